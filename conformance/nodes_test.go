package conformance

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// memoryNodes is a correct pair: two nodes of one cluster.
func memoryNodes() (Nodes, *eventstore.MemoryCluster) {
	c := eventstore.NewMemoryCluster(eventstore.WithShardCount(4))
	return Nodes{A: c.Node("a"), B: c.Node("b"), ShardCount: 4, Kill: func(context.Context) error { c.Kill("a"); return nil }}, c
}

// bothOwnNode swallows a lost election: it "acquires" a shard another node
// holds and reports holding it.
type bothOwnNode struct {
	*eventstore.Memory
	mu    sync.Mutex
	taken []int
}

func (n *bothOwnNode) AcquireOwnedShards(ctx context.Context, shards []int) error {
	err := n.Memory.AcquireOwnedShards(ctx, shards)
	if errors.Is(err, eventstore.ErrNotOwner) {
		n.mu.Lock()
		n.taken = append(n.taken, shards...)
		n.mu.Unlock()
		return nil
	}
	return err
}

func (n *bothOwnNode) AcquireOwnedShard(ctx context.Context, shard int) error {
	return n.AcquireOwnedShards(ctx, []int{shard})
}

func (n *bothOwnNode) IsCurrentOwner(ctx context.Context, shard int) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Contains(n.taken, shard) || n.Memory.IsCurrentOwner(ctx, shard)
}

// unfencedNode writes through its peer when its own append is fenced: no
// fencing between the two nodes.
type unfencedNode struct {
	*eventstore.Memory
	peer *eventstore.Memory
}

func (n unfencedNode) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
	err := n.Memory.Append(ctx, tok, wf, evs, exp)
	if errors.Is(err, eventstore.ErrNotOwner) {
		return n.peer.Append(ctx, tok, wf, evs, exp)
	}
	return err
}

func (n unfencedNode) AppendWithOutbox(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
	err := n.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
	if errors.Is(err, eventstore.ErrNotOwner) {
		return n.peer.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
	}
	return err
}

// lyingOwnerNode reports holding every shard some node holds.
type lyingOwnerNode struct {
	*eventstore.Memory
	peer *eventstore.Memory
}

func (n lyingOwnerNode) IsCurrentOwner(ctx context.Context, shard int) bool {
	return n.Memory.IsCurrentOwner(ctx, shard) || n.peer.IsCurrentOwner(ctx, shard)
}

// sharedScopeNode sets its peer's scope too: one scope for both nodes.
type sharedScopeNode struct {
	*eventstore.Memory
	peer *eventstore.Memory
}

func (n sharedScopeNode) SetOwnedShards(ctx context.Context, shards []int) {
	n.Memory.SetOwnedShards(ctx, shards)
	n.peer.SetOwnedShards(ctx, shards)
}

// partialNode acquires shard by shard, keeping those won before a lost one.
type partialNode struct{ *eventstore.Memory }

