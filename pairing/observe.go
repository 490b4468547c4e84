package pairing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// A fact is one thing history says that pairing joins on: a run started or
// closed, an activity dispatched, retried or terminated.
type fact struct {
	kind     factKind
	run      eventstore.RunID
	activity eventstore.ActivityID
	pos      position
	at       int64
	live     bool    // observed committing, as opposed to read back
	call     callRef // the store call that wrote it
	typ      string  // the workflow type of a start, the activity type of a dispatch
	outcome  int     // a terminal's, index in outcomes
	status   int     // a close's, index in statuses
	next     eventstore.RunID
	nextWF   eventstore.WorkflowID // the next run's workflow, when not this one (ContinuedAsNew)
	ta       *typeAttrs
	wa       *workflowAttrs
	ns       *nsAttrs
}

type factKind uint8

const (
	factNone factKind = iota
	factStart
	factClose
	factDispatch
	factRetry
	factTerminal
)

// factOf reads the fact an event states, if any, with its RecordedAt and
// Seq; an event that states none has kind factNone and no envelope read.
func factOf(ev eventstore.Event) (f fact, at time.Time, seq uint64) {
	var env eventstore.Envelope
	switch e := ev.(type) {
	case eventstore.WorkflowStarted:
		f.kind, f.typ, env = factStart, e.WorkflowType, e.Envelope
	case eventstore.WorkflowCompleted:
		f.kind, f.status, env = factClose, 0, e.Envelope
	case eventstore.WorkflowFailed:
		f.kind, f.status, env = factClose, 1, e.Envelope
	case eventstore.WorkflowCancelled:
		f.kind, f.status, env = factClose, 2, e.Envelope
	case eventstore.WorkflowTimedOut:
		f.kind, f.status, env = factClose, 3, e.Envelope
	case eventstore.WorkflowContinuedAsNew:
		f.kind, f.status, f.next, env = factClose, 4, e.NewRunID, e.Envelope
	case ContinuedAsNew:
		f.kind, f.status, f.next, f.nextWF, env = factClose, 4, e.NewRunID, e.NewWorkflowID, e.Envelope
	case eventstore.ActivityScheduled:
		f.kind, f.activity, f.typ, env = factDispatch, e.ActivityID, e.ActivityType, e.Envelope
	case eventstore.ActivityCompleted:
		f.kind, f.activity, f.outcome, env = factTerminal, e.ActivityID, 0, e.Envelope
	case eventstore.ActivityFailed:
		f.kind, f.activity, f.outcome, env = factTerminal, e.ActivityID, 1, e.Envelope
		if e.Error.Kind == eventstore.Retryable {
			f.kind = factRetry
		}
	case eventstore.ActivityCancelled:
		f.kind, f.activity, f.outcome, env = factTerminal, e.ActivityID, 2, e.Envelope
	case eventstore.ActivityTimedOut:
		f.kind, f.activity, f.outcome, env = factTerminal, e.ActivityID, 3, e.Envelope
	default:
		return f, time.Time{}, 0
	}
	f.run = env.RunID
	return f, env.RecordedAt, env.Seq
}

// envelopeOf returns ev's envelope; a nil event, or one whose method
// panics (a nil pointer of a foreign Event type), has none.
func envelopeOf(ev eventstore.Event) (env eventstore.Envelope) {
	if ev == nil {
		return env
	}
	defer func() {
		if recover() != nil {
			env = eventstore.Envelope{}
		}
	}()
	return ev.EventEnvelope()
}

// Observe records what a committed batch of one workflow's history says:
// WorkflowStarted starts a run, the five closing events close it (see
// [Tracker.RunClosed]), ActivityScheduled dispatches an activity,
// ActivityCompleted, a Terminal ActivityFailed, ActivityCancelled and
// ActivityTimedOut terminate it, and a Retryable ActivityFailed retries it;
// other events only fill in positions. firstSeq is the Seq of events[0]
// (the appended batch's expected seq plus one); 0 means the events carry
// their own Seq, as a history read back does. An event's zero RecordedAt
// is the time of observation.
//
// Observe is how the facts' history positions reach the tracker, and what
// makes the result independent of arrival order: batches of one workflow
// may be observed in any order and any number of times, and the telemetry
// (every metric point and exported span) is the one history order gives,
// within the memory bounds. A pairing is recorded once every position
// between its two facts has been observed; until then the activity is out
// of the gauge (history has it settled) and its completion waits.
//
// With [WithHistory], a batch past what the tracker has seen of its
// workflow is a gap, filled from that reader in the background (see the
// package doc and [Tracker.ObserveFrom]).
//
// ctx carries the store call that committed the batch: it is passed to
// the instruments (for exemplars) and linked from the spans. Nothing of
// events is kept after Observe returns.
func (t *Tracker) Observe(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, firstSeq uint64, events []eventstore.Event) {
	if t == nil || t.join == nil || len(events) == 0 {
		return
	}
	fx := getEffects(orBackground(ctx))
	defer putEffects(fx)
	if firstSeq > ^uint64(0)-uint64(len(events)) {
		firstSeq = 0 // positions past the largest Seq: taken as unknown
	}
	fx.history = t.history
	t.collect(fx, firstSeq, events, true)
	t.observe(fx, namespace, workflowID)
}

