// Package pairing turns the facts of workflow histories into OpenTelemetry
// metrics and spans: activities in flight now and the age of the oldest of
// each type, dispatched, completed (by outcome) and retried, how long each
// activity and each run took, what the memory bounds dropped; and the
// timeline, one span per run and per activity at the times history
// recorded.
//
// # A join of facts
//
// The facts are: a run started (type, time), an activity dispatched (type,
// time, the store call that wrote it), retried, terminated (outcome, time),
// a run closed (status, time) or continued as new. The otelstore decorator
// hands a [Tracker] each committed batch with its history position
// ([Tracker.Observe]); a program may also drive one fact at a time
// ([Tracker.Dispatched], [Tracker.Finished], ...). Whatever order the facts
// arrive in, and however often each repeats, the telemetry is the one
// history order gives: a fact waits for its partner (a terminal for its
// dispatch, a close for its run's start); an activity's settler is the
// earliest, by position, of its terminal and its run's closes after it (a
// close settles it as abandoned, also a dispatch that arrives after it);
// and a pairing is recorded only once every position between its two
// facts was observed, so that a batch returning late can still come
// between. Until then the activity is out of the gauge (history has it
// settled) and its completion waits. The facts the per-fact methods take
// have no position: arrival stands in for it. Counters count facts
// observed committing, once each.
//
// # A gap is filled, not waited for
//
// The join knows history positions, so it knows what it has not seen: a
// batch observed committing whose first position is past what this
// tracker has seen of its workflow (after a restart, an adoption of
// shards, a write by another node) follows facts it never saw, and their
// partners (the dispatch of a terminal committed here, the start of a run
// closed here, the retries between) are in history. Given a reader
// ([WithHistory], or per batch [Tracker.ObserveFrom]; otelstore passes
// its inner store), the tracker reads that workflow's history once, in
// the background (at most [WithFillConcurrency] reads at once, default
// 4, each holding one history, or, from a reader that is an
// [eventstore.HistoriesReader], the histories of up to
// [eventstore.HistoriesPage] gaps waiting for it, read in one call; gaps
// waiting are bounded at 64Ki), and joins it as facts read back. A
// batch read returns whole histories: each is joined from the first
// position the tracker had not seen, as a read of its own would be; a
// batch call that fails loses no gap, each is then read on its own, so
// that one unreadable history fails its own gap only. Facts read back count nothing themselves;
// the facts committed here pair with them and count once: the counters
// count facts observed committing, and each completion, duration and
// span is recorded by the process that observed its settling fact
// commit. The order of the read, a [Tracker.Resume] and the live batches
// does not matter: a fact read back and then observed committing counts
// then, and a settlement whose run's start is in the gap waits for the
// fill, so that its span has its run span as parent. A read that fails
// (the store down; the workflow deleted by retention, whose history, read
// as empty or ending before the gap, fails with error.type not_found)
// counts on aion.pairing.resumed with its error.type and in
// [Tracker.Fills]; its facts are not guessed: they wait for partners until
// the bound drops them (aion.pairing.forgotten), and the gap is not read
// again. So
// [Tracker.Resume] is a warm-up: it makes the gauges right before the
// first write to each workflow (a fill makes them right at the first);
// completions, durations and spans do not need it. While a fill is
// pending, what it decides is not yet recorded (a completion whose
// dispatch it reads), and while it joins, the gauge may read one more for
// each dispatch it reads that is already known (raised before the join's
// lock, given back after it), as during any call; once every call has
// returned and no fill is pending, the telemetry is exact. So Resume, when
// its reads are done, waits (within its context) for the fills queued or
// running for the workflows it read, which a live batch began before the
// resume reached them; fills begun later do not hold it.
// [Tracker.WaitFilled] waits for every fill begun. The reads carry a
// context for which [IsReadBack] reports true.
//
// Two windows stay. A process that dies, or lets a shard go, while a
// fill of one of its workflows is pending loses what that fill was to
// record (the completions of the facts it committed whose partners were
// being read), as it loses the spans its exporter still held; a fill is
// one history read. And a batch that returns after a fill already read
// its facts counts once, exactly, but a span whose pairing the fill
// decided lacks the link to that late batch's store call.
//
// # Waiting for a worker
//
// Two facts come from the outbox, not from history: rows staged with a
// dispatch ([Tracker.Staged]) and rows claimed by a worker
// ([Tracker.Claimed], at the claim's time). They join their activity in
// any order, like the others. An activity waits while it is in flight with
// a staged row and no claim known (aion.activity.oldest_waiting_age, per
// type, O(types) per collection); aion.activity.oldest_inflight_age keeps
// its meaning, dispatched and not finished, waiting or running, so that a
// store without an outbox keeps it. The wait, from the dispatch to the
// earliest claim known when the two meet, is recorded once per dispatch
// (aion.activity.wait.duration; a re-claim records none); every claim is an
// aion.activity.claim event on the activity span. Claims have no position:
// one arriving after its activity's completion was recorded is dropped;
// those whose dispatch never comes (another node's workflow) are held
// within [WithMaxRemembered] and dropped silently. After a restart the waiting state starts empty (claims and rows are not
// in history): a dispatch read back is in flight, not waiting, and a claim
// of it records no wait, since it may be a re-claim.
//
// # Timeline
//
// On by default ([WithTimelineSpans], [WithTracerProvider]). A run span
// ("workflow <type>") runs from the run's start to its first close; an
// activity span ("activity <type>") from its dispatch to its settlement,
// with retries as events and links to the store calls that wrote its
// facts. A run's trace ID is a hash of (namespace, workflow, run), so
// processes that each see part of a run agree without shared state; each
// run of a chain is its own trace, linked to the next (in another workflow
// when an engine keys it so: [ContinuedAsNew]). With [NewIDGenerator]
// installed in the SDK, span IDs are derived too: the run span is a true
// root and every activity span its child, in any order, in any process.
// Without it, the run span hangs under a derived anchor that is never
// exported, and an activity span under its run span when this tracker
// holds that span (else under the anchor). With derived IDs no span is
// held: an activity's or run's span context is known from its key
// ([Tracker.ActivitySpanContext], the run's root) for the spans of work
// done under it, and its span is started at its start time and ended when
// it settles or closes (a span processor sees it start then). Without
// them, spans of activities in flight and open runs are held open (about
// 1 KiB each with the SDK when sampled), so that their children have a
// parent, and dropped unended if evicted, so they are never exported.
//
// # Concurrency
//
// A Tracker is safe for concurrent use and must not be copied. Its state
// sits under one mutex, which no call holds while an instrument, a tracer,
// a span processor or an error handler runs: the decisions are made under
// it, recorded after it, and a panic of that user code is reported, never
// passed on. With the timeline off, or no provider that records, a
// dispatch and its terminal do not allocate in steady state.
//
// # Limits
//
//   - Memory: at most [WithMaxInFlight] activities in flight and open runs
//     (past it the oldest is evicted: aion.activity.pairing.evicted or
//     aion.workflow.pairing.evicted), and at most [WithMaxRemembered]
//     settled activities, closed runs and facts waiting for a partner (past
//     it the oldest is dropped; one still waiting counts on
//     aion.pairing.forgotten).
//   - Cardinality: namespaces, activity and workflow types are cleaned and
//     bounded ([WithNamespaceCardinalityLimit], [WithTypeCardinalityLimit]),
//     past which they are recorded as "_other"; IDs go on spans only.
//   - Per process: the gauges count what this process saw dispatched and
//     not settled. Without a reader to fill gaps from, a pairing across
//     history positions this tracker never observes (an append by a
//     writer it does not see) waits until the bound drops it.
//   - Heap: at [DefaultMaxInFlight], every activity of its own workflow
//     (the worst case), about 58 MiB, 466 bytes an entry (its activity,
//     run and workflow of 128, 112 and 128 bytes, its slot in the index of
//     workflows, its queue and age heap places), with the timeline off or,
//     when [NewIDGenerator] is installed, on (no span is held while an
//     activity is in flight or a run open: each is made, with its start
//     time, when it settles or closes); about 242 MiB with sampled timeline
//     spans and random IDs, where each entry holds its SDK span open so
//     that its children have a parent (BenchmarkHeapPerEntry). Activities
//     that share a run or a workflow cost less. The facts an entry rarely
//     has in flight (a terminal waiting for positions, retries, outbox
//     claims, a held span; a run's closes, settled activities or second
//     activity) take a side struct when the first arrives (192 bytes for
//     an activity, 144 for a run). Fills add at most
//     [WithFillConcurrency] reads of one history each, or of a page of up
//     to [eventstore.HistoriesPage] histories from a batch reader (a few
//     MiB each at a few dozen events a history), and 64Ki waiting gaps of
//     about 100 bytes.
//   - Times are history's: a zero time is the time of observation; a time
//     OTLP cannot carry (before 1970, after 2262) is clamped to that range.
//   - Errors: [New] fails only on a misused option ([ErrInvalidOption]);
//     everything else goes to otel.Handle.
package pairing
