package conformance

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

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

// nodeRules are the names of the election rules.
var nodeRules = []string{RuleNodesOneOwner, RuleNodesFencing, RuleNodesHandoff, RuleNodesKill, RuleNodesScopes, RuleNodesModel}

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
		{"kill that leaves the shard held", func() Nodes {
			n, _ := memoryNodes()
			n.Kill = func(context.Context) error { return nil }
			return n
		}, []string{RuleNodesKill, RuleNodesModel}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range int64(10) {
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
