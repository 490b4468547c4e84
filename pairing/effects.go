package pairing

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/livetracer"
)

// An effect is one thing the join decided to record: the join appends
// effects under its lock, and the tracker applies them after unlocking, so
// no lock is held while an instrument, a tracer or a span processor runs.
type effect struct {
	op      effectOp
	outcome uint8  // opSettle: index in outcomes
	status  uint8  // opClose: index in statuses
	retries uint32 // opSettle: the activity's retries
	release bool   // opSettle: also the gauge -1 of an activity leaving flight
	ta      *typeAttrs
	wa      *workflowAttrs
	ns      *nsAttrs
	// from and to are the pairing's times: dispatch (or start) and
	// settlement (or close), Unix nanoseconds.
	from, to int64
	// span is the open span a settlement ends; nil: make the span whole.
	span trace.Span
	// work is 1 + the index in effects.work of what a span made or opened
	// here needs; 0 when the timeline is off.
	work int32
}

// spanWork is what making or opening a timeline span needs beyond the
// effect: the key (and what its run's spans share, if the join held it or
// the span looked it up), the parent the join knew (the run span, if
// held), the calls that wrote the first and last facts, the retries' and
// the claims' times (in effects.times), the next run of a
// continue-as-new, and the item an opened span is attached to, with its
// use (and, for an activity, its run's, whose span may be opened in the
// same call).
type spanWork struct {
	key                 Key
	parent, start, end  callRef
	retryAt, retryTimes int32
	claimAt, claimTimes int32
	next                eventstore.RunID
	nextWF              eventstore.WorkflowID
	act                 *activity
	run                 *run
	gen, runGen         uint64
	ids                 *runIDs
	// lateStart: the span being ended was opened before the call that
	// wrote its first fact was known (that fact was read back first), so
	// the end links start too.
	lateStart bool
}

type effectOp uint8

const (
	opNone          effectOp = iota // cancelled
	opGauge                         // aion.inflight_activities -1 (a release, or a dispatch that put nothing in flight)
	opDispatched                    // aion.activities.dispatched +1
	opRetried                       // aion.activities.retried +1
	opSettle                        // an activity's completion, duration and span
	opWait                          // aion.activity.wait.duration: from dispatch to the first claim
	opEvicted                       // a live activity dropped: gauge -1, aion.activity.pairing.evicted +1
	opRunEvicted                    // an open run dropped
	opForgotten                     // a remembered fact dropped before its partner
	opClose                         // a run's duration and span
	opStartActivity                 // open the span of an activity now in flight
	opStartRun                      // open the span of a run now open
	opReleased                      // an entry given up at a handoff: for an activity (ta set), also the gauge -1
)

// effects is the work of one call: its facts, then what the join decided.
// Pooled, so a call allocates nothing for it in steady state.
type effects struct {
	ctx    context.Context
	facts  []fact
	list   []effect
	work   []spanWork
	times  []int64    // retry and claim times of settled activities' span events
	ranges []seqRange // the history positions of the facts' batch
	// opened are the spans started by opStart effects, to attach.
	opened []opened
	// retired are the activities this call settled and recorded: once its
	// facts are applied they are kept as ranges of their runs.
	retired []*activity
	// history is the reader a gap of a live batch is filled from (nil:
	// none); fill is the token of the fill whose history this call joins
	// (0: not a fill); gap and fillReq are what the call decided.
	history HistoryReader
	fill    uint64
	gap     uint8
	fillReq fillRequest
	// lookup is the call's look at the global provider, for its spans.
	lookup livetracer.Lookup
}

type opened struct {
	act  *activity
	run  *run
	gen  uint64
	span trace.Span
	sc   trace.SpanContext
	// quiet: span records nothing. Learned here, outside the join's lock,
	// since IsRecording is user code; a span that does not record at its
	// start never does.
	quiet bool
	ids   *runIDs // its run's shared values, for the run to keep
	// ended: the span of a closed run, made whole; only its context is
	// kept, as the parent of the run's activity spans made later.
	ended bool
}

func (fx *effects) add(e effect) { fx.list = append(fx.list, e) }

// addWork keeps w for the effect about to be added and returns its ref.
func (fx *effects) addWork(w spanWork) int32 {
	fx.work = append(fx.work, w)
	return int32(len(fx.work))
}

// workOf returns e's span work, nil if it has none.
func (fx *effects) workOf(e *effect) *spanWork {
	if e.work == 0 {
		return nil
	}
	return &fx.work[e.work-1]
}

