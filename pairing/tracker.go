package pairing

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// Tracker pairs each activity dispatch with its first terminal and records
// the pairing instruments of the telemetry catalog. Each method documents
// the rule it keeps.
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
	live   *table
}

// New returns a Tracker configured by opts.
//
// Telemetry trouble never fails New: an error creating an instrument is
// reported to otel.Handle and the tracker keeps working, pairing entries
// correctly, with a no-op instrument in its place. The only error New returns
// is a misused option: [WithAttributes] given an empty key or a key the
// tracker sets itself, matching [ErrInvalidOption] with errors.Is. (The
// design contract fixes the (T, error) signature; this is its one use.)
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
		handle: c.handle,
		attrs:  newAttrCache(c.attrs, c.nsLimit, c.typeLimit),
		spans:  newSpans(c.tracerProvider, c.timeline, c.handle),
		live:   newTable(c.maxInFlight),
	}
	t.inst = newInstruments(c.meterProvider, c.handle, t.observeAges)
	return t, nil
}

// Dispatched records the dispatch of the activity key, of type activityType,
// at time at. If key is not live, it becomes a live entry remembering the
// type and at, aion.activities.dispatched is counted and
// aion.inflight_activities raised by one, and Dispatched returns true.
//
// A dispatch of a key that is already live (a re-driven append) changes
// nothing and returns false: the first dispatch time and type stay. The
// gauge increment is recorded before the entry becomes visible to
// terminals, so the exported gauge never goes below the live count; a
// duplicate therefore makes a provisional increment and takes it back (net
// nothing, though a duplicate claiming a type never seen before leaves a
// 0-valued point for it and uses up a place under the type limit).
//
// Memory bound: if the tracker already holds [WithMaxInFlight] live
// entries (activities and open runs), the oldest one (first in, first out
// in the order they reached the tracker, not by their times; a retry does
// not make an entry younger) is evicted to make room. An evicted activity's
// gauge slot is released under its own type and
// aion.activity.pairing.evicted counted under its namespace; no completion,
// duration or span is recorded for it, and its later terminal is a no-op.
// An evicted open run is counted on aion.workflow.pairing.evicted and gets
// neither run span nor duration. The bound is exact, also under concurrent
// calls.
//
// The activity type and the namespace become attribute values only after
// cleaning (invalid UTF-8 replaced by U+FFFD, cut to 256 bytes); an empty
// type is recorded as "_unknown", a type past [WithTypeCardinalityLimit] as
// "_other", a namespace past [WithNamespaceCardinalityLimit] as "_other".
// The key itself is kept as given. ctx is passed to the instruments.
//
// With the timeline on, a new entry's activity span starts at at: a child of
// its run's span if this tracker holds it (else of the run's anchor),
// linked to the span in ctx, the store call that appended the dispatch. An
// evicted entry's span is dropped without ending.
func (t *Tracker) Dispatched(ctx context.Context, key Key, activityType string, at time.Time) bool {
	if t == nil || t.live == nil {
		return false
	}
	key.normalize()
	if at.IsZero() {
		at = time.Now()
	}
	ctx = orBackground(ctx)
	ta := t.attrs.forType(key.Namespace, activityType)
	// No instrument or span is made under the table's lock. The span is
	// started for every dispatch, also one that turns out a duplicate (and
	// then is dropped): deciding first would lose the span of a dispatch
	// that wins against a terminal of the same key in between.
	var span trace.Span
	if t.spans != nil {
		span = t.spans.startActivity(ctx, key, ta, t.live.runSpanOf(key.run()), at)
	}
	t.inst.inflight.Add(ctx, 1, ta.base...)
	added, evicted := t.live.add(key, ta, at, span)
	if !added {
		// A duplicate: take the increment back. Its span, if one was
		// started, is dropped without ending, so it is never exported.
		t.inst.inflight.Add(ctx, -1, ta.base...)
		return false
	}
	t.inst.dispatched.Add(ctx, 1, ta.base...)
	t.countEvicted(ctx, evicted)
	return true
}

// countEvicted records what one eviction removed: an activity releases its gauge
// slot and counts on aion.activity.pairing.evicted, an open run counts on
// aion.workflow.pairing.evicted; neither span is ended (so neither is
// exported).
func (t *Tracker) countEvicted(ctx context.Context, ev evicted) {
	switch {
	case ev.attrs != nil:
		t.inst.inflight.Add(ctx, -1, ev.attrs.base...)
		t.inst.evicted.Add(ctx, 1, ev.attrs.ns.evicted...)
	case ev.ns != nil:
		t.inst.runEvicted.Add(ctx, 1, ev.ns.evicted...)
	}
}

