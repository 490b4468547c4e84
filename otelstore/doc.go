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
// observed: workflow counters, and activity dispatches and terminals for the
// [pairing.Tracker]. Batches of one workflow are observed in history order
// (see [New]).
//
// IDs go on spans only, never on metrics. No payload, input, result or
// transcript text is ever put in an attribute.
//
// # Hostile values
//
// Every string a caller or a store controls is cleaned before it reaches an
// attribute: invalid UTF-8 becomes U+FFFD and the value is cut to 256 bytes
// (workflow and activity types, the namespace, [WithAttributes] values,
// classifier results); the error text a failed call puts on its span (the
// exception event and the status description) is cleaned the same way and
// cut to 1024 bytes. Past [WithTypeCardinalityLimit] distinct types, new
// ones are recorded as "_other", and past 64 distinct classifier results,
// new ones as "_OTHER". So no value can make an export or a scrape fail.
//
// # Concurrency and limits
//
// The decorators are safe for concurrent use whenever the inner store is.
// The call path takes no lock except, for an append, a short lock (sharded
// by workflow) around its observation, and the pairing tracker's. Memory is bounded: the
// type caches by the cardinality limits, the pairing tracker by its own
// bound, and what waits for history order by the appends in flight (at
// most 1024 events per workflow; past that, see [New]).
//
// # Errors
//
// The constructors fail only for a nil inner store ([ErrNilStore]) or an
// option they cannot honour ([ErrInvalidOption]). Telemetry trouble (an
// instrument that cannot be created) goes to otel.Handle and never fails or
// slows a store call. A panic in the inner store ends the span with status
// Error and the duration point with error.type _OTHER, then goes on.
package otelstore
