package conformance

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// localRenewNode renews a shard it recorded acquiring without asking the
// backend: a dead node's record is never cleared, so it "renews" a shard
// the survivor took over.
type localRenewNode struct{ *localOwnerNode }

func (n localRenewNode) AcquireOwnedShards(ctx context.Context, shards []int) error {
	n.mu.Lock()
	all := true
	for _, s := range shards {
		all = all && n.held[s]
	}
	n.mu.Unlock()
	if all && len(shards) > 0 {
		return nil
	}
	return n.localOwnerNode.AcquireOwnedShards(ctx, shards)
}

func (n localRenewNode) AcquireOwnedShard(ctx context.Context, shard int) error {
	return n.AcquireOwnedShards(ctx, []int{shard})
}

func (n localRenewNode) PublishShardOwner(ctx context.Context, shard int) error {
	return n.Memory.PublishShardOwner(ctx, shard)
}

// directory is an owner directory both nodes of a pair share.
type directory struct {
	mu    sync.Mutex
	owner map[int]string
}

// idempotentPublishNode publishes once: a shard the directory already
// names it the owner of is "published" again without checking it still
// holds it.
type idempotentPublishNode struct {
	*eventstore.Memory
	dir *directory
}

func (n idempotentPublishNode) PublishShardOwner(ctx context.Context, shard int) error {
	n.dir.mu.Lock()
	defer n.dir.mu.Unlock()
	if n.dir.owner[shard] == n.Name() {
		return nil
	}
	err := n.Memory.PublishShardOwner(ctx, shard)
	if err == nil {
		n.dir.owner[shard] = n.Name()
	}
	return err
}

// multiExtendNode's ListPaused and ExpiredTimers take only the first
// shard of an ExtendOwnedShards call.
type multiExtendNode struct{ *setScopeOnlyNode }

func (n multiExtendNode) ExtendOwnedShards(ctx context.Context, shards []int) {
	n.mu.Lock()
	if n.scope != nil && len(shards) > 0 {
		n.scope = append(n.scope, shards[0])
	}
	n.mu.Unlock()
	n.Memory.ExtendOwnedShards(ctx, shards)
}

// ownWritesNode answers ListActive, ListPaused and ExpiredTimers with the
// backend's answer overlaid by a cache of what it wrote itself (its own
// pauses, resumes and timers win over the other node's later ones).
type ownWritesNode struct {
	*eventstore.Memory
	mu     sync.Mutex
	paused map[eventstore.WorkflowID]bool
	timers map[eventstore.WorkflowID]eventstore.TimerEntry
}

func newOwnWritesNode(m *eventstore.Memory) *ownWritesNode {
	return &ownWritesNode{Memory: m, paused: map[eventstore.WorkflowID]bool{}, timers: map[eventstore.WorkflowID]eventstore.TimerEntry{}}
}

func (n *ownWritesNode) note(wf eventstore.WorkflowID, evs []eventstore.Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, ev := range evs {
		switch ev.(type) {
		case eventstore.WorkflowPaused:
			n.paused[wf] = true
		case eventstore.WorkflowResumed, eventstore.WorkflowStarted:
			n.paused[wf] = false
		}
	}
}

func (n *ownWritesNode) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
	err := n.Memory.Append(ctx, tok, wf, evs, exp)
	if err == nil {
		n.note(wf, evs)
	}
	return err
}

func (n *ownWritesNode) AppendWithOutbox(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
	err := n.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
	if err == nil {
		n.note(wf, evs)
	}
	return err
}

func (n *ownWritesNode) ScheduleTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) error {
	err := n.Memory.ScheduleTimer(ctx, wf, id, at, seq)
	if err == nil {
		n.mu.Lock()
		n.timers[wf] = eventstore.TimerEntry{WorkflowID: wf, TimerID: id, FireAt: at, ArmedSeq: seq}
		n.mu.Unlock()
	}
	return err
}

// lists answers ListActive (paused false) or ListPaused from the backend's
// two scoped listings, each workflow where its own cache puts it.
func (n *ownWritesNode) lists(ctx context.Context, paused bool) ([]eventstore.WorkflowID, error) {
	active, err := n.Memory.ListActive(ctx)
	if err != nil {
		return nil, err
	}
	held, err := n.Memory.ListPaused(ctx)
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []eventstore.WorkflowID
	for _, wf := range append(active, held...) {
		p, cached := n.paused[wf]
		if !cached {
			p = slices.Contains(held, wf)
		}
		if p == paused {
			out = append(out, wf)
		}
	}
	return out, err
}

func (n *ownWritesNode) ListActive(ctx context.Context) ([]eventstore.WorkflowID, error) {
	return n.lists(ctx, false)
}

func (n *ownWritesNode) ListPaused(ctx context.Context) ([]eventstore.WorkflowID, error) {
	return n.lists(ctx, true)
}

func (n *ownWritesNode) ExpiredTimers(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
	due, err := n.Memory.ExpiredTimers(ctx, asOf)
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, e := range due {
		if c, ok := n.timers[e.WorkflowID]; ok && c.TimerID == e.TimerID {
			due[i] = c
		}
	}
	return due, err
}

// twoStepOutboxNode checks the fence of an AppendWithOutbox, then writes
// (its Append is atomic): between the two the shard may change hands, and
// the write goes through the unfenced path (here: the peer's). The window
// is widened as a round trip to a database would.
type twoStepOutboxNode twoStepFenceNode