// Finished records the terminal of the activity key with outcome at time at.
// If key is live, the entry is removed, aion.inflight_activities lowered by
// one, aion.activities.completed counted and at minus the dispatch time
// recorded in aion.activity.duration (0 if at is before the dispatch), all
// under the remembered type and outcome, and Finished returns true.
//
// A terminal with no live entry (a duplicate, a terminal whose dispatch this
// process never saw or already evicted) is a no-op returning false: no gauge
// movement, no completion.
//
// An outcome that is not one of the [Outcome] constants is refused: it is
// reported to otel.Handle as [ErrInvalidOutcome], the entry stays live, and
// Finished returns false. ctx is passed to the instruments.
//
// The entry's activity span, if it has one, ends at at (never before its
// start) with aion.activity.outcome and aion.activity.retry_count, status
// Error for failed and timed_out, linked to the span in ctx.
func (t *Tracker) Finished(ctx context.Context, key Key, outcome Outcome, at time.Time) bool {
	if t == nil || t.live == nil {
		return false
	}
	oi := outcome.index()
	if oi < 0 {
		t.handle(fmt.Errorf("%w %q (want one of the pairing.Outcome constants)", ErrInvalidOutcome, string(outcome)))
		return false
	}
	key.normalize()
	ctx = orBackground(ctx)
	if at.IsZero() {
		at = time.Now()
	}
	e, ok := t.live.take(key)
	if !ok {
		return false
	}
	t.settle(ctx, e, oi, at)
	return true
}

// settle records the end of one removed entry and ends its span.
func (t *Tracker) settle(ctx context.Context, e taken, outcome int, at time.Time) {
	ta := e.attrs
	t.inst.inflight.Add(ctx, -1, ta.base...)
	t.inst.completed.Add(ctx, 1, ta.completed[outcome]...)
	t.inst.duration.Record(ctx, seconds(e.at, at), ta.duration[outcome]...)
	t.spans.endActivity(ctx, e, outcomes[outcome], at)
}

// orBackground returns ctx, or context.Background for a nil one: a nil
// context must not panic the timeline.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// seconds returns to - from in seconds, never negative.
func seconds(from, to time.Time) float64 {
	d := to.Sub(from)
	if d < 0 {
		return 0
	}
	return d.Seconds()
}

// Retried records a retry of the activity key at time at. If key is live,
// aion.activities.retried is counted under the remembered type and Retried
// returns true; the entry stays live and keeps its dispatch time, so its
// eventual duration covers every attempt (schedule-to-close latency) and a
// retry does not make it younger for eviction. A retry of a key that is not
// live is a no-op returning false.
//
// The entry's activity span, if it has one, gets an aion.activity.retry event
// at at. ctx is passed to the instrument.
func (t *Tracker) Retried(ctx context.Context, key Key, at time.Time) bool {
	if t == nil || t.live == nil {
		return false
	}
	key.normalize()
	if at.IsZero() {
		at = time.Now()
	}
	ta, span, n := t.live.retry(key)
	if ta == nil {
		return false
	}
	ctx = orBackground(ctx)
	t.inst.retried.Add(ctx, 1, ta.base...)
	t.spans.retried(span, n, at)
	return true
}

// AbandonRun settles every live entry of one run (namespace, workflowID,
// runID) at time at, as if each had finished with [OutcomeAbandoned]: the
// gauge is lowered, the completion counted and the duration recorded for
// each. It returns the number of entries settled. Other runs, including
// other runs of the same workflow, are untouched. The cost grows with the
// run's entries (the most it has held at once), not with the tracker's. An
// empty namespace is "default". ctx is passed to the instruments, and the
// entries' spans end at at as abandoned, linked to the span in ctx. The
// run itself stays open: closing it is [Tracker.RunClosed].
func (t *Tracker) AbandonRun(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID, at time.Time) int {
	if t == nil || t.live == nil {
		return 0
	}
	if at.IsZero() {
		at = time.Now()
	}
	rk := runKey{namespace: namespaceOf(namespace), workflowID: workflowID, runID: runID}
	var buf [16]taken
	return t.abandon(orBackground(ctx), t.live.takeRun(rk, buf[:0]), at)
}

// abandon settles entries removed from the table as abandoned at at.
func (t *Tracker) abandon(ctx context.Context, done []taken, at time.Time) int {
	oi := OutcomeAbandoned.index()
	for _, e := range done {
		t.settle(ctx, e, oi, at)
	}
	return len(done)
}

// InFlight returns the number of live entries now: dispatched, not finished,
// not abandoned and not evicted.
func (t *Tracker) InFlight() int {
	if t == nil || t.live == nil {
		return 0
	}
	return t.live.len()
}
