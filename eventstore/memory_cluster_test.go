package eventstore

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// newTestCluster returns a cluster of four shards on a test clock and its
// nodes a and b.
func newTestCluster(t *testing.T) (c *MemoryCluster, a, b *Memory) {
	t.Helper()
	clock := &testClock{now: t0}
	c = NewMemoryCluster(WithClock(clock.Now), WithShardCount(4))
	return c, c.Node("a"), c.Node("b")
}

// appendAt appends events at the workflow's current head as seen through m
// and returns the error.
func appendAt(t *testing.T, m *Memory, wf WorkflowID, rows []OutboxRow, events ...Event) error {
	t.Helper()
	var head uint64
	chain, err := m.ReadHistory(t.Context(), wf)
	if err != nil {
		return err
	}
	head = uint64(len(chain))
	if rows != nil {
		return m.AppendWithOutbox(t.Context(), RecorderToken(), wf, events, head, rows)
	}
	return m.Append(t.Context(), RecorderToken(), wf, events, head)
}

func TestMemoryClusterNodes(t *testing.T) {
	c, a, b := newTestCluster(t)
	if c.Node("a") != a || a == b {
		t.Fatal("Node returns a new value for a known name, or the same value for two names")
	}
	if a.Name() != "a" || NewMemory().Name() != "memory" {
		t.Errorf("names = %q, %q; want a, memory", a.Name(), NewMemory().Name())
	}
	var zero MemoryCluster
	if err := zero.Node("x").Append(t.Context(), RecorderToken(), wfA, []Event{started(runA, "t")}, 0); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("a node of a zero cluster: Append = %v, want ErrInvalidArgument", err)
	}
	zero.Kill("x") // no panic
}

func TestMemoryClusterSharesHistory(t *testing.T) {
	ctx := t.Context()
	_, a, b := newTestCluster(t)
	row := OutboxRow{RunID: runA, Ordinal: 0, ActivityType: "x"}
	if err := appendAt(t, a, wfA, []OutboxRow{row}, started(runA, "order"), scheduled(runA, 0)); err != nil {
		t.Fatal(err)
	}
	if err := b.ScheduleTimer(ctx, wfA, "t", t0, 2); err != nil {
		t.Fatal(err)
	}
	if err := b.PutPackageWithRoutes(ctx, PackageRecord{WorkflowType: "order", ContentHash: "h"}, []string{"order"}); err != nil {
		t.Fatal(err)
	}
	if h := mustHistory(t, b, wfA); len(h) != 2 {
		t.Errorf("history through b = %v, want the 2 events appended through a", seqsOf(h))
	}
	if ids, _ := b.ListActive(ctx); !slices.Equal(ids, []WorkflowID{wfA}) {
		t.Errorf("ListActive through b = %v", ids)
	}
	if timers, _ := a.ExpiredTimers(ctx, t0); len(timers) != 1 {
		t.Errorf("timers through a = %v, want the one armed through b", timers)
	}
	if routes, _ := a.ListPackageRoutes(ctx); len(routes) != 1 {
		t.Errorf("routes through a = %v", routes)
	}
	claimed, err := b.ClaimOutboxRows(ctx, 10)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("claim through b = %v, %v; want the row staged through a", claimed, err)
	}
	if n, _ := a.CountClaimedOutboxRows(ctx); n != 1 {
		t.Errorf("claimed count through a = %d, want 1", n)
	}
	// A write through b (no shard was ever acquired) is read through a.
	if err := appendAt(t, b, wfA, nil, signal(runA, "s")); err != nil {
		t.Fatal(err)
	}
	if h := mustHistory(t, a, wfA); len(h) != 3 {
		t.Errorf("history through a = %v, want 3 events", seqsOf(h))
	}
}