// cancel drops the effect that would open an item's span, if this call
// added one (*opening is 1 + its index): the item left flight in the same
// call, and its settlement makes the span whole instead.
func (fx *effects) cancel(opening *int32) {
	if *opening > 0 {
		fx.list[*opening-1].op = opNone
		*opening = 0
	}
}

// sealOpenings forgets, before the lock is released, which effects open
// which items' spans: the indices are this call's.
func (fx *effects) sealOpenings() {
	for i := range fx.list {
		if e := &fx.list[i]; e.op == opStartActivity || e.op == opStartRun {
			if w := fx.workOf(e); w.act != nil {
				w.act.opening = 0
			} else {
				w.run.opening = 0
			}
		}
	}
}

var effectsPool = sync.Pool{New: func() any { return new(effects) }}

// getEffects starts a call that looks the global provider up itself.
func getEffects(ctx context.Context) *effects { return getEffectsAt(ctx, livetracer.Lookup{}) }

// getEffectsAt starts a call whose look at the global provider is lk (the
// decorated store call's, through pairinghook). It runs before the call
// takes the join's lock, and first tells the joins that follow the global
// provider whether it records now (syncFollowers).
func getEffectsAt(ctx context.Context, lk livetracer.Lookup) *effects {
	fx := effectsPool.Get().(*effects)
	fx.ctx, fx.lookup = ctx, lk
	syncFollowers(&fx.lookup)
	return fx
}

// putEffects clears fx (its references to spans, contexts and items) and
// returns it to the pool.
func putEffects(fx *effects) {
	clear(fx.facts)
	clear(fx.list)
	clear(fx.work)
	clear(fx.opened)
	clear(fx.retired)
	fx.fillReq = fillRequest{}
	*fx = effects{facts: fx.facts[:0], list: fx.list[:0], work: fx.work[:0], times: fx.times[:0], ranges: fx.ranges[:0], opened: fx.opened[:0], retired: fx.retired[:0]}
	effectsPool.Put(fx)
}

// apply records the effects, in order. Each runs user code (instruments,
// tracers, span processors), so each recovers a panic of its own and
// reports it: the others still run, so the gauge stays balanced.
func (t *Tracker) apply(fx *effects) {
	t.openClosedRuns(fx)
	for i := 0; i < len(fx.list); {
		i = t.applyFrom(fx, i)
	}
	if len(fx.opened) > 0 {
		t.attach(fx.opened)
	}
	t.follow()
}

// applyFrom applies the effects from i on and returns where it stopped:
// the end, or past an effect that panicked, which is reported.
func (t *Tracker) applyFrom(fx *effects, i int) (next int) {
	defer func() {
		if r := recover(); r != nil {
			t.handle(fmt.Errorf("pairing: telemetry panicked: %v", r))
			next = i + 1
		}
	}()
	for ; i < len(fx.list); i++ {
		t.applyOne(fx, &fx.list[i])
	}
	return i
}

func (t *Tracker) applyOne(fx *effects, e *effect) {
	ctx := fx.ctx
	switch e.op {
	case opGauge:
		t.inst.inflight.Add(ctx, -1, e.ta.base...)
	case opDispatched:
		t.inst.dispatched.Add(ctx, 1, e.ta.base...)
	case opRetried:
		t.inst.retried.Add(ctx, 1, e.ta.base...)
	case opSettle:
		if e.release {
			t.inst.inflight.Add(ctx, -1, e.ta.base...)
		}
		t.inst.completed.Add(ctx, 1, e.ta.completed[e.outcome]...)
		t.inst.duration.Record(ctx, secondsBetween(e.from, e.to), e.ta.duration[e.outcome]...)
		if w := fx.workOf(e); w != nil {
			fx.runSpan(w)
			t.spans.settle(ctx, &fx.lookup, e, w, fx.times[w.retryAt:w.retryAt+w.retryTimes], fx.times[w.claimAt:w.claimAt+w.claimTimes])
		} else if e.span != nil {
			e.span.End() // it records nothing: spare the span work
		}
	case opWait:
		t.inst.wait.Record(ctx, secondsBetween(e.from, e.to), e.ta.wait...)
	case opEvicted:
		t.inst.inflight.Add(ctx, -1, e.ta.base...)
		t.inst.evicted.Add(ctx, 1, e.ta.ns.evicted...)
	case opRunEvicted:
		if e.ns != nil {
			t.inst.runEvicted.Add(ctx, 1, e.ns.evicted...)
		}
	case opReleased:
		if e.ta != nil {
			t.inst.inflight.Add(ctx, -1, e.ta.base...)
		}
		t.inst.released.Add(ctx, 1, e.ns.evicted...)
	case opForgotten:
		if e.ns != nil {
			t.inst.forgotten.Add(ctx, 1, e.ns.evicted...)
		}
	case opClose:
		if e.wa != nil {
			t.inst.workflowDuration.Record(ctx, secondsBetween(e.from, e.to), e.wa.duration[e.status]...)
		}
		if w := fx.workOf(e); w != nil {
			if span := t.spans.close(ctx, &fx.lookup, e, w); span != nil && w.run != nil {
				// Its context stays the parent of the run's later
				// activity spans (a terminal observed after the close).
				fx.opened = append(fx.opened, opened{run: w.run, gen: w.gen, sc: span.SpanContext(), ended: true})
			}
		}
	case opStartActivity:
		w := fx.workOf(e)
		fx.runSpan(w)
		if span := t.spans.startActivity(ctx, &fx.lookup, e, w); span != nil {
			fx.opened = append(fx.opened, opened{act: w.act, gen: w.gen, span: span, sc: span.SpanContext(), quiet: !span.IsRecording(), ids: w.ids})
		}
	case opStartRun:
		w := fx.workOf(e)
		if span := t.spans.startRun(ctx, &fx.lookup, e, w); span != nil {
			fx.opened = append(fx.opened, opened{run: w.run, gen: w.gen, span: span, sc: span.SpanContext(), ids: w.ids})
		}
	}
}

