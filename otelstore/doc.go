// Package otelstore instruments a workflow event store and a transcript
// keyspace with OpenTelemetry: a span and a latency histogram point for every
// store call, and workflow and activity lifecycle metrics for every event
// that commits.
//
//	store, err := otelstore.New(eventstore.NewMemory(),
//		otelstore.WithMeterProvider(mp),
//		otelstore.WithTracerProvider(tp),
//		otelstore.WithNamespace("payments"))
//
// # Forwarding
//
// The decorator returned by [New] implements exactly the optional
// capabilities of the store it wraps: [eventstore.Outbox] only if the inner
// store is an Outbox, [eventstore.ShardOwner] only if it is a ShardOwner.
// Hiding a capability would silently switch a feature off (an engine that
// stages fan-out rows through an Outbox would stop staging them); claiming
// one the inner store lacks would be a lie. Every method reaches the inner
// store exactly once with the caller's arguments, and the inner results and
// error values come back unchanged: the decorator never wraps an error, so
// errors.Is, errors.As and == all behave as without it. The context passed
// down is the caller's, carrying the call's span. Unwrap returns the inner
// store.
//
// # Spans and the duration metric
//
// Every method that can fail is timed and traced. The operation name
// ([Operation]) is the method's snake_case name; the span is named
// "aion.store <operation>" ("aion.keyspace <operation>" for [NewKeyspace]),
// of kind client, with db.operation.name, aion.namespace and, where the call
// has them, aion.workflow.id, aion.store.expected_seq, aion.store.event_count
// and aion.store.outbox_row_count. A failed call sets error.type, records the
// error and sets the span status to Error; a sequence conflict adds
// aion.store.found_seq. The three ShardOwner methods that cannot fail
// (SetOwnedShards, ExtendOwnedShards, IsCurrentOwner) are forwarded only.
//
// The duration, in seconds, goes to aion.store.operation.duration (or
// aion.keyspace.operation.duration) with aion.namespace, db.operation.name
// and, on failure, error.type. It is recorded with the span's context, so an
// exemplar points at the call's own span. For appends the timed window is the
// inner call alone, not the lifecycle bookkeeping that follows it.
//
// IDs go on spans only, never on metrics. No payload, input, result, error
// detail or transcript text is ever put in an attribute.
//
// error.type is sequence_conflict, invalid_token, not_found, not_owner,
// invalid_argument, unsupported, canceled, deadline_exceeded or _OTHER; a
// [WithErrorClassifier] function may refine it. A panic in the inner store
// ends the span with status Error and the metric with error.type _OTHER, and
// then goes on unwinding.
//
// # Lifecycle metrics
//
// Only after the inner Append or AppendWithOutbox succeeded are the events it
// committed observed:
//
//   - WorkflowStarted counts aion.workflows.started by aion.workflow.type;
//   - the five run-closing events count aion.workflows.completed by
//     aion.workflow.status (completed, failed, cancelled, timed_out,
//     continued_as_new) and settle that run's activities still in flight with
//     outcome abandoned, so a run that ends without activity terminals leaks
//     no in-flight slot;
//   - WorkflowReopened, SignalReceived (delivery "resident") and
//     ScheduleTriggered count their counters;
//   - ActivityScheduled is a dispatch for the [pairing.Tracker];
//     ActivityCompleted, a Terminal ActivityFailed, ActivityCancelled and
//     ActivityTimedOut are its terminals (succeeded, failed, cancelled,
//     timed_out); a Retryable ActivityFailed counts a retry and leaves the
//     activity in flight.
//
// Pairing keys are (namespace, workflow, run, activity), the workflow being
// the one the append names. An event with a zero RecordedAt is observed at
// the decorator's clock.
//
// Batches are observed in history order per workflow. Two appends to one
// workflow can be in flight together and return in either order; a batch
// that committed is therefore observed only once no append of the same
// workflow with a smaller expected seq is still in flight in this decorator
// (the last of them to return observes the waiting batches in order).
// Otherwise a WorkflowCompleted seen before the ActivityCompleted that
// precedes it would settle that activity as abandoned, and an
// ActivityScheduled seen after its ActivityCancelled would leak an in-flight
// slot. Appends made by other processes are not waited for.
//
// # Cardinality
//
// Workflow and activity types are user data. Past [WithTypeCardinalityLimit]
// distinct values (default [DefaultTypeCardinalityLimit]) later new values
// are recorded as "_other"; an empty type is recorded as "_unknown". Custom
// error types are bounded the same way (64, then _OTHER).
//
// # Performance
//
// New precomputes, per operation, the span name, the span start options and
// the metric options of a successful call. Span attributes are built only
// when the span is recording, and set in one SetAttributes call (the
// operation's own attributes followed by the per-call ones), so an unsampled
// span costs no attribute work at all; the price is that a sampler does not
// see them at span start (it sees the span name, which names the operation).
// A call whose span is filtered out by [WithSpanFilter] allocates nothing in
// the decorator. The benchmarks in bench_test.go compare each configuration
// with a hand-written baseline doing the same SDK work.
//
// # Errors and concurrency
//
// Telemetry trouble (an instrument that cannot be created) goes to
// otel.Handle and never fails or slows a store call. The decorators are safe
// for concurrent use whenever the inner store is; they hold no lock on the
// call path except inside the pairing tracker. Both constructors fail only
// for a nil inner store.
package otelstore
