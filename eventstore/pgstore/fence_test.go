package pgstore_test

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
)

// TestNameReuseFencesTheEarlierLife: a second Store under node name "a" (a
// process restarted by its supervisor while the first is paused) takes the
// first one's live lease at once, in a new epoch; the first one, whatever
// its name, is refused on every write, writes nothing, renews nothing and
// cannot take the shard back.
func TestNameReuseFencesTheEarlierLife(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	nodes, pool, schema := cluster(t, clock, "a")
	old := nodes[0]
	wf, run := workflowIn(6, 16), eventstore.NewRunID()
	if err := old.AcquireOwnedShards(ctx, []int{6, 9}); err != nil {
		t.Fatal(err)
	}
	fire := time.Unix(1_900_000_000, 0)
	if err := old.Append(ctx, token, wf, []eventstore.Event{started(wf, run)}, 0); err != nil {
		t.Fatal(err)
	}
	if err := old.ScheduleTimer(ctx, wf, "t", fire, 1); err != nil {
		t.Fatal(err)
	}

	again := clusterNode(t, pool, schema, clock, "a")
	if err := again.AcquireOwnedShard(ctx, 6); err != nil {
		t.Fatalf("the new life taking over the earlier one's live lease: %v", err)
	}
	if l := lease(t, again, 6); l.Owner != "a" || l.Epoch != 2 || !l.Live {
		t.Fatalf("after the takeover by the same name: %+v, want epoch 2", l)
	}

	checks := map[string]error{
		"Append":                             old.Append(ctx, token, wf, []eventstore.Event{signal(run, "stale")}, 1),
		"AppendWithOutbox":                   old.AppendWithOutbox(ctx, token, wf, nil, 1, []eventstore.OutboxRow{{RunID: run, Ordinal: 1}}),
		"ScheduleTimer":                      old.ScheduleTimer(ctx, wf, "t2", fire, 1),
		"RetireTimer":                        func() error { _, err := old.RetireTimer(ctx, wf, "t", fire, 1); return err }(),
		"SettleWorkflowOutboxRowsCancelled":  func() error { _, err := old.SettleWorkflowOutboxRowsCancelled(ctx, wf); return err }(),
		"AcquireOwnedShard (taking it back)": old.AcquireOwnedShard(ctx, 6),
	}
	for call, err := range checks {
		if !errors.Is(err, eventstore.ErrNotOwner) {
			t.Errorf("the earlier life's %s = %v, want ErrNotOwner", call, err)
		}
	}
	if old.IsCurrentOwner(ctx, 6) || !again.IsCurrentOwner(ctx, 6) {
		t.Fatal("IsCurrentOwner(6): want the earlier life false, the later true")
	}
	if err := old.PublishShardOwner(ctx, 6); !errors.Is(err, eventstore.ErrNotOwner) {
		t.Fatalf("the earlier life publishing = %v, want ErrNotOwner", err)
	}
	// The earlier life still holds shard 9, which the later did not take.
	if held, err := old.RenewOwnedShards(ctx); err != nil || !reflect.DeepEqual(held, []int{9}) {
		t.Fatalf("the earlier life renewing = %v, %v; want [9] only", held, err)
	}
	if err := old.ReleaseShards(ctx, []int{6}); err != nil || !again.IsCurrentOwner(ctx, 6) {
		t.Fatalf("the earlier life releasing the later's shard = %v; want nothing released", err)
	}
	wantHead(t, again, wf, 1)
	if timers, err := again.ExpiredTimers(ctx, fire); err != nil || len(timers) != 1 || timers[0].TimerID != "t" {
		t.Fatalf("timers = %+v, %v; want t alone", timers, err)
	}
	if err := again.Append(ctx, token, wf, []eventstore.Event{signal(run, "new")}, 1); err != nil {
		t.Fatalf("the new life writing: %v", err)
	}
}

