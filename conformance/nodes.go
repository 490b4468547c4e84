package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
)

// Nodes is two nodes of one backend, for the election rules between nodes
// (the nodes/* rules of [TestEventStore], run when [WithNodes] gives a
// factory of them). A and B share one history and are each an
// [eventstore.ShardOwner] with their own identity: for the in-memory store,
// two nodes of one [eventstore.MemoryCluster]; for a database, two stores
// on one database with different node names.
type Nodes struct {
	A, B eventstore.Store
	// ShardCount is the backend's number of shards: a workflow is in shard
	// eventstore.ShardOf(id, ShardCount). It must be at least 2.
	ShardCount int
	// Kill declares node A dead and returns once node B may acquire the
	// shards A held: a store without leases marks A dead
	// (eventstore.MemoryCluster.Kill); a store with leases stops A's
	// renewals and lets its leases run out (an injected clock, or a short
	// lease waited for). After Kill the rules call A only to append, which
	// must fail with eventstore.ErrNotOwner on the shards A held, and to
	// ask IsCurrentOwner, which must be false. nil skips the rules that
	// kill a node.
	Kill func(ctx context.Context) error
	// Close, when set, is called when the rule is over: the cleanup for
	// [CheckEventStore], which has no *testing.T (TestEventStore users may
	// register t.Cleanup instead).
	Close func()
}

// shardReleaser is how the rules give shards up: a node with a
// ReleaseShards method (as eventstore.Memory has) releases through it; the
// rules that need it skip for a node without it.
type shardReleaser interface {
	ReleaseShards(ctx context.Context, shards []int) error
}

// WithNodes makes [TestEventStore] and [CheckEventStore] also run the
// election rules between two nodes of one backend (the nodes/* rules), each
// on a fresh pair from newNodes. TestEventStore calls newNodes on the
// subtest's *testing.T; CheckEventStore calls it with a nil *testing.T, so
// a factory meant for it must not use t and cleans up through Nodes.Close.
// Without this option the nodes/* rules are not run (a single store cannot
// show an election between nodes).
func WithNodes(newNodes func(t *testing.T) Nodes) Option {
	return optionFunc(func(c *config) { c.nodes = newNodes })
}

var nodesSuite = suite[Nodes]{
	name: SuiteEventStore,
	rules: []rule[Nodes]{
		{name: RuleNodesOneOwner, check: nodesOneOwner},
		{name: RuleNodesFencing, check: nodesFencing},
		{name: RuleNodesHandoff, check: nodesHandoff},
		{name: RuleNodesKill, check: nodesKill},
		{name: RuleNodesScopes, check: nodesScopes},
		{name: RuleNodesModel, run: nodesModelRule},
	},
}

// pair is a checked Nodes with a workflow in each of shards 0, 1 and 2
// (shard%ShardCount), and the model of what each workflow holds.
type pair struct {
	Nodes
	so      [2]eventstore.ShardOwner
	wfs     []esRun // wfs[i] is in shard i % ShardCount
	history map[eventstore.WorkflowID][]eventstore.Event
	deadA   bool // Kill was called: A's reads are not checked any more
}

func newPair(n Nodes, rng *rand.Rand) (*pair, error) {
	p := &pair{Nodes: n, history: map[eventstore.WorkflowID][]eventstore.Event{}}
	for i, s := range []eventstore.Store{n.A, n.B} {
		so, ok := s.(eventstore.ShardOwner)
		if !ok {
			return nil, fmt.Errorf("node %c (%T) is not an eventstore.ShardOwner", 'A'+i, s)
		}
		p.so[i] = so
	}
	if n.ShardCount < 2 {
		return nil, fmt.Errorf("Nodes.ShardCount is %d, want at least 2", n.ShardCount)
	}
	ids := newIDGen(rng)
	for shard := range 3 {
		for {
			wf := ids.workflow()
			if eventstore.ShardOf(wf, n.ShardCount) == shard%n.ShardCount {
				p.wfs = append(p.wfs, esRun{wf, ids.run()})
				break
			}
		}
	}
	return p, nil
}

func (p *pair) node(i int) eventstore.Store { return []eventstore.Store{p.A, p.B}[i] }

