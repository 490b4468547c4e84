package pairing

import (
	"context"
	"fmt"
	"time"

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

// spans makes the timeline spans: run spans from RunStarted to the run's
// close, activity spans from dispatch to first terminal, each started and
// ended at the times of history. A nil *spans makes none.
//
// A tracer and its spans run user code (span processors, samplers): each
// method recovers a panic of theirs and reports it to handle, so that it
// can neither fail the call nor leave the tracker's state half updated.
type spans struct {
	tracer trace.Tracer
	handle func(error)
}

func newSpans(tp trace.TracerProvider, on bool, handle func(error)) *spans {
	if _, noop := tp.(tracenoop.TracerProvider); noop || !on {
		return nil // a no-op provider would only cost allocations
	}
	return &spans{tracer: tp.Tracer(ScopeName, trace.WithInstrumentationVersion(version.Version),
		trace.WithSchemaURL(catalog.SchemaURL)), handle: handle}
}

// recovered is deferred by every method: it reports a panic of the tracer
// or a span instead of passing it on.
func (s *spans) recovered() {
	if r := recover(); r != nil {
		s.handle(fmt.Errorf("pairing: timeline span: panic: %v", r))
	}
}

// Link attributes, one set per role.
var (
	linkScheduled   = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkScheduled)}
	linkSettled     = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkSettled)}
	linkStarted     = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkStarted)}
	linkClosed      = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkClosed)}
	linkPreviousRun = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkPreviousRun)}
	linkNextRun     = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkNextRun)}
)

// callLink returns the link to the span of ctx (the store call being
// observed) with the role attrs, if ctx has a valid one.
func callLink(ctx context.Context, role []attribute.KeyValue) (trace.Link, bool) {
	sc := trace.SpanContextFromContext(ctx)
	return trace.Link{SpanContext: sc, Attributes: role}, sc.IsValid()
}

// anchorOf returns the run's derived anchor span context.
func anchorOf(rk runKey) trace.SpanContext {
	return timeline.Anchor(rk.namespace, rk.workflowID, rk.runID)
}

// internalKind is the kind of every timeline span, made once: an option
// built per span would cost an allocation.
var internalKind = trace.WithSpanKind(trace.SpanKindInternal)

// startActivity starts the span of the activity key, dispatched at at, as a
// child of parent (the run span) or, when the tracker holds no run span,
// of the run's anchor, linked to the store call of ctx. The type's
// attributes go to the sampler; the IDs are set only on a recording span.
func (s *spans) startActivity(ctx context.Context, key Key, ta *typeAttrs, runSpan trace.Span, at time.Time) (span trace.Span) {
	defer s.recovered()
	var parent trace.SpanContext
	if runSpan != nil {
		parent = runSpan.SpanContext()
	}
	if !parent.IsValid() {
		parent = anchorOf(key.run())
	}
	_, span = s.tracer.Start(trace.ContextWithSpanContext(ctx, parent), ta.spanName,
		internalKind, ta.spanStart, trace.WithTimestamp(at))
	if !span.IsRecording() {
		return span
	}
	span.SetAttributes(
		catalog.WorkflowID.String(key.WorkflowID.String()),
		catalog.RunID.String(key.RunID.String()),
		catalog.ActivityID.Int64(attrvalue.Int64(uint64(key.ActivityID))),
	)
	if l, ok := callLink(ctx, linkScheduled); ok {
		span.AddLink(l)
	}
	return span
}

// endActivity ends the span of a settled activity at at (never before its
// start), linked to the store call of ctx. A nil span is nothing to end.
func (s *spans) endActivity(ctx context.Context, t taken, outcome Outcome, at time.Time) {
	if t.span == nil {
		return
	}
	defer s.recovered()
	if !t.span.IsRecording() {
		t.span.End() // nothing is recorded: spare the options
		return
	}
	t.span.SetAttributes(
		catalog.ActivityOutcome.String(string(outcome)),
		catalog.RetryCount.Int64(int64(t.retries)),
	)
	if outcome == OutcomeFailed || outcome == OutcomeTimedOut {
		t.span.SetStatus(codes.Error, string(outcome))
	}
	if l, ok := callLink(ctx, linkSettled); ok {
		t.span.AddLink(l)
	}
	t.span.End(trace.WithTimestamp(notBefore(at, t.at)))
}

// retried adds the retry event n to the open span of an activity.
func (s *spans) retried(span trace.Span, n uint32, at time.Time) {
	if span == nil {
		return
	}
	defer s.recovered()
	if !span.IsRecording() {
		return
	}
	span.AddEvent(catalog.RetryEvent, trace.WithTimestamp(at),
		trace.WithAttributes(catalog.RetryCount.Int64(int64(n))))
}

// startRun starts the run span of rk, started at at, as a child of the
// run's anchor, linked to the store call of ctx and to prev, the run span of
// the run it continues (if known).
func (s *spans) startRun(ctx context.Context, rk runKey, wa *workflowAttrs, prev trace.SpanContext, at time.Time) (span trace.Span) {
	defer s.recovered()
	_, span = s.tracer.Start(trace.ContextWithSpanContext(ctx, anchorOf(rk)), wa.spanName,
		internalKind, wa.spanStart, trace.WithTimestamp(at))
	if !span.IsRecording() {
		return span
	}
	span.SetAttributes(
		catalog.WorkflowID.String(rk.workflowID.String()),
		catalog.RunID.String(rk.runID.String()),
	)
	if l, ok := callLink(ctx, linkStarted); ok {
		span.AddLink(l)
	}
	if prev.IsValid() {
		span.AddLink(trace.Link{SpanContext: prev, Attributes: linkPreviousRun})
	}
	return span
}

// endRun ends a run span at at (never before its start) with the run's
// status, linked to the store call of ctx and, for a continue-as-new, to
// the anchor of the next run.
func (s *spans) endRun(ctx context.Context, o openRun, status eventstore.WorkflowStatus, next trace.SpanContext, at time.Time) {
	if o.span == nil {
		return
	}
	defer s.recovered()
	if !o.span.IsRecording() {
		o.span.End()
		return
	}
	o.span.SetAttributes(catalog.WorkflowStatus.String(string(status)))
	if status == eventstore.StatusFailed || status == eventstore.StatusTimedOut {
		o.span.SetStatus(codes.Error, string(status))
	}
	if l, ok := callLink(ctx, linkClosed); ok {
		o.span.AddLink(l)
	}
	if next.IsValid() {
		o.span.AddLink(trace.Link{SpanContext: next, Attributes: linkNextRun})
	}
	o.span.End(trace.WithTimestamp(notBefore(at, o.at)))
}

// notBefore returns t, or start if t is before it.
func notBefore(t, start time.Time) time.Time {
	if t.Before(start) {
		return start
	}
	return t
}