// TestRenewalDoesNotWaitForWrites: a write in progress (paused after its
// fence, holding the lease row) neither delays nor prevents the holder's
// renewal, which changes only the expiry.
func TestRenewalDoesNotWaitForWrites(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	nodes, _, _ := cluster(t, clock, "a")
	a := nodes[0]
	wf, run := workflowIn(5, 16), eventstore.NewRunID()
	if err := a.AcquireOwnedShard(ctx, 5); err != nil {
		t.Fatal(err)
	}
	locked, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	pgstore.SetHooksForTest(a, nil, func(uint32) { once.Do(func() { close(locked); <-resume }) })
	release := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release)
	done := make(chan error, 1)
	go func() { done <- a.Append(ctx, token, wf, []eventstore.Event{started(wf, run)}, 0) }()
	<-locked

	clock.Advance(testLease / 2)
	renewCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	held, err := a.RenewOwnedShards(renewCtx)
	if err != nil || !reflect.DeepEqual(held, []int{5}) {
		t.Fatalf("renewing while a write holds the fence = %v, %v; want [5] at once", held, err)
	}
	if l := lease(t, a, 5); !l.Expires.Equal(clock.Now().Add(testLease)) {
		t.Fatalf("lease %+v not extended to %v", l, clock.Now().Add(testLease))
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestPausedOpenWriteIsEndedByTheServer: a writer paused inside its
// transaction, past its lease, holds the shard only until the server ends
// its idle session (WithIdleInTransactionTimeout); meanwhile the takeover
// is refused at once (never waits) and the survivor's own lease renews;
// then the takeover succeeds and the paused write, resumed, has written
// nothing.
func TestPausedOpenWriteIsEndedByTheServer(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	pool := testPool(t)
	schema := testSchema(t, pool)
	const idle = time.Second
	open := func(node string) *pgstore.Store {
		return clusterNode(t, pool, schema, clock, node, pgstore.WithIdleInTransactionTimeout(idle))
	}
	a, b := open("a"), open("b")
	wf, run := workflowIn(2, 16), eventstore.NewRunID()
	if err := a.AcquireOwnedShard(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := b.AcquireOwnedShard(ctx, 3); err != nil {
		t.Fatal(err)
	}
	locked, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	pgstore.SetHooksForTest(a, nil, func(uint32) { once.Do(func() { close(locked); <-resume }) })
	release := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release)
	done := make(chan error, 1)
	go func() { done <- a.Append(ctx, token, wf, []eventstore.Event{started(wf, run)}, 0) }()
	<-locked
	lockedAt := time.Now()

	clock.Advance(testLease / 2)
	if held, err := b.RenewOwnedShards(ctx); err != nil || !reflect.DeepEqual(held, []int{3}) {
		t.Fatalf("b renewing = %v, %v", held, err)
	}
	clock.Advance(testLease/2 + time.Second) // a's lease has expired; b's has not
	// The server ends a's session once it idled for the timeout (real
	// time): only a takeover before that must be refused. On a loaded
	// machine the steps above can outlast it; then the takeover may
	// already succeed, which the rest of the test checks.
	switch err := b.AcquireOwnedShard(ctx, 2); {
	case errors.Is(err, pgstore.ErrLeaseBusy):
	case err == nil && time.Since(lockedAt) >= idle:
		t.Logf("the server ended a's idle session before the first takeover (%v after the pause): no busy refusal to see", time.Since(lockedAt).Round(time.Millisecond))
	default:
		t.Fatalf("b's takeover while a's paused write holds the row = %v, want ErrLeaseBusy", err)
	}
	// Bounded by the idle timeout: poll the acquisition (each attempt
	// returns at once).
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := b.AcquireOwnedShard(ctx, 2)
		if err == nil {
			break
		}
		if !errors.Is(err, pgstore.ErrLeaseBusy) || time.Now().After(deadline) {
			t.Fatalf("b's takeover after a's idle session should have been ended: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !b.IsCurrentOwner(ctx, 3) {
		t.Fatal("b lost its own shard meanwhile")
	}
	release()
	if err := <-done; err == nil {
		t.Fatal("a's write, whose session the server ended, returned nil")
	}
	wantHead(t, b, wf, 0)
	if err := b.Append(ctx, token, wf, []eventstore.Event{started(wf, run)}, 0); err != nil {
		t.Fatal(err)
	}
}

// TestClaimsWithinOwnedShards: with WithOwnedShardClaims a store claims only
// rows of the shards it holds now; without it, every row.
func TestClaimsWithinOwnedShards(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	pool := testPool(t)
	schema := testSchema(t, pool)
	open := func(node string, opts ...pgstore.Option) *pgstore.Store {
		return clusterNode(t, pool, schema, clock, node, opts...)
	}
	a, b := open("a", pgstore.WithOwnedShardClaims()), open("b", pgstore.WithOwnedShardClaims())
	dispatcher := open("dispatcher")
	stage := func(s *pgstore.Store, shard int) eventstore.WorkflowID {
		t.Helper()
		wf, run := workflowIn(shard, 16), eventstore.NewRunID()
		if err := s.AppendWithOutbox(ctx, token, wf, []eventstore.Event{started(wf, run)}, 0,
			[]eventstore.OutboxRow{{RunID: run, Ordinal: 1, ActivityType: "x"}}); err != nil {
			t.Fatal(err)
		}
		return wf
	}
	if rows, err := a.ClaimOutboxRows(ctx, 10); err != nil || len(rows) != 0 {
		t.Fatalf("a store holding nothing claimed %+v, %v", rows, err)
	}
	if err := a.AcquireOwnedShard(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := b.AcquireOwnedShard(ctx, 2); err != nil {
		t.Fatal(err)
	}
	wfA, wfB := stage(a, 1), stage(b, 2)
	stage(a, 3) // a shard nobody holds
	for _, c := range []struct {
		s    *pgstore.Store
		want eventstore.WorkflowID
	}{{a, wfA}, {b, wfB}} {
		rows, err := c.s.ClaimOutboxRows(ctx, 10)
		if err != nil || len(rows) != 1 || rows[0].WorkflowID != c.want {
			t.Fatalf("%s claimed %+v, %v; want its own shard's row only", c.s.Node(), rows, err)
		}
	}
	if rows, err := dispatcher.ClaimOutboxRows(ctx, 10); err != nil || len(rows) != 1 || eventstore.ShardOf(rows[0].WorkflowID, 16) != 3 {
		t.Fatalf("a store without the option claimed %+v, %v; want the one pending row left", rows, err)
	}
	// Once a's lease lapses, it claims nothing of shard 1 any more.
	wf := workflowIn(1, 16)
	run := eventstore.NewRunID()
	if err := a.AppendWithOutbox(ctx, token, wf, []eventstore.Event{started(wf, run)}, 0, []eventstore.OutboxRow{{RunID: run, Ordinal: 2}}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(testLease)
	if rows, err := a.ClaimOutboxRows(ctx, 10); err != nil || len(rows) != 0 {
		t.Fatalf("a claimed %+v, %v after its lease expired", rows, err)
	}
}

// TestLeasePoolKeepsRenewalsOffTheWorkload: with WithLeasePool, the lease
// statements run on their own pool, so a workload that holds every
// connection of the store's pool does not hold up a renewal or an
// acquisition.
func TestLeasePoolKeepsRenewalsOffTheWorkload(t *testing.T) {
	ctx := context.Background()
	leasePool := testPool(t)
	schema := testSchema(t, leasePool)
	cfg := leasePool.Config().Copy()
	cfg.MaxConns = 1
	workload, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(workload.Close)
	s, err := pgstore.New(ctx, workload, pgstore.WithSchema(schema), pgstore.WithNode("a"), pgstore.WithLeasePool(leasePool))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	plain, err := pgstore.New(ctx, workload, pgstore.WithSchema(schema), pgstore.WithNode("b"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = plain.Close() })
	if err := s.AcquireOwnedShard(ctx, 1); err != nil {
		t.Fatal(err)
	}
	busy, err := workload.Acquire(ctx) // the workload holds the store's only connection
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Release()
	short, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if held, err := s.RenewOwnedShards(short); err != nil || !reflect.DeepEqual(held, []int{1}) {
		t.Fatalf("renewing while the store's pool is full = %v, %v; want [1]", held, err)
	}
	if err := s.AcquireOwnedShard(short, 2); err != nil || !s.IsCurrentOwner(short, 2) {
		t.Fatalf("acquiring while the store's pool is full = %v", err)
	}
	// Without the option the same renewal waits for the workload.
	blocked, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if _, err := plain.RenewOwnedShards(blocked); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("renewing on the full pool without WithLeasePool = %v, want it to wait (deadline exceeded)", err)
	}
}

// TestLongLeasesAndIdleTimeoutsWork: a lease long enough that half of it
// passes PostgreSQL's largest idle_in_transaction_session_timeout (2^31-1
// ms, about 24.8 days), or such a timeout asked for outright, on a Store
// from New or from Open, still appends and acquires. Regression: every
// append and acquisition failed with the server's "invalid value for
// parameter" (and, from Open, every connection), although New had
// succeeded.
func TestLongLeasesAndIdleTimeoutsWork(t *testing.T) {
	ctx := context.Background()
	const day = 24 * time.Hour
	testCases := []struct {
		name string
		open bool
		opt  pgstore.Option
	}{
		{"New, 100-day lease", false, pgstore.WithLeaseDuration(100 * day)},
		{"New, 30-day idle timeout", false, pgstore.WithIdleInTransactionTimeout(30 * day)},
		{"New, longest lease", false, pgstore.WithLeaseDuration(time.Duration(1<<63 - 1))},
		{"Open, 30-day idle timeout", true, pgstore.WithIdleInTransactionTimeout(30 * day)},
		{"Open, 100-day lease", true, pgstore.WithLeaseDuration(100 * day)},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s, _, schema := newStore(t, tc.opt)
			if tc.open {
				var err error
				s, err = pgstore.Open(ctx, testDSN(t), pgstore.WithSchema(schema), tc.opt)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close() })
			}
			wf := workflowIn(3, 16)
			if err := s.Append(ctx, token, wf, []eventstore.Event{started(wf, eventstore.NewRunID())}, 0); err != nil {
				t.Fatalf("Append = %v", err)
			}
			if err := s.AcquireOwnedShard(ctx, 3); err != nil || !s.IsCurrentOwner(ctx, 3) {
				t.Fatalf("AcquireOwnedShard = %v", err)
			}
			if err := s.Append(ctx, token, wf, []eventstore.Event{signal(eventstore.NewRunID(), "owner")}, 1); err != nil {
				t.Fatalf("Append as the owner = %v", err)
			}
		})
	}
}