// appendBy appends one event through node i to the workflow of shard
// (through AppendWithOutbox with a row when withRow and the node is an
// Outbox), at the head the model knows. want is nil for success or the
// error the append must match; on a refusal the history, read through both
// nodes, must be unchanged.
func (p *pair) appendBy(ctx context.Context, i, shard int, withRow bool, want error) error {
	r := p.wfs[shard]
	head := uint64(len(p.history[r.wf]))
	ev := r.signal(fmt.Sprintf("by-%c-%d", 'A'+i, head))
	if head == 0 {
		ev = r.started("conformance-nodes")
	}
	var err error
	what := fmt.Sprintf("node %c: Append to a workflow of shard %d", 'A'+i, shard)
	if ob, ok := p.node(i).(eventstore.Outbox); ok && withRow {
		what = fmt.Sprintf("node %c: AppendWithOutbox (one event, one row) to a workflow of shard %d", 'A'+i, shard)
		err = ob.AppendWithOutbox(ctx, token, r.wf, []eventstore.Event{ev}, head, []eventstore.OutboxRow{r.row(eventstore.ActivityID(head))})
	} else {
		err = p.node(i).Append(ctx, token, r.wf, []eventstore.Event{ev}, head)
	}
	switch {
	case want == nil && err != nil:
		return fmt.Errorf("%s: %w", what, err)
	case want != nil && !errors.Is(err, want):
		return fmt.Errorf("%s returned %v, want an error matching %v", what, err, want)
	case want == nil:
		p.history[r.wf] = append(p.history[r.wf], ev)
	}
	// Read back through both nodes (B only, once A is dead).
	for _, j := range []int{1, 0} {
		if j == 0 && p.deadA {
			continue
		}
		if err := wantHistory(ctx, p.node(j), r.wf, p.history[r.wf]...); err != nil {
			return fmt.Errorf("after %s, read through node %c: %w", what, 'A'+j, err)
		}
	}
	return nil
}

// acquire runs node i's election for shards and checks the answer.
func (p *pair) acquire(ctx context.Context, i int, shards []int, want error) error {
	var err error
	if len(shards) == 1 {
		err = p.so[i].AcquireOwnedShard(ctx, shards[0])
	} else {
		err = p.so[i].AcquireOwnedShards(ctx, shards)
	}
	switch {
	case want == nil && err != nil:
		return fmt.Errorf("node %c: acquiring shards %v: %w", 'A'+i, shards, err)
	case want != nil && !errors.Is(err, want):
		return fmt.Errorf("node %c: acquiring shards %v returned %v, want an error matching %v", 'A'+i, shards, err, want)
	}
	return nil
}

// owners checks IsCurrentOwner of shard through both nodes: holder is 0 or
// 1 for A or B, -1 for neither.
func (p *pair) owners(ctx context.Context, shard, holder int) error {
	for i := range 2 {
		if got := p.so[i].IsCurrentOwner(ctx, shard); got != (i == holder) {
			return fmt.Errorf("node %c: IsCurrentOwner(%d) = %v, want %v", 'A'+i, shard, got, i == holder)
		}
	}
	return nil
}

// steps runs checks in order and stops at the first failure.
func steps(fs ...func() error) error {
	for i, f := range fs {
		if err := f(); err != nil {
			return fmt.Errorf("step %d: %w", i+1, err)
		}
	}
	return nil
}

func pairOf(ctx context.Context, n Nodes, rule string) (*pair, error) {
	return newPair(n, newRand(int64(len(rule))+1, rule))
}

