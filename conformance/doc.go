// Package conformance holds reusable contract suites for the interfaces
// aionotel builds on, in the manner of testing/fstest.TestFS and
// golang.org/x/net/nettest.TestConn: plug your own event store or
// transcript keyspace (Postgres, FoundationDB, ...) under aionotel, or write
// your own decorator of an event store, run the matching suite in your
// tests, and know it behaves as the rest of aionotel assumes.
//
// There are three suites:
//
//   - [TestKeyspace] for a [keyspace.Store];
//   - [TestEventStore] for an [eventstore.Store], with its optional
//     [eventstore.Outbox] and [eventstore.ShardOwner] capabilities;
//   - [TestDecorator] for a function that wraps an [eventstore.Store] (as
//     otelstore.New does), run against a recording [Spy].
//
// # Using the suites
//
// Call a suite from a test of your package with a factory that makes a
// fresh, empty instance; every rule is a named subtest run on its own
// instance, so go test -run 'TestConformance/list-order' runs one rule:
//
//	func TestConformance(t *testing.T) {
//		conformance.TestKeyspace(t, func(t *testing.T) keyspace.Store {
//			return mykeyspace.New(t.TempDir())
//		})
//	}
//
// The factory runs on the subtest's *testing.T, so it may call t.Fatal and
// register t.Cleanup to close what it opened.
//
// Each suite also has an error-returning core, [CheckKeyspace],
// [CheckEventStore] and [CheckDecorator], which runs the same rule table and
// returns nil or the errors.Join of one *[RuleError] per broken rule. It
// never stops at the first failure. [RuleErrors] takes the result apart;
// a RuleError wraps the implementation's own error where there was one, so
// errors.Is still reaches eventstore.ErrSequenceConflict and friends. The
// cores are what the suites' own tests use to prove that each rule catches
// the bug it is meant to catch.
//
// # What the keyspace suite checks
//
// Every rule of the keyspace contract, each a subtest on a fresh store:
//
//   - contiguous-seqs: StoreSeq from 0, one after another, across appends;
//   - head: 0 for an unwritten stream, the record count after appends,
//     sibling streams untouched;
//   - batch: the i-th event at expectedSeq+i, the new head returned, order
//     kept, records self-describing (Event.StoreSeq == StoreSeq, Persisted);
//   - conflict-found-is-actual-head: a stale, consumed or ahead
//     expectedSeq, also on an unwritten stream, gives a
//     *eventstore.SequenceConflictError whose Found is the real head;
//   - conflicted-batch-writes-nothing: heads, records and listings are
//     identical after a refused batch;
//   - mixed-streams-refused: a batch whose last event differs in workflow,
//     run, activity or attempt matches [keyspace.ErrMixedStreams], and
//     neither stream changes;
//   - ephemeral-refused: [keyspace.ErrEphemeral], nothing written;
//   - empty-batch-noop: returns expectedSeq, whatever it is, writes nothing;
//   - attempts-disjoint and run-axis: two attempts, or two runs with the
//     same activity and attempt, are two streams, each starting at 0;
//   - list-order: by activity then attempt, compared as numbers;
//   - list-run-scoping: never another run's or another workflow's streams;
//   - empty-listings: an unknown workflow, an unwritten run;
//   - read-from-resume: fromSeq and limit (limit <= 0: all), empty past the
//     head and for an unwritten stream;
//   - records-are-copies: mutating the appended slice, a returned record
//     or a returned listing changes nothing stored;
//   - concurrent-appends: eight goroutines racing at one expectedSeq,
//     round after round: exactly one wins each round and every loser is
//     told the winner's head; then eight free-running writers with a
//     read-head-and-retry loop land every event exactly once, contiguously;
//   - context-cancelled: every method answers a cancelled context with an
//     error matching context.Canceled, and the append writes nothing;
//   - zero-ids-refused: a zero workflow or run ID in AppendEvents matches
//     [eventstore.ErrInvalidArgument], nothing written;
//   - append-event: the [keyspace.AppendEvent] convenience returns the
//     assigned StoreSeq.
//
// It does not check what the contract leaves to the implementation: the
// cost bounds of ReadFrom and ListStreams (benchmark those), durability
// across restarts, how Head, ReadFrom and ListStreams treat zero IDs, or the
// text of errors.
//
// # What the event store suite checks
//
// What the documentation of [eventstore.Store] and its types promises for
// any store:
//
//   - append-conflict-found-is-actual-head: a stale or ahead expectedSeq
//     gives a *eventstore.SequenceConflictError whose Found is the history
//     length;
//   - append-conflict-writes-nothing: histories, heads, listings and run
//     chains are unchanged after a refused append;
//   - seq-stamping: Seq is 1-based and contiguous whatever the caller put
//     there, a zero envelope WorkflowID is filled in, a zero RecordedAt is
//     set and a given one kept, and the caller's slice is not touched;
//   - zero-token-refused: [eventstore.ErrInvalidToken], even for an empty
//     batch, nothing written;
//   - bad-input-refused: a zero workflow, a nil event, a pointer event, an
//     event kind from outside the package, an envelope of another workflow,
//     a zero run ID: [eventstore.ErrInvalidArgument], nothing written;
//   - empty-append-noop: at the head or not, nothing written;
//   - read-history, read-history-from: content and envelopes, from any
//     fromSeq; empty, without error, for an unknown workflow;
//   - run-chain: across continue-as-new, oldest first, with status, first
//     and last Seq, StartedAt, and ClosedAt zero exactly while open;
//   - listings-follow-lifecycle: ListWorkflowIDs, ListActive and ListPaused
//     through start, pause, resume, completion, reopening, failure,
//     cancellation and time-out;
//   - stream-heads: each workflow once, with its history length;
//   - query: by type, by status, both, with Limit, the zero filter, and the
//     summary fields;
//   - timers-fencing: due when FireAt <= asOf, earliest first; re-arming
//     replaces; a retirement naming an old arming is superseded and removes
//     nothing; then retired, then absent; a zero workflow is
//     ErrInvalidArgument;
//   - packages-and-routes: replacing, routing, re-routing replaces,
//     [eventstore.ErrNotFound] for a package the store does not hold,
//     ErrInvalidArgument for an empty workflow type;
//   - context-cancelled: every error-returning method, found by reflection
//     over the interfaces, answers a cancelled context with an error
//     matching context.Canceled and writes nothing.
//
// Then, only for a store that implements the capability (discovered by
// type assertion; otherwise the subtests are skipped with a message saying
// why, and the core counts them as passed):
//
//   - outbox/append-atomic: a refused or conflicting AppendWithOutbox
//     stages no row and writes no event; a successful one commits both;
//   - outbox/claim: oldest first, the limit honoured, a non-positive limit
//     refused, CountClaimedOutboxRows following;
//   - outbox/rearm: a re-armed row is pending and claimable again; a row
//     the store does not hold is ErrNotFound;
//   - outbox/settle-cancelled: pending and claimed rows stop being
//     claimable and counted; a missing row is ErrNotFound;
//   - outbox/settle-workflow: exactly the workflow's open rows' keys, not
//     another workflow's, nothing the second time;
//   - shardowner/acquire-one, shardowner/acquire-many: after an election
//     IsCurrentOwner is true and PublishShardOwner succeeds;
//   - shardowner/publish-requires-acquire: [eventstore.ErrNotOwner];
//   - shardowner/negative-shard-refused: a negative shard, out of range for
//     any store, is ErrInvalidArgument and never owned;
//   - shardowner/nil-scope-lists-every-shard: SetOwnedShards(nil), and
//     widening that scope, lists every workflow.
//
// It does not check what is left to the store: the order of
// ListWorkflowIDs, ListActive, ListPaused, StreamHeads, Query and the
// package listings (compared as sets); whether a history must begin with
// WorkflowStarted; whether a workflow between continue-as-new and its next
// start counts as active; what deleting a routed package does; shard
// counts, the upper end of the shard range and scoping to particular shards
// (only shard 0, which every partitioned store has, and the negative shard,
// which none has, are used); whether returned events
// alias the store's memory; and how a store treats arguments its
// documentation does not mention.
//
// # What the decorator suite checks
//
// For each of the four capability combinations of a [Spy] (store, outbox,
// shardowner, outbox+shardowner): the wrapped value implements exactly the
// inner's optional interfaces; Unwrap() eventstore.Store returns the inner
// store; every method of the interfaces, found by reflection so that a
// method added later is covered without touching the suite, reaches the
// inner store exactly once with its arguments unchanged and no other inner
// call, the context the inner sees carries the caller's context values, and
// the results come back unchanged; and with a sentinel error set on the spy,
// every error-returning method returns that very value. Arguments are
// generated by reflection too; a parameter type the generator does not know
// fails the rule with a message naming it, so a new method is noticed.
//
// It does not check what a decorator adds (spans, metrics): test that with
// the [Spy] and the OpenTelemetry SDK's in-memory readers.
//
// # The Spy
//
// [Spy] is a recording [eventstore.Store] with a chosen set of
// [Capabilities]. It logs every [Call] (method, context, arguments,
// results), answers with distinctive defaults that a decorator which forgot
// to forward would not invent (IsCurrentOwner false, AcquireOwnedShard and
// PublishShardOwner ErrNotOwner, SettleOutboxRowCancelled ErrNotFound,
// one-element results from every read), and can be told to fail every
// method with one error ([Spy.SetError]) or to return other results
// ([Spy.SetResults]).
//
// # Concurrency, timeouts and isolation
//
// A suite runs its rules one after another; only the concurrency rule of
// the keyspace suite calls the store from several goroutines, and it is
// much sharper under the race detector (go test -race). The Spy is safe for
// concurrent use; the suites themselves must not be run concurrently on
// one store.
//
// A watchdog bounds every rule ([DefaultRuleTimeout], or
// [WithRuleTimeout]): the rule's context carries the deadline, and a rule
// still running then fails with [ErrRuleTimedOut] while the suite moves on.
// A call that never returns leaves its goroutine behind; release it in the
// store's cleanup. A panic in the implementation, in the factory or in wrap
// fails that rule with [ErrRulePanicked], a runtime.Goexit (t.Fatal called
// off the test goroutine) with [ErrRuleAborted], and the suite goes on.
//
// Rules use fresh random workflow and run IDs and look only at the IDs they
// made, but the outbox rules claim every pending row, so a factory must
// return a store no one else writes to while the rule runs.
package conformance