// TestMemoryClusterElections walks two nodes through the election rules,
// checking who holds shard 1 and its epoch after each step.
func TestMemoryClusterElections(t *testing.T) {
	c, a, b := newTestCluster(t)
	ctx := t.Context()
	nodes := map[string]*Memory{"a": a, "b": b}
	steps := []struct {
		name   string
		do     func() error
		want   error
		holder string // of shard 1 afterwards: "a", "b" or ""
		epoch  uint64
	}{
		{"a acquires", func() error { return a.AcquireOwnedShard(ctx, 1) }, nil, "a", 1},
		{"b cannot acquire a held shard", func() error { return b.AcquireOwnedShard(ctx, 1) }, ErrNotOwner, "a", 1},
		{"b's many-shard call acquires none", func() error { return b.AcquireOwnedShards(ctx, []int{2, 1}) }, ErrNotOwner, "a", 1},
		{"a renews", func() error { return a.AcquireOwnedShards(ctx, []int{1, 1}) }, nil, "a", 1},
		{"b releasing a's shard changes nothing", func() error { return b.ReleaseShards(ctx, []int{1}) }, nil, "a", 1},
		{"a releases", func() error { return a.ReleaseShards(ctx, []int{1}) }, nil, "", 1},
		{"b acquires: a new epoch", func() error { return b.AcquireOwnedShard(ctx, 1) }, nil, "b", 2},
		{"a cannot publish", func() error { return a.PublishShardOwner(ctx, 1) }, ErrNotOwner, "b", 2},
		{"b publishes", func() error { return b.PublishShardOwner(ctx, 1) }, nil, "b", 2},
		{"b is killed", func() error { c.Kill("b"); return nil }, nil, "", 2},
		{"a acquires after the death: a new epoch", func() error { return a.AcquireOwnedShard(ctx, 1) }, nil, "a", 3},
		{"bad release releases none", func() error { return a.ReleaseShards(ctx, []int{1, 9}) }, ErrInvalidArgument, "a", 3},
	}
	for _, st := range steps {
		if err := st.do(); !errors.Is(err, st.want) || (st.want == nil) != (err == nil) {
			t.Fatalf("%s: %v, want %v", st.name, err, st.want)
		}
		for name, n := range nodes {
			if got, want := n.IsCurrentOwner(ctx, 1), name == st.holder; got != want {
				t.Errorf("%s: IsCurrentOwner(1) of %s = %v, want %v", st.name, name, got, want)
			}
		}
		c.s.mu.RLock()
		epoch := c.s.shards[1].epoch
		c.s.mu.RUnlock()
		if epoch != st.epoch {
			t.Errorf("%s: epoch of shard 1 = %d, want %d", st.name, epoch, st.epoch)
		}
	}
	if b.IsCurrentOwner(ctx, 2) || a.IsCurrentOwner(ctx, 2) {
		t.Error("shard 2 is owned after the refused many-shard call")
	}
	c.s.mu.RLock()
	dir := c.s.directory[1]
	c.s.mu.RUnlock()
	if dir != (ownerRecord{node: "b", epoch: 2}) {
		t.Errorf("directory entry of shard 1 = %+v, want b at epoch 2", dir)
	}
}

// TestMemoryClusterFencing checks which node may append to a workflow of
// shard 1 (wf1) as the shard changes hands; wf0 is in shard 0, never
// acquired, and stays open to both.
func TestMemoryClusterFencing(t *testing.T) {
	c, a, b := newTestCluster(t)
	ctx := t.Context()
	wf0, wf1 := testID(9, 0), testID(9, 1)
	steps := []struct {
		name   string
		do     func()
		allow  string // the node whose append to wf1 succeeds: "a", "b", "both" or ""
		killed string
	}{
		{"never acquired", func() {}, "both", ""},
		{"a acquired", func() { _ = a.AcquireOwnedShard(ctx, 1) }, "a", ""},
		{"a released", func() { _ = a.ReleaseShards(ctx, []int{1}) }, "", ""},
		{"b acquired", func() { _ = b.AcquireOwnedShard(ctx, 1) }, "b", ""},
		{"b killed", func() { c.Kill("b") }, "", "b"},
		{"a acquired again", func() { _ = a.AcquireOwnedShard(ctx, 1) }, "a", "b"},
	}
	n := 0
	for _, st := range steps {
		st.do()
		for name, m := range map[string]*Memory{"a": a, "b": b} {
			for _, viaOutbox := range []bool{false, true} {
				n++
				before := snapshot(t, a)
				ev := signal(runA, fmt.Sprint("s", n))
				if len(mustHistory(t, a, wf1)) == 0 {
					ev = started(runA, "t")
				}
				var rows []OutboxRow
				if viaOutbox {
					rows = []OutboxRow{{RunID: runA, Ordinal: ActivityID(n)}}
				}
				err := appendAt(t, m, wf1, rows, ev)
				allowed := st.allow == name || st.allow == "both"
				switch {
				case allowed && err != nil:
					t.Errorf("%s: append by %s (outbox %v): %v", st.name, name, viaOutbox, err)
				case !allowed && !errors.Is(err, ErrNotOwner):
					t.Errorf("%s: append by %s (outbox %v) = %v, want ErrNotOwner", st.name, name, viaOutbox, err)
				case !allowed && snapshot(t, a) != before:
					t.Errorf("%s: the fenced append by %s (outbox %v) wrote something", st.name, name, viaOutbox)
				}
			}
			if st.killed == name {
				continue
			}
			// The unfenced shard, and the other writes, stay open.
			if err := appendAt(t, m, wf0, nil, started(runB, "t")); err != nil && !errors.Is(err, ErrSequenceConflict) {
				t.Errorf("%s: append by %s to a never-acquired shard: %v", st.name, name, err)
			}
			if err := m.ScheduleTimer(ctx, wf1, "t", t0, 1); err != nil {
				t.Errorf("%s: ScheduleTimer by %s: %v", st.name, name, err)
			}
			if _, err := m.SettleWorkflowOutboxRowsCancelled(ctx, wf1); err != nil {
				t.Errorf("%s: SettleWorkflowOutboxRowsCancelled by %s: %v", st.name, name, err)
			}
		}
	}
}

