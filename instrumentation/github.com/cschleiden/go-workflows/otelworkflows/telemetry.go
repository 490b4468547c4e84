package otelworkflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// telemetry holds the decorator's own instruments and tracer.
type telemetry struct {
	tp        trace.TracerProvider // nil: the global one, at each call
	duration  metric.Float64Histogram
	started   metric.Int64Counter
	completed metric.Int64Counter
	signals   metric.Int64Counter
	taskWait  metric.Float64Histogram
	filter    func(context.Context, Operation) bool
	classify  func(error) string

	base      []attribute.KeyValue // aion.namespace and WithAttributes
	spanAttrs [len(operations)][]attribute.KeyValue
	okSets    [len(operations)]metric.MeasurementOption
	opIndex   map[Operation]int

	types      typeLimiter
	classified typeLimiter // custom error.type values
	statusSets [numStatuses]metric.MeasurementOption
	signalSet  metric.MeasurementOption
}

// The aion.workflow.status values of go-workflows' closes.
const (
	statusCompleted = iota
	statusFailed
	statusCancelled
	statusContinuedAsNew
	numStatuses
)

var statusNames = [numStatuses]string{"completed", "failed", "cancelled", "continued_as_new"}

func newTelemetry(c *config) *telemetry {
	mp := c.mp
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	t := &telemetry{tp: c.tp, filter: c.filter, classify: c.classify, opIndex: make(map[Operation]int, len(operations))}
	limit := c.typeLimit
	if limit <= 0 {
		limit = 512
	}
	t.types = typeLimiter{limit: limit}
	t.classified = typeLimiter{limit: 64, other: otherError}
	scope := []metric.MeterOption{metric.WithInstrumentationVersion(Version()), metric.WithSchemaURL(semconv.SchemaURL)}
	meter := mp.Meter(ScopeName, scope...)
	var err error
	if t.duration, err = meter.Float64Histogram(storeOperationDuration, metric.WithUnit("s"),
		metric.WithDescription("Duration of go-workflows backend calls."),
		metric.WithExplicitBucketBoundaries(durationBoundaries...)); err != nil {
		otel.Handle(err)
	}
	if t.started, err = meter.Int64Counter(workflowsStarted, metric.WithUnit("{workflow}"),
		metric.WithDescription("Workflow runs started.")); err != nil {
		otel.Handle(err)
	}
	if t.completed, err = meter.Int64Counter(workflowsCompleted, metric.WithUnit("{workflow}"),
		metric.WithDescription("Workflow runs closed, by status.")); err != nil {
		otel.Handle(err)
	}
	if t.signals, err = meter.Int64Counter(signalsDelivered, metric.WithUnit("{signal}"),
		metric.WithDescription("Signals delivered to workflow runs.")); err != nil {
		otel.Handle(err)
	}
	if t.taskWait, err = meter.Float64Histogram(workflowTaskWait, metric.WithUnit("s"),
		metric.WithDescription("Time a workflow task waited before a worker claimed it, from its first new event."),
		metric.WithExplicitBucketBoundaries(durationBoundaries...)); err != nil {
		otel.Handle(err)
	}
	ns := attribute.String(keyNamespace, clean(c.namespace))
	t.base = append([]attribute.KeyValue{ns}, c.attrs...) // admitted by New
	dbSystem := semconv.DBSystemNameKey.String(clean(c.dbSystem))
	for i, op := range operations {
		t.opIndex[op] = i
		t.spanAttrs[i] = append([]attribute.KeyValue{semconv.DBOperationName(string(op)), dbSystem}, t.base...)
		t.okSets[i] = metric.WithAttributeSet(attribute.NewSet(t.spanAttrs[i]...))
	}
	for s := range numStatuses {
		t.statusSets[s] = metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{attribute.String(keyWorkflowStatus, statusNames[s])}, t.base...)...))
	}
	t.signalSet = metric.WithAttributeSet(attribute.NewSet(append([]attribute.KeyValue{attribute.String(keySignalDelivery, "resident")}, t.base...)...))
	return t
}

func (t *telemetry) tracerOf() trace.Tracer {
	tp := t.tp
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(ScopeName, trace.WithInstrumentationVersion(Version()), trace.WithSchemaURL(semconv.SchemaURL))
}

// call is one timed backend call.
type call struct {
	ctx   context.Context
	span  trace.Span
	op    int
	start time.Time
}

// begin starts the span (unless the filter says no) and the clock of op.
func (t *telemetry) begin(ctx context.Context, op Operation, attrs ...attribute.KeyValue) call {
	i := t.opIndex[op]
	c := call{ctx: ctx, op: i}
	if t.wantSpan(ctx, op) {
		opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(t.spanAttrs[i]...)}
		if len(attrs) > 0 {
			opts = append(opts, trace.WithAttributes(attrs...))
		}
		c.ctx, c.span = t.tracerOf().Start(ctx, string(op), opts...)
	}
	c.start = time.Now()
	return c
}

