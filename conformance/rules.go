package conformance

// The keyspace rules: the subtest names of [TestKeyspace] and the Rule of a
// *[RuleError] from [CheckKeyspace]. Each is checked on a fresh store.
const (
	// RuleKSContiguousSeqs: StoreSeq from 0, one after another, across appends.
	RuleKSContiguousSeqs = "contiguous-seqs"
	// RuleKSHead: Head is 0 for an unwritten stream and the record count after appends; siblings untouched.
	RuleKSHead = "head"
	// RuleKSBatch: the i-th event at expectedSeq+i, the new head returned, order kept, records self-describing.
	RuleKSBatch = "batch"
	// RuleKSConflictFound: a stale, consumed or ahead expectedSeq gives a *eventstore.SequenceConflictError whose Found is the real head.
	RuleKSConflictFound = "conflict-found-is-actual-head"
	// RuleKSConflictWritesNone: heads, records and listings are identical after a refused batch.
	RuleKSConflictWritesNone = "conflicted-batch-writes-nothing"
	// RuleKSMixedStreams: a batch whose last event is of another stream matches keyspace.ErrMixedStreams; neither stream changes.
	RuleKSMixedStreams = "mixed-streams-refused"
	// RuleKSEphemeral: a batch holding an ephemeral event matches keyspace.ErrEphemeral; nothing written.
	RuleKSEphemeral = "ephemeral-refused"
	// RuleKSEmptyBatch: an empty batch returns expectedSeq, whatever it is, and writes nothing.
	RuleKSEmptyBatch = "empty-batch-noop"
	// RuleKSAttemptsDisjoint: attempts of one activity (0, 1, 1<<16, the largest), and activities 3 and 3+1<<32, are distinct streams.
	RuleKSAttemptsDisjoint = "attempts-disjoint"
	// RuleKSRunAxis: two runs with the same activity and attempt are two streams.
	RuleKSRunAxis = "run-axis"
	// RuleKSListOrder: ListStreams orders by activity then attempt, as numbers.
	RuleKSListOrder = "list-order"
	// RuleKSListRunScoping: ListStreams never returns another run's or workflow's streams.
	RuleKSListRunScoping = "list-run-scoping"
	// RuleKSEmptyListings: an unknown workflow or unwritten run lists nothing.
	RuleKSEmptyListings = "empty-listings"
	// RuleKSReadFromResume: ReadFrom honours fromSeq and limit (<= 0: all), empty past the head.
	RuleKSReadFromResume = "read-from-resume"
	// RuleKSRecordsAreCopies: mutating the appended slice, a returned record or listing changes nothing stored.
	RuleKSRecordsAreCopies = "records-are-copies"
	// RuleKSConcurrentAppends: eight racers at one expectedSeq, round after round: one winner, losers told its head; free-running writers land every event once.
	RuleKSConcurrentAppends = "concurrent-appends"
	// RuleKSContextCancelled: every method answers a cancelled context with an error matching context.Canceled; nothing written.
	RuleKSContextCancelled = "context-cancelled"
	// RuleKSZeroIDs: a zero workflow or run ID matches eventstore.ErrInvalidArgument in every method, reads too; nothing written.
	RuleKSZeroIDs = "zero-ids-refused"
	// RuleKSAppendEvent: keyspace.AppendEvent returns the assigned StoreSeq.
	RuleKSAppendEvent = "append-event"
	// RuleKSValidation: nil content pointers and foreign content kinds (eventstore.ErrInvalidArgument), mixed streams, ephemeral events, zero IDs, first or last in the batch, on a written or unwritten stream: refused alike by every store, nothing written.
	RuleKSValidation = "validation"
	// RuleKSModel (seeded): appends good and bad, reads at every offset and limit and listings, over a 3000-record stream and 400 streams (most in one run), 1 MiB in the message text, tool output and tool arguments (read straight back) and hostile strings, each result compared with a reference model; caller and returned memory scribbled on after every call.
	RuleKSModel = "model"
	// RuleKSConcurrentBatches (seeded): racers append multi-event batches at one expectedSeq, round after round: one winner, the stream exactly the winners' batches.
	RuleKSConcurrentBatches = "concurrent-batches"
)

