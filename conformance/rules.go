package conformance

// The keyspace rules: the subtest names of [TestKeyspace] and the Rule of a
// *[RuleError] from [CheckKeyspace]. Each runs on a fresh store, judged by
// the model (see the package documentation, How).
const (
	// RuleKSContiguousSeqs: StoreSeq from 0, one after another, across appends.
	RuleKSContiguousSeqs = "contiguous-seqs"
	// RuleKSHead: Head is 0 for an unwritten stream and the record count after appends; siblings untouched.
	RuleKSHead = "head"
	// RuleKSBatch: the i-th event at expectedSeq+i, the new head returned, order kept, records self-describing; a batch of 4,097.
	RuleKSBatch = "batch"
	// RuleKSConflictFound: a stale, consumed or ahead expectedSeq (also by 2^32, 2^63, the largest) gives a *eventstore.SequenceConflictError whose Found is the real head.
	RuleKSConflictFound = "conflict-found-is-actual-head"
	// RuleKSConflictWritesNone: heads, records and listings are identical after a refused batch.
	RuleKSConflictWritesNone = "conflicted-batch-writes-nothing"
	// RuleKSMixedStreams: a batch with one event (first, middle or last) of another attempt, activity, run or workflow matches keyspace.ErrMixedStreams; no stream changes.
	RuleKSMixedStreams = "mixed-streams-refused"
	// RuleKSEphemeral: a batch holding an ephemeral event matches keyspace.ErrEphemeral; nothing written.
	RuleKSEphemeral = "ephemeral-refused"
	// RuleKSEmptyBatch: an empty batch returns expectedSeq, whatever it is, and writes nothing.
	RuleKSEmptyBatch = "empty-batch-noop"
	// RuleKSAttemptsDisjoint: attempts 0, 1, 1<<16 and the largest, and activities past 2^32 and 2^63, are distinct streams.
	RuleKSAttemptsDisjoint = "attempts-disjoint"
	// RuleKSRunAxis: two runs with the same activity and attempt are two streams.
	RuleKSRunAxis = "run-axis"
	// RuleKSListOrder: ListStreams orders by activity then attempt, as unsigned numbers.
	RuleKSListOrder = "list-order"
	// RuleKSListRunScoping: ListStreams never returns another run's or workflow's streams.
	RuleKSListRunScoping = "list-run-scoping"
	// RuleKSEmptyListings: an unknown workflow or unwritten run lists nothing.
	RuleKSEmptyListings = "empty-listings"
	// RuleKSReadFromResume: ReadFrom honours fromSeq (also past 2^32, 2^63, the largest) and limit (<= 0: all; 1<<32+1 is not 1), empty past the head.
	RuleKSReadFromResume = "read-from-resume"
	// RuleKSRecordsAreCopies: scribbling on the appended slice, a returned record or listing changes nothing stored.
	RuleKSRecordsAreCopies = "records-are-copies"
	// RuleKSConcurrentAppends (seeded): eight racers at one expectedSeq, round after round: one winner, losers told its head; free-running writers land every event once, each at the seq it was told, and are told the head their append made.
	RuleKSConcurrentAppends = "concurrent-appends"
	// RuleKSContextCancelled: every method answers a cancelled or expired context with its error, nothing written; a context cancelled during an append leaves all of it or none.
	RuleKSContextCancelled = "context-cancelled"
	// RuleKSZeroIDs: a zero workflow or run ID matches eventstore.ErrInvalidArgument in every method, reads too; nothing written.
	RuleKSZeroIDs = "zero-ids-refused"
	// RuleKSRetriedBatch: a batch accepted, or refused with a conflict, made again, identical, at the expectedSeq it was accepted at (just after, or after later appends) is a *eventstore.SequenceConflictError whose Found is the head, and writes nothing: a store neither deduplicates retries nor takes a refused batch the second time.
	RuleKSRetriedBatch = "retried-batch-conflicts"
	// RuleKSSizes: every page size and cap a store plausibly has, drawn at, below, above and at exact multiples: a stream of exactly 2,000 records read whole, in pages of exactly 1,000, from where exactly 256, 512, 1,000 and 1,024 remain and next to each; one run listed at 511 to 1,025 streams and at exactly 2,048 and 4,096 streams and one more.
	RuleKSSizes = "sizes-and-pages"
	// RuleKSAppendEvent: keyspace.AppendEvent returns the assigned StoreSeq.
	RuleKSAppendEvent = "append-event"
	// RuleKSValidation: nil content pointers and foreign content kinds (eventstore.ErrInvalidArgument), mixed streams, ephemeral events, zero IDs, first or last in the batch, on a written or unwritten stream: refused alike by every store, nothing written; pointer and nil contents stored.
	RuleKSValidation = "validation"
	// RuleKSRetention: for a store with a DeleteRun method ([RunDeleter]), deleting a run removes its streams and returns their number, leaves other runs and workflows alone, and a deleted stream starts again at 0.
	RuleKSRetention = "retention/delete-run"
	// RuleKSModel (seeded): appends good and bad, at stale seqs near 2^32, 2^63 and the largest, with contexts cancelled before and during the call, reads at every boundary offset and limit, listings and (with DeleteRun) retention, over a stream past 65,536 records written in batches up to 5,000 and 400 streams (more than 256 in one run), every field of every event and content kind drawn (texts past 4 KiB and 64 KiB, one of 1 MiB read straight back), each result compared with a reference model.
	RuleKSModel = "model"
	// RuleKSConcurrentBatches (seeded): racers append multi-event batches at one expectedSeq, round after round: one winner, the stream exactly the winners' batches.
	RuleKSConcurrentBatches = "concurrent-batches"
	// RuleKSConcurrentStreams (seeded): racers create new streams of one run at once while listing it: every first append succeeds, a listing shows every stream whose append returned before it started, whole, and no stream before its append commits or in part, and the final listing is every stream, in order, with its head.
	RuleKSConcurrentStreams = "concurrent-streams"
)

