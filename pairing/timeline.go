package pairing

import (
	"context"
	"sync"
	"sync/atomic"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/livetracer"
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
//
// The tracer comes from a livetracer.Source: a fixed provider's, or the
// global provider's at each use, nil while that records nothing (the
// global default, before a program installs one). While it is nil the
// join prepares no span work at all (see followers).
type spans struct {
	src *livetracer.Source
	ids atomic.Int32
	// following is set once the join is registered with the followers.
	following atomic.Bool
}

// What the spans taught about the provider's IDs.
const (
	idsUnknown int32 = iota
	idsDerived
	idsRandom
)

func newSpans(tp trace.TracerProvider, on bool) *spans {
	if !on || (tp != nil && livetracer.Quiet(tp)) {
		return nil // nothing would be recorded, at the cost of allocations
	}
	return &spans{src: livetracer.New(tp, ScopeName, trace.WithInstrumentationVersion(version.Version),
		trace.WithSchemaURL(catalog.SchemaURL))}
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
	tr := s.src.Tracer()
	if s.src.Changed() {
		s.ids.Store(idsUnknown)
	}
	return tr
}

// Trackers whose timeline follows the global provider have their joins
// prepare span work only while that provider records: every call, before
// it takes its join's lock, looks the provider up (getEffects calls
// syncFollowers), and when whether it records changed since the last
// look, every such join is told. So a program that never installs a
// provider pays nothing for the timeline, and the first call after
// otel.SetTracerProvider already makes spans: an activity in flight then
// gets its span whole at its settlement, a run at its close.
var followers struct {
	n     atomic.Int32 // joins registered, read without the lock
	state atomic.Int32 // followUnknown, followQuiet or followRecords, as last told
	mu    sync.Mutex
	joins []weak.Pointer[join]
}

const (
	followUnknown int32 = iota
	followQuiet
	followRecords
)

// follow registers t's join with the followers, once, and tells it the
// provider's state now.
func (t *Tracker) follow() {
	s := t.spans
	if s == nil || !s.src.Global() || s.following.Load() || !s.following.CompareAndSwap(false, true) {
		return
	}
	followers.mu.Lock()
	defer followers.mu.Unlock()
	live := followers.joins[:0]
	for _, w := range followers.joins {
		if w.Value() != nil {
			live = append(live, w)
		}
	}
	followers.joins = append(live, weak.Make(t.join))
	followers.n.Store(int32(len(followers.joins)))
	on := livetracer.GlobalRecords()
	followers.state.Store(followState(on))
	for _, w := range followers.joins {
		if j := w.Value(); j != nil {
			j.mu.Lock()
			j.spans = on
			j.mu.Unlock()
		}
	}
}

func followState(on bool) int32 {
	if on {
		return followRecords
	}
	return followQuiet
}

// syncFollowers tells the registered joins whether the global provider
// records, if that changed since they were last told. Locks are taken in
// one order: the followers', then each join's.
func syncFollowers() {
	if followers.n.Load() == 0 || followState(livetracer.GlobalRecords()) == followers.state.Load() {
		return
	}
	followers.mu.Lock()
	defer followers.mu.Unlock()
	on := livetracer.GlobalRecords() // again, under the lock: the last look wins
	followers.state.Store(followState(on))
	for _, w := range followers.joins {
		if j := w.Value(); j != nil {
			j.mu.Lock()
			j.spans = on
			j.mu.Unlock()
		}
	}
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
// dispatch when it has none: outcome, retries as events at their times, a
// link to the call that wrote the settling fact, status Error for failed
// and timed_out.
func (s *spans) settle(ctx context.Context, e *effect, w *spanWork, retryTimes []int64) {
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
	span.End(trace.WithTimestamp(timeOf(max(e.to, e.from))))
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
