// Package eventstore is the domain model of a durable workflow engine's event
// store and the contract that aionotel decorates: workflow and run IDs, the
// history events, the [Store] interface with its optional [Outbox] and
// [ShardOwner] capabilities, the typed errors, and [Memory], a complete
// in-memory reference store.
//
// The engine records everything that happens to a workflow as an append-only
// history of events; the store keeps those histories and a few side tables
// (timers, workflow packages, the dispatch outbox). The otelstore package
// wraps any [Store] to observe it. [Memory] is the store the examples and
// tests run on, and the reference for the semantics below: where [Store]'s
// method docs leave a choice open, this page records what [Memory] does.
//
// # Identities
//
// A [WorkflowID] names a workflow for its whole life; a [RunID] names one run
// (generation) of it. Both are UUID-backed comparable values whose zero value
// names nothing and is refused. An [ActivityID] is an activity's position in
// its run, restarting at 0 in every run, so an activity is identified by
// (workflow, run, activity). [ParseWorkflowID] and [ParseRunID] return a
// [*ParseIDError] that matches [ErrInvalidArgument].
//
// # Histories and appends
//
// Every event kind is a value struct embedding an [Envelope]: workflow ID,
// run ID, Seq and RecordedAt. The set of kinds is closed; a pointer to a kind
// or a type that embeds one is not an event a store accepts.
//
// [Memory.Append] and [Memory.AppendWithOutbox] check, in this order:
//
//  1. the [WriteToken]: anything but [RecorderToken] is refused with
//     [ErrInvalidToken], even for an empty batch;
//  2. the context: a done context's error is returned unchanged;
//  3. the batch, with [ValidateAppend]: a zero workflow ID, a nil event, a
//     value that is not one of this package's kinds, an envelope naming
//     another (non-zero) workflow, or a zero RunID is refused with an error
//     wrapping [ErrInvalidArgument] that names the bad event's index;
//  4. an empty batch (for AppendWithOutbox: no events and no rows) is then a
//     no-op that succeeds whatever expectedSeq is;
//  5. optimistic concurrency: expectedSeq must equal the history length, or
//     the call returns a [*SequenceConflictError] whose Found is the real
//     length (retry from there).
//
// A refused append writes nothing. A successful one stores copies of the
// events: Seq is stamped expectedSeq+1+i whatever the caller set, a zero
// WorkflowID is filled in, a zero RecordedAt is set to the store's clock
// ([WithClock]); payload bytes are copied, and the caller's slice and events
// are never modified.
//
// # Runs and lifecycle
//
// A history may begin with any event: the store does not require a
// WorkflowStarted first. A run is created by the first event that names its
// RunID, whatever that event's kind; it starts out running, with FirstSeq and
// StartedAt taken from that event. The run chain ([Memory.ReadRunChain])
// lists runs in the order they first appeared, and a workflow's current run
// is the last of them. Lifecycle events then update the run their envelope
// names:
//
//   - [WorkflowStarted] sets the run's type, makes it running, sets StartedAt
//     to the event's RecordedAt and clears ClosedAt; on a run that already
//     exists it does so in place, without adding a run;
//   - [WorkflowCompleted], [WorkflowFailed], [WorkflowCancelled],
//     [WorkflowTimedOut] and [WorkflowContinuedAsNew] close the run with the
//     matching status and ClosedAt = RecordedAt (a later closing event
//     overwrites an earlier one: the store records, the engine decides);
//   - [WorkflowPaused] pauses a running run and [WorkflowResumed] resumes a
//     paused one; neither changes a closed run;
//   - [WorkflowReopened] makes a closed run running again and clears ClosedAt;
//     it does not change an open (running or paused) run.
//
// Every event sets its run's LastSeq, so a late event of an earlier run
// updates that run and leaves the current run current. The continue-as-new
// event's NewRunID does not create the next run: that run appears with its
// own WorkflowStarted (or first event).
//
// A workflow's status is its current run's status. [Memory.ListActive]
// returns the workflows whose current run is running, and also those whose
// current run was closed by continue-as-new while the next run has not
// appeared yet: the chain goes on, and an engine scanning for work must not
// drop it in the gap. [Memory.ListPaused] returns those whose current run is
// paused. [Memory.Query], by contrast, reports and filters on the recorded
// status literally ([StatusContinuedAsNew] in that gap).
//
// # Reads
//
// Reads of an unknown workflow return an empty result and no error. Every
// returned slice is freshly allocated and every returned event is a deep copy
// (as by [WithEnvelope]), so callers may keep and modify what they get
// without affecting the store. Listings (ListWorkflowIDs, ListActive,
// ListPaused, StreamHeads) are ordered by workflow ID, which is the order of
// the IDs' canonical strings. [Memory.Query] matches WorkflowType, Status and
// the StartedAt window ([WorkflowFilter.StartedAfter] inclusive,
// [WorkflowFilter.StartedBefore] exclusive) against each workflow's current
// run, orders the results by StartedAt then workflow ID, and applies Limit
// last.
//
// # Timers
//
// A timer is keyed by (workflow, [TimerID]); [Memory.ScheduleTimer] arms it
// or re-arms it, replacing its fire time and armed sequence (the Seq of the
// event that armed it). [Memory.ExpiredTimers] lists armed timers due at the
// given time (FireAt <= asOf), earliest first, then by workflow and timer ID;
// listing does not retire. [Memory.RetireTimer] is fenced: it removes the
// timer only if it is still armed with the same fire time (compared with
// time.Time.Equal) and armed sequence, returning [TimerRetired]; a timer
// re-armed since gives [TimerSuperseded] and stays armed, so a slow firer
// cannot retire its successor; no timer gives [TimerAbsent]. A zero workflow
// ID or an empty timer ID is refused with [ErrInvalidArgument].
//
// # Packages and routes
//
// A [PackageRecord] is keyed by (WorkflowType, ContentHash), both non-empty;
// its Data is copied in and out, and a zero CreatedAt is set from the clock.
// Putting a package under an existing key replaces it. A route sends new
// runs of one workflow type to one content hash; putting a route replaces
// the type's previous one. A route resolves by content hash, so one package
// can serve several workflow types: [Memory.PutPackageWithRoutes] stores a
// package and routes every listed type to its hash in one step, after
// checking every argument. [Memory.PutPackageRoute] needs some stored package
// with that hash ([ErrNotFound] otherwise). [Memory.DeletePackage] of a
// package that is not stored returns [ErrNotFound]; deleting the last package
// with a hash that a route still points at is refused with
// [ErrInvalidArgument], since the route would dangle. Packages list by
// (type, hash), routes by type.
//
// # Outbox
//
// The outbox stages activity dispatches in the same commit as the events
// that schedule them, so a crash can neither lose a dispatch nor dispatch an
// activity whose scheduling was never recorded. A row ([OutboxRow]) is
// identified by its dispatch key and moves through these states:
//
//	pending --claim--> claimed --activity terminal event--> settled
//	   ^                  |
//	   +------rearm-------+
//	pending or claimed --cancel--> cancelled
//
// [Memory.AppendWithOutbox] runs the append checks above, then checks the
// rows: a zero WorkflowID is filled in with the append's, a row of another
// workflow or with a zero RunID is refused, an empty DispatchKey is filled in
// with [DispatchKey], and a dispatch key repeated in the batch or already
// staged (in any state, until pruned) is refused. Only then are the rows staged
// (pending, CreatedAt from the clock when zero) and the events committed,
// together; a conflict or a bad row stages nothing and writes no event. Rows
// with no events are staged too, fenced by expectedSeq like an append; no
// events and no rows is a no-op.
//
// [Memory.ClaimOutboxRows] claims pending rows oldest (first staged) first;
// a limit <= 0 is refused. [Memory.RearmOutboxPending] returns claimed rows
// to pending after a dispatcher crash, where they are claimed again in their
// original order; every named row must exist or nothing changes
// ([ErrNotFound]); pending rows stay pending and settled or cancelled rows
// are not revived. [Memory.CountClaimedOutboxRows] counts claimed rows.
//
// The [Outbox] interface has no method to settle a completed row: rows are
// settled by the history itself. When an activity terminal event is
// committed ([ActivityCompleted], [ActivityFailed] with a [Terminal] error,
// [ActivityCancelled], [ActivityTimedOut]), every pending or claimed row of
// that workflow, run and ordinal (ActivityID) becomes settled, in the same
// commit. A [Retryable] failure settles nothing. Rows staged in a batch are
// in place before the batch's events are applied, so a terminal event in the
// same batch settles its row at once. [Memory.SettleOutboxRowCancelled]
// cancels one open row (an unknown key is [ErrNotFound]; a settled or
// cancelled row is left alone and the call succeeds), and
// [Memory.SettleWorkflowOutboxRowsCancelled] cancels every open row of a
// workflow, across its runs, returning their keys in staging order.
//
// # Shards
//
// Workflows are partitioned by [ShardOf] into [WithShardCount] shards (16 by
// default). A [Memory] is a single node with one owner identity, and tracks
// two separate things. Ownership: [Memory.AcquireOwnedShards] and
// [Memory.AcquireOwnedShard] always win the election for shards in
// [0, shard count) (each acquisition starts a new epoch; an out-of-range
// shard is refused with [ErrInvalidArgument] and, for the plural form, no
// shard of the call is acquired); [Memory.IsCurrentOwner] reports whether a
// shard was acquired; [Memory.PublishShardOwner] records the store in the
// owner directory for an acquired shard and returns [ErrNotOwner] for any
// other. The enumeration scope: [Memory.SetOwnedShards] limits
// ListWorkflowIDs, ListActive, ListPaused, StreamHeads and ExpiredTimers to
// workflows in the listed shards (nil means every shard, an empty slice no
// shard), and [Memory.ExtendOwnedShards] widens it (a no-op when every shard
// is already in scope). Acquiring a shard does not change the scope; Query,
// reads by workflow ID and writes ignore it.
//
// # Errors
//
// Every refusal returns one of the sentinels ([ErrSequenceConflict] through
// [*SequenceConflictError], [ErrInvalidToken], [ErrNotFound], [ErrNotOwner],
// [ErrInvalidArgument], [ErrUnsupported]) or an error wrapping one, so
// callers test with errors.Is; a refused call changes nothing. A call whose
// context is already done returns ctx.Err() itself (after the token check,
// for the appends), so errors.Is(err, context.Canceled) holds. The three
// ShardOwner methods that return no error do nothing when the context is
// done, and IsCurrentOwner then reports false.
//
// # Concurrency
//
// [Memory] is safe for concurrent use. It is a reference store, not a fast
// one: a single sync.RWMutex guards all of its state, so every call is
// atomic with respect to every other, reads run in parallel and writes one
// at a time. The zero value is not ready for use: create a Memory with
// [NewMemory]; the methods of a zero (or nil) Memory return an error
// wrapping [ErrInvalidArgument] instead of panicking. A Memory must not be
// copied after first use.
//
// # Retention
//
// A Memory keeps everything it is given (histories, timers, settled outbox
// rows) until [Memory.PruneClosed] removes the workflows whose current run
// closed (completed, failed, cancelled or timed out; not continued as new)
// before a given time, with everything kept for them. A pruned workflow ID
// is as if never written, its dispatch keys included. A long-running
// process calls PruneClosed periodically so that its memory levels off.
//
// # Other stores
//
// A third-party [Store] should refuse the same inputs as [Memory]:
// [ValidateAppend] is exported so that it can run the same batch checks, and
// the conformance package's suites check the rest of the contract.
package eventstore
