// Package otelstore instruments a workflow event store ([New]) and a
// transcript keyspace ([NewKeyspace]) with OpenTelemetry: a span and a
// duration point for every call, and workflow and activity lifecycle
// metrics for every event that commits.
//
//	store, err := otelstore.New(eventstore.NewMemory(),
//		otelstore.WithMeterProvider(mp),
//		otelstore.WithTracerProvider(tp),
//		otelstore.WithNamespace("payments"))
//
// # What the decorators do
//
// A decorator implements exactly the optional capabilities of the store it
// wraps ([eventstore.Outbox], [eventstore.ShardOwner]), forwards every call
// once with the caller's arguments and a context carrying the call's span,
// and returns the inner results and error values unchanged. Every method
// that can fail is timed and traced under its [Operation]; the timed window
// is the inner call alone. After an append committed, its events are
// observed: workflow counters, and the batch for the [pairing.Tracker],
// which joins facts whatever order appends return in (see [New]) and rebuilds each
// run as a trace: a run span and its activity spans with the times history
// recorded ([WithTimelineSpans]). A process that restarts or adopts shards
// needs nothing more: an append past what its tracker has seen of a
// workflow has that workflow's history read once from the inner store, in
// the background, so completions, durations and spans stay exact (a gap
// is filled, not waited for; see [New]); [Resume] is a warm-up that makes
// the gauges right before the first write. The keyspace decorator turns
// committed agent transcripts into GenAI telemetry by the GenAI
// conventions: token usage, tool calls, one invoke_agent span per attempt
// with its model-call and tool spans, and, opt-in, log records (see
// [NewKeyspace]; package genai makes them and documents them); these
// carry the schema URL of the conventions' version that defines them. IDs go on spans only, never on metrics; no payload,
// input, result or transcript text goes into an attribute unless
// [WithContentCapture] lets it onto a tool span.
//
// # Options
//
// Each thing is said once. The options both constructors take
// ([SharedOption]) are the providers, the namespace, the extra attributes,
// db.system.name, the span filter and name formatter, the error classifier,
// the conflict status and exception events. [New] adds the tracker's
// ([WithPairing], or the settings of the tracker it makes:
// [WithTimelineSpans], [WithTypeCardinalityLimit]), the shard count
// ([WithShardCount]; a ShardCount method of the store says it too) and
// [WithResumeReports]; [NewKeyspace] adds the GenAI ones. An option New
// cannot honour beside another (a tracker setting beside [WithPairing])
// or a bad attribute key is reported to the error handler, never a failed
// start. One option is engine behaviour, not telemetry: [WithOutboxWake]
// (the store contract names it) wakes a dispatcher after a commit that
// staged rows; an engine may as well wake its dispatcher itself once
// AppendWithOutbox returned. Names kept for earlier callers are marked
// Deprecated and say their replacement.
//
// # Semantic conventions
//
// Keys the conventions define (db.operation.name, db.system.name,
// error.type, the exception event) come from semconv v1.43.0, the newest in
// the OTel release this module requires; meters and tracers carry its
// schema URL and [Version]. Names it does not define keep the aion. prefix.
// Spans are database client spans named "{db.operation.name}" ("append"),
// or "{db.operation.name} {target}" when [WithAttributes] gives
// db.collection.name or db.namespace: the decorators cannot know the table
// or database behind a store (aion.namespace is a tenant, not a database),
// so they never set those keys themselves. [WithDBSystem] names the
// database ("postgresql" for a pgstore keyspace); by default db.system.name
// is "aion.eventstore" or "aion.keyspace", since the conventions' only
// fallback, other_sql, would claim an SQL database. Spans are created with
// db.operation.name and db.system.name, where a sampler sees them. A
// failed call gets error.type and status Error, no exception event unless
// [WithExceptionEvents] (the current guidance on recording errors). A
// sequence conflict is a failed call, as the conventions say;
// [WithConflictAsError](false) makes it an expected answer instead.
//
// # Hostile values
//
// Every string a caller or a store controls is cleaned before it reaches an
// attribute: invalid UTF-8 becomes U+FFFD and the value is cut to 256 bytes
// (types, the namespace, the db.system.name, [WithAttributes] values,
// classifier results); a failed call's error text on its span is cleaned
// the same way and cut to 1024 bytes. Past [WithTypeCardinalityLimit]
// distinct types, new ones are recorded as "_other", and past 64 distinct
// classifier results, new ones as "_OTHER". No value can make an export or
// a scrape fail.
//
// # Concurrency, limits and errors
//
// The decorators are safe for concurrent use whenever the inner store is.
// The call path takes no lock of the decorator's; an append's observation
// takes the pairing tracker's, never while user code runs. With a tracer
// provider that records nothing (trace/noop, or the global default before
// a program installs one) a call starts no span and allocates nothing of
// its own. Memory is
// bounded by the cardinality limits and the tracker's bounds. The constructors
// fail only for a nil inner store ([ErrNilStore]) or an option they cannot
// honour ([ErrInvalidOption]); a bad [WithAttributes] key is dropped and
// reported, never a failed start. Telemetry trouble goes to otel.Handle and
// never fails or slows a store call: a panic of user code on the call path
// (a span filter, classifier, sampler, span processor or instrument) is
// reported there too and the call goes on. A panic in the inner store ends
// the span with status Error and error.type _OTHER, then goes on.
//
// # Telemetry catalog
//
// Every instrument carries aion.namespace ([WithNamespace], for both
// decorators); the others' attributes follow. Durations are
// seconds: store and keyspace calls on buckets from 100 µs to 10 s,
// activities and runs from 5 ms to a day. A Prometheus exporter (the OTel
// Go one, or the Collector's as configured in collector-config.yaml) turns
// dots into underscores and appends _total to counters and _seconds to
// durations: aion_inflight_activities, aion_activities_completed_total,
// aion_activity_duration_seconds.
//
//	aion.store.operation.duration         histogram  db.operation.name, db.system.name, error.type (failures)
//	aion.workflows.started                counter    aion.workflow.type
//	aion.workflows.completed              counter    aion.workflow.status
//	aion.workflows.reopened               counter
//	aion.signals.delivered                counter    aion.signal.delivery
//	aion.schedules.fired                  counter
//	aion.workflow.duration                histogram  aion.workflow.type, aion.workflow.status
//	aion.activities.dispatched            counter    aion.activity.type
//	aion.activities.completed             counter    aion.activity.type, aion.activity.outcome
//	aion.activities.retried               counter    aion.activity.type
//	aion.activity.duration                histogram  aion.activity.type, aion.activity.outcome
//	aion.inflight_activities              up-down    aion.activity.type
//	aion.activity.oldest_inflight_age     gauge      aion.activity.type: now minus the oldest dispatch in flight, 0 when none
//	aion.activity.wait.duration           histogram  aion.activity.type: dispatch to the outbox claim, once per dispatch
//	aion.activity.oldest_waiting_age      gauge      aion.activity.type: the oldest row staged and not claimed
//	aion.activity.pairing.evicted         counter    in-flight activities the tracker's bound evicted
//	aion.workflow.pairing.evicted         counter    open runs the bound evicted
//	aion.pairing.forgotten                counter    facts dropped while waiting for a partner
//	aion.pairing.resumed                  counter    workflows a resume read; error.type for failed reads
//	aion.pairing.released                 counter    entries given up with a shard
//	aion.keyspace.operation.duration      histogram  db.operation.name, db.system.name, error.type
//	aion.keyspace.append.batch_size       histogram  events per committed AppendEvents
//
// The aion.activit*, aion.inflight_activities, aion.workflow.duration and
// pairing instruments come from the [pairing.Tracker] (instrumentation
// scope .../pairing; the others' scope is this package's import path),
// which also makes the timeline spans (see package pairing). error.type is
// sequence_conflict, invalid_token, not_found, not_owner,
// invalid_argument, unsupported, canceled, deadline_exceeded or _OTHER,
// unless [WithErrorClassifier] refines it. Spans are named by the [Operation]
// constants. The GenAI instruments, spans and log records of a keyspace are
// listed on [NewKeyspace].
package otelstore