// nodesOneOwner: one holder per shard; a held shard is refused to the other
// node, and a many-shard call with one held shard acquires none; renewal
// succeeds; only the holder publishes.
func nodesOneOwner(ctx context.Context, n Nodes) error {
	p, err := pairOf(ctx, n, RuleNodesOneOwner)
	if err != nil {
		return err
	}
	const A, B = 0, 1
	return steps(
		func() error { return p.owners(ctx, 0, -1) },
		func() error { return p.acquire(ctx, A, []int{0}, nil) },
		func() error { return p.owners(ctx, 0, A) },
		func() error { return p.acquire(ctx, B, []int{0}, eventstore.ErrNotOwner) },
		func() error { return p.acquire(ctx, B, []int{1, 0}, eventstore.ErrNotOwner) },
		func() error { return p.owners(ctx, 1, -1) },
		func() error { return p.owners(ctx, 0, A) },
		func() error { return p.acquire(ctx, A, []int{0}, nil) }, // renewal
		func() error { return p.owners(ctx, 0, A) },
		func() error {
			return wantErr(p.so[A].PublishShardOwner(ctx, 0), nil, "node A: PublishShardOwner(0) of its shard")
		},
		func() error {
			return wantErr(p.so[B].PublishShardOwner(ctx, 0), eventstore.ErrNotOwner, "node B: PublishShardOwner(0) of A's shard")
		},
		func() error { return p.acquire(ctx, B, []int{1}, nil) },
		func() error { return p.owners(ctx, 1, B) },
		func() error { return p.acquire(ctx, A, []int{1}, eventstore.ErrNotOwner) },
		func() error { return p.owners(ctx, 0, A) },
	)
}

// wantErr checks err against want (nil: success).
func wantErr(err, want error, what string) error {
	switch {
	case want == nil && err != nil:
		return fmt.Errorf("%s: %w", what, err)
	case want != nil && !errors.Is(err, want):
		return fmt.Errorf("%s returned %v, want an error matching %v", what, err, want)
	}
	return nil
}

// nodesFencing: a shard no node acquired takes appends from both; once A
// holds it, B's appends (with and without outbox rows) fail with
// ErrNotOwner and write nothing, read back through both nodes.
func nodesFencing(ctx context.Context, n Nodes) error {
	p, err := pairOf(ctx, n, RuleNodesFencing)
	if err != nil {
		return err
	}
	const A, B = 0, 1
	return steps(
		func() error { return p.appendBy(ctx, A, 0, false, nil) },
		func() error { return p.appendBy(ctx, B, 0, true, nil) },
		func() error { return p.acquire(ctx, A, []int{0}, nil) },
		func() error { return p.appendBy(ctx, A, 0, true, nil) },
		func() error { return p.appendBy(ctx, B, 0, false, eventstore.ErrNotOwner) },
		func() error { return p.appendBy(ctx, B, 0, true, eventstore.ErrNotOwner) },
		func() error { return p.appendBy(ctx, B, 1, true, nil) }, // shard 1 was never acquired
		func() error { return p.appendBy(ctx, A, 0, false, nil) },
	)
}

// nodesHandoff: A releases its shard; until B acquires it neither node may
// append; then only B may, and only B publishes.
func nodesHandoff(ctx context.Context, n Nodes) error {
	p, err := pairOf(ctx, n, RuleNodesHandoff)
	if err != nil {
		return err
	}
	rel, ok := n.A.(shardReleaser)
	if !ok {
		return &skipError{reason: fmt.Sprintf("node A (%T) has no ReleaseShards(ctx, shards) method", n.A)}
	}
	const A, B = 0, 1
	return steps(
		func() error { return p.acquire(ctx, A, []int{0}, nil) },
		func() error { return p.appendBy(ctx, A, 0, false, nil) },
		func() error { return wantErr(rel.ReleaseShards(ctx, []int{0}), nil, "node A: ReleaseShards([0])") },
		func() error { return p.owners(ctx, 0, -1) },
		func() error { return p.appendBy(ctx, A, 0, false, eventstore.ErrNotOwner) },
		func() error { return p.appendBy(ctx, B, 0, true, eventstore.ErrNotOwner) },
		func() error { return p.acquire(ctx, B, []int{0}, nil) },
		func() error { return p.owners(ctx, 0, B) },
		func() error { return p.appendBy(ctx, B, 0, true, nil) },
		func() error { return p.appendBy(ctx, A, 0, false, eventstore.ErrNotOwner) },
		func() error { return p.acquire(ctx, A, []int{0}, eventstore.ErrNotOwner) },
		func() error {
			return wantErr(p.so[A].PublishShardOwner(ctx, 0), eventstore.ErrNotOwner, "node A: PublishShardOwner(0) after the handoff")
		},
		func() error {
			return wantErr(p.so[B].PublishShardOwner(ctx, 0), nil, "node B: PublishShardOwner(0) after the handoff")
		},
	)
}