// The event store rules: the subtest names of [TestEventStore] and the Rule
// of a *[RuleError] from [CheckEventStore], judged like the keyspace's. The
// Outbox, ShardOwner and retention rules are skipped for a store without
// the capability, unless it is required ([WithRequiredCapabilities]).
const (
	// RuleESConflictFound: a stale or ahead expectedSeq (also by 2^32, 2^63, the largest) gives a *eventstore.SequenceConflictError whose Found is the history length; the same append made again is a conflict again (a store does not remember refusals).
	RuleESConflictFound = "append-conflict-found-is-actual-head"
	// RuleESConflictWritesNone: histories, heads, listings and run chains are unchanged after a refused append.
	RuleESConflictWritesNone = "append-conflict-writes-nothing"
	// RuleESSeqStamping: Seq 1-based and contiguous whatever the caller put, a zero envelope WorkflowID filled in, a zero RecordedAt set, a given one kept, the caller's slice untouched.
	RuleESSeqStamping = "seq-stamping"
	// RuleESZeroToken: the zero WriteToken matches eventstore.ErrInvalidToken, even for an empty batch; nothing written.
	RuleESZeroToken = "zero-token-refused"
	// RuleESBadInput: a zero workflow, a nil, pointer or foreign event, another workflow's envelope, a zero run ID, first or last: eventstore.ErrInvalidArgument, nothing written.
	RuleESBadInput = "bad-input-refused"
	// RuleESRetriedAppend: an accepted append made again, identical (events and rows, through Append or AppendWithOutbox, rows only too), at the expectedSeq it was accepted at (just after, or after later appends) is a *eventstore.SequenceConflictError whose Found is the history length, and writes nothing (no event, no row): a store does not deduplicate retries.
	RuleESRetriedAppend = "append-retried-identical-conflicts"
	// RuleESEmptyAppend: an empty append is a no-op, at the head or not.
	RuleESEmptyAppend = "empty-append-noop"
	// RuleESReadHistory: content and envelopes; empty, without error, for an unknown workflow.
	RuleESReadHistory = "read-history"
	// RuleESReadHistoryFrom: the events with Seq >= fromSeq, from any fromSeq, also past 2^32, 2^63 and the largest.
	RuleESReadHistoryFrom = "read-history-from"
	// RuleESRunChain: runs across continue-as-new, oldest first, with every summary field; a run started again is restarted in place (type, StartedAt), running or closed; a continue-as-new alone creates no run.
	RuleESRunChain = "run-chain"
	// RuleESListings: ListWorkflowIDs, ListActive and ListPaused through the lifecycle: every lifecycle event in every state (a pause, resume or reopen that changes nothing, a close of a paused or closed run) and late events of an earlier run, which change that run only.
	RuleESListings = "listings-follow-lifecycle"
	// RuleESStreamHeads: each workflow once, with its history length; every listing at, below and past 512, 1,000 and 1,024 workflows and at 4,096 and 4,097, all paused then resumed, StartedAt tied; Query by status at those sizes, and with a filter and a limit past 1,000.
	RuleESStreamHeads = "stream-heads"
	// RuleESSizes: every page size and cap a store plausibly has, drawn at, below, above and at exact multiples: a chain of 1,025 runs read at 100 to 1,025 runs; its history of 2,049 events read whole and from where 1 to 2,049 events remain; rows staged at one CreatedAt: 1,000 claimed whole, then 1,024 of 1,025; 4,097 timers (IDs of 255, 256, 4,097 and 65,537 bytes among them), 1,025 due at one instant, read with 511 to 1,025, 2,000, 2,048, 2,049, 3,071, 4,096 and 4,097 due; listings, StreamHeads, Query and (for an eventstore.HistoriesReader) ReadHistories of exactly 1,000 and 2,000 IDs and one more, an unknown one amid them and a repeated one last.
	RuleESSizes = "sizes-and-pages"
	// RuleESQuery: by type (differing in case only), status, both, limits (0, 1, negative, past 2^32, the largest), the zero filter, time bounds at a workflow's own StartedAt; every filter with each limit of 1, 2, 512, 1,000, 1,001, 1,025 and 4,097; every summary field.
	RuleESQuery = "query"
	// RuleESTimers: key-shaped timer IDs and IDs differing only in spaces (" a", "a ", "a  b"); due when FireAt <= asOf, earliest first; re-arming replaces; retirement fenced by fireAt and by armedSeq (also by bit 32 or 63 alone); bad IDs refused.
	RuleESTimers = "timers-fencing"
	// RuleESPackages: composite keys that a careless store joins into one ("a/b"+"c" and "a"+"b/c", case, NUL, 300-byte shared prefixes); replacing, routing and re-routing, ErrNotFound for what is not stored, ErrInvalidArgument for empty names.
	RuleESPackages = "packages-and-routes"
	// RuleESContextCancelled: every method answers a cancelled or expired context with its error and writes nothing, IsCurrentOwner with false; a context cancelled during an append leaves all of it or none, rows included.
	RuleESContextCancelled = "context-cancelled"
	// RuleESModel (seeded): appends good and bad through both paths, stale at seqs near 2^32, 2^63 and the largest, with contexts cancelled before and during the call, reads at boundary offsets of a history past 4,096 events, run chains, listings, StreamHeads and Query over 300 workflows through the whole lifecycle; with the capabilities, the outbox (a batch of 4,100 rows, key-shaped dispatch keys, ordinals past 2^32 and 2^63, rows-only appends, claims, re-arms, cancels), fenced timers, packages and routes, single-node elections and scopes, and retention; every field of every event, row and package drawn, payloads past 4 KiB and 64 KiB and of 1 MiB; each result compared with a reference model.
	RuleESModel = "model"
	// RuleESConcurrentAppends (seeded): racers append multi-event batches (through Append, and every other round, for an Outbox, AppendWithOutbox with rows) at one expectedSeq, round after round: one winner, losers told its head, the history exactly the winners' batches, only the winners' rows staged.
	RuleESConcurrentAppends = "concurrent-appends"
	// RuleESAliasing: scribbling on the payload bytes of appended events, a put package or staged rows after the call, or on what a read returned, changes nothing stored.
	RuleESAliasing = "aliasing"
	// RuleESRetention: for a store with a PruneClosed method ([ClosedPruner]), pruning removes exactly the workflows whose current run closed strictly before the cutoff (not one closed at it, continued as new, reopened, running or paused), with their histories, chains, timers and outbox rows, and returns their number; a pruned workflow starts again at expectedSeq 0.
	RuleESRetention = "retention/prune-closed"
	// RuleOutboxAtomic: a refused or conflicting AppendWithOutbox (also one with rows and no events, at every stale or ahead expectedSeq) stages no row and writes no event; a successful one commits both.
	RuleOutboxAtomic = "outbox/append-atomic"
	// RuleOutboxClaim: oldest first, the limit honoured (past 4,096, 2^32, the largest), a non-positive limit refused, CountClaimedOutboxRows following.
	RuleOutboxClaim = "outbox/claim"
	// RuleOutboxConcurrentClaims (seeded): racers claim small batches of the same pending rows at once and re-arm some of what they got: each row goes to one claimant until re-armed (checked at every claim; handed out at most once more than re-armed), every row handed out is the staged row, and the rows left claimed and pending afterwards are what the racers were told.
	RuleOutboxConcurrentClaims = "outbox/concurrent-claims"
	// RuleOutboxRearm: a re-armed row is pending and claimable again; an unknown row is ErrNotFound, an empty key ErrInvalidArgument, and nothing changes then.
	RuleOutboxRearm = "outbox/rearm"
	// RuleOutboxSettle: a cancelled row stops being claimable and counted; a key differing in case or separator only, or unknown, is ErrNotFound.
	RuleOutboxSettle = "outbox/settle-cancelled"
	// RuleOutboxSettleWorkflow: exactly the workflow's open rows' keys, of every run, in staging order, nothing the second time.
	RuleOutboxSettleWorkflow = "outbox/settle-workflow"
	// RuleOutboxTerminalSettles: completed, terminally failed, cancelled and timed out activities settle their rows, a retryable failure does not; across continue-as-new, a terminal settles only its own run's rows.
	RuleOutboxTerminalSettles = "outbox/terminal-settles"
	// RuleShardAcquireOne: after AcquireOwnedShard(0), IsCurrentOwner(0) is true (false with a cancelled context) and PublishShardOwner succeeds.
	RuleShardAcquireOne = "shardowner/acquire-one"
	// RuleShardAcquireMany: the same through AcquireOwnedShards.
	RuleShardAcquireMany = "shardowner/acquire-many"
	// RuleShardPublishNotOwner: publishing a shard never acquired is eventstore.ErrNotOwner.
	RuleShardPublishNotOwner = "shardowner/publish-requires-acquire"
	// RuleShardNegative: a shard no store has (-1, the smallest int, 1<<32, the largest) is ErrInvalidArgument, alone or in a list, and never owned.
	RuleShardNegative = "shardowner/negative-shard-refused"
	// RuleShardScopeEveryShard: SetOwnedShards(nil), and widening it, lists every workflow; the empty scope none, widened by no shard too (ExpiredTimers alike); a done context changes no scope.
	RuleShardScopeEveryShard = "shardowner/nil-scope-lists-every-shard"
)

