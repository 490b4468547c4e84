package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// Nodes is two nodes of one backend, for the nodes/* rules ([WithNodes]):
// A and B share one history and are each an [eventstore.ShardOwner] with
// their own identity (two nodes of one [eventstore.MemoryCluster], or two
// stores on one database with different node names).
type Nodes struct {
	A, B eventstore.Store
	// ShardCount is the backend's number of shards: a workflow is in shard
	// eventstore.ShardOf(id, ShardCount). It must be at least 2.
	ShardCount int
	// Kill declares node A dead and returns once node B may acquire the
	// shards A held: a store without leases marks A dead
	// (eventstore.MemoryCluster.Kill); a store with leases stops A's
	// renewals and lets its leases run out (an injected clock, or a short
	// lease waited for). After Kill the rules call A only to write, to
	// acquire a shard B holds and to publish itself as a shard's owner,
	// which must fail with eventstore.ErrNotOwner (writes on the shards A
	// held), and to ask IsCurrentOwner, which must be false. nil skips the
	// rules that kill a node.
	Kill func(ctx context.Context) error
	// Close, when set, is called when the rule is over (the cleanup for
	// [CheckEventStore], which has no *testing.T).
	Close func()
}

// shardReleaser is a node that can give shards up (as eventstore.Memory
// can); the rules that release skip for a node without it.
type shardReleaser interface {
	ReleaseShards(ctx context.Context, shards []int) error
}

