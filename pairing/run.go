package pairing

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// statuses are the closing statuses of a run, in the order of the
// per-workflow-type option cache.
var statuses = [...]eventstore.WorkflowStatus{
	eventstore.StatusCompleted, eventstore.StatusFailed, eventstore.StatusCancelled,
	eventstore.StatusTimedOut, eventstore.StatusContinuedAsNew,
}

const numStatuses = len(statuses)

// statusIndex returns s's position in statuses, or -1 if s does not close a
// run.
func statusIndex(s eventstore.WorkflowStatus) int {
	for i, c := range statuses {
		if c == s {
			return i
		}
	}
	return -1
}

// RunStarted records that run (namespace, workflowID, runID) of type
// workflowType started at at (its WorkflowStarted's RecordedAt; a zero time
// is now). The run becomes open: it takes a slot under [WithMaxInFlight]
// until it closes ([Tracker.RunClosed], [Tracker.RunContinued]) or is
// evicted, and with the timeline on its run span starts at at, as a child
// of the run's derived anchor (see the package doc), linked to the span in
// ctx (the store call that appended the WorkflowStarted) and, if this
// tracker saw the previous run of a continue-as-new chain close, to that
// run's span. A run already open here is left as it is and RunStarted
// returns false; otherwise it returns true.
//
// The workflow type is cleaned and bounded like activity types (per
// namespace, [WithTypeCardinalityLimit]).
func (t *Tracker) RunStarted(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID, workflowType string, at time.Time) bool {
	if t == nil || t.live == nil {
		return false
	}
	ctx = orBackground(ctx)
	if at.IsZero() {
		at = time.Now()
	}
	rk := runKey{namespace: namespaceOf(namespace), workflowID: workflowID, runID: runID}
	wa := t.attrs.forWorkflow(rk.namespace, workflowType)
	prev, started := t.live.pending(rk)
	if started {
		return false
	}
	var span trace.Span
	if t.spans != nil {
		span = t.spans.startRun(ctx, rk, wa, prev, at)
	}
	opened, ev := t.live.open(rk, wa, at, span)
	t.countEvicted(ctx, ev)
	return opened
}

// RunClosed records that run (namespace, workflowID, runID) closed at at
// with status, one of the five closing statuses (completed, failed,
// cancelled, timed_out, continued_as_new; for the last, [Tracker.RunContinued]
// also links the runs). Its activities still live are settled as abandoned
// (see [Tracker.AbandonRun]); if the run was open here, aion.workflow.duration
// records at minus its start and its run span ends at at, with status Error
// for failed and timed_out, linked to the span in ctx (the store call that
// appended the closing event). It returns the number of activities settled.
//
// A status that does not close a run is refused: it is reported to
// otel.Handle as [ErrInvalidStatus] and nothing changes.
func (t *Tracker) RunClosed(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID, status eventstore.WorkflowStatus, at time.Time) int {
	return t.closeRun(ctx, namespace, workflowID, runID, status, eventstore.RunID{}, at)
}

// RunContinued records that run (namespace, workflowID, runID) continued as
// newRunID at at: RunClosed with status continued_as_new, whose run span
// also links to the new run's anchor (its trace), and the new run is
// expected, so that its run span, when [Tracker.RunStarted] comes, links
// back to this one. The expectation takes an open-run slot until then.
func (t *Tracker) RunContinued(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, runID, newRunID eventstore.RunID, at time.Time) int {
	return t.closeRun(ctx, namespace, workflowID, runID, eventstore.StatusContinuedAsNew, newRunID, at)
}

func (t *Tracker) closeRun(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID, status eventstore.WorkflowStatus, next eventstore.RunID, at time.Time) int {
	if t == nil || t.live == nil {
		return 0
	}
	si := statusIndex(status)
	if si < 0 {
		t.handle(fmt.Errorf("%w %q (want a status that closes a run)", ErrInvalidStatus, string(status)))
		return 0
	}
	ctx = orBackground(ctx)
	if at.IsZero() {
		at = time.Now()
	}
	rk := runKey{namespace: namespaceOf(namespace), workflowID: workflowID, runID: runID}
	var buf [16]taken
	done, o := t.live.closeRun(rk, buf[:0])
	n := t.abandon(ctx, done, at)
	if o.wf != nil {
		t.inst.workflowDuration.Record(ctx, seconds(o.at, at), o.wf.duration[si]...)
	}
	var nextAnchor trace.SpanContext
	if next != (eventstore.RunID{}) && next != runID {
		nk := runKey{namespace: rk.namespace, workflowID: workflowID, runID: next}
		if t.spans != nil {
			nextAnchor = anchorOf(nk)
			prev := trace.SpanContext{}
			if o.span != nil {
				prev = o.span.SpanContext()
			}
			t.countEvicted(ctx, t.live.expect(nk, t.attrs.namespaces.Get(rk.namespace), prev))
		}
	}
	t.spans.endRun(ctx, o, status, nextAnchor, at)
	return n
}

// ActivitySpanContext returns the span context of the live activity key's
// span, so that work done for the activity elsewhere (log records, a
// worker's own spans) can join its trace. It is invalid when key is not
// live, was dispatched before the timeline was on, or the timeline is off.
func (t *Tracker) ActivitySpanContext(key Key) trace.SpanContext {
	if t == nil || t.live == nil {
		return trace.SpanContext{}
	}
	key.normalize()
	if span := t.live.spanOf(key); span != nil {
		return span.SpanContext()
	}
	return trace.SpanContext{}
}

// observeAges is the callback of aion.activity.oldest_inflight_age: for
// each (namespace, activity type) that has had an activity live, the age of
// its oldest one still in flight, 0 if none is. O(types).
func (t *Tracker) observeAges(_ context.Context, o metric.Observer, g metric.Float64Observable) {
	ages := t.live.oldest(nil)
	now := time.Now()
	for _, a := range ages {
		v := 0.0
		if !a.oldest.IsZero() {
			v = seconds(a.oldest, now)
		}
		o.ObserveFloat64(g, v, a.attrs.age...)
	}
}
