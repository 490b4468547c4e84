// Package conformance holds reusable contract suites, in the manner of
// testing/fstest.TestFS: [TestKeyspace] checks a [keyspace.Store],
// [TestEventStore] an [eventstore.Store] with its optional
// [eventstore.Outbox] and [eventstore.ShardOwner] (with [WithNodes], also
// elections between two nodes of one backend), [TestDecorator] a function
// that wraps a store (as otelstore.New does), run against a recording
// [Spy], and [TestTelemetry] what such a decorator emits.
//
// # Use
//
// Call a suite with a factory of fresh, empty instances; every rule is a
// named subtest (the Rule* constants) on its own instance:
//
//	conformance.TestKeyspace(t, func(t *testing.T) keyspace.Store { return mykeyspace.Open(t) })
//
// [CheckKeyspace], [CheckEventStore] and [CheckDecorator] are the
// error-returning cores: they never stop at the first failure and return
// one *[RuleError] per broken rule, joined ([RuleErrors]). A missing
// capability skips its rules; [WithRequiredCapabilities] makes it a failure.
// Retention is an optional capability too ([ClosedPruner], [RunDeleter]).
//
// # How
//
// Each store suite is one executable model written from the contract text
// and one generator. The model rule draws long operation sequences from a
// seed; every fixed rule is a short script of the same operations, judged
// by the same model. The generators set every field of every event,
// content, row and record by reflection (a field added later is covered
// without a new rule), with hostile strings, key shapes a careless store
// merges, numbers next to 2^32 and 2^63, sizes past 4,096 and 65,536, and
// contexts cancelled before or during a call. Every call checks that the
// caller's arguments are left as given, every answer is scribbled on and
// read again, every refusal must write nothing. Once a call returned, its
// caller's slices are overwritten with marks no generator draws: a store
// that kept them answers with a mark later, a decorator that reads a kept
// event, hands a mark on or writes over a mark fails, without the race
// detector.
//
// A write whose context ends while it runs may commit and still return the
// context's error from a store (the same append again settles it, which
// the models do); never from a decorator whose inner store answered (rule
// differential). A failure names the seed and the operation, shrunk to a
// short reproduction; replay with -conformance.seed=N ([WithSeed]), run
// longer with -conformance.long ([WithScale]).
//
// The concurrency rules race real goroutines and judge what each caller
// was told against the final state, in the manner of a linearizability
// check (see each rule's doc). A black-box rule finds a non-atomic step
// only when the schedule interleaves the racers inside it, so the rules
// racing appends at one seq and claims go on drawing rounds for 250 ms
// (times the scale) after their minimum: a fast store's window of a few
// instructions is hit on a busy machine too, a database store pays only
// the minimum. Run the suites under -race and with -count for more
// schedules.
//
// # Limits
//
// The suites check what the contracts promise, not what they leave open:
// listing and Query order, histories not starting with WorkflowStarted,
// deleting a routed package, cost bounds (benchmark those), durability
// across restarts, error texts. [TestTelemetry] judges points on the
// catalog's attributes only, and not the pairing and resume counters, the
// outbox's wait and waiting age, the keyspace's telemetry, the timeline's
// links, racing appends of one workflow or restarts; it uses the OTel SDK,
// which this package, unlike the library's, imports. Under the race
// detector the seeded rules run shorter and the rule timeout doubles: run
// the suites without -race too. A panic or
// runtime.Goexit in the implementation fails that rule ([ErrRulePanicked],
// [ErrRuleAborted]).
//
// # Timeouts
//
// A watchdog bounds each rule ([WithRuleTimeout]), by progress: it fires
// only when no step of the rule (a call into the implementation, or a
// short batch of calls) returned for the whole timeout, so a busy machine
// makes a rule slower, never a failure; a call that hangs fails the rule
// with an error matching [ErrRuleTimedOut].
//
// # Self-tests
//
// The package's own tests run every suite against deliberately broken
// stores and decorators (one plausible bug each) and require each to be
// caught: the classes, the adversaries and two held-out sets, about 75 s
// of CPU, and three blind sets written from the docs alone, about 95 s more
// (2 cores, 2026-12). A plain go test ./... skips them; CI runs them,
// without -race, by setting an environment variable:
//
//	AIONOTEL_CONFORMANCE_SELFTEST=1 go test -run 'TestClassesCaught|TestAdversary|TestHeldOut|TestBlind' ./conformance
package conformance
