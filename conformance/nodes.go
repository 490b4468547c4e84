package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

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
// rules that release skip for a node without it.
type shardReleaser interface {
	ReleaseShards(ctx context.Context, shards []int) error
}

// WithNodes makes [TestEventStore] and [CheckEventStore] also run the
// election rules between two nodes of one backend (the nodes/* rules), each
// on a fresh pair from newNodes. TestEventStore calls newNodes on the
// subtest's *testing.T; CheckEventStore calls it with a nil *testing.T, so
// a factory meant for it must not use t and cleans up through Nodes.Close.
// Without this option the nodes/* rules are not run: a single store cannot
// show an election between nodes.
func WithNodes(newNodes func(t *testing.T) Nodes) Option {
	return optionFunc(func(c *config) { c.nodes = newNodes })
}

const nodeA, nodeB, nobody = 0, 1, -1

var nodesSuite = suite[Nodes]{name: SuiteEventStore, rules: []rule[Nodes]{
	nodesScript(RuleNodesOneOwner, func(b *nb) {
		b.acquire(nodeA, 0)
		b.acquire(nodeB, 0)
		b.acquire(nodeB, 1, 0)
		b.acquire(nodeA, 0) // renewal
		b.publish(nodeA, 0)
		b.publish(nodeB, 0)
		b.acquire(nodeB, 1)
		b.acquire(nodeA, 1)
		b.publish(nodeB, 1)
	}),
	nodesScript(RuleNodesFencing, func(b *nb) {
		b.write(nodeA, 0, false)
		b.write(nodeB, 0, true)
		b.acquire(nodeA, 0)
		b.write(nodeA, 0, true)
		b.write(nodeB, 0, false)
		b.write(nodeB, 0, true)
		b.write(nodeB, 1, true) // never acquired
		b.write(nodeA, 0, false)
	}),
	nodesScript(RuleNodesHandoff, func(b *nb) {
		b.acquire(nodeA, 0)
		b.write(nodeA, 0, false)
		b.release(nodeA, 0)
		b.write(nodeA, 0, false)
		b.write(nodeB, 0, true)
		b.acquire(nodeB, 0)
		b.write(nodeB, 0, true)
		b.write(nodeA, 0, false)
		b.acquire(nodeA, 0)
		b.publish(nodeA, 0)
		b.publish(nodeB, 0)
	}),
	nodesScript(RuleNodesKill, func(b *nb) {
		b.acquire(nodeA, 0, 1)
		b.write(nodeA, 0, true)
		b.acquire(nodeB, 0)
		b.kill()
		b.write(nodeB, 0, false)
		b.acquire(nodeB, 0)
		b.write(nodeB, 0, true)
		b.write(nodeA, 0, true)
		b.write(nodeA, 1, false)
	}),
	nodesScript(RuleNodesScopes, func(b *nb) {
		b.write(nodeA, 0, false)
		b.write(nodeB, 1, false)
		b.scope(nodeA, false, 0)
		b.scope(nodeB, false, 1)
		b.scope(nodeB, true, 0)
		b.scope(nodeA, false)
		b.scope(nodeB, false, -1)
	}),
	seeded(RuleNodesModel, nodesModelRule),
}}

// nodesModel is the election model: who holds each of shards 0 to 2
// (shard mod ShardCount), whether each was ever acquired, whether A is
// dead, each node's scope, and the history of one workflow per shard.
type nodesModel struct {
	Nodes
	ctx      context.Context
	so       [2]eventstore.ShardOwner
	wfs      [3]eventstore.WorkflowID
	runs     [3]eventstore.RunID
	history  [3][]eventstore.Event
	holder   [3]int
	acquired [3]bool
	scopes   [2][]int // nil: every shard
	deadA    bool
	shards   int // how many of the three shards are distinct
}

