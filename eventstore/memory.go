package eventstore

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Memory is the complete in-memory reference store, one node of a
// [MemoryCluster]. It implements [Store], [Outbox] and [ShardOwner] and
// passes the conformance package's TestEventStore, with two nodes of one
// cluster for the election rules. Where the contract leaves a choice open,
// Memory makes the one written here and on its methods.
//
// Every call whose context is already done returns ctx.Err() itself (the
// appends check the token first), so errors.Is(err, context.Canceled) holds.
// Every returned slice is freshly allocated and every returned event, row
// and package is a deep copy, so callers may keep and modify what they get.
// Listings are ordered by workflow ID, the order of the IDs' canonical
// strings.
//
// # Runs
//
// A history may begin with any event: no WorkflowStarted is required first.
// A run is created by the first event that names its RunID, whatever its
// kind; it starts out running, with FirstSeq and StartedAt taken from that
// event. [Memory.ReadRunChain] lists runs in the order they first appeared,
// and a workflow's current run, whose status is the workflow's, is the last
// of them. Lifecycle events then update the run their envelope names:
//
//   - [WorkflowStarted] sets the run's type, makes it running, sets StartedAt
//     to the event's RecordedAt and clears ClosedAt, in place on a run that
//     already exists;
//   - [WorkflowCompleted], [WorkflowFailed], [WorkflowCancelled],
//     [WorkflowTimedOut] and [WorkflowContinuedAsNew] close the run with the
//     matching status and ClosedAt = RecordedAt (a later closing event
//     overwrites an earlier one: the store records, the engine decides);
//   - [WorkflowPaused] pauses a running run, [WorkflowResumed] resumes a
//     paused one; neither changes a closed run;
//   - [WorkflowReopened] makes a closed run running again and clears
//     ClosedAt; it does not change an open run.
//
// Every event sets its run's LastSeq, so a late event of an earlier run
// updates that run and leaves the current run current. The continue-as-new
// event's NewRunID does not create the next run: that run appears with its
// own first event. An activity terminal event ([ActivityCompleted],
// [ActivityFailed] with a [Terminal] error, [ActivityCancelled],
// [ActivityTimedOut]), committed by Append or AppendWithOutbox, settles the
// open outbox rows of that workflow, run and ActivityID in the same commit;
// a [Retryable] failure settles nothing.
//
// # Shards
//
// Workflows fall into [WithShardCount] shards by [ShardOf]. A Memory is one
// node of a [MemoryCluster]: a view of the cluster's one shared history (the
// histories, run chains, timers, packages, routes and outbox rows are the
// cluster's) with its own owner identity, its own ownership and its own
// enumeration scope. [NewMemory] makes a cluster of one node, which runs no
// election unless asked to and then always wins it.
//
// A node tracks two separate things: ownership, the shards it has won by
// election ([Memory.AcquireOwnedShards]) and published
// ([Memory.PublishShardOwner]); and the enumeration scope, the shards whose
// workflows the enumerating reads return ([Memory.SetOwnedShards]).
// Acquiring a shard does not widen the scope; the engine sets both. Query,
// reads by workflow ID and writes ignore the scope.
//
// Elections keep the [ShardOwner] contract: a shard has at most one holder
// at a time; acquiring a shard another live node holds fails with
// [ErrNotOwner]; re-acquiring a shard the node holds renews it (same
// epoch); a node gives shards up with [Memory.ReleaseShards], and loses all
// of them when [MemoryCluster.Kill] declares it dead; each acquisition by a
// new holder starts a new epoch of the shard. Memory has no leases: a node
// holds a shard until it releases it or is killed, which is what a lease
// running out is for a store that has leases.
//
// Fencing: a shard no node ever acquired is open to appends from every node
// (so single-node use, which runs no election, is unchanged). Once a shard
// has been acquired, only its current holder may append to its workflows
// (Append, AppendWithOutbox); any other node's append fails with
// [ErrNotOwner] and writes nothing, also after the holder released the
// shard or died and before a new holder acquired it. The other writes are
// not fenced: timers (a retirement is fenced by its armed seq, and a timer
// takes effect through an append), outbox claims, re-arms and settlements
// (the dispatcher's, idempotent, and settled by appends in the normal
// course), packages and routes (global, in no shard).
//
// # Concurrency
//
// A Memory is safe for concurrent use by multiple goroutines: one
// sync.RWMutex per cluster guards all of its state, so every call is atomic
// with respect to every other call on any node of the cluster; reads run in
// parallel, writes one at a time. The zero value is not ready for use (its
// methods return an error wrapping [ErrInvalidArgument]); create one with
// [NewMemory] or [MemoryCluster.Node]. A Memory must not be copied after
// first use.
type Memory struct {
	*memShared // the cluster's state; nil in a zero Memory

	name  string
	dead  atomic.Bool      // set by MemoryCluster.Kill, never cleared
	scope map[int]struct{} // enumeration scope, guarded by mu; nil means every shard
}

