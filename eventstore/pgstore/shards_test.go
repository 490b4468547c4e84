package pgstore_test

import (
	"context"
	"errors"
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
)

// fakeClock is a lease clock that tests advance by hand, shared by the
// nodes of a test: leases expire without anybody sleeping.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

const testLease = 10 * time.Second

// cluster returns nodes "a", "b", ... on one fresh schema, sharing clock.
func cluster(t *testing.T, clock *fakeClock, nodes ...string) ([]*pgstore.Store, *pgxpool.Pool, string) {
	t.Helper()
	pool := testPool(t)
	schema := testSchema(t, pool)
	var out []*pgstore.Store
	for _, n := range nodes {
		out = append(out, clusterNode(t, pool, schema, clock, n))
	}
	return out, pool, schema
}

// clusterNode opens node name on schema with the test lease on clock, and
// opts; it is closed when the test ends.
func clusterNode(t *testing.T, pool *pgxpool.Pool, schema string, clock *fakeClock, name string, opts ...pgstore.Option) *pgstore.Store {
	t.Helper()
	s, err := pgstore.New(context.Background(), pool, append([]pgstore.Option{pgstore.WithSchema(schema), pgstore.WithNode(name),
		pgstore.WithLeaseDuration(testLease), pgstore.WithLeaseClock(clock.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// workflowIn returns a fresh workflow ID of the given shard.
func workflowIn(shard, count int) eventstore.WorkflowID {
	for {
		if id := eventstore.NewWorkflowID(); eventstore.ShardOf(id, count) == shard {
			return id
		}
	}
}

var token = eventstore.RecorderToken()

func started(wf eventstore.WorkflowID, run eventstore.RunID) eventstore.Event {
	return eventstore.WorkflowStarted{Envelope: eventstore.Envelope{WorkflowID: wf, RunID: run}, WorkflowType: "order"}
}

func signal(run eventstore.RunID, name string) eventstore.Event {
	return eventstore.SignalReceived{Envelope: eventstore.Envelope{RunID: run}, SignalName: name}
}

// lease returns the shard's lease as the database records it.
func lease(t *testing.T, s *pgstore.Store, shard int) pgstore.Lease {
	t.Helper()
	leases, err := s.Leases(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if l.Shard == shard {
			return l
		}
	}
	t.Fatalf("shard %d has no lease in %+v", shard, leases)
	return pgstore.Lease{}
}

func wantHead(t *testing.T, s eventstore.Store, wf eventstore.WorkflowID, want int) {
	t.Helper()
	h, err := s.ReadHistory(context.Background(), wf)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != want {
		t.Fatalf("history of %v has %d events, want %d", wf, len(h), want)
	}
}

func TestLeaseLifecycle(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	nodes, _, _ := cluster(t, clock, "a", "b")
	a, b := nodes[0], nodes[1]

	// Free: a takes it in epoch 1.
	if err := a.AcquireOwnedShard(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if l := lease(t, a, 3); l.Owner != "a" || l.Epoch != 1 || !l.Live || l.Published {
		t.Fatalf("after a acquired shard 3: %+v", l)
	}
	if !a.IsCurrentOwner(ctx, 3) || b.IsCurrentOwner(ctx, 3) {
		t.Fatal("IsCurrentOwner(3): want a true, b false")
	}
	// A live lease of another node: refused, and a many-shard call with it
	// acquires none.
	if err := b.AcquireOwnedShard(ctx, 3); !errors.Is(err, eventstore.ErrNotOwner) {
		t.Fatalf("b acquiring a's live shard: %v, want ErrNotOwner", err)
	}
	if err := b.AcquireOwnedShards(ctx, []int{5, 3}); !errors.Is(err, eventstore.ErrNotOwner) {
		t.Fatalf("b acquiring [5 3]: %v, want ErrNotOwner", err)
	}
	if b.IsCurrentOwner(ctx, 5) {
		t.Fatal("a refused many-shard call acquired shard 5 anyway")
	}
	// Renewal by the holder: same epoch, lease extended from now.
	clock.Advance(testLease - time.Second)
	if err := a.AcquireOwnedShard(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if l := lease(t, a, 3); l.Epoch != 1 || !l.Expires.Equal(clock.Now().Add(testLease)) {
		t.Fatalf("after a renewed shard 3: %+v, want epoch 1 expiring at %v", l, clock.Now().Add(testLease))
	}
	if err := a.PublishShardOwner(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := b.PublishShardOwner(ctx, 3); !errors.Is(err, eventstore.ErrNotOwner) {
		t.Fatalf("b publishing a's shard: %v, want ErrNotOwner", err)
	}
	if l := lease(t, a, 3); !l.Published {
		t.Fatalf("after a published shard 3: %+v", l)
	}
	// a stops renewing: exactly at the expiry the lease is gone.
	clock.Advance(testLease - time.Nanosecond)
	if !a.IsCurrentOwner(ctx, 3) {
		t.Fatal("the lease ended before its duration")
	}
	clock.Advance(time.Nanosecond)
	if a.IsCurrentOwner(ctx, 3) {
		t.Fatal("IsCurrentOwner true after the lease expired")
	}
	if err := a.PublishShardOwner(ctx, 3); !errors.Is(err, eventstore.ErrNotOwner) {
		t.Fatalf("publishing an expired shard: %v, want ErrNotOwner", err)
	}
	if held, err := a.RenewOwnedShards(ctx); err != nil || len(held) != 0 {
		t.Fatalf("renewing with only an expired lease = %v, %v; want none renewed", held, err)
	}
	// b adopts it in a new epoch.
	if err := b.AcquireOwnedShards(ctx, []int{3, 5}); err != nil {
		t.Fatal(err)
	}
	if l := lease(t, b, 3); l.Owner != "b" || l.Epoch != 2 || !l.Live || l.Published {
		t.Fatalf("after b took shard 3 over: %+v", l)
	}
	if err := a.AcquireOwnedShard(ctx, 3); !errors.Is(err, eventstore.ErrNotOwner) {
		t.Fatalf("a re-acquiring after the takeover: %v, want ErrNotOwner", err)
	}
	// Renewing all: b holds 3 and 5.
	clock.Advance(testLease / 2)
	if held, err := b.RenewOwnedShards(ctx); err != nil || !reflect.DeepEqual(held, []int{3, 5}) {
		t.Fatalf("b renewing = %v, %v; want [3 5]", held, err)
	}
	clock.Advance(testLease - time.Second)
	if !b.IsCurrentOwner(ctx, 5) {
		t.Fatal("a renewed lease expired before its new expiry")
	}
	// Releasing hands a shard over at once, in a new epoch.
	if err := b.ReleaseShards(ctx, []int{3, 4}); err != nil {
		t.Fatalf("b releasing [3 4] = %v", err)
	}
	if b.IsCurrentOwner(ctx, 3) || !b.IsCurrentOwner(ctx, 5) {
		t.Fatal("after releasing shard 3, b must hold 5 only")
	}
	if err := a.AcquireOwnedShard(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if l := lease(t, a, 3); l.Owner != "a" || l.Epoch != 3 {
		t.Fatalf("after a took the released shard: %+v", l)
	}
	if err := b.ReleaseShards(ctx, nil); err != nil || !b.IsCurrentOwner(ctx, 5) {
		t.Fatalf("b releasing nil = %v; want nothing released", err)
	}
	if err := a.ReleaseShards(ctx, []int{5}); err != nil || !b.IsCurrentOwner(ctx, 5) {
		t.Fatalf("a releasing b's shard = %v; want nothing released", err)
	}
	for _, bad := range []int{-1, 16, 1 << 32, math.MaxInt} {
		if err := a.AcquireOwnedShard(ctx, bad); !errors.Is(err, eventstore.ErrInvalidArgument) {
			t.Fatalf("AcquireOwnedShard(%d) = %v, want ErrInvalidArgument", bad, err)
		}
		if err := a.ReleaseShards(ctx, []int{3, bad}); !errors.Is(err, eventstore.ErrInvalidArgument) || !a.IsCurrentOwner(ctx, 3) {
			t.Fatalf("ReleaseShards([3 %d]) = %v, want ErrInvalidArgument and nothing released", bad, err)
		}
		if a.IsCurrentOwner(ctx, bad) {
			t.Fatalf("IsCurrentOwner(%d) = true", bad)
		}
	}
}

// TestFencing: a shard never acquired takes writes from every node; once
// acquired, only from its live holder; every fenced write writes nothing.
func TestFencing(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	nodes, _, _ := cluster(t, clock, "a", "b")
	a, b := nodes[0], nodes[1]
	wf, run := workflowIn(7, 16), eventstore.NewRunID()

	// Open to all: a starts it, b appends.
	if err := a.Append(ctx, token, wf, []eventstore.Event{started(wf, run)}, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx, token, wf, []eventstore.Event{signal(run, "b-before-election")}, 1); err != nil {
		t.Fatal(err)
	}
	if err := a.AcquireOwnedShard(ctx, 7); err != nil {
		t.Fatal(err)
	}
	fire := time.Unix(1_900_000_000, 0)
	if err := a.ScheduleTimer(ctx, wf, "t", fire, 2); err != nil {
		t.Fatal(err)
	}
	o := eventstore.OutboxRow{RunID: run, Ordinal: 1, ActivityType: "charge"}
	if err := a.AppendWithOutbox(ctx, token, wf, []eventstore.Event{signal(run, "a-owner")}, 2, []eventstore.OutboxRow{o}); err != nil {
		t.Fatal(err)
	}

	// b is fenced on every write to the workflow, whatever the expected
	// sequence, and nothing changes.
	fenced := func(who *pgstore.Store, step string) {
		t.Helper()
		checks := map[string]error{
			"Append":                            who.Append(ctx, token, wf, []eventstore.Event{signal(run, "fenced")}, 3),
			"Append at a stale seq":             who.Append(ctx, token, wf, []eventstore.Event{signal(run, "fenced")}, 0),
			"AppendWithOutbox rows only":        who.AppendWithOutbox(ctx, token, wf, nil, 3, []eventstore.OutboxRow{{RunID: run, Ordinal: 9}}),
			"ScheduleTimer":                     who.ScheduleTimer(ctx, wf, "t2", fire, 3),
			"SettleWorkflowOutboxRowsCancelled": func() error { _, err := who.SettleWorkflowOutboxRowsCancelled(ctx, wf); return err }(),
			"RetireTimer":                       func() error { _, err := who.RetireTimer(ctx, wf, "t", fire, 2); return err }(),
		}
		for call, err := range checks {
			if !errors.Is(err, eventstore.ErrNotOwner) {
				t.Errorf("%s: %s by %s = %v, want ErrNotOwner", step, call, who.Node(), err)
			}
		}
		wantHead(t, a, wf, 3)
		timers, err := a.ExpiredTimers(ctx, fire)
		if err != nil || len(timers) != 1 || timers[0].TimerID != "t" {
			t.Fatalf("%s: timers = %+v, %v; want t alone", step, timers, err)
		}
		if n, err := a.CountClaimedOutboxRows(ctx); err != nil || n != 0 {
			t.Fatalf("%s: claimed = %d, %v", step, n, err)
		}
		rows, err := a.ClaimOutboxRows(ctx, 10)
		if err != nil || len(rows) != 1 || rows[0].Ordinal != 1 {
			t.Fatalf("%s: the only row must still be a's pending row, claimed %+v, %v", step, rows, err)
		}
		if err := a.RearmOutboxPending(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	fenced(b, "a holds the shard")

	// a's lease expires: a is fenced too, and nobody writes until an
	// acquisition.
	clock.Advance(testLease)
	fenced(a, "a's lease expired")
	fenced(b, "a's lease expired")

	// b adopts the shard and writes; a stays fenced.
	if err := b.AcquireOwnedShard(ctx, 7); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx, token, wf, []eventstore.Event{signal(run, "b-owner")}, 3); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, token, wf, []eventstore.Event{signal(run, "a-late")}, 4); !errors.Is(err, eventstore.ErrNotOwner) {
		t.Fatalf("a after the takeover: %v, want ErrNotOwner", err)
	}
	if r, err := b.RetireTimer(ctx, wf, "t", fire, 2); err != nil || r != eventstore.TimerRetired {
		t.Fatalf("the new owner retiring the timer = %v, %v", r, err)
	}
	wantHead(t, a, wf, 4)

	// Other shards are untouched by the election.
	other := workflowIn(8, 16)
	if err := a.Append(ctx, token, other, []eventstore.Event{started(other, run)}, 0); err != nil {
		t.Fatalf("a shard nobody acquired: %v", err)
	}
}

// TestPausedWriterIsFencedAfterTakeover is the lease expiry race: node a
// starts an append while it holds the shard, is paused past its lease before
// its transaction checks the fence, node b takes the shard over meanwhile,
// and a's append, resumed, fails with ErrNotOwner and writes nothing.
func TestPausedWriterIsFencedAfterTakeover(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	nodes, _, _ := cluster(t, clock, "a", "b")
	a, b := nodes[0], nodes[1]
	wf, run := workflowIn(2, 16), eventstore.NewRunID()
	if err := a.AcquireOwnedShard(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, token, wf, []eventstore.Event{started(wf, run)}, 0); err != nil {
		t.Fatal(err)
	}

	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	pgstore.SetHooksForTest(a, func() {
		once.Do(func() { close(paused); <-resume })
	}, nil)
	release := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release) // a failing test must not leave the append paused
	done := make(chan error, 1)
	go func() { done <- a.Append(ctx, token, wf, []eventstore.Event{signal(run, "from-a")}, 1) }()
	<-paused

	// The pause outlasts a's lease; b takes over and writes at the same
	// expected seq.
	clock.Advance(testLease + time.Second)
	if err := b.AcquireOwnedShard(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := b.Append(ctx, token, wf, []eventstore.Event{signal(run, "from-b")}, 1); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-done; !errors.Is(err, eventstore.ErrNotOwner) {
		t.Fatalf("a's append resumed after the takeover = %v, want ErrNotOwner", err)
	}
	h, err := b.ReadHistory(ctx, wf)
	if err != nil {
		t.Fatal(err)
	}
	if len(h) != 2 || h[1].(eventstore.SignalReceived).SignalName != "from-b" {
		t.Fatalf("history after the race: %+v; want started, then b's signal only", h)
	}
}

// TestTakeoverDoesNotWaitForWriteInProgress is the other side of the race:
// node a's append has passed the fence (holding the lease row FOR KEY
// SHARE) when it is paused past its lease. b's takeover neither waits for
// it nor succeeds: it is refused at once with ErrLeaseBusy (and
// ErrNotOwner), acquiring nothing; a's write, checked under its live
// lease, commits; b's next attempt takes the shard in a new epoch and a's
// next write is fenced. No moment has two writers.
func TestTakeoverDoesNotWaitForWriteInProgress(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	nodes, _, _ := cluster(t, clock, "a", "b")
	a, b := nodes[0], nodes[1]
	wf, run := workflowIn(4, 16), eventstore.NewRunID()
	if err := a.AcquireOwnedShard(ctx, 4); err != nil {
		t.Fatal(err)
	}

	locked, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	pgstore.SetHooksForTest(a, nil, func(uint32) {
		once.Do(func() { close(locked); <-resume })
	})
	release := sync.OnceFunc(func() { close(resume) })
	t.Cleanup(release) // a failing test must not leave the append paused
	done := make(chan error, 1)
	go func() { done <- a.Append(ctx, token, wf, []eventstore.Event{started(wf, run)}, 0) }()
	<-locked

	clock.Advance(testLease + time.Second)
	err := b.AcquireOwnedShards(ctx, []int{3, 4})
	if !errors.Is(err, pgstore.ErrLeaseBusy) || !errors.Is(err, eventstore.ErrNotOwner) {
		t.Fatalf("b's takeover while a's write holds the fence = %v, want ErrLeaseBusy and ErrNotOwner at once", err)
	}
	if b.IsCurrentOwner(ctx, 3) || b.IsCurrentOwner(ctx, 4) {
		t.Fatal("a refused takeover acquired a shard")
	}
	release()
	if err := <-done; err != nil {
		t.Fatalf("a's write, checked under its live lease: %v", err)
	}
	if err := b.AcquireOwnedShard(ctx, 4); err != nil {
		t.Fatalf("b's takeover after a's write: %v", err)
	}
	if l := lease(t, b, 4); l.Owner != "b" || l.Epoch != 2 {
		t.Fatalf("lease after the takeover: %+v", l)
	}
	if err := a.Append(ctx, token, wf, []eventstore.Event{signal(run, "late")}, 1); !errors.Is(err, eventstore.ErrNotOwner) {
		t.Fatalf("a's next write = %v, want ErrNotOwner", err)
	}
	if err := b.Append(ctx, token, wf, []eventstore.Event{signal(run, "b")}, 1); err != nil {
		t.Fatalf("b writes after a's committed write: %v", err)
	}
}

// TestLeaseExpiresOnTheDatabaseClock: without WithLeaseClock a lease is
// timed by the database; the test waits on the database's clock for a
// short lease to pass.
func TestLeaseExpiresOnTheDatabaseClock(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	schema := testSchema(t, pool)
	open := func(node string) *pgstore.Store {
		s, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema), pgstore.WithNode(node), pgstore.WithLeaseDuration(300*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	a, b := open("a"), open("b")
	if err := a.AcquireOwnedShard(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := b.AcquireOwnedShard(ctx, 0); !errors.Is(err, eventstore.ErrNotOwner) {
		t.Fatalf("b before the lease expired: %v", err)
	}
	expires := lease(t, a, 0).Expires
	// Wait until the database's clock passes the expiry (bounded: 300 ms).
	if _, err := pool.Exec(ctx, `SELECT pg_sleep(greatest(0, extract(epoch FROM $1::timestamptz - clock_timestamp())) + 0.01)`, expires); err != nil {
		t.Fatal(err)
	}
	if a.IsCurrentOwner(ctx, 0) {
		t.Fatal("a still owns the shard after its lease expired on the database's clock")
	}
	if err := b.AcquireOwnedShard(ctx, 0); err != nil {
		t.Fatal(err)
	}
}

// TestAcquireConcurrentSafe: nodes racing for the same free shards; each
// shard ends up with exactly one holder, in epoch 1, and a many-shard call
// got all of its shards or none.
func TestAcquireConcurrentSafe(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	names := []string{"a", "b", "c", "d", "e", "f"}
	nodes, _, _ := cluster(t, clock, names...)
	sets := [][]int{{0, 1, 2}, {2, 3}, {3, 4, 5}, {5, 0}, {1, 4}, {6}}
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Go(func() { errs[i] = n.AcquireOwnedShards(ctx, sets[i]) })
	}
	wg.Wait()
	holder := map[int]string{}
	for i, err := range errs {
		switch {
		case err == nil:
			for _, sh := range sets[i] {
				if h, dup := holder[sh]; dup {
					t.Fatalf("shard %d won by %s and %s", sh, h, names[i])
				}
				holder[sh] = names[i]
			}
		case !errors.Is(err, eventstore.ErrNotOwner):
			t.Fatalf("%s: %v", names[i], err)
		}
	}
	leases, err := nodes[0].Leases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range leases {
		if holder[l.Shard] != l.Owner || l.Epoch != 1 {
			t.Fatalf("lease %+v, but the winners were %v (a refused call must acquire nothing)", l, holder)
		}
	}
	if len(leases) != len(holder) {
		t.Fatalf("leases %+v, winners %v", leases, holder)
	}
}
