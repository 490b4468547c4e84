// Package pairing tracks activities from dispatch to their first terminal and
// turns the pairs into OpenTelemetry metrics: how many activities are in
// flight now, how many were dispatched, completed (by outcome) and retried,
// how long each took from dispatch to terminal, and how many the memory bound
// dropped.
//
// # Use
//
// The otelstore decorator feeds a [Tracker] from the events that commit
// (ActivityScheduled is a dispatch; ActivityCompleted, a terminal
// ActivityFailed, ActivityCancelled and ActivityTimedOut are terminals; a
// retryable ActivityFailed is a retry; a workflow terminal abandons the run);
// several decorators may share one tracker through otelstore.WithPairing. It
// can also be driven directly: create one with [New], then call
// [Tracker.Dispatched], [Tracker.Finished], [Tracker.Retried] and
// [Tracker.AbandonRun] with a [Key] per activity. Each method documents the
// rule it keeps: a duplicate dispatch changes nothing, the first terminal
// wins, a terminal with no live entry is a no-op, so the gauge can neither
// leak nor underflow.
//
// A [Key] is (namespace, workflow, run, activity). The run is part of it
// because a continue-as-new chain keeps its workflow ID and restarts activity
// positions at 0. Namespaces are isolated: the same IDs in two namespaces are
// two entries. The empty namespace is "default".
//
// # Concurrency
//
// A Tracker is safe for concurrent use and must not be copied; its zero value
// is not ready. Its live entries sit under one mutex, which no call holds
// while it runs an instrument or user code, and every critical section
// unlocks with defer, so a panic (from a misbehaving MeterProvider, say)
// never leaves it held. The attribute caches are lock-free once warm. In
// steady state Dispatched and Finished do not allocate; bench_test.go
// compares them with the bare SDK calls they make.
//
// # Limits
//
//   - Memory: at most [WithMaxInFlight] live entries; past it the oldest is
//     evicted and counted on aion.activity.pairing.evicted (see
//     [Tracker.Dispatched]). A steadily rising evicted counter means the bound
//     is too small or terminals are being lost.
//   - Cardinality: namespaces and activity types come from callers. Each is
//     cleaned before it becomes an attribute value (invalid UTF-8 replaced by
//     U+FFFD, cut to 256 bytes), then bounded: past
//     [WithNamespaceCardinalityLimit] namespaces and, per namespace,
//     [WithTypeCardinalityLimit] types, new values are recorded as "_other".
//     Only attributes are folded; pairing stays exact per key. Workflow and
//     run IDs never become metric attributes.
//   - Per process: the in-flight gauge counts what this process saw
//     dispatched and not finished, and starts from zero on restart. It is for
//     dashboards and alerts; to enforce a limit read the durable count of
//     claimed outbox rows ([eventstore.Outbox.CountClaimedOutboxRows]).
//   - Times are taken as given; the tracker never reads the clock.
//   - Errors: telemetry trouble never fails a call. An instrument the
//     MeterProvider cannot create is reported to otel.Handle and replaced by
//     a no-op one. [New] fails only on a misused option ([ErrInvalidOption]).
package pairing