// collect reads the facts and the positions of a batch into fx: positions
// from firstSeq, or from the events' own Seq when it is 0; live says the
// facts were seen committing rather than read back.
func (t *Tracker) collect(fx *effects, firstSeq uint64, events []eventstore.Event, live bool) {
	call := t.callOf(fx.ctx)
	var lo, hi uint64 // a run of consecutive positions, not yet recorded
	for i, ev := range events {
		f, at, seq := factOf(ev)
		switch {
		case firstSeq > 0:
			seq = firstSeq + uint64(i)
		case f.kind == factNone:
			seq = envelopeOf(ev).Seq // a position all the same
		}
		if seq != 0 {
			if hi != 0 && seq == hi+1 {
				hi = seq
			} else {
				if hi != 0 {
					fx.ranges = append(fx.ranges, seqRange{lo, hi})
				}
				lo, hi = seq, seq
			}
		}
		if f.kind == factNone {
			continue
		}
		f.pos.seq, f.at, f.live, f.call = seq, nanos(at), live, call
		fx.facts = append(fx.facts, f)
	}
	if hi != 0 {
		fx.ranges = append(fx.ranges, seqRange{lo, hi})
	}
}

// result is what one observation did, for the per-fact methods' results.
type result struct {
	isNew     bool // a dispatch or start not known before
	inFlight  bool // a dispatch that put its activity in flight
	settled   bool // a terminal that took its activity out of flight
	retried   bool // a retry counted
	abandoned int  // activities a close took out of flight
	// For a batch read back: the activities in flight and the open runs
	// of its workflow it added.
	activities, runs int
}

// observe applies fx.facts, all of one workflow, and the positions in
// fx.ranges, then records what they decided.
func (t *Tracker) observe(fx *effects, namespace string, workflowID eventstore.WorkflowID) result {
	if len(fx.facts) == 0 && len(fx.ranges) == 0 {
		return result{}
	}
	ns := namespaceOf(namespace)
	na := t.attrs.namespaces.Get(ns)
	for i := range fx.facts {
		f := &fx.facts[i]
		f.ns = na
		switch f.kind {
		case factDispatch:
			f.ta = na.types.Get(f.typ)
			t.raise(fx.ctx, f.ta)
		case factStart:
			f.wa = na.workflows.Get(f.typ)
		}
		f.typ = "" // nothing of the caller's is kept
	}
	var res result
	j := t.join
	stale := false
	func() {
		j.mu.Lock()
		defer j.mu.Unlock()
		k := wfKey{namespace: ns, id: workflowID}
		w := j.workflows.get(k)
		if fx.fill != 0 && (w == nil || w.fill != fx.fill) {
			// The workflow was released or forgotten while its history
			// was read: what was read is not this tracker's any more.
			j.pendingFills--
			stale = true
			return
		}
		if w == nil {
			w = j.workflowOf(k)
		}
		resumed := len(fx.facts) > 0 && !fx.facts[0].live
		if resumed { // what the batch adds is what it resumes
			res.activities, res.runs = w.live()
			res.activities, res.runs = -res.activities, -res.runs
		}
		if fx.fill == 0 && !resumed && len(fx.ranges) > 0 {
			// Before the facts: a settlement whose run's start is in
			// the gap waits for the fill (its run span is the parent).
			j.gap(w, fx.ranges[0].lo, fx)
		}
		for i := range fx.facts {
			f := &fx.facts[i]
			j.arrival++
			f.pos.arrival = j.arrival
			switch f.kind {
			case factDispatch:
				res.isNew, res.inFlight = j.dispatch(w, f, fx)
				if !res.inFlight {
					fx.add(effect{op: opGauge, ta: f.ta})
				}
			case factTerminal:
				res.settled = j.terminal(w, f, fx)
			case factRetry:
				res.retried = j.retry(w, f, fx)
			case factStart:
				res.isNew = j.start(w, f, fx)
			case factClose:
				res.abandoned = j.close(w, f, fx)
			}
		}
		for _, r := range fx.ranges {
			j.observed(w, r.lo, r.hi, fx)
		}
		if resumed {
			a, r := w.live()
			res.activities, res.runs = res.activities+a, res.runs+r
		}
		if fx.fill != 0 {
			j.endFill(w)
			j.resolveWaiting(w, fx)
		}
		j.retire(fx)
		j.settle(w)
		j.trim(fx)
		fx.sealOpenings()
	}()
	if stale { // give back what raise took
		for i := range fx.facts {
			if fx.facts[i].kind == factDispatch {
				fx.add(effect{op: opGauge, ta: fx.facts[i].ta})
			}
		}
		fx.gap = gapStale
	}
	t.apply(fx)
	switch fx.gap {
	case gapQueued:
		t.fill.enqueue(t, fx.fillReq)
	case gapDropped:
		t.fill.gaps.Add(1)
		t.fill.dropped.Add(1)
	}
	return res
}

// raise adds one to the gauge for a dispatch, before the activity becomes
// visible to terminals, so the exported gauge never goes below the
// activities in flight; a dispatch that puts nothing in flight takes it
// back. A panic of the instrument is reported.
func (t *Tracker) raise(ctx context.Context, ta *typeAttrs) {
	defer t.recovered()
	t.inst.inflight.Add(ctx, 1, ta.base...)
}

// one observes a single fact without a position: the per-fact methods.
func (t *Tracker) one(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, f fact, at time.Time) result {
	fx := getEffects(orBackground(ctx))
	defer putEffects(fx)
	f.at, f.live, f.call = nanos(at), true, t.callOf(fx.ctx)
	fx.facts = append(fx.facts, f)
	return t.observe(fx, namespace, workflowID)
}

// callOf is the store call of ctx, for the timeline's links; none when the
// timeline is off.
func (t *Tracker) callOf(ctx context.Context) callRef {
	if t.spans == nil {
		return callRef{}
	}
	return callOf(trace.SpanContextFromContext(ctx))
}

// orBackground returns ctx, or context.Background for a nil one: a nil
// context must not panic an instrument or the timeline.
func orBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