// The election rules between two nodes of one backend, run by
// [TestEventStore] and [CheckEventStore] only with [WithNodes].
const (
	// RuleNodesOneOwner: a shard held by one node is refused to the other (a many-shard call acquiring none), renewed by its holder, published only by it; IsCurrentOwner follows.
	RuleNodesOneOwner = "nodes/one-owner"
	// RuleNodesFencing: a never-acquired shard takes appends from both nodes; a held one only from its holder: every write of the other (Append, AppendWithOutbox with events, rows only, a pause) fails with ErrNotOwner and writes nothing, read back through both nodes.
	RuleNodesFencing = "nodes/fencing"
	// RuleNodesHandoff: a released shard is fenced for both nodes, every kind of write, until the other acquires it; then only the new holder appends and publishes (needs a ReleaseShards(ctx, shards) method).
	RuleNodesHandoff = "nodes/handoff"
	// RuleNodesKill: the shard of a killed holder (Nodes.Kill) is fenced until the survivor acquires it; then the dead node's writes of every kind fail with ErrNotOwner, and so do its claims of ownership: acquiring (renewing) a shard the survivor holds, publishing the shards it held and published before its death.
	RuleNodesKill = "nodes/kill"
	// RuleNodesReadsAcross: histories, ListWorkflowIDs, ListActive, ListPaused, StreamHeads, timers and outbox rows written through one node are read (and claimed) through the other, within each node's scope, also after SetOwnedShards and ExtendOwnedShards of one shard or several (adoption), after a kill, and after the other node changed what this one wrote (a pause resumed, a timer re-armed); a non-holder's rows-only AppendWithOutbox fails with ErrNotOwner and stages nothing.
	RuleNodesReadsAcross = "nodes/reads-across"
	// RuleNodesStaleOwnerRace (seeded): a holder's goroutines keep appending (Append, and for an Outbox AppendWithOutbox with a row) while it gives the shard up (released, round after round, then killed) and the other node acquires it: every append the old holder was told landed is in the new holder's first read after its acquisition returned, every append started after that fails with ErrNotOwner, and none that failed is in the history (a fence check and a write in two steps lets a stale owner's write land after the takeover).
	RuleNodesStaleOwnerRace = "nodes/stale-owner-race"
	// RuleNodesScopes: each node's enumeration scope is its own.
	RuleNodesScopes = "nodes/scopes"
	// RuleNodesModel (seeded): random elections, renewals, releases, appends with and without rows, publications, scopes and a late death of node A, checked against a model of holders and fences; every write read back through both nodes.
	RuleNodesModel = "nodes/model"
)

