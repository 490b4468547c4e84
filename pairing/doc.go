// Package pairing tracks activities from dispatch to their first terminal and
// runs from start to close, and turns them into OpenTelemetry metrics and
// spans: activities in flight now and the age of the oldest of each type,
// dispatched, completed (by outcome) and retried, how long each took and how
// long each run took, what the memory bound dropped; and the timeline, one
// span per run and per activity, started and ended at the times history
// recorded.
//
// # Use
//
// The otelstore decorator feeds a [Tracker] from the events that commit:
// WorkflowStarted opens a run ([Tracker.RunStarted]), ActivityScheduled is a
// dispatch, ActivityCompleted, a terminal ActivityFailed, ActivityCancelled
// and ActivityTimedOut are terminals, a retryable ActivityFailed is a retry,
// and a run's closing event closes it ([Tracker.RunClosed],
// [Tracker.RunContinued]), abandoning its activities still in flight.
// Several decorators may share one tracker (otelstore.WithPairing), or a
// program may drive one directly with a [Key] per activity. Each method
// documents its rule: a duplicate changes nothing, the first terminal wins,
// a terminal with no live entry is a no-op, so the gauge neither leaks nor
// underflows. A Key is (namespace, workflow, run, activity): a
// continue-as-new chain keeps its workflow ID and restarts activity
// positions at 0. The empty namespace is "default".
//
// # Timeline
//
// On by default ([WithTimelineSpans], [WithTracerProvider]). A run span
// ("workflow <type>") starts at RunStarted and ends at the close; an
// activity span ("activity <type>", its child) starts at the dispatch and
// ends at the first terminal, with retries as events and links to the store
// calls (the spans in the contexts passed in). Both are of kind internal.
// Trace identity: a run's trace ID is a hash of (namespace, workflow, run),
// so processes that each see part of a run agree without shared state, and
// each run of a chain is its own trace, linked to the next. The run span's
// parent is a derived anchor that is never exported; an activity whose run
// span this tracker does not hold hangs under the anchor, in the same trace.
// The anchor is marked sampled, so a parent-based sampler keeps every
// timeline; a ratio sampler applies only through [WithTimelineSpans](false)
// or a custom sampler. The cost of holding spans open: each open run and
// live activity keeps its span, about 1 KiB with the SDK when sampled; an
// evicted or never-closed span is dropped unended, so it is not exported.
//
// # Concurrency
//
// A Tracker is safe for concurrent use and must not be copied. Its live
// entries sit under one mutex, which no call holds while it runs an
// instrument, a tracer or other user code, and every critical section
// unlocks with defer, so a panic (from a misbehaving provider, say) never
// leaves it held. With the timeline off (or a trace/noop provider),
// Dispatched and Finished do not allocate in steady state.
//
// # Limits
//
//   - Memory: at most [WithMaxInFlight] live entries, activities and open
//     runs together; past it the oldest is evicted and counted on
//     aion.activity.pairing.evicted or aion.workflow.pairing.evicted.
//   - Cardinality: namespaces, activity and workflow types are cleaned
//     (invalid UTF-8 replaced by U+FFFD, cut to 256 bytes) and bounded
//     ([WithNamespaceCardinalityLimit], [WithTypeCardinalityLimit]), past
//     which they are recorded as "_other"; pairing stays exact per key. IDs
//     go on spans only, never on metrics.
//   - Per process: the gauges count what this process saw dispatched and
//     not finished, from zero on restart; for enforcing a limit read the
//     durable count of claimed outbox rows instead.
//   - Times are history's: a zero time is taken as now. The age gauge reads
//     the clock at each collection and never goes below 0.
//   - Errors: telemetry trouble never fails a call; it goes to otel.Handle
//     (an instrument that cannot be created becomes a no-op one). [New]
//     fails only on a misused option ([ErrInvalidOption]).
package pairing