// nodesKill: A holds a shard and dies; the shard stays fenced until B
// acquires it; then B appends and A's appends fail with ErrNotOwner.
func nodesKill(ctx context.Context, n Nodes) error {
	if n.Kill == nil {
		return &skipError{reason: "Nodes.Kill is nil"}
	}
	p, err := pairOf(ctx, n, RuleNodesKill)
	if err != nil {
		return err
	}
	const A, B = 0, 1
	return steps(
		func() error { return p.acquire(ctx, A, []int{0}, nil) },
		func() error { return p.appendBy(ctx, A, 0, true, nil) },
		func() error { return p.acquire(ctx, B, []int{0}, eventstore.ErrNotOwner) },
		func() error { p.deadA = true; return wantErr(n.Kill(ctx), nil, "Nodes.Kill") },
		func() error {
			if p.so[A].IsCurrentOwner(ctx, 0) {
				return errors.New("node A: IsCurrentOwner(0) = true after Kill")
			}
			return nil
		},
		func() error { return p.appendBy(ctx, B, 0, false, eventstore.ErrNotOwner) },
		func() error { return p.acquire(ctx, B, []int{0}, nil) },
		func() error { return p.appendBy(ctx, B, 0, true, nil) },
		func() error { return p.appendBy(ctx, A, 0, true, eventstore.ErrNotOwner) },
		func() error { return p.appendBy(ctx, A, 0, false, eventstore.ErrNotOwner) },
	)
}

// nodesScopes: each node's enumeration scope is its own.
func nodesScopes(ctx context.Context, n Nodes) error {
	p, err := pairOf(ctx, n, RuleNodesScopes)
	if err != nil {
		return err
	}
	for shard := range 2 {
		if err := p.appendBy(ctx, shard, shard, false, nil); err != nil {
			return err
		}
	}
	listed := func(i int, want ...int) error {
		ids, err := p.node(i).ListWorkflowIDs(ctx)
		if err != nil {
			return fmt.Errorf("node %c: ListWorkflowIDs: %w", 'A'+i, err)
		}
		for shard := range 2 {
			if got, w := count(ids, p.wfs[shard].wf), boolInt(count(want, shard) > 0); got != w {
				return fmt.Errorf("node %c: ListWorkflowIDs lists the workflow of shard %d %d times, want %d (its scope: shards %v)", 'A'+i, shard, got, w, want)
			}
		}
		return nil
	}
	const A, B = 0, 1
	return steps(
		func() error { p.so[A].SetOwnedShards(ctx, []int{0}); return listed(A, 0) },
		func() error { p.so[B].SetOwnedShards(ctx, []int{1}); return listed(B, 1) },
		func() error { return listed(A, 0) },
		func() error { p.so[B].ExtendOwnedShards(ctx, []int{0}); return listed(B, 0, 1) },
		func() error { return listed(A, 0) },
		func() error { p.so[A].SetOwnedShards(ctx, nil); return listed(A, 0, 1) },
		func() error { return listed(B, 0, 1) },
		func() error { p.so[B].SetOwnedShards(ctx, []int{}); return listed(B) },
		func() error { return listed(A, 0, 1) },
	)
}

// nodesOp is one generated step of the election model.
type nodesOp struct {
	kind  int // 0 acquire, 1 release, 2 append, 3 publish, 4 kill A
	node  int
	shard int
	many  bool
	row   bool
}

func (o nodesOp) String() string {
	name := []string{"acquire", "release", "append", "publish", "kill A"}[o.kind]
	return fmt.Sprintf("%s(node %c, shard %d, many=%v, row=%v)", name, 'A'+o.node, o.shard, o.many, o.row)
}

// nodesModel is the election model: who holds each of the rule's shards,
// whether each was ever acquired, whether A is dead.
type nodesModel struct {
	*pair
	holder   [3]int // -1: nobody
	acquired [3]bool
}

