// Package pairing tracks activities from dispatch to their first terminal and
// turns the pairs into OpenTelemetry metrics: how many activities are in
// flight now, how many were dispatched, completed (by outcome) and retried,
// and how long each took from dispatch to terminal.
//
// The otelstore decorator feeds a [Tracker] from the events that commit
// (ActivityScheduled is a dispatch; ActivityCompleted, a terminal
// ActivityFailed, ActivityCancelled and ActivityTimedOut are terminals; a
// retryable ActivityFailed is a retry; a workflow terminal abandons the run),
// and several decorators may share one tracker. It can also be driven
// directly.
//
// # Keys
//
// A [Key] is (namespace, workflow ID, run ID, activity ID). The run is part of
// the key because a continue-as-new chain keeps its workflow ID and starts
// activity positions again at 0 in every run: without the run, generation 2's
// activity 0 would be mistaken for a duplicate of generation 1's. The empty
// namespace is the namespace "default".
//
// # Rules
//
//   - [Tracker.Dispatched] of a key that is not live makes it live, remembering
//     its activity type and dispatch time; it counts aion.activities.dispatched
//     and raises aion.inflight_activities by one. A dispatch of a live key (a
//     re-driven append) changes nothing: the first dispatch time and type stay.
//   - [Tracker.Finished] on a live key removes it: the gauge goes down by one,
//     aion.activities.completed is counted and aion.activity.duration records
//     the terminal time minus the dispatch time, in seconds, under the
//     remembered type and the outcome. A terminal time before the dispatch
//     records 0, never a negative sample.
//   - A terminal with no live entry (a duplicate, a terminal whose dispatch this
//     process never saw, or one evicted) is a no-op. The gauge is only ever
//     lowered by removing a live entry, so it can neither leak nor underflow,
//     and no phantom completion is counted.
//   - [Tracker.Retried] counts aion.activities.retried for a live key, which
//     stays in flight with its first dispatch time: its eventual duration
//     covers every attempt, like schedule-to-close latency.
//   - [Tracker.AbandonRun] settles the live entries of one run with the outcome
//     "abandoned", so a run that ends without activity terminals leaks nothing.
//     Its cost is proportional to that run's live entries: entries are indexed
//     by run (in hash buckets at least as many as the live entries, so a run
//     shares its bucket with less than one other entry on average).
//   - Namespaces are isolated: the same IDs in two namespaces are two entries,
//     and every measurement carries aion.namespace.
//
// Attributes are those of the telemetry catalog: aion.namespace and
// aion.activity.type, plus aion.activity.outcome on the completed counter and
// the duration histogram; aion.activity.pairing.evicted carries only
// aion.namespace. [WithAttributes] adds fixed attributes to all of them. An
// empty activity type is recorded as "_unknown"; past
// [WithTypeCardinalityLimit] distinct types, further ones are recorded as
// "_other" (the pairing itself stays exact; only the attribute is folded).
// Workflow and run IDs never become metric attributes.
//
// # Observability, not enforcement
//
// The in-flight gauge is a per-process observability signal: it counts what
// this process saw dispatched and not yet finished, and starts again from zero
// when the process restarts (entries of a previous process are simply never
// seen). It is for dashboards and alerts. Anything that must enforce a limit
// (a concurrency quota, a fairness budget) must read the durable count of
// claimed outbox rows ([eventstore.Outbox.CountClaimedOutboxRows]), which a
// failover survivor sees correctly whichever process dispatched the work.
// Never conflate the two.
//
// # Memory bound
//
// A tracker keeps at most [WithMaxInFlight] live entries (default
// [DefaultMaxInFlight], 1<<20). A dispatch that takes the table past the
// bound evicts the oldest live entry (first in, first out in the order the
// dispatches reached the tracker, not by their timestamps; a retry does not
// make an entry younger): its gauge slot is released under its own type,
// aion.activity.pairing.evicted is counted, and no completion or duration is
// recorded for it. Its later terminal is a no-op. A steadily rising evicted
// counter means the bound is too small or terminals are being lost.
//
// The bound and the order are global, across the table's shards (see below),
// and exact for calls made one after another. While dispatches run
// concurrently at the bound, the table can hold more entries than the bound
// until they return, and two of them racing for the same eviction can evict
// one entry more than needed; the order is then best effort among entries
// dispatched at the same moment.
//
// A live entry costs about 165 bytes (a 136-byte slot, its share of the key
// and run bucket arrays and slab headroom; measured at 1<<20 entries), so a
// full table at the default bound holds about 165 MiB. Slots and buckets are
// reused, not returned: after a burst the table keeps its high-water size
// until the tracker is dropped. The attribute cache holds one entry per
// (namespace, recorded type), at most namespaces x (type limit + 2);
// namespaces are expected to be few (they come from configuration, not from
// user data).
//
// # Concurrency and cost
//
// A [Tracker] is safe for concurrent use. The live table is split into 16
// shards by run, each with its own mutex, so calls about different runs
// rarely wait for each other (a single mutex made the parallel benchmark
// about 1.7 times slower); all entries of a run share a shard, so
// AbandonRun takes one lock. No call holds two shard locks, no instrument
// and no user code runs while one is held, and every critical section
// unlocks with defer, so a panic (from a misbehaving MeterProvider, say)
// never leaves a lock held. Keys are hashed outside the locks. The live count
// and the global dispatch order are atomic counters.
//
// The gauge increment of a dispatch is recorded before its entry becomes
// visible to terminals, and every decrement after its entry was removed. So,
// per attribute set, the exported value never goes below the true number of
// live entries; while calls are in progress it can run ahead of it by the
// number of dispatches and terminals in flight (it converges as they return).
// A duplicate dispatch makes a provisional increment and takes it back: the
// net effect is nothing, though a duplicate claiming a type never dispatched
// before can leave a 0-valued data point for that type and uses up a place
// under the type cardinality limit.
//
// In steady state, Dispatched and Finished do not allocate: measurement
// options are precomputed per (namespace, type) and per outcome, entries live
// by value in reused slabs, and the ctx passed in goes straight to the
// instruments (so exemplars link to the caller's span).
// BenchmarkDispatchFinish and BenchmarkBareSDKRecords in bench_test.go
// compare the tracker with the bare SDK calls it makes, and their Parallel
// variants do the same from all CPUs.
//
// # Errors
//
// Telemetry trouble never fails a call: an instrument the MeterProvider cannot
// create is reported to otel.Handle and replaced by a no-op one, and the live
// table stays exact regardless. [New] fails only on a misused option
// ([ErrInvalidOption]). An [Outcome] outside the defined constants is refused:
// reported to otel.Handle as [ErrInvalidOutcome], with the entry left live so
// a correct terminal still pairs.
//
// # Limits
//
//   - The gauge and the pairs are per process; see "Observability, not
//     enforcement".
//   - Times are taken as given: the tracker never reads the clock. A zero or
//     skewed dispatch time yields a correspondingly odd duration (clamped at 0
//     below).
//   - [Tracker.Retried] does not record its time today.
//   - Evicted entries are gone: their terminals are not paired.
package pairing
