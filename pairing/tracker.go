package pairing

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/timeline"
)

// Tracker pairs each activity dispatch with its first terminal, and each
// run's start with its close, and records the pairing instruments and the
// timeline. Each method documents the rule it keeps; [Tracker.Observe] is
// the entry point that takes facts with their history positions.
//
// A Tracker is safe for concurrent use by multiple goroutines and must not be
// copied after first use. Its zero value is not ready: create one with [New].
// Every method of a nil *Tracker, or of a zero Tracker, is a no-op reporting
// nothing done.
type Tracker struct {
	handle func(error)
	attrs  *attrCache
	inst   instruments
	spans  *spans // nil: no timeline spans
	join   *join
	// history is the reader of WithHistory; fill runs the fills.
	history HistoryReader
	fill    *filler
}

// New returns a Tracker configured by opts.
//
// Telemetry trouble never fails New: an error creating an instrument is
// reported to otel.Handle and the tracker keeps working, pairing entries
// correctly, with a no-op instrument in its place. The only error New returns
// is a misused option: [WithAttributes] given a key it refuses (an empty
// key, a key the tracker sets itself, ...), matching [ErrInvalidOption]
// with errors.Is.
//
// The oldest-in-flight gauge is an observable instrument: its callback stays
// registered with the MeterProvider (and keeps the tracker reachable) for
// the provider's lifetime.
func New(opts ...Option) (*Tracker, error) {
	c, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	t := &Tracker{
		handle:  c.handle,
		attrs:   newAttrCache(c.attrs, c.nsLimit, c.typeLimit),
		spans:   newSpans(c.tracerProvider, c.timeline),
		history: c.history,
		fill:    &filler{max: c.fillConcurrency},
	}
	t.join = newJoin(c.maxInFlight, c.maxRemembered, t.spans != nil)
	if t.spans != nil {
		t.join.ids = &t.spans.ids
	}
	t.inst = newInstruments(c.meterProvider, c.handle, t.observeAges)
	return t, nil
}

// The per-fact methods below take one fact without its history position.
// Where a position would decide, arrival stands in for it: a terminal or a
// close settles whatever dispatch of its activity or run it meets, before
// or after it arrives. Observe, given positions, needs no such stand-in.

// Dispatched records the dispatch of the activity key, of type activityType,
// at time at (its ActivityScheduled's RecordedAt; a zero time is now). If
// the tracker knows no dispatch of key, the dispatch is remembered with its
// type and time, aion.activities.dispatched is counted and Dispatched
// returns true; unless a terminal of key (or a close of its run) already
// arrived, the activity is in flight: aion.inflight_activities is raised
// by one. A terminal or close that arrived first settles it at once
// (the gauge is not raised; Dispatched still returns true, since the
// dispatch was new), with the duration and span history gives.
//
// A dispatch of a key the tracker already knows (a repeat, or a re-driven
// append; also after the activity settled, while the tracker remembers it)
// changes nothing and returns false: the first dispatch time and type stay.
//
// Memory bound: past [WithMaxInFlight] activities in flight and open runs,
// the oldest in arrival order (not by their times; a retry does not make
// an entry younger) is evicted: its gauge slot is released under its own
// type, aion.activity.pairing.evicted counted under its namespace, and no
// completion, duration or span is recorded for it.
//
// The activity type and the namespace become attribute values only after
// cleaning (invalid UTF-8 replaced by U+FFFD, cut to 256 bytes); an empty
// type is recorded as "_unknown", a type past [WithTypeCardinalityLimit] as
// "_other", a namespace past [WithNamespaceCardinalityLimit] as "_other".
// The key itself is kept as given. ctx is passed to the instruments, and
// its span is linked from the activity span as the store call that wrote
// the dispatch.
func (t *Tracker) Dispatched(ctx context.Context, key Key, activityType string, at time.Time) bool {
	if t == nil || t.join == nil {
		return false
	}
	f := fact{kind: factDispatch, run: key.RunID, activity: key.ActivityID, typ: activityType}
	return t.one(ctx, key.Namespace, key.WorkflowID, f, at).isNew
}

