package pairing

import (
	"context"
	"reflect"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/timeline"
	"github.com/aionotel/aionotel/internal/version"
)

// spans makes the timeline: a run span from a run's start to its close, an
// activity span from a dispatch to its settlement, each at the times of
// history. A nil *spans makes none.
//
// Whether span IDs are derived (the provider's ID generator is the one of
// [NewIDGenerator]) is learned from the spans themselves: a span asks for
// its derived IDs through its context, and gets them only from that
// generator. While they are, a run span is a true root whose IDs are the
// run's [timeline.Root], and activity spans are its children whichever
// order the facts came in. While they are not, a run span is a child of
// that root context (an anchor that is never exported), and an activity
// span a child of its run span when this tracker holds it, else of the
// anchor.
type spans struct {
	tracers tracers
	ids     atomic.Int32
}

// What the spans taught about the provider's IDs.
const (
	idsUnknown int32 = iota
	idsDerived
	idsRandom
)

func newSpans(tp trace.TracerProvider, on bool) *spans {
	if !on {
		return nil
	}
	if _, noop := tp.(tracenoop.TracerProvider); noop {
		return nil // nothing would be recorded, at the cost of allocations
	}
	return &spans{tracers: tracers{fixed: tp, global: tp == nil || isGlobalDefault(tp)}}
}

// tracers gives the tracer spans are made with. A fixed provider gives one
// tracer; the global one is looked up again at every use, so that spans
// start once a program installs a provider (otel.SetTracerProvider) and,
// before that, cost nothing: the global default records nothing.
type tracers struct {
	fixed   trace.TracerProvider
	global  bool
	once    atomic.Pointer[cachedTracer]
	changed atomic.Bool // the provider changed since the spans last looked
}

type cachedTracer struct {
	tp         trace.TracerProvider
	comparable bool
	tracer     trace.Tracer // nil: the provider records nothing
}

func (t *tracers) get() trace.Tracer {
	c := t.once.Load()
	if c != nil && !t.global {
		return c.tracer // a fixed provider: looked up once
	}
	tp := t.fixed
	if t.global {
		tp = otel.GetTracerProvider()
	}
	if c != nil && c.comparable && sameType(c.tp, tp) && c.tp == tp {
		return c.tracer
	}
	c = &cachedTracer{tp: tp, comparable: reflect.TypeOf(tp).Comparable()}
	t.changed.Store(true) // what the spans taught is about another provider
	if !isGlobalDefault(tp) {
		if _, noop := tp.(tracenoop.TracerProvider); !noop {
			c.tracer = tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version.Version),
				trace.WithSchemaURL(catalog.SchemaURL))
		}
	}
	t.once.Store(c)
	return c.tracer
}

func sameType(a, b any) bool { return reflect.TypeOf(a) == reflect.TypeOf(b) }

// globalDefaultType is the type of the provider otel.GetTracerProvider
// returns before any is installed: it records nothing until one is.
var globalDefaultType = reflect.TypeOf(otel.GetTracerProvider())

func isGlobalDefault(tp trace.TracerProvider) bool {
	return tp != nil && reflect.TypeOf(tp) == globalDefaultType && globalDefaultType.String() == "*global.tracerProvider"
}

// idRequest asks the ID generator of [NewIDGenerator] for a span's derived
// IDs: a run span's (as a root) or an activity span's (in its run's trace).
type idRequest struct {
	run   bool
	trace trace.TraceID
	span  trace.SpanID
}

type idRequestKey struct{}

// internalKind is the kind of every timeline span, made once: an option
// built per span would cost an allocation.
var internalKind = trace.WithSpanKind(trace.SpanKindInternal)

// Link attributes, one set per role.
var (
	linkScheduled = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkScheduled)}
	linkSettled   = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkSettled)}
	linkStarted   = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkStarted)}
	linkClosed    = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkClosed)}
	linkNextRun   = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkNextRun)}
)

func rootOf(k Key) trace.SpanContext { return timeline.Root(k.Namespace, k.WorkflowID, k.RunID) }

// tracer returns the tracer spans are made with, nil if none records; when
// the provider changed, what the spans taught about its IDs is forgotten.
func (s *spans) tracer() trace.Tracer {
	tr := s.tracers.get()
	if s.tracers.changed.Load() && s.tracers.changed.CompareAndSwap(true, false) {
		s.ids.Store(idsUnknown)
	}
	return tr
}

// startActivity opens the span of an activity now in flight; nil if no
// span can be made.
func (s *spans) startActivity(ctx context.Context, e *effect, w *spanWork) trace.Span {
	if s == nil {
		return nil
	}
	tr := s.tracer()
	if tr == nil {
		return nil
	}
	return s.openActivity(ctx, tr, e, w)
}

// openActivity starts an activity span at its dispatch, as a child of its
// run span (or the run's root), linked to the call that wrote the
// dispatch.
func (s *spans) openActivity(ctx context.Context, tr trace.Tracer, e *effect, w *spanWork) trace.Span {
	k := w.key
	root := rootOf(k)
	parent := root
	if s.ids.Load() != idsDerived && w.parent.span.IsValid() {
		parent = w.parent.spanContext()
	}
	ctx = trace.ContextWithSpanContext(ctx, parent)
	var want trace.SpanID
	if s.ids.Load() != idsRandom { // ask for the derived ID, and learn whether it comes
		want = timeline.ActivitySpanID(k.Namespace, k.WorkflowID, k.RunID, k.ActivityID)
		ctx = context.WithValue(ctx, idRequestKey{}, idRequest{trace: root.TraceID(), span: want})
	}
	_, span := tr.Start(ctx, e.ta.spanName, internalKind, e.ta.spanStart, trace.WithTimestamp(timeOf(e.from)))
	if sc := span.SpanContext(); sc.IsValid() && want.IsValid() {
		if sc.SpanID() == want {
			s.ids.Store(idsDerived)
		} else {
			s.ids.Store(idsRandom)
		}
	}
	if !span.IsRecording() {
		return span
	}
	span.SetAttributes(
		catalog.WorkflowID.String(k.WorkflowID.String()),
		catalog.RunID.String(k.RunID.String()),
		catalog.ActivityID.Int64(attrvalue.Int64(uint64(k.ActivityID))),
	)
	if w.start.span.IsValid() {
		span.AddLink(trace.Link{SpanContext: w.start.spanContext(), Attributes: linkScheduled})
	}
	return span
}