func newNodesModel(ctx context.Context, idSeed uint64) func(Nodes) (*nodesModel, error) {
	return func(n Nodes) (*nodesModel, error) {
		m := &nodesModel{Nodes: n, ctx: ctx, holder: [3]int{nobody, nobody, nobody}}
		for i, s := range []eventstore.Store{n.A, n.B} {
			so, ok := s.(eventstore.ShardOwner)
			if !ok {
				return nil, fmt.Errorf("node %c (%T) is not an eventstore.ShardOwner", 'A'+i, s)
			}
			m.so[i] = so
		}
		if n.ShardCount < 2 {
			return nil, fmt.Errorf("Nodes.ShardCount is %d, want at least 2", n.ShardCount)
		}
		m.shards = min(n.ShardCount, 3)
		g := newGen(rand.New(rand.NewPCG(idSeed, 5)))
		for shard := range m.shards {
			for wf := g.workflow(); ; wf = g.workflow() {
				if eventstore.ShardOf(wf, n.ShardCount) == shard {
					m.wfs[shard], m.runs[shard] = wf, g.run()
					break
				}
			}
		}
		return m, nil
	}
}

func (m *nodesModel) node(i int) eventstore.Store { return []eventstore.Store{m.A, m.B}[i] }

// check compares every node's view with the model: IsCurrentOwner of each
// shard, and each workflow's history and listing through each live node.
func (m *nodesModel) check() error {
	tick(m.ctx)
	for i := range 2 {
		for s := range m.shards {
			if got, want := m.so[i].IsCurrentOwner(m.ctx, s), m.holder[s] == i; got != want {
				return fmt.Errorf("node %c: IsCurrentOwner(%d) = %v, want %v", 'A'+i, s, got, want)
			}
		}
		if i == nodeA && m.deadA {
			continue
		}
		ids, err := m.node(i).ListWorkflowIDs(m.ctx)
		if err != nil {
			return fmt.Errorf("node %c: ListWorkflowIDs: %w", 'A'+i, err)
		}
		for s := range m.shards {
			got, err := m.node(i).ReadHistory(m.ctx, m.wfs[s])
			if err != nil {
				return fmt.Errorf("node %c: ReadHistory: %w", 'A'+i, err)
			}
			if d := diff(got, m.history[s]); d != "" {
				return fmt.Errorf("node %c reads the workflow of shard %d: %s", 'A'+i, s, d)
			}
			listed := len(m.history[s]) > 0 && (m.scopes[i] == nil || slices.Contains(m.scopes[i], s))
			if slices.Contains(ids, m.wfs[s]) != listed {
				return fmt.Errorf("node %c: ListWorkflowIDs lists the workflow of shard %d: %v, want %v (scope %v)", 'A'+i, s, !listed, listed, m.scopes[i])
			}
		}
	}
	return nil
}

func (m *nodesModel) acquire(i int, shards []int) error {
	if i == nodeA && m.deadA {
		return nil
	}
	var want error
	for _, s := range shards {
		if h := m.holder[s]; h != nobody && h != i {
			want = eventstore.ErrNotOwner
		}
	}
	var err error
	if len(shards) == 1 {
		err = m.so[i].AcquireOwnedShard(m.ctx, shards[0])
	} else {
		err = m.so[i].AcquireOwnedShards(m.ctx, shards)
	}
	if err := wantErr(err, want, fmt.Sprintf("node %c: acquiring shards %v", 'A'+i, shards)); err != nil {
		return err
	}
	if want == nil {
		for _, s := range shards {
			m.holder[s], m.acquired[s] = i, true
		}
	}
	return m.check()
}

func (m *nodesModel) release(i int, shards []int) error {
	rel, ok := m.node(i).(shardReleaser)
	if !ok {
		return skipf(0, "node %c (%T) has no ReleaseShards(ctx, shards) method", 'A'+i, m.node(i))
	}
	if i == nodeA && m.deadA {
		return nil
	}
	if err := rel.ReleaseShards(m.ctx, shards); err != nil {
		return fmt.Errorf("node %c: ReleaseShards(%v): %w", 'A'+i, shards, err)
	}
	for _, s := range shards {
		if m.holder[s] == i {
			m.holder[s] = nobody
		}
	}
	return m.check()
}

