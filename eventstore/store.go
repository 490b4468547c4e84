package eventstore

import (
	"context"
	"time"
)

// Store is the method set every event store has. Optional capabilities
// ([Outbox], [ShardOwner]) are separate interfaces, discovered by type
// assertion as io.WriterTo is.
//
// Every method takes a context first; implementations return ctx.Err() (or an
// error wrapping it) when the context is done before the call takes effect
// (conformance rule context-cancelled). A write whose context is cancelled
// while it runs takes effect whole or not at all; when it returns the
// context's error a durable store may not know which (its commit may still
// land), and making the same append again settles it: it commits, or
// conflicts at the head after the first.
//
// Nothing is shared between a store and its caller: the store neither
// modifies nor keeps the slices and payload bytes it is given, and what it
// returns is the caller's to keep and modify. It stores what it accepts
// exactly: every uint64 (seqs, ordinals, armed seqs), strings of any bytes
// and length (NUL, invalid UTF-8, shapes such as "a/b" and "A/b" that a
// joined or case-folded key would merge), payloads of any size, times to
// at least the microsecond. The conformance package's TestEventStore
// checks every method; each method below names its rules (the
// conformance.RuleES*, RuleOutbox*, RuleShard* and RuleNodes* constants).
type Store interface {
	// Append commits events to the workflow's history after its current last
	// event, all or nothing. expectedSeq is the history length the caller
	// believes current (0 for a new workflow); the i-th event gets Seq
	// expectedSeq+1+i. A stale expectedSeq returns a *SequenceConflictError and
	// writes nothing, also when the batch is identical to the one committed
	// at that expectedSeq: a store does not deduplicate retries, and a
	// writer that does not know whether its append landed reads the
	// history. An empty slice is a no-op (after the token check).
	// Conformance rules: append-conflict-found-is-actual-head,
	// append-conflict-writes-nothing, append-retried-identical-conflicts,
	// seq-stamping, zero-token-refused,
	// bad-input-refused, empty-append-noop, concurrent-appends, aliasing,
	// model.
	Append(ctx context.Context, token WriteToken, workflowID WorkflowID, events []Event, expectedSeq uint64) error

	// ReadHistory returns the workflow's whole history, in Seq order. An
	// unknown workflow has an empty history. Conformance rules: read-history,
	// aliasing, model.
	ReadHistory(ctx context.Context, workflowID WorkflowID) ([]Event, error)
	// ReadHistoryFrom returns the events with Seq >= fromSeq, in order.
	// Conformance rules: read-history-from, aliasing, model.
	ReadHistoryFrom(ctx context.Context, workflowID WorkflowID, fromSeq uint64) ([]Event, error)
	// ReadRunChain returns the workflow's runs, oldest first, each as its
	// own events left it: the lifecycle of the Runs section of [Memory]'s
	// doc is every store's (a pause of a closed run changes nothing, a late
	// event of an earlier run changes that run only). Conformance rules:
	// run-chain, listings-follow-lifecycle, model.
	ReadRunChain(ctx context.Context, workflowID WorkflowID) ([]RunSummary, error)
	// ListWorkflowIDs returns every workflow with a history (in the owned
	// shards, for a ShardOwner with a scope set). Conformance rules:
	// listings-follow-lifecycle, shardowner/nil-scope-lists-every-shard, model.
	ListWorkflowIDs(ctx context.Context) ([]WorkflowID, error)
	// ListActive returns the workflows whose current run is running (not
	// paused, not closed). Conformance rules: listings-follow-lifecycle,
	// model.
	ListActive(ctx context.Context) ([]WorkflowID, error)
	// ListPaused returns the workflows whose current run is paused.
	// Conformance rules: listings-follow-lifecycle, model.
	ListPaused(ctx context.Context) ([]WorkflowID, error)
	// StreamHeads returns each workflow's history length. Conformance rules:
	// stream-heads, model.
	StreamHeads(ctx context.Context) ([]StreamHead, error)
	// Query returns summaries of the workflows that match filter.
	// Conformance rules: query, model.
	Query(ctx context.Context, filter WorkflowFilter) ([]WorkflowSummary, error)

	// ScheduleTimer arms (or re-arms) a timer. armedSeq is the history Seq of
	// the event that armed it; it fences retirement. Conformance rules:
	// timers-fencing, model.
	ScheduleTimer(ctx context.Context, workflowID WorkflowID, timerID TimerID, fireAt time.Time, armedSeq uint64) error
	// ExpiredTimers returns the armed timers with FireAt <= asOf, earliest first.
	// Conformance rules: timers-fencing, model.
	ExpiredTimers(ctx context.Context, asOf time.Time) ([]TimerEntry, error)
	// RetireTimer removes a timer only if it is still armed with exactly this
	// fireAt and armedSeq, and says what it found. Conformance rules:
	// timers-fencing, model (only fireAt, or only armedSeq, changed).
	RetireTimer(ctx context.Context, workflowID WorkflowID, timerID TimerID, fireAt time.Time, armedSeq uint64) (TimerRetirement, error)

	// PutPackage stores a workflow package (replacing one with the same type
	// and content hash). Conformance rules: packages-and-routes, aliasing,
	// model.
	PutPackage(ctx context.Context, record PackageRecord) error
	// PutPackageWithRoutes stores a package and routes each named workflow
	// type to it, in one step: a bad route stores nothing. Conformance rules:
	// packages-and-routes, model.
	PutPackageWithRoutes(ctx context.Context, record PackageRecord, routeWorkflowTypes []string) error
	// ListPackages returns every stored package. Conformance rules:
	// packages-and-routes, aliasing, model.
	ListPackages(ctx context.Context) ([]PackageRecord, error)
	// DeletePackage removes a package. Conformance rules:
	// packages-and-routes, model.
	DeletePackage(ctx context.Context, workflowType, contentHash string) error
	// PutPackageRoute routes a workflow type to a stored package.
	// Conformance rules: packages-and-routes, model.
	PutPackageRoute(ctx context.Context, workflowType, contentHash string) error
	// ListPackageRoutes returns every route. Conformance rules:
	// packages-and-routes, model.
	ListPackageRoutes(ctx context.Context) ([]PackageRoute, error)
}