func (m *nodesModel) step(ctx context.Context, o nodesOp) error {
	shards := m.ShardCount
	s := o.shard % min(shards, 3)
	if o.node == 0 && m.deadA && o.kind != 2 {
		return nil // A is dead: only its appends are still checked
	}
	switch o.kind {
	case 0:
		list := []int{s}
		if o.many {
			list = []int{(s + 1) % min(shards, 3), s}
		}
		var want error
		for _, x := range list {
			if h := m.holder[x]; h >= 0 && h != o.node {
				want = eventstore.ErrNotOwner
			}
		}
		if err := m.acquire(ctx, o.node, list, want); err != nil {
			return err
		}
		if want == nil {
			for _, x := range list {
				m.holder[x], m.acquired[x] = o.node, true
			}
		}
	case 1:
		rel, ok := m.node(o.node).(shardReleaser)
		if !ok {
			return nil
		}
		if err := rel.ReleaseShards(ctx, []int{s}); err != nil {
			return fmt.Errorf("node %c: ReleaseShards([%d]): %w", 'A'+o.node, s, err)
		}
		if m.holder[s] == o.node {
			m.holder[s] = -1
		}
	case 2:
		var want error
		if m.acquired[s] && m.holder[s] != o.node {
			want = eventstore.ErrNotOwner
		}
		if o.node == 0 && m.deadA && !m.acquired[s] {
			return nil // a dead node's write to an open shard: the store's choice
		}
		if err := m.appendBy(ctx, o.node, s, o.row, want); err != nil {
			return err
		}
	case 3:
		var want error
		if m.holder[s] != o.node {
			want = eventstore.ErrNotOwner
		}
		if err := wantErr(m.so[o.node].PublishShardOwner(ctx, s), want, fmt.Sprintf("node %c: PublishShardOwner(%d)", 'A'+o.node, s)); err != nil {
			return err
		}
	case 4:
		if m.Kill == nil || m.deadA {
			return nil
		}
		// A dies holding a shard (B gives one up if it holds them all).
		if rel, ok := m.B.(shardReleaser); ok && m.holder[0] == 1 {
			if err := rel.ReleaseShards(ctx, []int{0}); err != nil {
				return fmt.Errorf("node B: ReleaseShards([0]): %w", err)
			}
			m.holder[0] = -1
		}
		for x := range min(shards, 3) {
			if m.holder[x] != 1 {
				if err := m.acquire(ctx, 0, []int{x}, nil); err != nil {
					return err
				}
				m.holder[x], m.acquired[x] = 0, true
				break
			}
		}
		m.deadA = true
		if err := m.Kill(ctx); err != nil {
			return fmt.Errorf("Nodes.Kill: %w", err)
		}
		for x := range m.holder {
			if m.holder[x] == 0 {
				m.holder[x] = -1
			}
		}
	}
	for x := range min(shards, 3) {
		for i := range 2 {
			if i == 0 && m.deadA {
				if m.so[0].IsCurrentOwner(ctx, x) {
					return fmt.Errorf("node A: IsCurrentOwner(%d) = true after Kill", x)
				}
				continue
			}
			if got := m.so[i].IsCurrentOwner(ctx, x); got != (m.holder[x] == i) {
				return fmt.Errorf("node %c: IsCurrentOwner(%d) = %v, want %v", 'A'+i, x, got, m.holder[x] == i)
			}
		}
	}
	return nil
}

// nodesModelRule runs a seeded sequence of elections, releases, appends,
// publications and (once, late) the death of A against the election model.
func nodesModelRule(ctx context.Context, env *ruleEnv[Nodes], n Nodes) error {
	rng := newRand(env.cfg.seed, RuleNodesModel)
	idSeed := rng.Uint64()
	total := 400 * env.cfg.scale
	var ops []nodesOp
	for i := range total {
		// Elections most often, releases seldom, so that shards stay held
		// and the nodes contest them.
		kind := []int{0, 0, 0, 0, 1, 2, 2, 2, 3, 3}[rng.IntN(10)]
		o := nodesOp{kind: kind, node: rng.IntN(2), shard: rng.IntN(3), many: rng.IntN(3) == 0, row: rng.IntN(2) == 0}
		if i == total*3/4 {
			o.kind = 4
		}
		ops = append(ops, o)
	}
	exec := func(ctx context.Context, n Nodes, ops []nodesOp) (int, error) {
		p, err := newPair(n, rand.New(rand.NewPCG(idSeed, 5)))
		if err != nil {
			return 0, err
		}
		m := &nodesModel{pair: p, holder: [3]int{-1, -1, -1}}
		for i, o := range ops {
			if err := m.step(ctx, o); err != nil {
				return i, err
			}
		}
		return 0, nil
	}
	return runModel(ctx, env, n, ops, exec)
}
