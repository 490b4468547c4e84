// Package otelworkflows instruments go-workflows
// (github.com/cschleiden/go-workflows, v1.2.0) with OpenTelemetry, at its
// storage interface: one call wraps any backend.Backend (SQLite, MySQL,
// Redis, in-memory) and a worker and client built on the result get the
// aionotel telemetry catalog, so the Grafana dashboard and alert rules of
// aionotel work on a go-workflows service unchanged.
//
//	b := otelworkflows.New(sqlite.NewSqliteBackend("workflows.sqlite"),
//		otelworkflows.WithMeterProvider(mp),
//		otelworkflows.WithTracerProvider(tp))
//	w := worker.New(b, nil)
//	c := client.New(b)
//
// The name follows OpenTelemetry Go contrib (instrumentation/<import
// path>/otel<name>, as otelgrpc and otelmongo): the path is that of the
// go-workflows module, not of its backend package, because the decorator
// reads the module's history, core and diag types too; the package is
// named after the engine.
//
// # Per call
//
// Every method is forwarded once, with its arguments, and its results and
// error come back unchanged; Tracer, Metrics, Options, FeatureSupported are
// the wrapped backend's. The value New returns has diag.Backend, and the
// GetFutureEvents of go-workflows' backend/test, exactly when the wrapped
// backend has them. Each method that can fail gets a client span named
// after its [Operation] (db.operation.name, the method's snake_case name)
// and a point of aion.store.operation.duration, with aion.namespace and, on
// failure, error.type: instance_not_found, instance_already_exists,
// instance_not_finished, not_supported, canceled, deadline_exceeded, else
// _OTHER. The spans carry go-workflows' own IDs: aion.workflow.id is the
// instance ID, aion.run.id the execution ID, aion.activity.id the schedule
// event ID.
//
// # Through pairing
//
// What a CompleteWorkflowTask commits to an instance's history is fed, at
// its sequence IDs, to a pairing.Tracker: WorkflowExecutionStarted starts
// a run (aion.workflows.started by type); WorkflowExecutionFinished closes
// it as completed, failed, or cancelled when its error is go-workflows'
// cancellation (workflow.Canceled, possibly wrapped); ContinuedAsNew closes
// it as continued_as_new (all on aion.workflows.completed); SignalReceived
// counts on aion.signals.delivered. ActivityScheduled dispatches an
// activity, ActivityCompleted and ActivityFailed settle it as succeeded or
// failed, and a run's close settles what is left as abandoned. go-workflows
// retries in the workflow: each attempt is its own ActivityScheduled with
// its own schedule event ID, so each attempt is a dispatch, a failed
// attempt a failed completion, and an attempt after the first counts on
// aion.activities.retried. Durations and spans take the history's
// timestamps. The activities a task schedules wait (pairing's Staged) until
// a GetActivityTask claims them (Claimed): aion.activity.wait.duration is
// go-workflows' activity time in queue. Its workflow task time in queue,
// from a task's first new event (a fired timer's due time) to the
// GetWorkflowTask that claims it, is aion.workflow.task.wait.duration
// (a histogram in seconds, the catalog's boundaries, by aion.namespace and
// aion.workflow.task.trigger, the first event's type; in the catalog as an
// engine module's instrument, which otelstore never records). Timers and
// sub-workflows carry positions only: a sub-workflow is a run of its own,
// with its own span; the catalog has no timer instrument.
//
// # Keys
//
// pairing keys a run by UUIDs and an activity by a number. Each execution
// (instance ID, execution ID) is keyed by a name-based UUID: version 5, in
// the name space 5b0e6f1c-8f3a-5d2e-9c41-0a7e2f6b9d13, of the instance ID's
// length (a uvarint), the instance ID and the execution ID. It is used as
// both workflow and run ID, since go-workflows numbers
// each execution's history from 1; an activity is its schedule event ID.
// Every process derives the same keys, so run trace IDs agree across
// restarts (BenchmarkExecutionKey measures the derivation). Run and
// activity spans carry the derived UUID as aion.workflow.id and aion.run.id
// and, with [WithTracerProvider] (not the global provider) and no
// [WithPairing], go-workflows' own IDs as go_workflows.instance.id and
// go_workflows.execution.id. A continue-as-new names the next execution's
// key as the next run's workflow and run (pairing.ContinuedAsNew), so the
// continued run span's next_run link points at the next execution's run
// span, in its own trace.
//
// # Traces
//
// Each execution's run span starts and ends at its history's start and
// close, its activity spans (children of it) at each activity's schedule
// and settling, in one trace per execution. For the run span to be a root,
// give the SDK tracer provider pairing's ID generator:
//
//	tp := sdktrace.NewTracerProvider(
//		sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)),
//		sdktrace.WithBatcher(exporter))
//
// Without it a run span is the child of a derived anchor span that is never
// exported (no API lets an instrumentation choose a root's IDs otherwise).
// The per-call spans are the caller's children, as any client span.
//
// # After a restart
//
// An execution first seen part-way through its history (a workflow task
// with earlier history, an activity task claimed or completed, of an
// execution this process has not seen start) has its history read once
// with GetWorkflowInstanceHistory, through the wrapped backend, off the
// caller's path, and joined as facts read back (pairing's Resume: counted
// nothing again), so the gauge, the durations and the spans of work that
// straddles a restart are right. [Flush] waits for the reads requested.
// One figure is not carried over: an activity scheduled before the restart
// and claimed after it records no aion.activity.wait.duration and is not
// among the waiting of aion.activity.oldest_waiting_age (pairing records a
// wait only for a dispatch it saw committed, since the earlier process may
// have recorded that activity's claim), where go-workflows' own
// activity.task.time_in_queue counts every claim.
//
// # When a call fails
//
// A backend may commit and still return an error (a network error or a
// timeout after the commit), so an error does not say whether a call's
// writes happened. Of the calls the decorator forwards, CompleteWorkflowTask
// is the one whose writes it observes: what a batch commits (a start, a
// signal, an activity's result, a close) reaches the tracker through it,
// whichever call wrote the event first (CreateWorkflowInstance,
// SignalWorkflow, CancelWorkflowInstance and CompleteActivityTask add
// events that a later workflow task commits to history, and that task's
// CompleteWorkflowTask observes them). So a CompleteWorkflowTask that
// returns an error has its batch checked, off the caller's path (one
// history read, from the batch's first sequence ID, through the wrapped
// backend, among the history reads and waited for by [Flush]): the batch is
// observed, as facts seen committing (counted, with its durations and
// spans), exactly when the history has every one of its events at its
// sequence ID with its own event ID. go-workflows gives each event it makes
// a new UUID, so the events of an attempt that did not commit are not
// found, even where its retry committed at the same positions: the retry is
// observed when it returns. A retry made only of events the task carried
// in (a signal, an activity's result) keeps their IDs and may be found by
// the failed attempt's check too; a batch is therefore observed once per
// execution and first sequence ID (each position of a history holds one
// batch), tracked for the executions that had a failed call (at most
// [DefaultMaxKnownInstances]). Reading the history back instead, as after a
// restart, would be wrong here: facts read back are counted nothing, and a
// batch lost to an error is one no other process observed. A check that
// cannot read the history (or finds the read queue full) reports to
// otel.Handle and forgets the execution, which is read back when next seen:
// its gauge and spans are then right, that batch's counters and durations
// are not recorded. A CompleteActivityTask that fails asks for the history
// read of an execution not seen from its start, as one that succeeds does.
// A GetWorkflowTask or GetActivityTask that fails hands the worker no task:
// the task is claimed again, and its wait recorded at that claim. The other
// calls feed the tracker nothing: their failure loses nothing.
//
// # Concurrency and limits
//
// The decorator is safe for concurrent use when the wrapped backend is.
// History reads: at most [WithHistoryReadConcurrency] at once (so as many
// histories in memory), at most [DefaultHistoryReadQueue] waiting (past it
// a read is dropped and done when the execution is next seen); at most
// [DefaultMaxKnownInstances] executions remembered as seen (past it a read
// may be repeated, never a figure counted twice). The tracker's own bounds
// hold the rest. Telemetry trouble goes to otel.Handle, never to the
// caller; a nil backend (or a nil pointer in the interface) gives
// [ErrNilBackend] from every call.
package otelworkflows