// Outbox is the optional capability of staging activity dispatch rows in the
// same commit as the events that schedule them (a transactional outbox).
type Outbox interface {
	// AppendWithOutbox is Append that also stages rows, all in one commit:
	// events and rows land together or not at all. The expected sequence
	// is checked also when only rows are staged. Staged rows are pending
	// whatever State they carry; a row of another workflow or with a zero
	// RunID, and a DispatchKey repeated in the batch or already staged, is
	// refused with an error wrapping [ErrInvalidArgument]. An activity
	// terminal event (not a Retryable failure) settles the open rows of its
	// activity and run, not those of another run. An identical retry at a
	// stale expectedSeq is a conflict, as for Append. Conformance rules:
	// outbox/append-atomic, outbox/terminal-settles, concurrent-appends,
	// append-retried-identical-conflicts,
	// aliasing, model.
	AppendWithOutbox(ctx context.Context, token WriteToken, workflowID WorkflowID, events []Event, expectedSeq uint64, rows []OutboxRow) error
	// RearmOutboxPending returns claimed rows (named by DispatchKey) to pending,
	// for crash recovery. Conformance rules: outbox/rearm, model.
	RearmOutboxPending(ctx context.Context, rows []OutboxRow) error
	// ClaimOutboxRows claims up to limit pending rows, oldest first.
	// Conformance rules: outbox/claim, aliasing, model.
	ClaimOutboxRows(ctx context.Context, limit int) ([]OutboxRow, error)
	// CountClaimedOutboxRows returns how many rows are claimed: the durable
	// in-flight count that quota enforcement reads. Conformance rules:
	// outbox/claim, model.
	CountClaimedOutboxRows(ctx context.Context) (int, error)
	// SettleOutboxRowCancelled cancels one open row. Conformance rules:
	// outbox/settle-cancelled, model.
	SettleOutboxRowCancelled(ctx context.Context, dispatchKey string) error
	// SettleWorkflowOutboxRowsCancelled cancels every open row of a workflow
	// and returns their dispatch keys, in staging order. Conformance rules:
	// outbox/settle-workflow, model.
	SettleWorkflowOutboxRowsCancelled(ctx context.Context, workflowID WorkflowID) ([]string, error)
}