func TestMemoryClusterKilledNode(t *testing.T) {
	c, a, b := newTestCluster(t)
	ctx := t.Context()
	if err := a.AcquireOwnedShards(ctx, []int{0, 1}); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, a, testID(3, 2), started(runC, "t"))
	c.Kill("a")
	c.Kill("a")      // twice: no change
	c.Kill("nobody") // unknown: no change
	if c.Node("a") != a {
		t.Error("Node returns a new node for a killed name")
	}
	for name, err := range allCalls(ctx, a) {
		if name == "IsCurrentOwner" {
			if err != nil {
				t.Errorf("IsCurrentOwner of a killed node: %v", err)
			}
			continue
		}
		if !errors.Is(err, ErrNotOwner) {
			t.Errorf("%s on a killed node = %v, want an error wrapping ErrNotOwner", name, err)
		}
	}
	if n := a.PruneClosed(t0.AddDate(1, 0, 0)); n != 0 {
		t.Errorf("PruneClosed on a killed node = %d", n)
	}
	if err := b.AcquireOwnedShards(ctx, []int{0, 1}); err != nil {
		t.Errorf("the killed node's shards cannot be acquired: %v", err)
	}
	if h := mustHistory(t, b, testID(3, 2)); len(h) != 1 {
		t.Errorf("the killed node's writes are gone: %v", seqsOf(h))
	}
}

func TestMemoryClusterScopesPerNode(t *testing.T) {
	ctx := t.Context()
	_, a, b := newTestCluster(t)
	ids := []WorkflowID{testID(1, 0), testID(1, 1), testID(1, 2), testID(1, 3)}
	for _, id := range ids {
		mustAppend(t, a, id, started(runA, "t"))
	}
	a.SetOwnedShards(ctx, []int{0, 1})
	b.SetOwnedShards(ctx, []int{3})
	b.ExtendOwnedShards(ctx, []int{2})
	if got, _ := a.ListWorkflowIDs(ctx); !slices.Equal(got, ids[:2]) {
		t.Errorf("a lists %v, want shards 0 and 1", got)
	}
	if got, _ := b.ListWorkflowIDs(ctx); !slices.Equal(got, ids[2:]) {
		t.Errorf("b lists %v, want shards 2 and 3", got)
	}
}

// TestMemoryClusterConcurrentSafe races eight nodes for one shard, round
// after round: exactly one wins each round and the others are told
// ErrNotOwner; the winner appends and releases.
func TestMemoryClusterConcurrentSafe(t *testing.T) {
	ctx := t.Context()
	c, _, _ := newTestCluster(t)
	wf := testID(5, 1)
	const racers, rounds = 8, 50
	nodes := make([]*Memory, racers)
	for i := range nodes {
		nodes[i] = c.Node(fmt.Sprint("n", i))
	}
	mustAppend(t, nodes[0], wf, started(runA, "t"))
	for round := range rounds {
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i, n := range nodes {
			wg.Go(func() { errs[i] = n.AcquireOwnedShard(ctx, 1) })
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil && won >= 0:
				t.Fatalf("round %d: nodes %d and %d both acquired shard 1", round, won, i)
			case err == nil:
				won = i
			case !errors.Is(err, ErrNotOwner):
				t.Fatalf("round %d: node %d: %v", round, i, err)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: no node acquired the free shard", round)
		}
		if err := appendAt(t, nodes[won], wf, nil, signal(runA, "s")); err != nil {
			t.Fatalf("round %d: the winner's append: %v", round, err)
		}
		if err := nodes[won].ReleaseShards(ctx, []int{1}); err != nil {
			t.Fatal(err)
		}
	}
}
