package otelstore

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/guard"
	"github.com/aionotel/aionotel/internal/instrument"
	"github.com/aionotel/aionotel/internal/livetracer"
	"github.com/aionotel/aionotel/internal/version"
)

// telemetry is the per-decorator state every call uses: the tracer, the
// duration histogram and, per operation, everything that can be computed
// once (span name, start options, metric record options), so that a call
// builds no attribute set of its own.
type telemetry struct {
	// tracer is a fixed provider's tracer (nil: none records), unless
	// follow says to ask tracers at each call: the global provider.
	tracer   trace.Tracer
	follow   bool
	tracers  *livetracer.Source
	filter   func(context.Context, Operation) bool
	now      func() time.Time // nil: time.Now
	classify classifier
	duration metric.Float64Histogram
	// conflictError is whether a sequence conflict sets status Error;
	// exceptionEvents whether a failure adds an exception event.
	conflictError, exceptionEvents bool
	// handle receives a panic of user code on the call path (the span
	// filter, a sampler or span processor), which never reaches the caller.
	handle func(error)

	ops      [numOps]opState
	errorOps sync.Map // errorKey -> []metric.RecordOption
}

// opState is what the constructor precomputes for one operation.
type opState struct {
	t        *telemetry
	op       opID
	spanName string
	// start are the span start options: kind client and the operation's
	// attributes, given at creation where a sampler sees them.
	start  []trace.SpanStartOption
	attrs  []attribute.KeyValue // the metric attributes of a successful call, the span's at start
	okOpts []metric.RecordOption
}

type errorKey struct {
	op        opID
	errorType string
}

// newMeter returns the instrument factory of a decorator.
func newMeter(c *config) *instrument.Meter {
	m := c.meterProvider.Meter(ScopeName, metric.WithInstrumentationVersion(version.Version),
		metric.WithSchemaURL(catalog.SchemaURL))
	return instrument.New(m, "otelstore", c.handle)
}

// newTelemetry precomputes the operations from..to-1 (the event store's or
// the keyspace's), recorded on the duration histogram name.
func newTelemetry(c *config, meter *instrument.Meter, from, to opID, name, desc string) *telemetry {
	t := &telemetry{
		tracers: livetracer.New(c.tracerProvider, ScopeName, trace.WithInstrumentationVersion(version.Version),
			trace.WithSchemaURL(catalog.SchemaURL)),
		filter:          c.spanFilter,
		now:             c.now,
		classify:        newClassifier(c.classify),
		duration:        meter.Float64Histogram(name, catalog.UnitSeconds, desc, catalog.DurationBoundaries),
		conflictError:   c.conflictError,
		exceptionEvents: c.exceptionEvents,
		handle:          c.handle,
	}
	t.tracer, t.follow = t.tracers.Tracer(), t.tracers.Global()
	target := spanTarget(c.attributes)
	for op := from; op < to; op++ {
		name := string(operations[op])
		st := &t.ops[op]
		st.t, st.op = t, op
		st.spanName = c.spanName(operations[op], target)
		st.attrs = []attribute.KeyValue{catalog.OperationName.String(name), catalog.DBSystemName.String(c.dbSystem)}
		if op < firstKeyspaceOp {
			st.attrs = append(st.attrs, catalog.Namespace.String(c.namespace))
		} else {
			st.attrs = append(st.attrs, catalog.Namespace.String(c.keyspaceNamespace))
		}
		st.attrs = append(st.attrs, c.attributes...)
		st.okOpts = []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(st.attrs...))}
		st.start = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(st.attrs...)}
	}
	return t
}

// spanName is the span name of op: the formatter's, if one is set and it
// gives one, else defaultSpanName.
func (c *config) spanName(op Operation, target string) (name string) {
	name = defaultSpanName(op, target)
	if c.spanNameFormat == nil {
		return name
	}
	defer func() {
		if r := recover(); r != nil {
			c.handle(fmt.Errorf("otelstore: WithSpanNameFormatter: %s: panic: %v", op, r))
		}
	}()
	if formatted := c.spanNameFormat(op, target); formatted != "" {
		name = attrvalue.String(formatted)
	}
	return name
}

// defaultSpanName is the semantic conventions' database span name:
// "{db.operation.name} {target}", or the operation alone without a target.
func defaultSpanName(op Operation, target string) string {
	if target == "" {
		return string(op)
	}
	return string(op) + " " + target
}

// spanTarget is the {target} of the semantic conventions' database span
// name, "{db.operation.name} {target}": the first of db.collection.name and
// db.namespace among the WithAttributes attributes, or "" when neither was
// given (the decorator cannot know them on its own).
func spanTarget(attrs []attribute.KeyValue) string {
	for _, key := range []attribute.Key{catalog.DBCollectionName, catalog.DBNamespace} {
		var v string
		for _, kv := range attrs {
			if kv.Key == key && kv.Value.Type() == attribute.STRING {
				v = kv.Value.AsString() // the last one wins, as on the span
			}
		}
		if v != "" {
			return v
		}
	}
	return ""
}

// errorOpts returns the cached record options of a failed call. There are at
// most errorTypeLimit+len(errorClasses)+1 error types per operation.
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