func (n twoStepOutboxNode) AppendWithOutbox(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
	shard := eventstore.ShardOf(wf, n.shardCount)
	if !n.IsCurrentOwner(ctx, shard) {
		return n.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
	}
	for i := 0; i < 64 && n.IsCurrentOwner(ctx, shard); i++ {
		runtime.Gosched()
	}
	err := n.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
	if errors.Is(err, eventstore.ErrNotOwner) {
		return n.peer.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
	}
	return err
}

// slowNode is a correct node whose reads each take a quarter of the rule
// timeout (one sample of the injected watchdog), as on a loaded machine
// (its appends, which race one another, are not slowed: the samples of
// racing calls would count the same time twice); with hang set,
// ReadHistory never returns before its context ends.
type slowNode struct {
	*eventstore.Memory
	samples chan<- time.Time
	hang    bool
}

func (n slowNode) slow(ctx context.Context) {
	select {
	case n.samples <- time.Time{}:
	case <-ctx.Done():
	}
}

func (n slowNode) IsCurrentOwner(ctx context.Context, shard int) bool {
	n.slow(ctx)
	return n.Memory.IsCurrentOwner(ctx, shard)
}

func (n slowNode) ListWorkflowIDs(ctx context.Context) ([]eventstore.WorkflowID, error) {
	n.slow(ctx)
	return n.Memory.ListWorkflowIDs(ctx)
}

func (n slowNode) ListActive(ctx context.Context) ([]eventstore.WorkflowID, error) {
	n.slow(ctx)
	return n.Memory.ListActive(ctx)
}

func (n slowNode) ListPaused(ctx context.Context) ([]eventstore.WorkflowID, error) {
	n.slow(ctx)
	return n.Memory.ListPaused(ctx)
}

func (n slowNode) ExpiredTimers(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
	n.slow(ctx)
	return n.Memory.ExpiredTimers(ctx, asOf)
}

func (n slowNode) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	n.slow(ctx)
	for n.hang && ctx.Err() == nil {
		n.slow(ctx) // time passes, the call does not return
	}
	return n.Memory.ReadHistory(ctx, wf)
}

// slowPair is a pair of slowNodes feeding one injected watchdog.
func slowPair(hang bool) (func() Nodes, Option) {
	samples := make(chan time.Time)
	watchdog := optionFunc(func(c *config) { c.watchdog = func(time.Duration) <-chan time.Time { return samples } })
	return func() Nodes {
		n, c := memoryNodes()
		n.A = slowNode{c.Node("a"), samples, false}
		n.B = slowNode{c.Node("b"), samples, hang}
		return n
	}, watchdog
}

func TestHeldOutNodes(t *testing.T) {
	expensiveSelfTest(t)
	slow, slowWatch := slowPair(false)
	hang, hangWatch := slowPair(true)
	for _, tc := range []struct {
		name   string
		nodes  func() Nodes
		opts   []Option
		caught bool
	}{
		{"a dead node renews the shards it recorded", func() Nodes {
			n, c := memoryNodes()
			n.A = localRenewNode{&localOwnerNode{Memory: c.Node("a"), held: map[int]bool{}}}
			return n
		}, nil, true},
		{"a dead node republishes what the directory names it owner of", func() Nodes {
			n, c := memoryNodes()
			dir := &directory{owner: map[int]string{}}
			n.A = idempotentPublishNode{c.Node("a"), dir}
			n.B = idempotentPublishNode{c.Node("b"), dir}
			return n
		}, nil, true},
		{"node A's rows-only append not fenced", func() Nodes {
			n, c := memoryNodes()
			n.A = rowsUnfencedNode{c.Node("a"), c.Node("b")}
			return n
		}, nil, true},
		{"ListPaused and ExpiredTimers take one shard of an extension", func() Nodes {
			n, c := memoryNodes()
			n.B = multiExtendNode{&setScopeOnlyNode{Memory: c.Node("b"), shardCount: 4, paused: true, timer: true}}
			return n
		}, nil, true},
		{"listings and timers overlaid by a cache of the node's own writes", func() Nodes {
			n, c := memoryNodes()
			n.A = newOwnWritesNode(c.Node("a"))
			n.B = newOwnWritesNode(c.Node("b"))
			return n
		}, nil, true},
		{"AppendWithOutbox checks the fence and writes in two steps", func() Nodes {
			n, c := memoryNodes()
			n.A = twoStepOutboxNode{c.Node("a"), c.Node("b"), 4}
			n.B = twoStepOutboxNode{c.Node("b"), c.Node("a"), 4}
			return n
		}, nil, true},
		{"correct, every read a quarter of the timeout", slow, []Option{slowWatch, onlyRules(RuleNodesReadsAcross, RuleNodesStaleOwnerRace)}, false},
		{"ReadHistory hangs", hang, []Option{hangWatch, onlyRules(RuleNodesReadsAcross)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := append([]Option{onlyRules(nodeRules...), withoutShrinking(), WithSeed(adversarySeed),
				WithNodes(func(*testing.T) Nodes { return tc.nodes() })}, tc.opts...)
			err := CheckEventStore(t.Context(), func() (eventstore.Store, func(), error) { return eventstore.NewMemory(), nil, nil }, opts...)
			if !tc.caught {
				if err != nil {
					t.Fatalf("a correct pair fails: %v", err)
				}
				return
			}
			report(t, err)
			if strings.Contains(tc.name, "hangs") {
				for _, re := range RuleErrors(err) {
					if !errors.Is(re, ErrRuleTimedOut) {
						t.Errorf("rule %q: %v, want a timeout", re.Rule, re)
					}
				}
			}
		})
	}
}