// settle ends a settled activity's span, or makes it whole from its
// dispatch when it has none: outcome, the claims of its outbox row and its
// retries as events at their times, a link to the call that wrote the
// settling fact, status Error for failed and timed_out.
func (s *spans) settle(ctx context.Context, e *effect, w *spanWork, retryTimes, claimTimes []int64) {
	if s == nil {
		return
	}
	span := e.span
	if span == nil {
		tr := s.tracer()
		if tr == nil {
			return
		}
		span = s.openActivity(ctx, tr, e, w)
	}
	if !span.IsRecording() {
		span.End() // nothing is recorded: spare the options
		return
	}
	outcome := outcomes[e.outcome]
	span.SetAttributes(
		catalog.ActivityOutcome.String(string(outcome)),
		catalog.RetryCount.Int64(int64(e.retries)),
	)
	end := max(e.to, e.from)
	for i, at := range claimTimes { // within the span: a clock apart from history's may put one outside
		span.AddEvent(catalog.ClaimEvent, trace.WithTimestamp(timeOf(min(max(at, e.from), end))),
			trace.WithAttributes(catalog.ClaimCount.Int64(int64(i+1))))
	}
	for i, at := range retryTimes {
		span.AddEvent(catalog.RetryEvent, trace.WithTimestamp(timeOf(at)),
			trace.WithAttributes(catalog.RetryCount.Int64(int64(i+1))))
	}
	if outcome == OutcomeFailed || outcome == OutcomeTimedOut {
		span.SetStatus(codes.Error, string(outcome))
	}
	if w.end.span.IsValid() {
		span.AddLink(trace.Link{SpanContext: w.end.spanContext(), Attributes: linkSettled})
	}
	span.End(trace.WithTimestamp(timeOf(end)))
}

// startRun opens the span of a run now open; nil if no span can be made.
func (s *spans) startRun(ctx context.Context, e *effect, w *spanWork) trace.Span {
	if s == nil {
		return nil
	}
	tr := s.tracer()
	if tr == nil {
		return nil
	}
	return s.openRun(ctx, tr, e, w)
}

// openRun starts a run span at its start, linked to the call that wrote
// the start: a root with the run's derived IDs when the provider derives
// them, else a child of the run's anchor. Until the tracker knows, it
// tries the root first and, if the IDs come back random, drops that span
// unended (so it is never exported) and starts the child.
func (s *spans) openRun(ctx context.Context, tr trace.Tracer, e *effect, w *spanWork) trace.Span {
	root := rootOf(w.key)
	name, attrs := e.wa.spanName, e.wa.spanStart
	var span trace.Span
	if s.ids.Load() != idsRandom {
		ctx := context.WithValue(ctx, idRequestKey{}, idRequest{run: true, trace: root.TraceID(), span: root.SpanID()})
		_, span = tr.Start(ctx, name, internalKind, attrs, trace.WithTimestamp(timeOf(e.from)), trace.WithNewRoot())
		if sc := span.SpanContext(); sc.TraceID() != root.TraceID() || sc.SpanID() != root.SpanID() {
			s.ids.Store(idsRandom)
			span = nil // a random trace: dropped unended
		}
	}
	if span == nil {
		_, span = tr.Start(trace.ContextWithSpanContext(ctx, root), name, internalKind, attrs, trace.WithTimestamp(timeOf(e.from)))
	}
	if !span.IsRecording() {
		return span
	}
	span.SetAttributes(
		catalog.WorkflowID.String(w.key.WorkflowID.String()),
		catalog.RunID.String(w.key.RunID.String()),
	)
	if w.start.span.IsValid() {
		span.AddLink(trace.Link{SpanContext: w.start.spanContext(), Attributes: linkStarted})
	}
	return span
}

// close ends a closed run's span, or makes it whole from its start when it
// has none: status, a link to the call that wrote the close and, for a
// continue-as-new, to the next run's root.
func (s *spans) close(ctx context.Context, e *effect, w *spanWork) {
	if s == nil || e.wa == nil {
		return
	}
	span := e.span
	if span == nil {
		tr := s.tracer()
		if tr == nil {
			return
		}
		span = s.openRun(ctx, tr, e, w)
	}
	if !span.IsRecording() {
		span.End()
		return
	}
	status := statuses[e.status]
	span.SetAttributes(catalog.WorkflowStatus.String(string(status)))
	if status == eventstore.StatusFailed || status == eventstore.StatusTimedOut {
		span.SetStatus(codes.Error, string(status))
	}
	if w.end.span.IsValid() {
		span.AddLink(trace.Link{SpanContext: w.end.spanContext(), Attributes: linkClosed})
	}
	if w.next != (eventstore.RunID{}) && w.next != w.key.RunID {
		span.AddLink(trace.Link{SpanContext: timeline.Root(w.key.Namespace, w.key.WorkflowID, w.next), Attributes: linkNextRun})
	}
	span.End(trace.WithTimestamp(timeOf(max(e.to, e.from))))
}