// write appends one event through node i to the workflow of shard (with an
// outbox row when row and the node is an Outbox), at the model's head: it
// must succeed exactly when the shard is open or held by the node, and
// fail with ErrNotOwner writing nothing otherwise.
func (m *nodesModel) write(i, shard int, row bool) error {
	var want error
	if m.acquired[shard] && m.holder[shard] != i {
		want = eventstore.ErrNotOwner
	}
	if i == nodeA && m.deadA && !m.acquired[shard] {
		return nil // a dead node writing to an open shard: the store's choice
	}
	head := uint64(len(m.history[shard]))
	env := eventstore.Envelope{WorkflowID: m.wfs[shard], RunID: m.runs[shard], Seq: head + 1, RecordedAt: time.Unix(1_700_000_000+int64(head), 0).UTC()}
	var ev eventstore.Event = eventstore.SignalReceived{Envelope: env, SignalName: fmt.Sprintf("by-%c", 'A'+i)}
	if head == 0 {
		ev = eventstore.WorkflowStarted{Envelope: env, WorkflowType: "conformance-nodes"}
	}
	var err error
	what := fmt.Sprintf("node %c: Append to the workflow of shard %d", 'A'+i, shard)
	if ob, ok := m.node(i).(eventstore.Outbox); ok && row {
		what = fmt.Sprintf("node %c: AppendWithOutbox (one event, one row) to the workflow of shard %d", 'A'+i, shard)
		err = ob.AppendWithOutbox(m.ctx, token, m.wfs[shard], []eventstore.Event{ev}, head, []eventstore.OutboxRow{{RunID: m.runs[shard], Ordinal: eventstore.ActivityID(head)}})
	} else {
		err = m.node(i).Append(m.ctx, token, m.wfs[shard], []eventstore.Event{ev}, head)
	}
	if err := wantErr(err, want, what); err != nil {
		return err
	}
	if want == nil {
		m.history[shard] = append(m.history[shard], ev)
	}
	return m.check()
}

func (m *nodesModel) publish(i, shard int) error {
	if i == nodeA && m.deadA {
		return nil
	}
	var want error
	if m.holder[shard] != i {
		want = eventstore.ErrNotOwner
	}
	return wantErr(m.so[i].PublishShardOwner(m.ctx, shard), want, fmt.Sprintf("node %c: PublishShardOwner(%d)", 'A'+i, shard))
}

func (m *nodesModel) kill() error {
	if m.Kill == nil {
		return skipf(0, "Nodes.Kill is nil")
	}
	if m.deadA {
		return nil
	}
	m.deadA = true
	if err := m.Kill(m.ctx); err != nil {
		return fmt.Errorf("Nodes.Kill: %w", err)
	}
	for s := range m.holder {
		if m.holder[s] == nodeA {
			m.holder[s] = nobody
		}
	}
	return m.check()
}