// memShared is the state of a cluster, shared by its nodes.
type memShared struct {
	cfg memoryConfig

	mu        sync.RWMutex
	workflows map[WorkflowID]*memWorkflow

	timers map[timerKey]TimerEntry

	packages map[packageKey]PackageRecord
	routes   map[string]string // workflow type -> content hash

	outbox       []*outboxEntry          // every row ever staged, in staging order
	outboxByKey  map[string]*outboxEntry // by dispatch key
	outboxByWf   map[WorkflowID][]*outboxEntry
	pendingFrom  int // no row before this index of outbox is pending
	claimedCount int

	shards    map[int]*shardState // elections by shard; absent: never acquired
	directory map[int]ownerRecord // the owner directory, by shard
	nodes     map[string]*Memory
}

// shardState is a shard's election: its holder (nil once released or its
// holder died) and the epoch of the current or last holding.
type shardState struct {
	holder *Memory
	epoch  uint64
}

// ownerRecord is a published owner: the node's name and its epoch.
type ownerRecord struct {
	node  string
	epoch uint64
}

// The promises Memory makes.
var (
	_ Store      = (*Memory)(nil)
	_ Outbox     = (*Memory)(nil)
	_ ShardOwner = (*Memory)(nil)
)

// memWorkflow is one workflow's history and the run chain derived from it.
type memWorkflow struct {
	id       WorkflowID
	events   []Event // stored copies, Seq i+1 at index i
	runs     []*RunSummary
	runIndex map[RunID]*RunSummary
}

// memoryConfig holds what the MemoryOptions set.
type memoryConfig struct {
	now        func() time.Time
	shardCount int
}

// MemoryOption configures [NewMemory].
type MemoryOption interface {
	applyMemory(*memoryConfig)
}

type memoryOptionFunc func(*memoryConfig)

func (f memoryOptionFunc) applyMemory(c *memoryConfig) { f(c) }

// WithClock sets the clock the store reads to fill in a zero
// Envelope.RecordedAt, PackageRecord.CreatedAt or OutboxRow.CreatedAt at
// commit. Without it (or with nil) the store uses time.Now.
func WithClock(now func() time.Time) MemoryOption {
	return memoryOptionFunc(func(c *memoryConfig) {
		if now != nil {
			c.now = now
		}
	})
}

// WithShardCount sets the number of shards workflows are partitioned into
// (see [ShardOf]); it bounds the shard numbers the [ShardOwner] methods
// accept. Without it, or with n <= 0, the store has 16 shards.
func WithShardCount(n int) MemoryOption {
	return memoryOptionFunc(func(c *memoryConfig) {
		if n > 0 {
			c.shardCount = n
		}
	})
}

// DefaultShardCount is the number of shards of a Memory made without
// [WithShardCount].
const DefaultShardCount = 16

const defaultShardCount = DefaultShardCount

// NewMemory returns an empty store, configured by opts (nil options are
// ignored): the one node of a new [MemoryCluster], named "memory".
func NewMemory(opts ...MemoryOption) *Memory {
	return NewMemoryCluster(opts...).Node("memory")
}

// errNotReady is what every method of a Memory not made by NewMemory returns.
var errNotReady = invalidf("eventstore.Memory used without NewMemory")

// notFoundf returns an error that wraps [ErrNotFound] with a message.
func notFoundf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrNotFound}, args...)...)
}

// enter is the first check of every method: a done context is returned
// unchanged, then a Memory that NewMemory did not make is refused, then a
// node that was killed.
func (m *Memory) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m == nil || m.memShared == nil {
		return errNotReady
	}
	if m.dead.Load() {
		return fmt.Errorf("%w: node %q was killed", ErrNotOwner, m.name)
	}
	return nil
}