// Finished records the terminal of the activity key with outcome at time at.
// If key is in flight, it is settled: aion.inflight_activities lowered by
// one, aion.activities.completed counted and at minus the dispatch time
// recorded in aion.activity.duration (0 if at is before the dispatch), all
// under the remembered type and outcome, the activity span ended, and
// Finished returns true.
//
// A terminal whose dispatch has not arrived is remembered until it does
// (or the memory bound drops it), and returns false; a terminal of an
// activity already settled (a repeat, or a second terminal) changes
// nothing and returns false: the gauge never goes below the true in-flight
// count and no completion is counted twice.
//
// An outcome that is not one of the [Outcome] constants is refused: it is reported to otel.Handle as
// [ErrInvalidOutcome], nothing changes, and Finished returns false.
//
// The activity span, if it has one, ends at at (never before its start)
// with aion.activity.outcome and aion.activity.retry_count, status Error
// for failed and timed_out, linked to the span in ctx.
func (t *Tracker) Finished(ctx context.Context, key Key, outcome Outcome, at time.Time) bool {
	if t == nil || t.join == nil {
		return false
	}
	oi := outcome.index()
	if oi < 0 {
		t.handle(fmt.Errorf("%w %q (want one of the pairing.Outcome constants)", ErrInvalidOutcome, string(outcome)))
		return false
	}
	f := fact{kind: factTerminal, run: key.RunID, activity: key.ActivityID, outcome: oi}
	return t.one(ctx, key.Namespace, key.WorkflowID, f, at).settled
}

// Retried records a retry of the activity key at time at. If key is in
// flight, aion.activities.retried is counted under its type and Retried
// returns true; the activity stays in flight and keeps its dispatch time,
// so its eventual duration covers every attempt (schedule-to-close
// latency). A retry that arrives before its dispatch is remembered and
// counted when the dispatch arrives; the same retry twice (same time) is
// counted once. The activity span gets an aion.activity.retry event at at.
func (t *Tracker) Retried(ctx context.Context, key Key, at time.Time) bool {
	if t == nil || t.join == nil {
		return false
	}
	f := fact{kind: factRetry, run: key.RunID, activity: key.ActivityID}
	return t.one(ctx, key.Namespace, key.WorkflowID, f, at).retried
}

// RunStarted records that run (namespace, workflowID, runID) of type
// workflowType started at at (its WorkflowStarted's RecordedAt; a zero time
// is now). Until it closes the run is open: it takes a slot under
// [WithMaxInFlight], and with the timeline on its run span starts at at
// (see the package doc for its identity), linked to the span in ctx (the
// store call that appended the WorkflowStarted). A run whose close arrived
// first is recorded whole at once. A run already started here is left as
// it is and RunStarted returns false; otherwise it returns true.
//
// The workflow type is cleaned and bounded like activity types (per
// namespace, [WithTypeCardinalityLimit]).
func (t *Tracker) RunStarted(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID, workflowType string, at time.Time) bool {
	if t == nil || t.join == nil {
		return false
	}
	f := fact{kind: factStart, run: runID, typ: workflowType}
	return t.one(ctx, namespace, workflowID, f, at).isNew
}

// RunClosed records that run (namespace, workflowID, runID) closed at at
// with status, one of the five closing statuses (completed, failed,
// cancelled, timed_out, continued_as_new). Its activities not settled by a
// terminal, including any whose dispatch arrives later, are settled as
// abandoned at at; if the run started here, aion.workflow.duration records
// at minus its start and its run span ends at at, with status Error for
// failed and timed_out, linked to the span in ctx. A run closed twice (a
// reopened run) records its first close. RunClosed returns the number of
// activities it took out of flight.
//
// A status that does not close a run is refused: it is reported to
// otel.Handle as [ErrInvalidStatus] and nothing changes.
func (t *Tracker) RunClosed(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID, status eventstore.WorkflowStatus, at time.Time) int {
	return t.closeRun(ctx, namespace, workflowID, runID, status, eventstore.RunID{}, at)
}

// RunContinued records that run (namespace, workflowID, runID) continued as
// newRunID at at: RunClosed with status continued_as_new, whose run span
// also links to the new run's root (its trace).
func (t *Tracker) RunContinued(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, runID, newRunID eventstore.RunID, at time.Time) int {
	return t.closeRun(ctx, namespace, workflowID, runID, eventstore.StatusContinuedAsNew, newRunID, at)
}

