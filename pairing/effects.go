package pairing

import (
	"context"
	"fmt"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// An effect is one thing the join decided to record: the join appends
// effects under its lock, and the tracker applies them after unlocking, so
// no lock is held while an instrument, a tracer or a span processor runs.
type effect struct {
	op      effectOp
	ta      *typeAttrs
	wa      *workflowAttrs
	ns      *nsAttrs
	outcome int // opSettle
	status  int // opClose
	// from and to are the pairing's times: dispatch (or start) and
	// settlement (or close), Unix nanoseconds.
	from, to int64
	// span is the open span a settlement ends; nil: make the span whole.
	span trace.Span
	// What a span made here needs: the key, the parent the join knew
	// (the run span's context, if held), the calls that wrote the first
	// and last facts, the retries (count, and times in effects.times
	// from retryAt), the next run of a continue-as-new.
	key        Key
	parent     trace.SpanContext
	start, end callRef
	retries    uint32
	retryAt    int
	retryTimes int
	next       eventstore.RunID
	// The item an opened span is attached to, and its use; for an
	// activity's span, also its run, whose span may be opened in the same
	// call.
	act    *activity
	run    *run
	gen    uint64
	runGen uint64
}

type effectOp uint8

const (
	opGauge         effectOp = iota // aion.inflight_activities -1 (a release, or a dispatch that put nothing in flight)
	opDispatched                    // aion.activities.dispatched +1
	opRetried                       // aion.activities.retried +1
	opSettle                        // an activity's completion, duration and span
	opEvicted                       // a live activity dropped: gauge -1, aion.activity.pairing.evicted +1
	opRunEvicted                    // an open run dropped
	opForgotten                     // a remembered fact dropped before its partner
	opClose                         // a run's duration and span
	opStartActivity                 // open the span of an activity now in flight
	opStartRun                      // open the span of a run now open
)

// effects is the work of one call: its facts, then what the join decided.
// Pooled, so a call allocates nothing for it in steady state.
type effects struct {
	ctx    context.Context
	facts  []fact
	list   []effect
	times  []int64    // retry times of settled activities' span events
	ranges []seqRange // the history positions of the facts' batch
	// opened are the spans started by opStart effects, to attach.
	opened []opened
}

type opened struct {
	act  *activity
	run  *run
	gen  uint64
	span trace.Span
	sc   trace.SpanContext
}

func (fx *effects) add(e effect) { fx.list = append(fx.list, e) }

var effectsPool = sync.Pool{New: func() any { return new(effects) }}

func getEffects(ctx context.Context) *effects {
	fx := effectsPool.Get().(*effects)
	fx.ctx = ctx
	return fx
}

// putEffects clears fx (its references to spans, contexts and items) and
// returns it to the pool.
func putEffects(fx *effects) {
	clear(fx.facts)
	clear(fx.list)
	clear(fx.opened)
	*fx = effects{facts: fx.facts[:0], list: fx.list[:0], times: fx.times[:0], ranges: fx.ranges[:0], opened: fx.opened[:0]}
	effectsPool.Put(fx)
}

// apply records the effects, in order. Each runs user code (instruments,
// tracers, span processors), so each recovers a panic of its own and
// reports it: the others still run, so the gauge stays balanced.
func (t *Tracker) apply(fx *effects) {
	for i := range fx.list {
		t.applyOne(fx, &fx.list[i])
	}
	if len(fx.opened) > 0 {
		t.attach(fx.opened)
	}
}

func (t *Tracker) applyOne(fx *effects, e *effect) {
	defer t.recovered()
	ctx := fx.ctx
	switch e.op {
	case opGauge:
		t.inst.inflight.Add(ctx, -1, e.ta.base...)
	case opDispatched:
		t.inst.dispatched.Add(ctx, 1, e.ta.base...)
	case opRetried:
		t.inst.retried.Add(ctx, 1, e.ta.base...)
	case opSettle:
		t.inst.completed.Add(ctx, 1, e.ta.completed[e.outcome]...)
		t.inst.duration.Record(ctx, secondsBetween(e.from, e.to), e.ta.duration[e.outcome]...)
		fx.runSpan(e)
		t.spans.settle(ctx, e, fx.times[e.retryAt:e.retryAt+e.retryTimes])
	case opEvicted:
		t.inst.inflight.Add(ctx, -1, e.ta.base...)
		t.inst.evicted.Add(ctx, 1, e.ta.ns.evicted...)
	case opRunEvicted:
		if e.ns != nil {
			t.inst.runEvicted.Add(ctx, 1, e.ns.evicted...)
		}
	case opForgotten:
		if e.ns != nil {
			t.inst.forgotten.Add(ctx, 1, e.ns.evicted...)
		}
	case opClose:
		if e.wa != nil {
			t.inst.workflowDuration.Record(ctx, secondsBetween(e.from, e.to), e.wa.duration[e.status]...)
		}
		t.spans.close(ctx, e)
	case opStartActivity:
		fx.runSpan(e)
		if span := t.spans.startActivity(ctx, e); span != nil {
			fx.opened = append(fx.opened, opened{act: e.act, gen: e.gen, span: span, sc: span.SpanContext()})
		}
	case opStartRun:
		if span := t.spans.startRun(ctx, e); span != nil {
			fx.opened = append(fx.opened, opened{run: e.run, gen: e.gen, span: span, sc: span.SpanContext()})
		}
	}
}

// runSpan makes a run span opened earlier in the same call the parent of
// an activity span about to be made, when the join did not hold it yet.
func (fx *effects) runSpan(e *effect) {
	if e.parent.IsValid() || e.run == nil {
		return
	}
	for _, o := range fx.opened {
		if o.run == e.run && o.gen == e.runGen {
			e.parent = o.sc
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
		case o.act != nil && o.act.gen == o.gen && o.act.state == actLive && o.act.span == nil:
			o.act.span, o.act.spanSC = o.span, o.sc
		case o.run != nil && o.run.gen == o.gen && o.run.state == runOpen && o.run.span == nil:
			o.run.span, o.run.spanSC = o.span, o.sc
		}
	}
}