// Append commits events after the workflow's current last event, all or
// nothing. The checks come in this order: the token ([ErrInvalidToken], even
// for an empty batch), the context, a killed node, [ValidateAppend]; then an
// empty batch is a no-op; then the fence ([ErrNotOwner] for a workflow whose
// shard was acquired and is not held by this node, see the Shards section);
// then an expectedSeq other than the history length returns a
// *SequenceConflictError whose Found is the real length. Nothing is written on
// any error. The caller's slice and events are never modified: the store keeps
// copies with Seq stamped, a zero WorkflowID and RecordedAt filled in.
func (m *Memory) Append(ctx context.Context, token WriteToken, workflowID WorkflowID, events []Event, expectedSeq uint64) error {
	// An append is an outbox append that stages no row: one code path for
	// the checks and the commit.
	return m.AppendWithOutbox(ctx, token, workflowID, events, expectedSeq, nil)
}

// headLocked returns the workflow's history length. m.mu must be held.
func (m *Memory) headLocked(id WorkflowID) uint64 {
	if w := m.workflows[id]; w != nil {
		return uint64(len(w.events))
	}
	return 0
}

// commitLocked stores validated events after a successful sequence check and
// applies their lifecycle effects. It cannot fail. m.mu must be held for
// writing.
func (m *Memory) commitLocked(id WorkflowID, events []Event, expectedSeq uint64, now time.Time) {
	w := m.workflows[id]
	if w == nil {
		w = &memWorkflow{id: id, runIndex: make(map[RunID]*RunSummary)}
		m.workflows[id] = w
	}
	for i, ev := range events {
		env := ev.EventEnvelope()
		env.WorkflowID = id
		env.Seq = expectedSeq + 1 + uint64(i)
		if env.RecordedAt.IsZero() {
			env.RecordedAt = now
		}
		stored := WithEnvelope(ev, env)
		w.events = append(w.events, stored)
		m.applyLocked(w, stored)
	}
}

// applyLocked updates the run chain and the outbox for one stored event.
func (m *Memory) applyLocked(w *memWorkflow, ev Event) {
	env := ev.EventEnvelope()
	run := w.runIndex[env.RunID]
	if run == nil {
		// A run is created by the first event that names it, whatever its
		// kind; a WorkflowStarted then fills in what it knows.
		run = &RunSummary{
			RunID:     env.RunID,
			Status:    StatusRunning,
			StartedAt: env.RecordedAt,
			FirstSeq:  env.Seq,
		}
		w.runs = append(w.runs, run)
		w.runIndex[env.RunID] = run
	}
	run.LastSeq = env.Seq

	closeRun := func(s WorkflowStatus) {
		run.Status = s
		run.ClosedAt = env.RecordedAt
	}
	switch e := ev.(type) {
	case WorkflowStarted:
		run.WorkflowType = e.WorkflowType
		run.Status = StatusRunning
		run.StartedAt = env.RecordedAt
		run.ClosedAt = time.Time{}
	case WorkflowCompleted:
		closeRun(StatusCompleted)
	case WorkflowFailed:
		closeRun(StatusFailed)
	case WorkflowCancelled:
		closeRun(StatusCancelled)
	case WorkflowTimedOut:
		closeRun(StatusTimedOut)
	case WorkflowContinuedAsNew:
		closeRun(StatusContinuedAsNew)
	case WorkflowPaused:
		if run.Status == StatusRunning {
			run.Status = StatusPaused
		}
	case WorkflowResumed:
		if run.Status == StatusPaused {
			run.Status = StatusRunning
		}
	case WorkflowReopened:
		if run.Status.Closed() {
			run.Status = StatusRunning
			run.ClosedAt = time.Time{}
		}
	case ActivityCompleted:
		m.settleActivityLocked(w.id, env.RunID, e.ActivityID)
	case ActivityFailed:
		if e.Error.Kind == Terminal {
			m.settleActivityLocked(w.id, env.RunID, e.ActivityID)
		}
	case ActivityCancelled:
		m.settleActivityLocked(w.id, env.RunID, e.ActivityID)
	case ActivityTimedOut:
		m.settleActivityLocked(w.id, env.RunID, e.ActivityID)
	}
}

// currentRun returns the workflow's latest run (the last to appear in its
// history). Every stored workflow has at least one run.
func (w *memWorkflow) currentRun() *RunSummary { return w.runs[len(w.runs)-1] }

// isActive reports whether the workflow counts as active: its current run is
// running, or was closed by continue-as-new and the next run has not started
// yet.
func (w *memWorkflow) isActive() bool {
	s := w.currentRun().Status
	return s == StatusRunning || s == StatusContinuedAsNew
}

// compareWorkflowIDs orders IDs as their canonical strings sort.
func compareWorkflowIDs(a, b WorkflowID) int { return bytes.Compare(a[:], b[:]) }