// WithNodes makes [TestEventStore] and [CheckEventStore] also run the
// nodes/* rules, each on a fresh pair from newNodes. CheckEventStore calls
// it with a nil *testing.T: such a factory cleans up through Nodes.Close.
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
		b.write(nodeA, 0, wSignal)
		b.write(nodeB, 0, wSignal) // an activity scheduled without a row
		b.write(nodeB, 1, wRow)
		b.write(nodeA, 1, wSignal)
		b.acquire(nodeA, 0)
		b.acquire(nodeB, 1)
		b.everyWrite(nodeB, 0)
		b.everyWrite(nodeA, 1)
		b.write(nodeA, 0, wRow)
		b.write(nodeB, 1, wRowsOnly)
		b.write(nodeB, 2, wRow) // never acquired
	}),
	nodesScript(RuleNodesHandoff, func(b *nb) {
		b.acquire(nodeA, 0)
		b.write(nodeA, 0, wSignal)
		b.write(nodeA, 0, wSignal)
		b.release(nodeA, 0)
		b.everyWrite(nodeA, 0)
		b.everyWrite(nodeB, 0)
		b.acquire(nodeB, 0)
		b.write(nodeB, 0, wRow)
		b.write(nodeA, 0, wSignal)
		b.acquire(nodeA, 0)
		b.publish(nodeA, 0)
		b.publish(nodeB, 0)
	}),
	nodesScript(RuleNodesKill, func(b *nb) {
		b.acquire(nodeA, 0, 1)
		b.write(nodeA, 0, wSignal)
		b.write(nodeA, 0, wSignal)
		b.publish(nodeA, 0)
		b.publish(nodeA, 1)
		b.acquire(nodeB, 0)
		b.kill()
		b.everyWrite(nodeB, 0)
		b.acquire(nodeB, 0)
		b.write(nodeB, 0, wRow)
		// A dead node's writes and claims of ownership, also of what
		// it held and published.
		b.everyWrite(nodeA, 0)
		b.write(nodeA, 1, wSignal)
		b.acquire(nodeA, 0)
		b.acquire(nodeA, 1, 0)
		b.publish(nodeA, 0)
		b.publish(nodeA, 1)
	}),
	nodesScript(RuleNodesReadsAcross, func(b *nb) {
		b.write(nodeA, 0, wSignal) // started
		b.write(nodeA, 0, wSignal) // an activity scheduled without a row
		b.write(nodeA, 0, wLife)   // paused
		b.arm(nodeA, 0)
		b.write(nodeB, 1, wRow)
		b.write(nodeB, 1, wSignal)
		b.write(nodeB, 1, wRowsOnly)
		b.arm(nodeB, 1)
		// What the other node changed, read through the one that wrote
		// before.
		b.write(nodeA, 1, wLife)
		b.write(nodeB, 1, wLife)
		b.arm(nodeA, 1)
		b.claimAll(nodeA)
		b.claimAll(nodeB)
		// Adoption: a node scoped to one shard widens to the other's.
		b.scope(nodeB, false, 2)
		b.scope(nodeB, true, 1, 0)
		b.scope(nodeA, false, -1)
		b.scope(nodeA, true, 1)
		b.scope(nodeA, true, 0)
		// A non-holder's rows-only append is fenced like any other.
		b.acquire(nodeA, 0)
		b.write(nodeB, 0, wRowsOnly)
		b.claimAll(nodeA)
		b.write(nodeA, 0, wLife) // resumed
		b.write(nodeA, 0, wSignal)
		// After a kill, the survivor takes over, and reads what the dead
		// node wrote.
		b.kill()
		b.acquire(nodeB, 0)
		b.write(nodeB, 0, wRowsOnly)
		b.write(nodeB, 0, wLife)
		b.arm(nodeB, 0)
		b.scope(nodeB, false, 1)
		b.scope(nodeB, true, 0)
		b.claimAll(nodeB)
	}),
	nodesScript(RuleNodesScopes, func(b *nb) {
		b.write(nodeA, 0, wSignal)
		b.write(nodeB, 1, wSignal)
		b.scope(nodeA, false, 0)
		b.scope(nodeB, false, 1)
		b.scope(nodeB, true, 0)
		b.scope(nodeA, false)
		b.scope(nodeB, false, -1)
	}),
	seeded(RuleNodesStaleOwnerRace, nodesStaleOwnerRace),
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
	paused   [3]bool                   // the workflow's run is paused
	timer    [3]*eventstore.TimerEntry // the workflow's armed timer
	rows     [3][]string               // the dispatch keys staged for the workflow
	unrowed  [3][]eventstore.ActivityID
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
// shard, and each workflow's history and its place in every scoped read
// (the listings, StreamHeads, ExpiredTimers) through each live node.
// Each call that returned is progress for the watchdog: on a slow machine
// the whole check may take longer than the rule timeout.
func (m *nodesModel) check() error {
	for i := range 2 {
		for s := range m.shards {
			got, want := m.so[i].IsCurrentOwner(m.ctx, s), m.holder[s] == i
			tick(m.ctx)
			if got != want {
				return fmt.Errorf("node %c: IsCurrentOwner(%d) = %v, want %v", 'A'+i, s, got, want)
			}
		}
		if i == nodeA && m.deadA {
			continue
		}
		lists := []struct {
			name string
			call func(context.Context) ([]eventstore.WorkflowID, error)
			ids  []eventstore.WorkflowID
		}{{"ListWorkflowIDs", m.node(i).ListWorkflowIDs, nil}, {"ListActive", m.node(i).ListActive, nil}, {"ListPaused", m.node(i).ListPaused, nil},
			{"StreamHeads", func(ctx context.Context) ([]eventstore.WorkflowID, error) {
				hs, err := m.node(i).StreamHeads(ctx)
				ids := make([]eventstore.WorkflowID, len(hs))
				for k, h := range hs {
					ids[k] = h.WorkflowID
				}
				return ids, err
			}, nil}}
		var err error
		for j, l := range lists {
			lists[j].ids, err = l.call(m.ctx)
			tick(m.ctx)
			if err != nil {
				return fmt.Errorf("node %c: %s: %w", 'A'+i, l.name, err)
			}
		}
		due, err := m.node(i).ExpiredTimers(m.ctx, nodesTimerAt.Add(time.Hour))
		tick(m.ctx)
		if err != nil {
			return fmt.Errorf("node %c: ExpiredTimers: %w", 'A'+i, err)
		}
		for s := range m.shards {
			got, err := m.node(i).ReadHistory(m.ctx, m.wfs[s])
			tick(m.ctx)
			if err != nil {
				return fmt.Errorf("node %c: ReadHistory: %w", 'A'+i, err)
			}
			if d := diff(got, m.history[s]); d != "" {
				return fmt.Errorf("node %c reads the workflow of shard %d: %s", 'A'+i, s, d)
			}
			inScope := m.scopes[i] == nil || slices.Contains(m.scopes[i], s)
			written := len(m.history[s]) > 0
			for j, want := range []bool{written && inScope, written && inScope && !m.paused[s], written && inScope && m.paused[s], written && inScope} {
				if slices.Contains(lists[j].ids, m.wfs[s]) != want {
					return fmt.Errorf("node %c: %s lists the workflow of shard %d: %v, want %v (scope %v)", 'A'+i, lists[j].name, s, !want, want, m.scopes[i])
				}
			}
			var gotTimer, want *eventstore.TimerEntry
			if at := slices.IndexFunc(due, func(e eventstore.TimerEntry) bool { return e.WorkflowID == m.wfs[s] }); at >= 0 {
				gotTimer = &due[at]
			}
			if inScope {
				want = m.timer[s]
			}
			if d := diff(gotTimer, want); d != "" {
				return fmt.Errorf("node %c: ExpiredTimers, the timer of the workflow of shard %d (scope %v): %s", 'A'+i, s, m.scopes[i], d)
			}
		}
	}
	return nil
}