// The event store rules: the subtest names of [TestEventStore] and the Rule
// of a *[RuleError] from [CheckEventStore]. The Outbox and ShardOwner rules
// are skipped for a store without the capability, unless it is required
// ([WithRequiredCapabilities]).
const (
	// RuleESConflictFound: a stale or ahead expectedSeq gives a *eventstore.SequenceConflictError whose Found is the history length.
	RuleESConflictFound = "append-conflict-found-is-actual-head"
	// RuleESConflictWritesNone: histories, heads, listings and run chains are unchanged after a refused append.
	RuleESConflictWritesNone = "append-conflict-writes-nothing"
	// RuleESSeqStamping: Seq 1-based and contiguous whatever the caller put, a zero envelope WorkflowID filled in, a zero RecordedAt set, a given one kept, the caller's slice untouched.
	RuleESSeqStamping = "seq-stamping"
	// RuleESZeroToken: the zero WriteToken matches eventstore.ErrInvalidToken, even for an empty batch; nothing written.
	RuleESZeroToken = "zero-token-refused"
	// RuleESBadInput: a zero workflow, a nil, pointer or foreign event, another workflow's envelope, a zero run ID: eventstore.ErrInvalidArgument, nothing written.
	RuleESBadInput = "bad-input-refused"
	// RuleESEmptyAppend: an empty append is a no-op, at the head or not.
	RuleESEmptyAppend = "empty-append-noop"
	// RuleESReadHistory: content and envelopes; empty, without error, for an unknown workflow.
	RuleESReadHistory = "read-history"
	// RuleESReadHistoryFrom: the events with Seq >= fromSeq, from any fromSeq.
	RuleESReadHistoryFrom = "read-history-from"
	// RuleESRunChain: runs across continue-as-new, oldest first, with status, first and last Seq, StartedAt, ClosedAt zero exactly while open.
	RuleESRunChain = "run-chain"
	// RuleESListings: ListWorkflowIDs, ListActive and ListPaused through the lifecycle.
	RuleESListings = "listings-follow-lifecycle"
	// RuleESStreamHeads: each workflow once, with its history length.
	RuleESStreamHeads = "stream-heads"
	// RuleESQuery: by type, status, both, with Limit, the zero filter, time bounds at a workflow's own StartedAt; the summary fields.
	RuleESQuery = "query"
	// RuleESTimers: due when FireAt <= asOf (none as of the zero time), earliest first; re-arming replaces; retirement fenced by fireAt and armedSeq.
	RuleESTimers = "timers-fencing"
	// RuleESPackages: replacing, routing and re-routing, ErrNotFound for what is not stored, ErrInvalidArgument for empty names.
	RuleESPackages = "packages-and-routes"
	// RuleESContextCancelled: every error-returning method answers a cancelled context with context.Canceled and writes nothing.
	RuleESContextCancelled = "context-cancelled"
	// RuleESModel (seeded): appends good and bad, reads at boundary offsets of a 3000-event history, run chains, listings, StreamHeads and Query over 300 workflows through start, pause, resume, close, reopen and continue-as-new; with the capabilities, the outbox lifecycle (history terminals settle rows, retryable failures do not, oldest-first claims, re-arm, cancel, across continue-as-new), fenced timers where only fireAt or only armedSeq changes, packages with routes and many-shard elections; 1 MiB payloads in every payload field, read straight back, hostile strings, caller and returned memory scribbled on; each result compared with a reference model.
	RuleESModel = "model"
	// RuleESConcurrentAppends (seeded): racers append multi-event batches (through Append, and every other round, for an Outbox, AppendWithOutbox with rows) at one expectedSeq, round after round: one winner, losers told its head, the history exactly the winners' batches, only the winners' rows staged.
	RuleESConcurrentAppends = "concurrent-appends"
	// RuleESAliasing: editing the payload bytes of appended events, a put package or staged rows after the call, or of what a read returned, changes nothing stored.
	RuleESAliasing = "aliasing"
	// RuleOutboxAtomic: a refused or conflicting AppendWithOutbox stages no row and writes no event; a successful one commits both.
	RuleOutboxAtomic = "outbox/append-atomic"
	// RuleOutboxClaim: oldest first, the limit honoured, a non-positive limit refused, CountClaimedOutboxRows following.
	RuleOutboxClaim = "outbox/claim"
	// RuleOutboxRearm: a re-armed row is pending and claimable again; an unknown row is ErrNotFound.
	RuleOutboxRearm = "outbox/rearm"
	// RuleOutboxSettle: a cancelled row stops being claimable and counted; an unknown one is ErrNotFound.
	RuleOutboxSettle = "outbox/settle-cancelled"
	// RuleOutboxSettleWorkflow: exactly the workflow's open rows' keys, nothing the second time.
	RuleOutboxSettleWorkflow = "outbox/settle-workflow"
	// RuleOutboxTerminalSettles: a fixed history: completed and terminally failed activities' claimed rows stop being counted, a retryable failure's row stays claimed, a cancelled activity's pending row stops being claimable.
	RuleOutboxTerminalSettles = "outbox/terminal-settles"
	// RuleShardAcquireOne: after AcquireOwnedShard(0), IsCurrentOwner(0) is true (of shards 1 and -1 false) and PublishShardOwner succeeds.
	RuleShardAcquireOne = "shardowner/acquire-one"
	// RuleShardAcquireMany: the same through AcquireOwnedShards.
	RuleShardAcquireMany = "shardowner/acquire-many"
	// RuleShardPublishNotOwner: publishing a shard never acquired is eventstore.ErrNotOwner.
	RuleShardPublishNotOwner = "shardowner/publish-requires-acquire"
	// RuleShardNegative: a negative shard is ErrInvalidArgument and never owned.
	RuleShardNegative = "shardowner/negative-shard-refused"
	// RuleShardScopeEveryShard: SetOwnedShards(nil), and widening it, lists every workflow.
	RuleShardScopeEveryShard = "shardowner/nil-scope-lists-every-shard"
)

