// Package conformance holds reusable contract suites, in the manner of
// testing/fstest.TestFS: plug your own event store or transcript keyspace
// under aionotel, or write your own decorator, run the matching suite in
// your tests, and know it behaves as the rest of aionotel assumes.
// [TestKeyspace] checks a [keyspace.Store], [TestEventStore] an
// [eventstore.Store] with its optional [eventstore.Outbox] and
// [eventstore.ShardOwner] (and, with [WithNodes], elections between two
// nodes of one backend), [TestDecorator] a function that wraps a store (as
// otelstore.New does), run against a recording [Spy].
//
// # Use
//
// Call a suite with a factory of fresh, empty instances; every rule is a
// named subtest (the Rule* constants) on its own instance, and the factory
// runs on that subtest's *testing.T, so it may register t.Cleanup:
//
//	conformance.TestKeyspace(t, func(t *testing.T) keyspace.Store { return mykeyspace.Open(t) })
//
// [CheckKeyspace], [CheckEventStore] and [CheckDecorator] are the
// error-returning cores: their factories return a cleanup too, they never
// stop at the first failure, and they return the errors.Join of one
// *[RuleError] per broken rule ([RuleErrors]). A missing capability skips
// its rules; [WithRequiredCapabilities] makes it a failure.
//
// # How
//
// Each store suite is one executable model written from the contract text
// (never from the Memory stores) and one generator. The model rule draws
// long random operation sequences from a seed; every fixed rule is a short
// script of the same operations, judged by the same model. The generators
// set every field of every event, content, row and record by reflection (a
// field added later is covered without a new rule) with hostile strings and
// key shapes ("a/b"+"c" against "a"+"b/c", case, NUL, long shared prefixes),
// numbers and sizes next to 2^8, 2^16, 2^32 and 2^63 and past 4,096 and
// 65,536, and contexts cancelled before or during a call; every call checks
// the caller's arguments are left as given, every answer is scribbled on
// and read again, and every refusal must write nothing. IDs come from the
// seed, so no verdict depends on how random IDs sort. A failure names the
// seed and the operation, shrunk to a short reproduction: replay it with
// -conformance.seed=N (or [WithSeed]); -conformance.long (or [WithScale])
// runs longer.
//
// Retention (PruneClosed, DeleteRun) is an optional capability, not part of
// the store interfaces an engine calls: a store with the method of
// [ClosedPruner] or [RunDeleter] gets its rules, one without skips them.
//
// # Concurrency
//
// Rules run one after another; the concurrency rules race eight goroutines
// at one expectedSeq, round after round, and check atomicity from outside.
// A black-box rule finds a non-atomic commit only when the schedule
// interleaves the racers inside it: it cannot prove atomicity, and a store
// with a lock-free window between its check and its write passes whenever
// no racer lands in that window. Run the suites under -race and with
// -count for more schedules.
//
// # Limits
//
// The suites check what the contracts promise for any implementation, not
// what they leave open: listing and Query order, histories not starting
// with WorkflowStarted, deleting a routed package, cost bounds (benchmark
// those), durability across restarts, error texts. Under the race detector
// the seeded rules run shorter (a quarter to a half of the random
// operations, the keyspace's long stream past 4,096 records instead of
// 65,536, no decorator slice past 65,536) and the rule timeout doubles, so
// that they stay well inside it: run the suites without -race too. A watchdog bounds each rule
// ([WithRuleTimeout]); a panic or runtime.Goexit in the implementation
// fails that rule ([ErrRulePanicked], [ErrRuleAborted]) and the suite goes
// on.
package conformance