func (n partialNode) AcquireOwnedShards(ctx context.Context, shards []int) error {
	for _, s := range shards {
		if err := n.Memory.AcquireOwnedShard(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// noRenewalNode refuses to re-acquire a shard it holds.
type noRenewalNode struct{ *eventstore.Memory }

func (n noRenewalNode) AcquireOwnedShard(ctx context.Context, shard int) error {
	if n.Memory.IsCurrentOwner(ctx, shard) {
		return eventstore.ErrNotOwner
	}
	return n.Memory.AcquireOwnedShard(ctx, shard)
}

// localOwnerNode publishes from its own record of the shards it acquired,
// which a dead process never clears.
type localOwnerNode struct {
	*eventstore.Memory
	mu   sync.Mutex
	held map[int]bool
}

func (n *localOwnerNode) AcquireOwnedShards(ctx context.Context, shards []int) error {
	err := n.Memory.AcquireOwnedShards(ctx, shards)
	if err == nil {
		n.mu.Lock()
		for _, s := range shards {
			n.held[s] = true
		}
		n.mu.Unlock()
	}
	return err
}

func (n *localOwnerNode) AcquireOwnedShard(ctx context.Context, shard int) error {
	return n.AcquireOwnedShards(ctx, []int{shard})
}

func (n *localOwnerNode) ReleaseShards(ctx context.Context, shards []int) error {
	n.mu.Lock()
	for _, s := range shards {
		delete(n.held, s)
	}
	n.mu.Unlock()
	return n.Memory.ReleaseShards(ctx, shards)
}

func (n *localOwnerNode) PublishShardOwner(ctx context.Context, shard int) error {
	n.mu.Lock()
	held := n.held[shard]
	n.mu.Unlock()
	if held {
		return nil
	}
	return n.Memory.PublishShardOwner(ctx, shard)
}

// setScopeOnlyNode filters some enumerating reads by the scope of its last
// SetOwnedShards, ignoring ExtendOwnedShards (adoption).
type setScopeOnlyNode struct {
	*eventstore.Memory
	shardCount    int
	mu            sync.Mutex
	scope         []int // nil: every shard
	paused, timer bool  // which reads filter
}

func (n *setScopeOnlyNode) SetOwnedShards(ctx context.Context, shards []int) {
	n.mu.Lock()
	n.scope = slices.Clone(shards)
	n.mu.Unlock()
	n.Memory.SetOwnedShards(ctx, shards)
}

func (n *setScopeOnlyNode) in(wf eventstore.WorkflowID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.scope == nil || slices.Contains(n.scope, eventstore.ShardOf(wf, n.shardCount))
}

func (n *setScopeOnlyNode) ListPaused(ctx context.Context) ([]eventstore.WorkflowID, error) {
	ids, err := n.Memory.ListPaused(ctx)
	if n.paused {
		ids = slices.DeleteFunc(ids, func(id eventstore.WorkflowID) bool { return !n.in(id) })
	}
	return ids, err
}

func (n *setScopeOnlyNode) ExpiredTimers(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
	due, err := n.Memory.ExpiredTimers(ctx, asOf)
	if n.timer {
		due = slices.DeleteFunc(due, func(e eventstore.TimerEntry) bool { return !n.in(e.WorkflowID) })
	}
	return due, err
}

// rowsUnfencedNode stages rows through its peer when its own rows-only
// append is fenced: the fence checked on events only.
type rowsUnfencedNode struct {
	*eventstore.Memory
	peer *eventstore.Memory
}

func (n rowsUnfencedNode) AppendWithOutbox(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
	err := n.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
	if len(evs) == 0 && errors.Is(err, eventstore.ErrNotOwner) {
		return n.peer.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
	}
	return err
}

// twoStepFenceNode checks the fence, then writes: between the two, the
// shard may change hands, and the write then goes through the unfenced
// path (here: the peer's). The window is widened while it still holds the
// shard, as a slow round trip to a database would.
type twoStepFenceNode struct {
	*eventstore.Memory
	peer       *eventstore.Memory
	shardCount int
}

func (n twoStepFenceNode) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
	shard := eventstore.ShardOf(wf, n.shardCount)
	if !n.IsCurrentOwner(ctx, shard) {
		return n.Memory.Append(ctx, tok, wf, evs, exp)
	}
	for i := 0; i < 64 && n.IsCurrentOwner(ctx, shard); i++ {
		runtime.Gosched()
	}
	err := n.Memory.Append(ctx, tok, wf, evs, exp)
	if errors.Is(err, eventstore.ErrNotOwner) {
		return n.peer.Append(ctx, tok, wf, evs, exp)
	}
	return err
}

// nodeRules are the names of the election rules.
var nodeRules = []string{RuleNodesOneOwner, RuleNodesFencing, RuleNodesHandoff, RuleNodesKill, RuleNodesReadsAcross, RuleNodesScopes, RuleNodesModel, RuleNodesStaleOwnerRace}

func TestNodesRulesPassOnMemory(t *testing.T) {
	err := CheckEventStore(t.Context(), func() (eventstore.Store, func(), error) { return eventstore.NewMemory(), nil, nil },
		onlyRules(nodeRules...), WithNodes(func(*testing.T) Nodes { n, _ := memoryNodes(); return n }))
	if err != nil {
		t.Fatal(err)
	}
}

func TestNodesRulesCatchBrokenClusters(t *testing.T) {
	testCases := []struct {
		name  string
		nodes func() Nodes
		rules []string // each must fail
	}{
		{"one identity for both nodes", func() Nodes {
			n, c := memoryNodes()
			n.B = c.Node("a")
			return n
		}, []string{RuleNodesOneOwner, RuleNodesFencing, RuleNodesModel}},
		{"both nodes own a shard", func() Nodes {
			n, c := memoryNodes()
			n.B = &bothOwnNode{Memory: c.Node("b")}
			return n
		}, []string{RuleNodesOneOwner, RuleNodesModel}},
		{"writes not fenced", func() Nodes {
			n, c := memoryNodes()
			n.B = unfencedNode{c.Node("b"), c.Node("a")}
			return n
		}, []string{RuleNodesFencing, RuleNodesModel}},
		{"IsCurrentOwner true for the other's shard", func() Nodes {
			n, c := memoryNodes()
			n.B = lyingOwnerNode{c.Node("b"), c.Node("a")}
			return n
		}, []string{RuleNodesOneOwner, RuleNodesModel}},
		{"one scope for both nodes", func() Nodes {
			n, c := memoryNodes()
			n.B = sharedScopeNode{c.Node("b"), c.Node("a")}
			return n
		}, []string{RuleNodesScopes}},
		{"a many-shard election keeps what it won", func() Nodes {
			n, c := memoryNodes()
			n.B = partialNode{c.Node("b")}
			return n
		}, []string{RuleNodesOneOwner}},
		{"renewal refused", func() Nodes {
			n, c := memoryNodes()
			n.A = noRenewalNode{c.Node("a")}
			return n
		}, []string{RuleNodesOneOwner, RuleNodesModel}},
		{"a dead node publishes itself as owner", func() Nodes {
			n, c := memoryNodes()
			n.A = &localOwnerNode{Memory: c.Node("a"), held: map[int]bool{}}
			return n
		}, []string{RuleNodesKill, RuleNodesModel}},
		{"ListPaused ignores ExtendOwnedShards", func() Nodes {
			n, c := memoryNodes()
			n.B = &setScopeOnlyNode{Memory: c.Node("b"), shardCount: 4, paused: true}
			return n
		}, []string{RuleNodesReadsAcross}},
		{"ExpiredTimers ignores ExtendOwnedShards", func() Nodes {
			n, c := memoryNodes()
			n.B = &setScopeOnlyNode{Memory: c.Node("b"), shardCount: 4, timer: true}
			return n
		}, []string{RuleNodesReadsAcross}},
		{"a non-holder's rows-only append not fenced", func() Nodes {
			n, c := memoryNodes()
			n.B = rowsUnfencedNode{c.Node("b"), c.Node("a")}
			return n
		}, []string{RuleNodesReadsAcross}},
		{"the fence check and the write are two steps", func() Nodes {
			n, c := memoryNodes()
			n.A = twoStepFenceNode{c.Node("a"), c.Node("b"), 4}
			n.B = twoStepFenceNode{c.Node("b"), c.Node("a"), 4}
			return n
		}, []string{RuleNodesStaleOwnerRace}},
		{"kill that leaves the shard held", func() Nodes {
			n, _ := memoryNodes()
			n.Kill = func(context.Context) error { return nil }
			return n
		}, []string{RuleNodesKill, RuleNodesModel}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			seeds := int64(10)
			if raceEnabled {
				seeds = 3 // the same verdicts, slower
			}
			for seed := range seeds {
				err := CheckEventStore(t.Context(), func() (eventstore.Store, func(), error) { return eventstore.NewMemory(), nil, nil },
					onlyRules(nodeRules...), withoutShrinking(), WithSeed(seed), WithNodes(func(*testing.T) Nodes { return tc.nodes() }))
				failed := failedRules(t, err, SuiteEventStore)
				for _, r := range tc.rules {
					if failed[r] == nil {
						t.Errorf("seed %d: rule %q did not fail; failures: %v", seed, r, err)
					}
				}
			}
		})
	}
}