// The election rules between two nodes of one backend, run by
// [TestEventStore] and [CheckEventStore] only with [WithNodes].
const (
	// RuleNodesOneOwner: a shard held by one node is refused to the other (a many-shard call acquiring none), renewed by its holder, published only by it; IsCurrentOwner follows.
	RuleNodesOneOwner = "nodes/one-owner"
	// RuleNodesFencing: a never-acquired shard takes appends from both nodes; a held one only from its holder: the other's Append and AppendWithOutbox fail with ErrNotOwner and write nothing, read back through both nodes.
	RuleNodesFencing = "nodes/fencing"
	// RuleNodesHandoff: a released shard is fenced for both nodes until the other acquires it; then only the new holder appends and publishes (needs a ReleaseShards(ctx, shards) method).
	RuleNodesHandoff = "nodes/handoff"
	// RuleNodesKill: the shard of a killed holder (Nodes.Kill) is fenced until the survivor acquires it; then the dead node's appends fail with ErrNotOwner.
	RuleNodesKill = "nodes/kill"
	// RuleNodesScopes: each node's enumeration scope is its own.
	RuleNodesScopes = "nodes/scopes"
	// RuleNodesModel (seeded): random elections, renewals, releases, appends with and without rows, publications and a late death of node A, checked against a model of holders and fences; every write read back through both nodes.
	RuleNodesModel = "nodes/model"
)

// The decorator rules: [TestDecorator] runs each, for each capability
// combination of the [Spy], as the subtest "<capabilities>/<rule>", where
// <capabilities> is a [Capabilities] String ("store", "outbox",
// "shardowner", "outbox+shardowner").
const (
	// RuleDecCapabilities: the wrapped store implements exactly the inner's optional interfaces.
	RuleDecCapabilities = "capabilities"
	// RuleDecUnwrap: Unwrap() eventstore.Store returns the inner store.
	RuleDecUnwrap = "unwrap"
	// RuleDecDifferential (seeded): generated calls (nil, empty, zero, negative and boundary arguments, cancelled, expired, deadline-bound and deadline-free contexts, repeated calls) against fresh Spy answers (nil, empty and multi-element results, errors): the inner sees the caller's arguments, context values, Err and Deadline; the caller gets exactly the inner's answer.
	RuleDecDifferential = "differential"
	// RuleDecForward, followed by a method name: one call with distinctive arguments reaches the inner once, unchanged, with the caller's context values; results come back unchanged.
	RuleDecForward = "forward/"
	// RuleDecError, followed by a method name: the inner's error comes back as the very value.
	RuleDecError = "error/"
)