// ShardOwner is the optional capability of a store partitioned into shards
// that nodes own. A workflow's shard is [ShardOf] its ID and the store's
// shard count.
//
// A ShardOwner value is one node of a backend that several nodes share (one
// database, say): the nodes see one history, and each has its own identity,
// its own ownership and its own enumeration scope. The contract between the
// nodes of one backend (conformance rules nodes/*, run when the caller of
// the suite gives two nodes, see conformance.WithNodes):
//
//   - Election: a shard has at most one holder at a time. Acquiring a shard
//     that is free (never acquired, released, or whose holder is dead)
//     succeeds; acquiring a shard this node holds renews it; acquiring a
//     shard another live node holds fails with an error wrapping
//     [ErrNotOwner], and the many-shard call then acquires none of its
//     shards. Each acquisition by a new holder starts a new epoch of the
//     shard. A holder keeps a shard until it gives it up or is declared
//     dead (its process is gone; in a store with leases, its lease ran
//     out).
//   - Fencing: a shard that no node ever acquired is open to appends from
//     every node, so a single node that runs no election works unchanged.
//     Once a shard has been acquired, only its current holder may append
//     to its workflows (Store.Append, Outbox.AppendWithOutbox); any other
//     node's append fails with an error wrapping [ErrNotOwner] and writes
//     nothing, also after the holder gave the shard up or died and before a
//     new holder acquired it. Which other writes a store fences is its
//     choice, documented on it ([Memory] fences appends only).
//   - An election never waits on another node's write: while a previous
//     holder's write to the shard is still committing, an acquisition may
//     be refused with an error wrapping [ErrNotOwner] (a lease that
//     cannot be held hostage); the caller tries again.
//   - IsCurrentOwner is true exactly while this node holds the shard.
//   - The scope set by SetOwnedShards and ExtendOwnedShards is this node's
//     own.
//   - A write through one node is read through every other.
//
// Shard numbers outside [0, shard count) are malformed input: the
// error-returning methods refuse them with an error wrapping
// [ErrInvalidArgument] (the suites try -1, 1<<32 and the largest int), and
// IsCurrentOwner reports false for them. The infallible methods answer a
// done context by doing nothing (SetOwnedShards, ExtendOwnedShards) or
// false (IsCurrentOwner); the others by returning ctx.Err().
type ShardOwner interface {
	// SetOwnedShards scopes this node's enumerating reads (ListWorkflowIDs,
	// ListActive, ListPaused, StreamHeads, ExpiredTimers) to these shards;
	// nil means every shard, an empty non-nil slice no shard. Conformance
	// rules: shardowner/nil-scope-lists-every-shard, nodes/scopes, model.
	SetOwnedShards(ctx context.Context, shards []int)
	// AcquireOwnedShards runs the election for each shard, all or none.
	// Conformance rules: shardowner/acquire-many,
	// shardowner/negative-shard-refused, nodes/*, model.
	AcquireOwnedShards(ctx context.Context, shards []int) error
	// AcquireOwnedShard runs the election for one shard. Conformance rules:
	// shardowner/acquire-one, shardowner/negative-shard-refused, nodes/*.
	AcquireOwnedShard(ctx context.Context, shard int) error
	// ExtendOwnedShards widens this node's enumeration scope (failover
	// adoption); with no scope set (every shard) it changes nothing.
	// Conformance rules: shardowner/nil-scope-lists-every-shard,
	// nodes/scopes.
	ExtendOwnedShards(ctx context.Context, shards []int)
	// IsCurrentOwner reports whether this node holds the shard now.
	// Conformance rules: shardowner/acquire-one, shardowner/acquire-many,
	// shardowner/negative-shard-refused, nodes/*, model.
	IsCurrentOwner(ctx context.Context, shard int) bool
	// PublishShardOwner records this node as the shard's owner in the owner
	// directory, so requests for the shard route here; a shard this node
	// does not hold is refused with [ErrNotOwner]. Conformance rules:
	// shardowner/publish-requires-acquire, shardowner/acquire-one,
	// nodes/*, model.
	PublishShardOwner(ctx context.Context, shard int) error
}

// WorkflowStatus is the state of a run, as its lifecycle events leave it.
type WorkflowStatus string

// The statuses. The five closing ones match the aion.workflow.status values.
const (
	StatusRunning        WorkflowStatus = "running"
	StatusPaused         WorkflowStatus = "paused"
	StatusCompleted      WorkflowStatus = "completed"
	StatusFailed         WorkflowStatus = "failed"
	StatusCancelled      WorkflowStatus = "cancelled"
	StatusTimedOut       WorkflowStatus = "timed_out"
	StatusContinuedAsNew WorkflowStatus = "continued_as_new"
)

// Closed reports whether s ends a run.
func (s WorkflowStatus) Closed() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusCancelled, StatusTimedOut, StatusContinuedAsNew:
		return true
	}
	return false
}

