package otelstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/version"
)

// telemetry is the per-decorator state every call uses: the tracer, the
// duration histograms and, per operation, everything that can be computed
// once (span name, attributes, metric record options), so that a
// call builds no attribute set of its own.
type telemetry struct {
	tracer   trace.Tracer
	filter   func(context.Context, Operation) bool
	now      func() time.Time
	handle   func(error)
	classify classifier
	extra    []attribute.KeyValue

	storeDuration    metric.Float64Histogram
	keyspaceDuration metric.Float64Histogram

	ops      [numOps]opState
	errorOps sync.Map // errorKey -> []metric.RecordOption
}

// clientSpan is the start option of every span: attributes are set after
// start, and only on recording spans (see call.annotate).
var clientSpan = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient)}

// opState is what New precomputes for one operation.
type opState struct {
	spanName string
	attrs    []attribute.KeyValue // the metric attributes of a successful call
	okOpts   []metric.RecordOption
}

type errorKey struct {
	op        opID
	errorType string
}

func newTelemetry(c *config, meter metric.Meter) *telemetry {
	t := &telemetry{
		tracer:   c.tracerProvider.Tracer(ScopeName, trace.WithInstrumentationVersion(version.Version)),
		filter:   c.spanFilter,
		now:      c.now,
		handle:   c.handle,
		classify: newClassifier(c.classify),
		extra:    c.attributes,
	}
	t.storeDuration = t.histogram(meter, catalog.StoreOperationDuration, "Duration of event store calls.")
	t.keyspaceDuration = t.histogram(meter, catalog.KeyspaceOperationDuration, "Duration of transcript keyspace calls.")

	for op := range numOps {
		name := operations[op]
		st := &t.ops[op]
		if op < firstKeyspaceOp {
			st.spanName = "aion.store " + string(name)
			st.attrs = t.metricAttrs(catalog.Namespace.String(c.namespace), catalog.OperationName.String(string(name)))
		} else {
			st.spanName = "aion.keyspace " + string(name)
			st.attrs = t.metricAttrs(catalog.OperationName.String(string(name)))
		}
		st.okOpts = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(st.attrs...))}
	}
	return t
}

// metricAttrs returns attrs followed by the user's extra attributes.
func (t *telemetry) metricAttrs(attrs ...attribute.KeyValue) []attribute.KeyValue {
	return append(attrs, t.extra...)
}

func (t *telemetry) histogram(meter metric.Meter, name, desc string) metric.Float64Histogram {
	h, err := meter.Float64Histogram(name,
		metric.WithDescription(desc),
		metric.WithUnit(catalog.UnitSeconds),
		metric.WithExplicitBucketBoundaries(catalog.DurationBoundaries...))
	if err != nil {
		t.handle(fmt.Errorf("otelstore: creating %s: %w", name, err))
	}
	if h == nil {
		h = noop.Float64Histogram{}
	}
	return h
}

// errorOpts returns the cached record options of a failed call.
func (t *telemetry) errorOpts(op opID, errorType string) []metric.RecordOption {
	key := errorKey{op, errorType}
	if v, ok := t.errorOps.Load(key); ok {
		return v.([]metric.RecordOption)
	}
	attrs := append(append([]attribute.KeyValue(nil), t.ops[op].attrs...), catalog.ErrorType.String(errorType))
	opts := []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
	v, _ := t.errorOps.LoadOrStore(key, opts)
	return v.([]metric.RecordOption)
}

// call is one timed call in progress.
type call struct {
	t     *telemetry
	op    opID
	ctx   context.Context // the span's context when there is a span
	span  trace.Span      // nil when the span filter said no
	start time.Time
	took  time.Duration // set by stop; 0 means "until finish"
	// annotated records that the span has its attributes.
	annotated bool
}

// begin starts timing op and, unless the span filter says no, a span.
func (t *telemetry) begin(ctx context.Context, op opID) call {
	c := call{t: t, op: op, ctx: ctx}
	if t.filter == nil || t.filter(ctx, operations[op]) {
		c.ctx, c.span = t.tracer.Start(ctx, t.ops[op].spanName, clientSpan...)
	}
	c.start = t.now()
	return c
}

// recording reports whether span attributes would be kept; callers build
// per-call attributes only then.
func (c *call) recording() bool { return c.span != nil && c.span.IsRecording() }

// annotate gives the recording span its attributes in one SetAttributes call:
// the operation's own (namespace, operation name, WithAttributes) followed by
// the per-call ones. One call means the SDK grows the span's attribute slice
// once; the attributes are not start options, so they cost nothing on an
// unsampled span.
func (c *call) annotate(perCall ...attribute.KeyValue) {
	c.annotated = true
	static := c.t.ops[c.op].attrs
	attrs := make([]attribute.KeyValue, 0, len(static)+len(perCall))
	c.span.SetAttributes(append(append(attrs, static...), perCall...)...)
}

// end finishes the call. It is deferred with a pointer to the method's error
// result, so it also sees a panic of the inner store: the span records it and
// the panic goes on.
func (c *call) end(errp *error) {
	if r := recover(); r != nil {
		c.finish(&panicError{value: r})
		panic(r)
	}
	c.finish(*errp)
}

// stop ends the timed window before the call's own follow-up work (the
// lifecycle bookkeeping of an append), which the duration must not include.
func (c *call) stop() { c.took = max(c.t.now().Sub(c.start), 1) }

func (c *call) finish(err error) {
	if c.took == 0 {
		c.stop()
	}
	elapsed := c.took.Seconds()
	opts := c.t.ops[c.op].okOpts
	if !c.annotated && c.recording() {
		c.annotate()
	}
	if err != nil {
		errorType := c.t.classify.errorType(err)
		opts = c.t.errorOpts(c.op, errorType)
		if c.span != nil {
			attrs := []attribute.KeyValue{catalog.ErrorType.String(errorType)}
			var conflict *eventstore.SequenceConflictError
			if errors.As(err, &conflict) {
				attrs = append(attrs, catalog.FoundSeq.Int64(clampInt64(conflict.Found)))
			}
			c.span.SetAttributes(attrs...)
			c.span.RecordError(err)
			c.span.SetStatus(codes.Error, err.Error())
		}
	}
	if c.op < firstKeyspaceOp {
		c.t.storeDuration.Record(c.ctx, elapsed, opts...)
	} else {
		c.t.keyspaceDuration.Record(c.ctx, elapsed, opts...)
	}
	if c.span != nil {
		c.span.End()
	}
}

// panicError stands for a panic of the inner store in telemetry.
type panicError struct{ value any }

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }

// clampInt64 converts a sequence number to an attribute value.
func clampInt64(v uint64) int64 {
	if v > 1<<63-1 {
		return 1<<63 - 1
	}
	return int64(v)
}