// openClosedRuns starts, ahead of the other effects, the span of a run
// that this call makes whole (started and closed here) when this call also
// makes the span of one of its activities: the activity span is then its
// child, whatever the order of the two effects (a terminal comes before
// the close in history, and an abandoned activity is settled after it).
// Without the ID generator the run span's ID is random, so an activity
// span made first could only hang under the run's anchor. The run span is
// ended by its close effect, as if it had been held.
func (t *Tracker) openClosedRuns(fx *effects) {
	if t.spans == nil || len(fx.work) == 0 {
		return
	}
	defer t.recovered()
	for i := range fx.list {
		c := &fx.list[i]
		if c.op != opClose || c.span != nil || c.wa == nil {
			continue
		}
		cw := fx.workOf(c)
		if cw == nil || cw.run == nil || !t.hasChildSpan(fx, cw) {
			continue
		}
		tr := t.spans.tracer(&fx.lookup)
		if tr == nil {
			return
		}
		span := t.spans.openRun(fx.ctx, tr, c, cw)
		c.span = span
		fx.opened = append(fx.opened, opened{run: cw.run, gen: cw.gen, span: span, sc: span.SpanContext(), ids: cw.ids, ended: true})
	}
}

// hasChildSpan reports whether fx makes the span of an activity of the
// run closed by the effect whose work is cw, without a parent known.
func (t *Tracker) hasChildSpan(fx *effects, cw *spanWork) bool {
	for i := range fx.list {
		e := &fx.list[i]
		if e.op != opSettle || e.span != nil {
			continue
		}
		if w := fx.workOf(e); w != nil && w.run == cw.run && w.runGen == cw.gen && !w.parent.span.IsValid() {
			return true
		}
	}
	return false
}

// runSpan makes a run span opened earlier in the same call the parent of
// an activity span about to be made, when the join did not hold it yet.
func (fx *effects) runSpan(w *spanWork) {
	if w.parent.span.IsValid() || w.run == nil {
		return
	}
	for _, o := range fx.opened {
		if o.run == w.run && o.gen == w.runGen {
			w.parent = callOf(o.sc)
			return
		}
	}
}

// recovered is deferred around user code: it reports a panic instead of
// passing it on.
func (t *Tracker) recovered() {
	if r := recover(); r != nil {
		t.handle(fmt.Errorf("pairing: telemetry panicked: %v", r))
	}
}

// attach gives the spans just opened to their activities and runs, if
// these still want them: an item that settled meanwhile got a whole span
// of its own, so its opened one is dropped unended and never exported.
func (t *Tracker) attach(spans []opened) {
	j := t.join
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, o := range spans {
		switch {
		case o.ended:
			if o.run.gen == o.gen && o.run.state == runDone && !o.run.spanRef().span.IsValid() {
				j.runFacts(o.run).spanRef = callOf(o.sc)
			}
		case o.act != nil && o.act.gen == o.gen && o.act.state == actLive && o.act.span() == nil:
			x := j.facts(o.act)
			x.span, x.spanSC, o.act.spanQuiet = o.span, o.sc, o.quiet
			j.keepIDs(o.act.run, o.ids)
		case o.run != nil && o.run.gen == o.gen && o.run.state == runOpen && o.run.span() == nil:
			x := j.runFacts(o.run)
			x.span, x.spanRef = o.span, callOf(o.sc)
			j.keepIDs(o.run, o.ids)
		}
	}
}
