// Package conformance holds reusable contract suites, in the manner of
// testing/fstest.TestFS: [TestKeyspace] checks a [keyspace.Store],
// [TestEventStore] an [eventstore.Store] with its optional
// [eventstore.Outbox] and [eventstore.ShardOwner] (with [WithNodes], also
// elections between two nodes of one backend), [TestDecorator] a function
// that wraps a store (as otelstore.New does), run against a recording [Spy].
//
// [TestTelemetry] judges what such a decorator emits: every counter,
// gauge, duration and span of the otelstore catalog against a model of
// generated histories (see below).
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
// Retention (PruneClosed, DeleteRun) is an optional capability too: a store
// with the method of [ClosedPruner] or [RunDeleter] gets its rules.
//
// # How
//
// Each store suite is one executable model written from the contract text
// and one generator. The model rule draws long operation sequences from a
// seed; every fixed rule is a short script of the same operations, judged
// by the same model. The generators set every field of every event,
// content, row and record by reflection (a field added later is covered
// without a new rule), with hostile strings, key shapes a joined or
// case-folded key merges, numbers next to 2^32 and 2^63, sizes past 4,096
// and 65,536, and contexts cancelled before or during a call. Every call
// checks that the caller's arguments are left as given, every answer is
// scribbled on and read again, every refusal must write nothing. Once a
// call returned, its caller's slices are overwritten with marks no
// generator draws (events, rows, IDs, shard numbers, strings, payload
// bytes): a store that kept them answers with a mark later, a decorator
// that reads a kept event or hands a mark to the inner store fails,
// without the race detector.
//
// A write whose context ends while it runs may commit and still return
// the context's error from a store (the contract allows it: the same
// append again settles it, which the models do); never from a decorator
// whose inner store answered: that answer, nil included, is the caller's
// (rule differential, where the Spy cancels the caller's context once it
// has the call), and its telemetry is a success's (rule calls). A failure
// names the seed and the operation, shrunk to a short reproduction; replay
// with -conformance.seed=N ([WithSeed]), run longer with -conformance.long
// ([WithScale]).
//
// # Concurrency
//
// Rules run one after another; the concurrency rules race real goroutines
// and judge what each caller was told against the final state, in the
// manner of a linearizability check: eight appenders at one expectedSeq,
// round after round (one winner, the losers told its head); racers
// claiming the same outbox rows and re-arming some (each row to one
// claimant until re-armed); racers creating streams of one run while
// listing it (a listing shows every stream whose append returned before
// it started); and, between two nodes, a holder appending from several
// goroutines while the shard changes hands (every append it was told
// landed is in the new holder's first read after acquiring, every later
// one fails with ErrNotOwner). A black-box rule finds a non-atomic step
// only when the schedule interleaves the racers inside it: a store with a
// lock-free window between its check and its write passes whenever no
// racer lands in that window. Run the suites under -race and with -count
// for more schedules.
//
// Retries are not deduplicated: an accepted batch made again, identical,
// at the expectedSeq it was accepted at is a conflict like any stale one
// (rules retried-batch-conflicts, append-retried-identical-conflicts), as
// the eventstore and keyspace contracts state.
//
// # Telemetry
//
// [TestTelemetry] (core [CheckTelemetry]) drives a decorator, over a fresh
// [eventstore.Memory] and an SDK meter and tracer provider per rule, with
// histories drawn from the seed, and compares every counter, gauge,
// duration, store call and span with a model of those histories (rules
// RuleTel*). It uses the SDK (a ManualReader, metricdatatest and a
// tracetest.SpanRecorder), so this package, unlike the library's, imports
// the OTel SDK. It judges points on the catalog's attributes only (others,
// such as aion.namespace, are summed over) and does not judge the pairing
// and resume counters, the outbox's wait and waiting age, the keyspace's
// telemetry, the timeline's links, appends of one workflow racing each
// other (workflows race one another in rule concurrent) or restarts.
//
// # Limits
//
// Sizes come from the contracts and from the limits implementations
// plausibly have: the sizes-and-pages rules draw every page size at, below,
// above and at exact multiples (1,000 and 2,000 of a history, a stream,
// rows, due timers, workflows; 512 and 1,024 streams of one run; timer IDs
// of 65,537 bytes), and the model rules go past 4,096 and 65,536.
//
// The suites check what the contracts promise, not what they leave open:
// listing and Query order, histories not starting with WorkflowStarted,
// deleting a routed package, cost bounds (benchmark those), durability
// across restarts, error texts. Under the race detector the seeded rules
// run shorter (fewer random operations, the keyspace's long stream past
// 4,096 records instead of 65,536, no decorator slice past 65,536) and the
// rule timeout doubles: run the suites without -race too. A panic or
// runtime.Goexit in the implementation fails that rule ([ErrRulePanicked],
// [ErrRuleAborted]).
//
// # Timeouts
//
// A watchdog bounds each rule ([WithRuleTimeout], [DefaultRuleTimeout]),
// and it is progress-based: it fires only when no step of the rule (one
// call, or a short batch of calls, into the implementation) returned for
// the whole timeout. A busy machine that slows every call makes a rule
// slower, never a failure, however long the rule runs in total; a call
// that hangs fails the rule with an error matching [ErrRuleTimedOut] that
// says it timed out, apart from the failures of wrong answers.
//
// # Self-tests
//
// The package's own tests run every suite against deliberately broken
// stores and decorators (one plausible bug each) and require each to be
// caught. Those runs take nearly two minutes of CPU, so a plain
// go test ./... skips them; CI runs them, without -race, by setting an
// environment variable:
//
//	AIONOTEL_CONFORMANCE_SELFTEST=1 go test -run 'TestClassesCaught|TestAdversary' ./conformance
package conformance