// The decorator rules: [TestDecorator] runs each, for each capability
// combination of the [Spy], as the subtest "<capabilities>/<rule>", where
// <capabilities> is a [Capabilities] String ("store", "outbox",
// "historiesreader", "outbox+shardowner+historiesreader", the eight
// combinations).
const (
	// RuleDecCapabilities: the wrapped store implements exactly the inner's optional interfaces; a ShardCount() int method, which it need not have, answers the inner's, and there is none over a store without one.
	RuleDecCapabilities = "capabilities"
	// RuleDecUnwrap: Unwrap() eventstore.Store returns the inner store.
	RuleDecUnwrap = "unwrap"
	// RuleDecDifferential (seeded): generated calls (nil, empty, zero, boundary and large arguments with every field drawn, cancelled, expired, deadline-bound and deadline-free contexts, contexts cancelled during the call, repeated calls) against fresh Spy answers of the same shapes or any error of the set: the inner sees the caller's arguments, context values, Err and Deadline; the caller gets exactly the inner's answer, also when its context was cancelled while the inner took the call (a call that took effect is not reported as cancelled). Once a call returned, the caller's slices are poisoned (events, rows, IDs, shard numbers, strings, payload bytes): a decorator that reads a kept event later, or hands a poisoned value to the inner store on any later call, its own reads included, fails, without the race detector. At the end of the rule every caller's value must still be as the caller left it, so a decorator that wrote into a kept slice, during a later call or from a goroutine, fails; nested slices are nil, empty or short in turn. The decorator's own reads (of what it resumes, say) are not counted as the caller's forward; any write is.
	RuleDecDifferential = "differential"
	// RuleDecForward, followed by a method name: one call with distinctive arguments reaches the inner once, unchanged, with the caller's context values; results come back unchanged.
	RuleDecForward = "forward/"
	// RuleDecError, followed by a method name: each error of the set (every sentinel, bare and wrapped, a conflict with its fields, the context errors, a joined and a private one) comes back as the very value, after one inner call.
	RuleDecError = "error/"
)
