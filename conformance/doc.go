// Package conformance holds reusable contract suites, in the manner of
// testing/fstest.TestFS: plug your own event store or transcript keyspace
// under aionotel, or write your own decorator, run the matching suite in
// your tests, and know it behaves as the rest of aionotel assumes.
// [TestKeyspace] checks a [keyspace.Store], [TestEventStore] an
// [eventstore.Store] with its optional [eventstore.Outbox] and
// [eventstore.ShardOwner], [TestDecorator] a function that wraps a store (as
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
// its rules (t.Skip); [WithRequiredCapabilities] makes it a failure.
//
// # Rules
//
// Fixed rules check one clause each, with examples. Seeded rules
// ([RuleKSModel], [RuleESModel], [RuleDecDifferential], the concurrency
// rules) generate operation sequences from a seed and compare every result
// with a small reference model written from the contract text (never from
// the Memory stores), at sizes past plausible internal boundaries; IDs come
// from the seed too, so no verdict depends on how random IDs sort. A failure
// names the seed and the failing operation, and the model rules shrink it to
// a short reproduction on fresh stores. Replay with -conformance.seed=N (or
// [WithSeed]); -conformance.long, -conformance.scale=N or [WithScale] run
// longer.
//
// # Concurrency
//
// Rules run one after another; the concurrency rules race eight goroutines
// at one expectedSeq, round after round, and check atomicity from outside:
// one winner per round, losers told the winner's head, the stream exactly
// the winners' whole batches. A black-box rule finds a non-atomic commit
// only when the schedule interleaves the racers inside it: it cannot prove
// atomicity, and a store that serialises everything on one lock passes
// whatever its code would do under another schedule. Run it under -race,
// which also reports data races, and with -count for more schedules.
//
// # Limits
//
// The suites check what the contracts promise for any implementation, not
// what they leave open: listing and Query order, histories not starting
// with WorkflowStarted, the gap after continue-as-new, deleting a routed
// package, shard counts beyond shard 0, cost bounds (benchmark those),
// durability across restarts, error texts. A factory must return a store no
// one else writes to while a rule runs (the outbox rules claim every row).
// A watchdog bounds each rule ([WithRuleTimeout]); a panic or runtime.Goexit
// in the implementation fails that rule ([ErrRulePanicked],
// [ErrRuleAborted]) and the suite goes on.
package conformance