// call is one timed call in progress. Its timed window, for the span and the
// histogram alike, runs from begin to finish.
type call struct {
	st    *opState
	ctx   context.Context // the span's context when there is a span
	span  trace.Span      // nil when no tracer records or the span filter said no
	start time.Time
	// finished records that the window is closed.
	finished bool
	// lookup is the call's look at the global tracer provider, shared
	// with the tracker the call hands its batch to.
	lookup livetracer.Lookup
}

// begin starts timing op and, when a tracer may record and the span
// filter does not say no, a span. It is small enough to be inlined, so
// that the call is made where the caller keeps it.
func (t *telemetry) begin(ctx context.Context, op opID) (c call) {
	c.st, c.ctx = &t.ops[op], ctx
	c.open()
	return c
}

// open is begin's work.
func (c *call) open() {
	t := c.st.t
	tr := t.tracer
	if t.follow {
		tr = t.tracers.TracerAt(&c.lookup)
	}
	if tr != nil {
		c.startSpan(tr)
	}
	if t.now != nil {
		c.start = t.now()
	} else {
		c.start = time.Now()
	}
}

// startSpan starts the call's span unless the span filter says no. The
// filter, the sampler and the span processors are user code: a panic of
// theirs is reported and the call goes on without a span.
func (c *call) startSpan(tr trace.Tracer) {
	defer c.recovered("starting its span")
	if f := c.st.t.filter; f == nil || f(c.ctx, operations[c.st.op]) {
		c.ctx, c.span = tr.Start(c.ctx, c.st.spanName, c.st.start...)
	}
}

// recovered is deferred around user code on the call path: it reports a
// panic to the error handler instead of passing it to the caller.
func (c *call) recovered(what string) {
	if r := recover(); r != nil {
		c.st.t.handle(fmt.Errorf("otelstore: %s, %s: panic: %v", operations[c.st.op], what, r))
	}
}

// recording reports whether span attributes would be kept; callers build
// per-call attributes only then.
func (c *call) recording() bool { return c.span != nil && c.span.IsRecording() }

// annotate gives the recording span the call's own attributes; the
// operation's were given at its start.
func (c *call) annotate(perCall ...attribute.KeyValue) {
	c.span.SetAttributes(perCall...)
}

// end is deferred by every timed method with a pointer to its error result.
// It closes the window unless the method did already, and it also sees a
// panic of the inner store: the span records it and the panic goes on.
func (c *call) end(errp *error) {
	if r := recover(); r != nil {
		if !c.finished {
			c.finish(&panicError{value: r})
		}
		panic(r)
	}
	if !c.finished {
		c.finish(*errp)
	}
}

// finish closes the timed window: the duration point and the span's end.
// The meter and the span processors are user code: a panic of theirs is
// reported, after the inner call, and goes no further.
func (c *call) finish(err error) {
	c.finished = true
	defer c.recovered("ending its span")
	st := c.st
	t := st.t
	var took time.Duration
	if t.now != nil {
		took = t.now().Sub(c.start)
	} else {
		took = time.Since(c.start) // the monotonic reading: no second wall-clock read
	}
	opts := st.okOpts
	if err != nil {
		errorType := t.classify.errorType(err)
		opts = t.errorOpts(st.op, errorType)
		if c.span != nil {
			c.failSpan(err, errorType)
		}
	}
	t.duration.Record(c.ctx, max(took, 1).Seconds(), opts...)
	if c.span != nil {
		c.span.End()
	}
}

// failSpan marks the recording span of a failed call as the semantic
// conventions' recording-errors guidance says: error.type, and status
// Error with the error's message as its description; a sequence conflict
// also gets aion.store.found_seq, and with WithConflictAsError(false)
// keeps status Unset. The message comes from the inner store, so it is
// made valid UTF-8 and cut to attrvalue.MaxTextLen bytes. An exception
// event (what RecordError would add, with the cleaned message), which
// that guidance no longer recommends, is added only with
// WithExceptionEvents(true).
func (c *call) failSpan(err error, errorType string) {
	if !c.span.IsRecording() {
		return
	}
	if conflict := guard.Conflict(err); conflict != nil {
		c.span.SetAttributes(catalog.ErrorType.String(errorType), catalog.FoundSeq.Int64(attrvalue.Int64(conflict.Found)))
		if !c.st.t.conflictError {
			return
		}
	} else {
		c.span.SetAttributes(catalog.ErrorType.String(errorType))
	}
	msg := attrvalue.Cut(errorText(err), attrvalue.MaxTextLen)
	if c.st.t.exceptionEvents {
		c.span.AddEvent(catalog.ExceptionEvent, trace.WithAttributes(
			catalog.ExceptionType.String(attrvalue.String(typeName(err))),
			catalog.ExceptionMessage.String(msg)))
	}
	c.span.SetStatus(codes.Error, msg)
}

// errorText is err's message as fmt prints it: an Error method that panics
// (a typed nil pointer of an error type whose method reads its receiver, say)
// gives fmt's "<nil>" or "%!v(PANIC=Error method: ...)" instead of a panic
// out of the decorator, where the undecorated call would have returned.
func errorText(err error) string { return fmt.Sprint(err) }

// typeName is the exception.type of err, as the SDK's RecordError names it.
func typeName(err error) string {
	t := reflect.TypeOf(err)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return t.PkgPath() + "." + t.Name()
}

// panicError stands for a panic of the inner store in telemetry.
type panicError struct{ value any }

func (e *panicError) Error() string { return fmt.Sprintf("panic: %v", e.value) }