// RunSummary describes one run of a workflow's continue-as-new chain.
type RunSummary struct {
	RunID        RunID
	WorkflowType string
	Status       WorkflowStatus
	StartedAt    time.Time
	ClosedAt     time.Time // zero while the run is open
	FirstSeq     uint64    // Seq of the run's WorkflowStarted
	LastSeq      uint64    // Seq of the run's latest event
}

// StreamHead is a workflow's history length.
type StreamHead struct {
	WorkflowID WorkflowID
	Head       uint64
}

// WorkflowFilter selects workflows for [Store.Query]. Zero fields match
// everything; Limit <= 0 means no limit.
type WorkflowFilter struct {
	WorkflowType  string
	Status        WorkflowStatus
	StartedAfter  time.Time // inclusive
	StartedBefore time.Time // exclusive
	Limit         int
}

// WorkflowSummary describes a workflow by its current run.
type WorkflowSummary struct {
	WorkflowID   WorkflowID
	RunID        RunID
	WorkflowType string
	Status       WorkflowStatus
	StartedAt    time.Time
	ClosedAt     time.Time
	Head         uint64
}

// TimerEntry is an armed timer.
type TimerEntry struct {
	WorkflowID WorkflowID
	TimerID    TimerID
	FireAt     time.Time
	ArmedSeq   uint64
}

// TimerRetirement is what [Store.RetireTimer] found.
type TimerRetirement uint8

const (
	// TimerRetired: the timer was armed as named and is now removed.
	TimerRetired TimerRetirement = iota + 1
	// TimerSuperseded: the timer was re-armed (another fireAt or armedSeq);
	// nothing was removed.
	TimerSuperseded
	// TimerAbsent: no such timer is armed.
	TimerAbsent
)

// String returns "retired", "superseded", "absent" or "unknown".
func (r TimerRetirement) String() string {
	switch r {
	case TimerRetired:
		return "retired"
	case TimerSuperseded:
		return "superseded"
	case TimerAbsent:
		return "absent"
	default:
		return "unknown"
	}
}

// PackageRecord is a stored workflow package.
type PackageRecord struct {
	WorkflowType string
	ContentHash  string
	Data         []byte
	CreatedAt    time.Time
}

// PackageRoute routes new runs of a workflow type to one package.
type PackageRoute struct {
	WorkflowType string
	ContentHash  string
}

// OutboxState is where an outbox row is in its life:
//
//	pending --claim--> claimed --activity terminal event--> settled
//	   ^                  |
//	   +------rearm-------+
//	pending or claimed --cancel--> cancelled
//
// The [Outbox] interface has no method to settle a completed row: the
// activity's terminal event in the history settles it, in the same commit.
type OutboxState uint8

const (
	// OutboxPending rows wait to be claimed by a dispatcher.
	OutboxPending OutboxState = iota + 1
	// OutboxClaimed rows have been handed to a dispatcher.
	OutboxClaimed
	// OutboxSettled rows are done: the activity reached a terminal event.
	OutboxSettled
	// OutboxCancelled rows were cancelled before they settled.
	OutboxCancelled
)

// String returns the state's lower-case name.
func (s OutboxState) String() string {
	switch s {
	case OutboxPending:
		return "pending"
	case OutboxClaimed:
		return "claimed"
	case OutboxSettled:
		return "settled"
	case OutboxCancelled:
		return "cancelled"
	default:
		return "unknown"
	}
}

// OutboxRow is one staged activity dispatch. Its identity is DispatchKey;
// [DispatchKey] derives the conventional one from workflow and ordinal.
type OutboxRow struct {
	DispatchKey  string
	WorkflowID   WorkflowID
	RunID        RunID
	Ordinal      ActivityID // the activity the row dispatches
	ActivityType string
	Input        Payload
	CreatedAt    time.Time
	State        OutboxState // set by the store; ignored on staging
}

// DispatchKey returns the conventional dispatch key of an activity:
// "<workflow>/<run>/<ordinal>".
func DispatchKey(workflowID WorkflowID, runID RunID, ordinal ActivityID) string {
	return workflowID.String() + "/" + runID.String() + "/" + ordinal.String()
}

// ShardOf returns the shard of a workflow among n shards (n > 0): the first
// eight bytes of its UUID, big-endian, modulo n.
func ShardOf(workflowID WorkflowID, n int) int {
	var v uint64
	for _, b := range workflowID[:8] {
		v = v<<8 | uint64(b)
	}
	return int(v % uint64(n))
}