// nodesTimerAt is when the nodes rules' timers fire.
var nodesTimerAt = time.Unix(1_700_000_000, 0).UTC()

func (m *nodesModel) acquire(i int, shards []int) error {
	var want error
	for _, s := range shards {
		if h := m.holder[s]; h != nobody && h != i {
			want = eventstore.ErrNotOwner
		}
	}
	if i == nodeA && m.deadA && want == nil {
		return nil // a dead node acquiring free shards: the store's choice
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

// What a nodes rule writes: one event (a signal, or a pause or resume),
// with an outbox row, or rows only.
type nodeWrite int

const (
	wSignal   nodeWrite = iota
	wRow                // one event, one row, through AppendWithOutbox
	wLife               // a pause, or a resume of a paused run
	wRowsOnly           // AppendWithOutbox with a row and no event
)

// write appends through node i to the workflow of shard (one event, or
// with an outbox row, or a row only, for an Outbox), at the model's head:
// it must succeed exactly when the shard is open or held by the node, and
// fail with ErrNotOwner writing nothing otherwise. The first event of the
// workflow starts it, and a rows-only write needs an activity scheduled
// without a row.
func (m *nodesModel) write(i, shard int, kind nodeWrite) error {
	var want error
	if m.acquired[shard] && m.holder[shard] != i {
		want = eventstore.ErrNotOwner
	}
	if i == nodeA && m.deadA && !m.acquired[shard] {
		return nil // a dead node writing to an open shard: the store's choice
	}
	ob, isOutbox := m.node(i).(eventstore.Outbox)
	if !isOutbox && kind != wLife {
		kind = wSignal
	}
	head := uint64(len(m.history[shard]))
	if kind == wRowsOnly && len(m.unrowed[shard]) == 0 {
		kind = wSignal
	}
	env := eventstore.Envelope{WorkflowID: m.wfs[shard], RunID: m.runs[shard], Seq: head + 1, RecordedAt: time.Unix(1_700_000_000+int64(head), 0).UTC()}
	var ev eventstore.Event = eventstore.SignalReceived{Envelope: env, SignalName: fmt.Sprintf("by-%c", 'A'+i)}
	paused := m.paused[shard]
	switch {
	case head == 0:
		ev = eventstore.WorkflowStarted{Envelope: env, WorkflowType: "conformance-nodes"}
	case kind == wLife && paused:
		ev, paused = eventstore.WorkflowResumed{Envelope: env}, false
	case kind == wLife:
		ev, paused = eventstore.WorkflowPaused{Envelope: env}, true
	case kind == wSignal && !paused:
		// An activity scheduled without a row, for a later rows-only write.
		ev = eventstore.ActivityScheduled{Envelope: env, ActivityID: eventstore.ActivityID(head), ActivityType: "conformance-nodes"}
	}
	events := []eventstore.Event{ev}
	var rows []eventstore.OutboxRow
	switch kind {
	case wRow:
		rows = []eventstore.OutboxRow{{RunID: m.runs[shard], Ordinal: eventstore.ActivityID(head) | 1<<40}}
	case wRowsOnly:
		events, rows = nil, []eventstore.OutboxRow{{RunID: m.runs[shard], Ordinal: m.unrowed[shard][0]}}
	}
	var err error
	if rows != nil {
		err = ob.AppendWithOutbox(m.ctx, token, m.wfs[shard], events, head, rows)
	} else {
		err = m.node(i).Append(m.ctx, token, m.wfs[shard], events, head)
	}
	if err := wantErr(err, want, fmt.Sprintf("node %c appending %s to the workflow of shard %d", 'A'+i, nodeWriteNames[kind], shard)); err != nil {
		return err
	}
	if want == nil {
		m.history[shard] = append(m.history[shard], events...)
		m.paused[shard] = paused
		for _, r := range rows {
			m.rows[shard] = append(m.rows[shard], eventstore.DispatchKey(m.wfs[shard], r.RunID, r.Ordinal))
		}
		if kind == wRowsOnly {
			m.unrowed[shard] = m.unrowed[shard][1:]
		}
		if s, ok := ev.(eventstore.ActivityScheduled); ok && kind == wSignal {
			m.unrowed[shard] = append(m.unrowed[shard], s.ActivityID)
		}
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
type nb struct{ builder[*nodesModel] }

// fold takes shards mod the model's distinct shards; -1 (the empty
// scope) and nil (every shard) stay as they are.
func fold(m *nodesModel, shards []int) []int {
	if shards == nil {
		return nil
	}
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
	b.push(fmt.Sprintf("node %c releases %v", 'A'+i, shards), func(m *nodesModel) error {
		shards := fold(m, shards)
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
	})
}

var nodeWriteNames = []string{"an event", "an event and a row", "a pause or resume", "a row only"}

func (b *nb) write(i, shard int, kind nodeWrite) {
	b.push(fmt.Sprintf("node %c appends %s to shard %d", 'A'+i, nodeWriteNames[kind], shard), func(m *nodesModel) error { return m.write(i, shard%m.shards, kind) })
}

// everyWrite makes node i append every kind of write to shard.
func (b *nb) everyWrite(i, shard int) {
	for k := range nodeWrite(len(nodeWriteNames)) {
		b.write(i, shard, k)
	}
}

// arm schedules the workflow's timer through node i, armed at its head: it
// must succeed when the shard is open or held by the node; another node's
// may be refused with ErrNotOwner (which writes a store fences beyond
// appends is its choice).
func (b *nb) arm(i, shard int) {
	b.push(fmt.Sprintf("node %c arms the timer of shard %d", 'A'+i, shard), func(m *nodesModel) error {
		shard := shard % m.shards
		if (i == nodeA && m.deadA) || len(m.history[shard]) == 0 {
			return nil
		}
		e := eventstore.TimerEntry{WorkflowID: m.wfs[shard], TimerID: "conformance-nodes", FireAt: nodesTimerAt.Add(time.Duration(len(m.history[shard])) * time.Second), ArmedSeq: uint64(len(m.history[shard]))}
		err := m.so[i].(eventstore.Store).ScheduleTimer(m.ctx, e.WorkflowID, e.TimerID, e.FireAt, e.ArmedSeq)
		switch {
		case err == nil:
			m.timer[shard] = &e
		case errors.Is(err, eventstore.ErrNotOwner) && m.acquired[shard] && m.holder[shard] != i:
		default:
			return fmt.Errorf("node %c: ScheduleTimer on the workflow of shard %d: %w", 'A'+i, shard, err)
		}
		return m.check()
	})
}

// claimAll claims every pending row through node i and re-arms them: it
// finds exactly the rows the model staged (none a fenced write staged).
// A node the store refuses the claim (ErrNotOwner: its choice) checks
// nothing.
func (b *nb) claimAll(i int) {
	b.push(fmt.Sprintf("node %c claims every row, and re-arms them", 'A'+i), func(m *nodesModel) error {
		ob, ok := m.node(i).(eventstore.Outbox)
		if !ok || (i == nodeA && m.deadA) {
			return nil
		}
		got, err := ob.ClaimOutboxRows(m.ctx, math.MaxInt)
		if errors.Is(err, eventstore.ErrNotOwner) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("node %c: ClaimOutboxRows: %w", 'A'+i, err)
		}
		var keys, want []string
		for _, r := range got {
			if slices.Contains(m.wfs[:m.shards], r.WorkflowID) {
				keys = append(keys, r.DispatchKey)
			}
		}
		for s := range m.shards {
			want = append(want, m.rows[s]...)
		}
		slices.Sort(keys)
		slices.Sort(want)
		if d := diff(keys, want); d != "" {
			return fmt.Errorf("node %c: ClaimOutboxRows finds the dispatch keys: %s", 'A'+i, d)
		}
		if err := ob.RearmOutboxPending(m.ctx, got); err != nil {
			return fmt.Errorf("node %c: RearmOutboxPending of what it claimed: %w", 'A'+i, err)
		}
		return nil
	})
}

func (b *nb) publish(i, shard int) {
	b.push(fmt.Sprintf("node %c publishes %d", 'A'+i, shard), func(m *nodesModel) error {
		shard := shard % m.shards
		var want error
		if m.holder[shard] != i || (i == nodeA && m.deadA) {
			want = eventstore.ErrNotOwner
		}
		return wantErr(m.so[i].PublishShardOwner(m.ctx, shard), want, fmt.Sprintf("node %c: PublishShardOwner(%d)", 'A'+i, shard))
	})
}

func (b *nb) kill() {
	b.push("node A dies", func(m *nodesModel) error {
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
	})
}

// scope sets (or with extend widens) node i's enumeration scope; -1 alone
// stands for the empty scope, no shard for nil.
func (b *nb) scope(i int, extend bool, shards ...int) {
	b.push(fmt.Sprintf("node %c scope %v (extend %v)", 'A'+i, shards, extend), func(m *nodesModel) error {
		shards := fold(m, shards)
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
	})
}

func nodesScript(name string, script func(b *nb)) rule[Nodes] {
	b := &nb{}
	script(b)
	return scripted(name, b.steps, func(ctx context.Context) func(Nodes) (*nodesModel, error) { return newNodesModel(ctx, 1) })
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
			b.publish(nodeA, 0)
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
			b.write(node, s, nodeWrite(rng.IntN(4)))
			if rng.IntN(8) == 0 {
				b.arm(node, s)
			}
			if rng.IntN(16) == 0 {
				b.claimAll(node)
			}
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

// staleWriters is how many goroutines of the old holder append while the
// shard changes hands in the stale-owner race.
const staleWriters = 4

// staleOp is one append of the old holder in the stale-owner race: the
// logical time it started, what it was told, and its signal's name.
type staleOp struct {
	start int64
	err   error
	name  string
}

// staleRace is the state of the stale-owner race: one workflow of shard 0
// per writer, and its head.
type staleRace struct {
	m     *nodesModel
	envs  []eventstore.Envelope
	heads []uint64
	rows  atomic.Uint64 // the ordinals of the rows staged
}

// nodesStaleOwnerRace: round after round, the holder of a shard keeps
// appending from several goroutines while it gives the shard up (released,
// or, in a last round, killed) and the other node acquires it. Every
// append is judged against what the new holder reads right after its
// acquisition returned: an append the old holder was told landed
// linearizes before the takeover, so the new holder's first read shows
// it; one that started after the acquisition returned must fail with
// ErrNotOwner; one that failed is never in the history.
func nodesStaleOwnerRace(ctx context.Context, env *ruleEnv[Nodes], n Nodes) error {
	m, err := newNodesModel(ctx, uint64(env.cfg.seed))(n)
	if err != nil {
		return err
	}
	_, releases := n.A.(shardReleaser)
	if !releases && n.Kill == nil {
		return skipf(0, "the nodes have no ReleaseShards(ctx, shards) method and Nodes.Kill is nil")
	}
	g := newGen(newRand(env.cfg.seed, RuleNodesStaleOwnerRace))
	r := &staleRace{m: m, heads: make([]uint64, staleWriters)}
	for range staleWriters {
		wf := g.workflow()
		for ; eventstore.ShardOf(wf, n.ShardCount) != 0; wf = g.workflow() {
		}
		r.envs = append(r.envs, eventstore.Envelope{WorkflowID: wf, RunID: g.run(), RecordedAt: time.Unix(1_700_000_000, 0).UTC()})
	}
	rounds := 0
	if releases {
		rounds = 8 * env.cfg.scale
	}
	old := nodeA
	for round := 0; round <= rounds; round++ {
		kill := round == rounds
		if kill && (n.Kill == nil || old != nodeA) {
			if n.Kill == nil || !releases {
				break
			}
			// The killed node is A: hand the shard to it first.
			if err := m.node(nodeB).(shardReleaser).ReleaseShards(ctx, []int{0}); err != nil {
				return fmt.Errorf("node B: ReleaseShards([0]): %w", err)
			}
			old = nodeA
		}
		if err := m.so[old].AcquireOwnedShard(ctx, 0); err != nil {
			return fmt.Errorf("round %d: node %c acquiring shard 0: %w", round, 'A'+old, err)
		}
		for w, e := range r.envs {
			if r.heads[w] == 0 {
				err := m.node(old).Append(ctx, token, e.WorkflowID, []eventstore.Event{eventstore.WorkflowStarted{Envelope: e, WorkflowType: "conformance-stale-owner"}}, 0)
				tick(ctx)
				if err != nil {
					return fmt.Errorf("node %c starting a workflow of shard 0 it holds: %w", 'A'+old, err)
				}
				r.heads[w] = 1
			}
		}
		if err := r.round(ctx, old, kill, round); err != nil {
			return fmt.Errorf("round %d, shard 0 from node %c to node %c: %w", round, 'A'+old, 'B'-old, err)
		}
		old = 1 - old
	}
	return nil
}

// append makes the k-th append of writer w through node i: a signal named
// name, with a row every other time for an Outbox.
func (r *staleRace) append(ctx context.Context, i, w, k int, name string) error {
	e := r.envs[w]
	evs := []eventstore.Event{eventstore.SignalReceived{Envelope: e, SignalName: name}}
	if ob, ok := r.m.node(i).(eventstore.Outbox); ok && k%2 == 1 {
		rows := []eventstore.OutboxRow{{RunID: e.RunID, Ordinal: eventstore.ActivityID(r.rows.Add(1))}}
		return ob.AppendWithOutbox(ctx, token, e.WorkflowID, evs, r.heads[w], rows)
	}
	return r.m.node(i).Append(ctx, token, e.WorkflowID, evs, r.heads[w])
}

// round is one round of the stale-owner race: old's writers append while
// old gives shard 0 up and the other node acquires it and reads every
// history; each writer stops after three appends started after that.
func (r *staleRace) round(ctx context.Context, old int, kill bool, round int) error {
	next := 1 - old
	var clock, acquired atomic.Int64           // acquired: when the new holder's acquisition returned; 0 before
	landed := make(chan struct{}, len(r.envs)) // a writer's second append landed
	stop := make(chan struct{})
	ops := make([][]staleOp, len(r.envs))
	errs := make([]error, len(r.envs))
	var wg sync.WaitGroup
	for w := range r.envs {
		spawn(&wg, &errs[w], func() error {
			for k, ok, lates := 0, 0, 0; lates < 3; k++ {
				select {
				case <-stop:
					return nil
				default:
				}
				op := staleOp{start: clock.Add(1), name: fmt.Sprintf("round %d: node %c's append %d to workflow %d", round, 'A'+old, k, w)}
				op.err = r.append(ctx, old, w, k, op.name)
				tick(ctx)
				ops[w] = append(ops[w], op)
				var conflict *eventstore.SequenceConflictError
				switch {
				case op.err == nil:
					r.heads[w]++
					if ok++; ok == 2 {
						landed <- struct{}{}
					}
				case errors.As(op.err, &conflict):
					r.heads[w] = conflict.Found
				case !errors.Is(op.err, eventstore.ErrNotOwner):
					return fmt.Errorf("%s: %w", op.name, op.err)
				}
				if a := acquired.Load(); a != 0 && op.start > a {
					lates++
				}
				// Leave the others, the handoff among them, room to run.
				runtime.Gosched()
				if k > 20_000 {
					return fmt.Errorf("%s: the old holder's writer never saw the shard change hands", op.name)
				}
			}
			return nil
		})
	}
	writersDone := make(chan struct{})
	go func() { wg.Wait(); close(writersDone) }()
	seen := make([]map[string]int, len(r.envs))
	// Once every writer has landed twice, the shard changes hands.
	handoff := func() error {
		for range r.envs {
			select {
			case <-landed:
			case <-writersDone:
				return fmt.Errorf("a writer of node %c stopped: %w", 'A'+old, errors.Join(errs...))
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		var err error
		if kill {
			err = r.m.Kill(ctx)
		} else {
			err = r.m.node(old).(shardReleaser).ReleaseShards(ctx, []int{0})
		}
		if err == nil {
			err = acquireRetrying(ctx, r.m.so[next], 0)
			acquired.Store(clock.Add(1))
		}
		for w := 0; w < len(r.envs) && err == nil; w++ {
			var hist []eventstore.Event
			hist, err = r.m.node(next).ReadHistory(ctx, r.envs[w].WorkflowID)
			seen[w] = signals(hist)
			tick(ctx)
		}
		return err
	}()
	if handoff != nil {
		close(stop)
	}
	<-writersDone
	if err := errors.Join(append(errs, handoff)...); err != nil {
		return err
	}
	a := acquired.Load()
	for w, e := range r.envs {
		// The new holder appends next, at the head it reads.
		hist, err := r.m.node(next).ReadHistory(ctx, e.WorkflowID)
		tick(ctx)
		if err != nil {
			return fmt.Errorf("node %c: ReadHistory: %w", 'A'+next, err)
		}
		r.heads[w] = uint64(len(hist))
		count := signals(hist)
		for _, op := range ops[w] {
			switch {
			case op.err == nil && op.start > a:
				return fmt.Errorf("%s started after node %c's acquisition returned, and landed: a stale owner's write after the takeover", op.name, 'A'+next)
			case op.err == nil && seen[w][op.name] == 0:
				return fmt.Errorf("%s was told it landed, but node %c's first read after acquiring the shard does not show it: it landed after the takeover (the fence check and the write are two steps)", op.name, 'A'+next)
			case count[op.name] != boolInt(op.err == nil):
				return fmt.Errorf("%s: the history holds it %d times (the append returned %v)", op.name, count[op.name], op.err)
			}
		}
	}
	return nil
}

// signals counts the signals of a history by name.
func signals(hist []eventstore.Event) map[string]int {
	count := map[string]int{}
	for _, ev := range hist {
		if s, ok := ev.(eventstore.SignalReceived); ok {
			count[s.SignalName]++
		}
	}
	return count
}

// acquireRetrying acquires shard for so, trying again while the election
// is refused with ErrNotOwner: the contract lets a store refuse an
// acquisition while the previous holder's write is still committing,
// rather than wait on it. It gives up after maxAcquireTries refusals.
func acquireRetrying(ctx context.Context, so eventstore.ShardOwner, shard int) error {
	var err error
	for try := 0; try < maxAcquireTries; try++ {
		err = so.AcquireOwnedShard(ctx, shard)
		tick(ctx)
		if !errors.Is(err, eventstore.ErrNotOwner) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return fmt.Errorf("refused %d times in a row: %w", maxAcquireTries, err)
}

// maxAcquireTries bounds acquireRetrying: a millisecond apart, about five
// seconds of a previous holder's writes in progress.
const maxAcquireTries = 5000