// scope sets (or with extend widens) node i's enumeration scope; -1 alone
// stands for the empty scope, no shard for nil.
func (m *nodesModel) scope(i int, extend bool, shards []int) error {
	if i == nodeA && m.deadA {
		return nil
	}
	if slices.Equal(shards, []int{-1}) {
		shards = []int{}
	}
	switch {
	case extend:
		m.so[i].ExtendOwnedShards(m.ctx, shards)
		if m.scopes[i] != nil {
			m.scopes[i] = append(m.scopes[i], shards...)
		}
	default:
		m.so[i].SetOwnedShards(m.ctx, shards)
		m.scopes[i] = slices.Clone(shards)
	}
	return m.check()
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

// nb builds the steps of a nodes rule. Shards are taken mod the model's
// distinct shards.
type nb struct{ steps []step[*nodesModel] }

func (b *nb) push(what string, do func(m *nodesModel) error) {
	b.steps = append(b.steps, step[*nodesModel]{what, do})
}

func fold(m *nodesModel, shards []int) []int {
	out := make([]int, len(shards))
	for i, s := range shards {
		out[i] = s % m.shards
	}
	return out
}

func (b *nb) acquire(i int, shards ...int) {
	b.push(fmt.Sprintf("node %c acquires %v", 'A'+i, shards), func(m *nodesModel) error { return m.acquire(i, fold(m, shards)) })
}

// contest makes node i acquire a shard the other node holds (and renew
// one it holds itself), when there are: the steps an election model must
// not leave to chance.
func (b *nb) contest(i int, renew bool) {
	b.push(fmt.Sprintf("node %c contests (renew %v)", 'A'+i, renew), func(m *nodesModel) error {
		for s := range m.shards {
			if h := m.holder[s]; (renew && h == i) || (!renew && h != i && h != nobody) {
				return m.acquire(i, []int{s})
			}
		}
		return nil
	})
}

func (b *nb) release(i int, shards ...int) {
	b.push(fmt.Sprintf("node %c releases %v", 'A'+i, shards), func(m *nodesModel) error { return m.release(i, fold(m, shards)) })
}

func (b *nb) write(i, shard int, row bool) {
	b.push(fmt.Sprintf("node %c appends to shard %d (row %v)", 'A'+i, shard, row), func(m *nodesModel) error { return m.write(i, shard%m.shards, row) })
}

func (b *nb) publish(i, shard int) {
	b.push(fmt.Sprintf("node %c publishes %d", 'A'+i, shard), func(m *nodesModel) error { return m.publish(i, shard%m.shards) })
}

func (b *nb) kill() { b.push("node A dies", func(m *nodesModel) error { return m.kill() }) }

func (b *nb) scope(i int, extend bool, shards ...int) {
	b.push(fmt.Sprintf("node %c scope %v (extend %v)", 'A'+i, shards, extend), func(m *nodesModel) error {
		if len(shards) == 1 && shards[0] == -1 {
			return m.scope(i, extend, shards)
		}
		if shards == nil {
			return m.scope(i, extend, nil)
		}
		return m.scope(i, extend, fold(m, shards))
	})
}

func nodesScript(name string, script func(b *nb)) rule[Nodes] {
	b := &nb{}
	script(b)
	return fixed(name, func(ctx context.Context, n Nodes) error {
		_, err := runSteps(ctx, n, newNodesModel(ctx, 1), b.steps)
		return err
	})
}

// nodesModelRule runs a seeded sequence of elections, renewals, releases,
// appends, publications, scopes and (late, holding a shard) the death of
// A against the election model.
func nodesModelRule(ctx context.Context, env *ruleEnv[Nodes], n Nodes) error {
	rng := newRand(env.cfg.seed, RuleNodesModel)
	_, releases := n.A.(shardReleaser)
	b := &nb{}
	total := 400 * env.cfg.scale
	for i := range total {
		node, s := rng.IntN(2), rng.IntN(3)
		if (i == total/4 || i == total/2) && releases {
			// Hand every shard to one node, so that the other contests it.
			winner := i / (total / 4) % 2
			b.release(1-winner, 0, 1, 2)
			b.acquire(winner, 0, 1, 2)
		}
		if i == total*3/4 && n.Kill != nil {
			if releases {
				b.release(nodeB, 0)
			}
			b.acquire(nodeA, 0)
			b.kill()
		}
		// Elections most often, releases seldom, so that shards stay held
		// and the nodes contest them.
		switch r := rng.IntN(24); {
		case r >= 20:
			b.contest(node, r == 23)
		case r < 7:
			if rng.IntN(3) == 0 {
				b.acquire(node, (s+1)%3, s)
			} else {
				b.acquire(node, s)
			}
		case r < 9 && releases:
			b.release(node, s)
		case r < 15:
			b.write(node, s, rng.IntN(2) == 0)
		case r < 18:
			b.publish(node, s)
		case r < 19:
			b.scope(node, rng.IntN(2) == 0, pick(rng, []int{s}, []int{-1}, nil)...)
		default:
			b.scope(node, false)
		}
	}
	return runModel(ctx, env, n, newNodesModel(ctx, rng.Uint64()), b.steps)
}