func (t *telemetry) wantSpan(ctx context.Context, op Operation) (ok bool) {
	if t.filter == nil {
		return true
	}
	defer func() {
		if r := recover(); r != nil {
			otel.Handle(fmt.Errorf("otelworkflows: span filter panicked: %v", r))
			ok = true
		}
	}()
	return t.filter(ctx, op)
}

// end records the call's duration and ends its span; err is the inner
// call's error, returned unchanged by the caller.
func (t *telemetry) end(c call, err error, attrs ...attribute.KeyValue) {
	d := time.Since(c.start).Seconds()
	if err == nil {
		if t.duration != nil {
			t.duration.Record(c.ctx, d, t.okSets[c.op])
		}
		if c.span != nil {
			if len(attrs) > 0 {
				c.span.SetAttributes(attrs...)
			}
			c.span.End()
		}
		return
	}
	et := t.errorType(err)
	if t.duration != nil {
		kv := append(append(make([]attribute.KeyValue, 0, len(t.spanAttrs[c.op])+1), t.spanAttrs[c.op]...), semconv.ErrorTypeKey.String(et))
		t.duration.Record(c.ctx, d, metric.WithAttributeSet(attribute.NewSet(kv...)))
	}
	if c.span != nil {
		c.span.SetAttributes(append(attrs, semconv.ErrorTypeKey.String(et))...)
		c.span.SetStatus(codes.Error, cut(clean(errText(err)), 1024))
		c.span.End()
	}
}

// errorType classifies err for error.type.
func (t *telemetry) errorType(err error) (et string) {
	defer func() {
		if recover() != nil {
			et = otherError
		}
	}()
	if t.classify != nil {
		if v := t.classify(err); v != "" {
			return t.classified.get(clean(v))
		}
	}
	var ns backend.ErrNotSupported
	switch {
	case errors.Is(err, backend.ErrInstanceNotFound):
		return "instance_not_found"
	case errors.Is(err, backend.ErrInstanceAlreadyExists):
		return "instance_already_exists"
	case errors.Is(err, backend.ErrInstanceNotFinished):
		return "instance_not_finished"
	case errors.As(err, &ns):
		return "not_supported"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline_exceeded"
	}
	return otherError
}

func errText(err error) (s string) {
	defer func() {
		if recover() != nil {
			s = otherError
		}
	}()
	return err.Error()
}

// workflowStarted counts a run started, of type typ.
func (t *telemetry) workflowStarted(ctx context.Context, typ string) {
	if t.started == nil {
		return
	}
	kv := append(append(make([]attribute.KeyValue, 0, len(t.base)+1), t.base...), attribute.String(keyWorkflowType, t.types.get(clean(typ))))
	t.started.Add(ctx, 1, metric.WithAttributeSet(attribute.NewSet(kv...)))
}

// workflowClosed counts a run closed with status.
func (t *telemetry) workflowClosed(ctx context.Context, status int) {
	if t.completed != nil {
		t.completed.Add(ctx, 1, t.statusSets[status])
	}
}

// signalDelivered counts a signal that reached a run's history.
func (t *telemetry) signalDelivered(ctx context.Context) {
	if t.signals != nil {
		t.signals.Add(ctx, 1, t.signalSet)
	}
}

// workflowTaskClaimed records a workflow task's time in queue, as
// go-workflows' own workflow.task.time_in_queue measures it: from its first
// new event (a fired timer's due time) to the claim at, under the type of
// that event (a closed set).
func (t *telemetry) workflowTaskClaimed(ctx context.Context, first *history.Event, at time.Time) {
	if t.taskWait == nil || first == nil {
		return
	}
	from := first.Timestamp
	if a, ok := first.Attributes.(*history.TimerFiredAttributes); ok && a != nil && first.Type == history.EventType_TimerFired {
		from = a.At
	}
	wait := max(at.Sub(from).Seconds(), 0)
	kv := append(append(make([]attribute.KeyValue, 0, len(t.base)+1), t.base...), attribute.String(keyTaskTrigger, first.Type.String()))
	t.taskWait.Record(ctx, wait, metric.WithAttributeSet(attribute.NewSet(kv...)))
}

// typeLimiter bounds the distinct values of a type attribute.
type typeLimiter struct {
	mu    sync.Mutex
	seen  map[string]struct{}
	limit int
	other string // "" means "_other"
}

func (l *typeLimiter) get(v string) string {
	if v == "" {
		return "_unknown"
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.seen[v]; ok {
		return v
	}
	if len(l.seen) >= l.limit {
		if l.other != "" {
			return l.other
		}
		return "_other"
	}
	if l.seen == nil {
		l.seen = make(map[string]struct{})
	}
	l.seen[v] = struct{}{}
	return v
}

// clean makes a value exportable: valid UTF-8, at most 256 bytes.
func clean(s string) string { return cut(strings.ToValidUTF8(s, "\uFFFD"), 256) }

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}
