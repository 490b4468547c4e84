package sim

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/pairing"
)

// testNode is a Cluster serving a set of shards that the test changes.
type testNode struct {
	count int
	mu    sync.Mutex
	mine  []int
}

func (n *testNode) NewWorkflowID() (eventstore.WorkflowID, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.mine) == 0 {
		return eventstore.WorkflowID{}, false
	}
	for {
		id := eventstore.NewWorkflowID()
		if slices.Contains(n.mine, eventstore.ShardOf(id, n.count)) {
			return id, true
		}
	}
}

func (n *testNode) Serves(wf eventstore.WorkflowID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Contains(n.mine, eventstore.ShardOf(wf, n.count))
}

func (n *testNode) Append(_ eventstore.WorkflowID, append func() error) error { return append() }

func (n *testNode) add(shards ...int) {
	n.mu.Lock()
	n.mine = append(n.mine, shards...)
	n.mu.Unlock()
}

// clusterServer is a server on a node of a MemoryCluster that holds the
// node's shards: acquired and in scope through the decorator, as the
// cluster package does.
type clusterServer struct {
	srv    *Server
	node   *testNode
	reader *sdkmetric.ManualReader
	done   chan struct{}
	stop   context.CancelFunc
}

const testShards = 4

func startClusterServer(t *testing.T, store *eventstore.Memory, seed uint64, shards ...int) *clusterServer {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)))
	node := &testNode{count: testShards}
	srv, err := New(Config{MeterProvider: mp, TracerProvider: tp, Store: store, Cluster: node, RunTimeout: 3 * time.Second,
		Rate: 30, Drain: 500 * time.Millisecond, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	c := &clusterServer{srv: srv, node: node, reader: reader, done: make(chan struct{})}
	c.adopt(t, shards...)
	ctx, stop := context.WithCancel(t.Context())
	c.stop = stop
	go func() { defer close(c.done); srv.Run(ctx) }()
	return c
}

// adopt acquires shards and brings them into scope through the decorator,
// then serves them and takes over their orphans.
func (c *clusterServer) adopt(t *testing.T, shards ...int) (orphans, rows int) {
	t.Helper()
	so := c.srv.Store().(eventstore.ShardOwner)
	if err := so.AcquireOwnedShards(t.Context(), shards); err != nil {
		t.Fatal(err)
	}
	c.node.mu.Lock()
	scope := append(slices.Clone(c.node.mine), shards...)
	c.node.mu.Unlock()
	so.SetOwnedShards(t.Context(), scope)
	c.node.add(shards...)
	orphans, rows, err := c.srv.Recover(t.Context(), func(wf eventstore.WorkflowID) bool {
		return slices.Contains(shards, eventstore.ShardOf(wf, testShards))
	})
	if err != nil {
		t.Fatal(err)
	}
	return orphans, rows
}

func (c *clusterServer) halt() {
	c.stop()
	<-c.done
}

// startedByShard counts the runs the histories started, by shard.
func startedByShard(t *testing.T, store *eventstore.Memory) map[int]float64 {
	t.Helper()
	ids, err := store.ListWorkflowIDs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]float64{}
	for _, id := range ids {
		events, err := store.ReadHistory(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range events {
			if _, ok := ev.(eventstore.WorkflowStarted); ok {
				out[eventstore.ShardOf(id, testShards)]++
			}
		}
	}
	return out
}

// TestClusterServersKeepToTheirShards runs two servers on two nodes of one
// store, each holding two of four shards (fenced: a write to another
// node's shard fails): each starts workflows only in its shards, passes on
// the outbox rows it claims for the other's, never writes to a workflow it
// does not serve, and leaves nothing open or in flight.
func TestClusterServersKeepToTheirShards(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mc := eventstore.NewMemoryCluster(eventstore.WithShardCount(testShards))
		a := startClusterServer(t, mc.Node("a"), 1, 0, 1)
		b := startClusterServer(t, mc.Node("b"), 2, 2, 3)
		time.Sleep(5 * time.Second)
		a.halt()
		b.halt()

		oa, ob := collect(t, a.reader), collect(t, b.reader)
		for name, o := range map[string]observed{"a": oa, "b": ob} {
			if o.values["aion.store.operation.duration error.type"]["not_owner"] {
				t.Errorf("server %s: a store call failed with not_owner: it wrote to a shard it does not hold", name)
			}
			if got := o.total["aion.inflight_activities"]; got != 0 {
				t.Errorf("server %s: %v activities in flight after Run, want 0", name, got)
			}
		}
		reader := mc.Node("reader")
		started := startedByShard(t, reader)
		if got, want := oa.total["aion.workflows.started"], started[0]+started[1]; got != want || got == 0 {
			t.Errorf("server a counted %v runs started, the histories of its shards 0 and 1 have %v", got, want)
		}
		if got, want := ob.total["aion.workflows.started"], started[2]+started[3]; got != want || got == 0 {
			t.Errorf("server b counted %v runs started, the histories of its shards 2 and 3 have %v", got, want)
		}
		if a.srv.Stats()["outbox.passed_on"]+b.srv.Stats()["outbox.passed_on"] == 0 {
			t.Error("no claimed row was passed on to the other server")
		}
		if open, err := reader.ListActive(t.Context()); err != nil || len(open) > 0 {
			t.Errorf("after both stopped: %d workflows open (%v), want none", len(open), err)
		}
	})
}

// TestClusterOrphansTakenOver kills a server's node in the middle of its
// run; the other server adopts its shards and takes its orphaned
// workflows over: the rows of their activities in flight are re-armed and
// run, and each run closes, as timed out when its run timeout fires or as
// cancelled when the adopter stops first. The adopter's telemetry resumed
// the orphans: its in-flight gauge is 0 once everything is closed.
func TestClusterOrphansTakenOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration // how long the adopter runs on
		stat  string        // how the orphans closed
	}{
		{"timed out", 5 * time.Second, "orphans.timed_out"},
		{"cancelled on stop", 0, "orphans.cancelled"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mc := eventstore.NewMemoryCluster(eventstore.WithShardCount(testShards))
				a := startClusterServer(t, mc.Node("a"), 1, 0, 1)
				b := startClusterServer(t, mc.Node("b"), 2, 2, 3)
				time.Sleep(2 * time.Second)
				mc.Kill("a") // every later call of node a fails
				a.halt()
				orphans, rows := b.adopt(t, 0, 1)
				if orphans == 0 || rows == 0 {
					t.Fatalf("server b took over %d orphans and re-armed %d rows, want some of each", orphans, rows)
				}
				time.Sleep(tc.after)
				b.halt()

				stats := b.srv.Stats()
				if stats[tc.stat] == 0 {
					t.Errorf("stats %v: no %s", stats, tc.stat)
				}
				reader := mc.Node("reader")
				if open, err := reader.ListActive(t.Context()); err != nil || len(open) > 0 {
					t.Errorf("after the adopter stopped: %d workflows open (%v), want none", len(open), err)
				}
				ob := collect(t, b.reader)
				if got := ob.total["aion.inflight_activities"]; got != 0 {
					t.Errorf("adopter: %v activities in flight after Run, want 0", got)
				}
				if ob.values["aion.store.operation.duration error.type"]["not_owner"] {
					t.Error("adopter: a store call failed with not_owner")
				}
			})
		})
	}
}