func (t *Tracker) closeRun(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID, status eventstore.WorkflowStatus, next eventstore.RunID, at time.Time) int {
	if t == nil || t.join == nil {
		return 0
	}
	si := statusIndex(status)
	if si < 0 {
		t.handle(fmt.Errorf("%w %q (want a status that closes a run)", ErrInvalidStatus, string(status)))
		return 0
	}
	f := fact{kind: factClose, run: runID, status: si, next: next}
	return t.one(ctx, namespace, workflowID, f, at).abandoned
}

// AbandonRun settles every activity of one run (namespace, workflowID,
// runID) still in flight at time at, as if each had finished with
// [OutcomeAbandoned]: the gauge is lowered, the completion counted and the
// duration recorded for each, and its span ended, linked to the span in
// ctx. It returns the number of activities settled. Other runs, including
// other runs of the same workflow, are untouched; the run itself stays
// open, and an activity dispatched later is in flight as usual (closing the
// run is [Tracker.RunClosed]). An empty namespace is "default".
func (t *Tracker) AbandonRun(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID, at time.Time) int {
	if t == nil || t.join == nil {
		return 0
	}
	fx := getEffects(orBackground(ctx))
	defer putEffects(fx)
	s := settler{ok: true, at: nanos(at), outcome: abandonedIndex, call: t.callOf(fx.ctx), live: true}
	n := t.join.abandon(wfKey{namespace: namespaceOf(namespace), id: workflowID}, runID, s, fx)
	t.apply(fx)
	return n
}

// abandon settles the activities of a run in flight with s.
func (j *join) abandon(k wfKey, runID eventstore.RunID, s settler, fx *effects) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	w := j.workflows.get(k)
	if w == nil || w.run(runID) == nil {
		return 0
	}
	n := 0
	for a := range w.run(runID).activities {
		if a.state != actLive {
			continue
		}
		j.leaveFlight(a)
		fx.cancel(&a.opening)
		fx.add(effect{op: opGauge, ta: a.ta})
		a.state, a.emitted = actDone, true
		fx.add(j.settleEffect(a, s, fx))
		fx.retired = append(fx.retired, a)
		a.dropSpan()
		j.place(a, &j.remembered)
		n++
	}
	j.retire(fx)
	j.trim(fx)
	fx.sealOpenings()
	return n
}

// ActivitySpanContext returns the span context of the activity key's span,
// so that work done for it elsewhere (log records, a worker's own spans,
// an agent's transcript) can join its trace. While the activity is in
// flight it is the live span's. Otherwise, once the tracker has seen that
// the provider makes the timeline's IDs (the ID generator of
// [NewIDGenerator] is installed), it is the context every process derives
// from the key alone: that of the span the activity has, or gets, wherever
// it is recorded, with the flags of its run's root. It is invalid when the
// timeline is off, and otherwise while neither is known (no span opened
// yet, or IDs not derived): work that starts after its activity settled
// cannot then be put under its span.
func (t *Tracker) ActivitySpanContext(key Key) trace.SpanContext {
	if t == nil || t.join == nil {
		return trace.SpanContext{}
	}
	key.normalize()
	if sc := t.liveSpanContext(key); sc.IsValid() {
		return sc
	}
	if t.spans == nil || t.spans.ids.Load() != idsDerived {
		return trace.SpanContext{}
	}
	root := rootOf(key)
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: root.TraceID(), TraceFlags: root.TraceFlags(),
		SpanID: timeline.ActivitySpanID(key.Namespace, key.WorkflowID, key.RunID, key.ActivityID)})
}

// liveSpanContext is the span context of key's span while it is in flight.
func (t *Tracker) liveSpanContext(key Key) trace.SpanContext {
	j := t.join
	j.mu.Lock()
	defer j.mu.Unlock()
	if w := j.workflows.get(wfKey{namespace: key.Namespace, id: key.WorkflowID}); w != nil {
		if r := w.run(key.RunID); r != nil {
			if a := r.activity(key.ActivityID); a != nil && a.state == actLive {
				return a.spanContext()
			}
		}
	}
	return trace.SpanContext{}
}

// InFlight returns the number of activities in flight now: dispatched, not
// settled and not evicted.
func (t *Tracker) InFlight() int {
	if t == nil || t.join == nil {
		return 0
	}
	t.join.mu.Lock()
	defer t.join.mu.Unlock()
	return t.join.active
}
