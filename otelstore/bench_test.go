package otelstore_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/timeline"
	"github.com/aionotel/aionotel/otelstore"
)

// The call path's benchmarks (issue 27). Each one runs the decorator side by
// side with the bare call and with the hand-written minimum of the same
// telemetry, as sub-benchmarks of one binary, so that benchstat medians (or
// instruction counts per iteration, which a loaded machine does not
// disturb) give the ratios the targets state. The providers are the SDK's:
// a MeterProvider with a ManualReader never collected during the run, and a
// TracerProvider without span processor (a sampled span is built, ended and
// dropped: the strictest comparison, since an exporter's own cost would
// dilute the ratios).
//
// Sub-benchmarks are named key=value, so that benchstat -col /impl puts
// each implementation beside the first of its group. The targets, on the
// instrumentation's own cost (the time beyond the bare call):
//
// BenchmarkReadHistory, a call with no lifecycle work:
//
//	spans=metrics_only: filtered, noop_tracer, global_default - bare
//	    <= 1.05 x (hand_minimum - bare), allocations those of bare
//	spans=sampled: decorated - bare <= 1.05 x (hand_minimum - bare)
//	spans=unsampled: decorated - bare <= 1.05 x (hand_minimum - bare)
//	    (the SDK's dropped start)
//
// BenchmarkAppendPairing, an append of one activity's dispatch and terminal:
//
//	tracer=quiet: noop_tracer, global_default <= 1.05 x timeline_off,
//	    allocations those of bare
//	tracer=sampled: on - off <= 1.10 x (hand_minimum - off)
//
// The comparison with otelsql is in the module internal/peerbench.

func shortHistory(b testing.TB) (*eventstore.Memory, eventstore.WorkflowID) {
	b.Helper()
	m := eventstore.NewMemory()
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	e := eventstore.Envelope{RunID: run, RecordedAt: time.Unix(1, 0)}
	events := []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: e, WorkflowType: "checkout"},
		eventstore.ActivityScheduled{Envelope: e, ActivityType: "charge"},
		eventstore.ActivityCompleted{Envelope: e},
	}
	if err := m.Append(context.Background(), eventstore.RecorderToken(), wf, events, 0); err != nil {
		b.Fatal(err)
	}
	return m, wf
}

func sdkMeter(b testing.TB) *sdkmetric.MeterProvider {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp
}

func sdkTracer(b testing.TB, sampler sdktrace.Sampler) *sdktrace.TracerProvider {
	// No span processor: a sampled span is built and ended, then dropped.
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp
}

// reportCPU adds a cpu-ns/op metric: the process CPU time (all threads,
// GC included) per iteration. On a shared machine wall-clock ns/op counts the
// time other processes hold the CPUs; CPU time does not, so it compares
// benchmarks run apart far more steadily. Call it just before the timed loop
// and call what it returns just after.
func reportCPU(b *testing.B) func() {
	start := processCPU()
	return func() {
		if end := processCPU(); start >= 0 && end >= 0 && b.N > 0 {
			b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

// loop times call, after one untimed call that warms the caches up.
func loop(b *testing.B, call func()) {
	call()
	b.ReportAllocs()
	defer reportCPU(b)()
	for b.Loop() {
		call()
	}
}

func newStore(b *testing.B, inner eventstore.Store, opts ...otelstore.Option) eventstore.Store {
	b.Helper()
	s, err := otelstore.New(inner, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return s
}

// readHistoryAttrs are the attributes of a ReadHistory span and duration
// point with the decorator's defaults.
var readHistoryAttrs = []attribute.KeyValue{semconv.DBOperationName(string(otelstore.OpReadHistory)),
	semconv.DBSystemNameKey.String(catalog.DefaultStoreSystem), attribute.String(string(otelstore.AttrNamespace), catalog.DefaultNamespace)}

// historyReader is the call BenchmarkReadHistory times, through an
// interface as a program calls a store.
type historyReader interface {
	ReadHistory(context.Context, eventstore.WorkflowID) ([]eventstore.Event, error)
}

// handReader is the hand-written minimum of a timed and traced
// ReadHistory: one clock pair and one Record with precomputed options and,
// given a tracer, one span started with the precomputed options of the
// semantic conventions (kind client, the attributes a sampler must see)
// and given the call's own attribute only when it records. It has none of
// the decorator's guarantees (a panic of the store or of user code goes
// through, nothing is cleaned or bounded).
type handReader struct {
	inner    *eventstore.Memory
	duration metric.Float64Histogram
	record   []metric.RecordOption
	tracer   trace.Tracer // nil: metrics only
	start    []trace.SpanStartOption
}

func newHandReader(b testing.TB, inner *eventstore.Memory, mp metric.MeterProvider, tp trace.TracerProvider) *handReader {
	h, err := mp.Meter("hand").Float64Histogram(catalog.StoreOperationDuration, metric.WithUnit(catalog.UnitSeconds),
		metric.WithExplicitBucketBoundaries(catalog.DurationBoundaries...))
	if err != nil {
		b.Fatal(err)
	}
	hr := &handReader{inner: inner, duration: h, record: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(readHistoryAttrs...))},
		start: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(readHistoryAttrs...)}}
	if tp != nil {
		hr.tracer = tp.Tracer("hand")
	}
	return hr
}

func (h *handReader) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	var span trace.Span
	if h.tracer != nil {
		ctx, span = h.tracer.Start(ctx, "read_history", h.start...)
		if span.IsRecording() {
			span.SetAttributes(attribute.String(string(otelstore.AttrWorkflowID), wf.String()))
		}
	}
	start := time.Now()
	events, err := h.inner.ReadHistory(ctx, wf)
	h.duration.Record(ctx, time.Since(start).Seconds(), h.record...)
	if span != nil {
		span.End()
	}
	return events, err
}

// BenchmarkReadHistory: a ReadHistory of a three-event history, bare,
// decorated and hand-instrumented, with metrics only, a sampled span and an
// unsampled one.
func BenchmarkReadHistory(b *testing.B) {
	ctx := context.Background()
	read := func(b *testing.B, s historyReader, wf eventstore.WorkflowID) {
		loop(b, func() {
			if _, err := s.ReadHistory(ctx, wf); err != nil {
				b.Fatal(err)
			}
		})
	}
	decorated := func(b *testing.B, opts ...otelstore.Option) {
		m, wf := shortHistory(b)
		read(b, newStore(b, m, opts...), wf)
	}
	hand := func(b *testing.B, tp trace.TracerProvider) {
		m, wf := shortHistory(b)
		read(b, newHandReader(b, m, sdkMeter(b), tp), wf)
	}
	noSpans := otelstore.WithSpanFilter(func(context.Context, otelstore.Operation) bool { return false })

	bare := func(b *testing.B) {
		m, wf := shortHistory(b)
		read(b, m, wf)
	}
	b.Run("spans=metrics_only/impl=hand_minimum", func(b *testing.B) { hand(b, nil) })
	b.Run("spans=metrics_only/impl=bare", bare)
	b.Run("spans=metrics_only/impl=filtered", func(b *testing.B) {
		decorated(b, otelstore.WithMeterProvider(sdkMeter(b)), otelstore.WithTracerProvider(sdkTracer(b, sdktrace.AlwaysSample())), noSpans)
	})
	b.Run("spans=metrics_only/impl=noop_tracer", func(b *testing.B) {
		decorated(b, otelstore.WithMeterProvider(sdkMeter(b)), otelstore.WithTracerProvider(tracenoop.NewTracerProvider()))
	})
	b.Run("spans=metrics_only/impl=global_default", func(b *testing.B) {
		// No tracer provider option: the global one, which this test binary
		// never sets.
		decorated(b, otelstore.WithMeterProvider(sdkMeter(b)))
	})
	for _, tc := range []struct {
		spans   string
		sampler sdktrace.Sampler
	}{{"sampled", sdktrace.AlwaysSample()}, {"unsampled", sdktrace.NeverSample()}} {
		b.Run("spans="+tc.spans+"/impl=hand_minimum", func(b *testing.B) { hand(b, sdkTracer(b, tc.sampler)) })
		b.Run("spans="+tc.spans+"/impl=bare", bare)
		b.Run("spans="+tc.spans+"/impl=decorated", func(b *testing.B) {
			decorated(b, otelstore.WithMeterProvider(sdkMeter(b)), otelstore.WithTracerProvider(sdkTracer(b, tc.sampler)))
		})
	}
}

// appendBatches are the batches of BenchmarkAppendPairing: batch i
// appends the dispatch and the terminal of activity i of one run, recorded
// 3 ms apart.
type appendBatches struct {
	run     eventstore.RunID
	from    time.Time
	to      time.Time
	batches [][]eventstore.Event
}

// perWorkflow keeps histories short: the benchmark measures the append,
// not the growth of one history.
const perWorkflow = 1024

func newAppendBatches() *appendBatches {
	ab := &appendBatches{run: eventstore.NewRunID(), from: time.Unix(1, 0), batches: make([][]eventstore.Event, perWorkflow)}
	ab.to = ab.from.Add(3 * time.Millisecond)
	for i := range ab.batches {
		id := eventstore.ActivityID(i)
		ab.batches[i] = []eventstore.Event{
			eventstore.ActivityScheduled{Envelope: eventstore.Envelope{RunID: ab.run, RecordedAt: ab.from}, ActivityID: id, ActivityType: "charge"},
			eventstore.ActivityCompleted{Envelope: eventstore.Envelope{RunID: ab.run, RecordedAt: ab.to}, ActivityID: id},
		}
	}
	return ab
}

// loop times appends of the batches to s, a fresh workflow every
// perWorkflow batches; after each, then is called with the workflow and
// the batch's index, if not nil.
func (ab *appendBatches) loop(b *testing.B, s eventstore.Store, then func(wf eventstore.WorkflowID, i int)) {
	ctx := context.Background()
	wf, i := eventstore.NewWorkflowID(), 0
	loop(b, func() {
		if i == perWorkflow {
			wf, i = eventstore.NewWorkflowID(), 0
		}
		if err := s.Append(ctx, eventstore.RecorderToken(), wf, ab.batches[i], uint64(2*i)); err != nil {
			b.Fatal(err)
		}
		if then != nil {
			then(wf, i)
		}
		i++
	})
}

// handActivity is the hand-written minimum of a timeline activity span:
// one span started and ended at the events' times, in its run's trace
// (the parent a hand-written program would compute once per run), with
// the attributes and the two links the library's span has.
type handActivity struct {
	tracer trace.Tracer
	start  []trace.SpanStartOption // kind and the attributes known up front
	links  []trace.Link            // to the call that wrote the dispatch, and the terminal
	ab     *appendBatches
	wf     eventstore.WorkflowID
	root   trace.SpanContext
}

func newHandActivity(tp trace.TracerProvider, ab *appendBatches) *handActivity {
	call := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, TraceFlags: trace.FlagsSampled})
	return &handActivity{
		tracer: tp.Tracer("hand"),
		start: []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
			attribute.String(string(otelstore.AttrNamespace), catalog.DefaultNamespace),
			attribute.String(string(otelstore.AttrActivityType), "charge"))},
		links: []trace.Link{
			{SpanContext: call, Attributes: []attribute.KeyValue{otelstore.AttrTimelineLink.String(catalog.LinkScheduled)}},
			{SpanContext: call, Attributes: []attribute.KeyValue{otelstore.AttrTimelineLink.String(catalog.LinkSettled)}},
		},
		ab: ab,
	}
}

func (h *handActivity) span(ctx context.Context, wf eventstore.WorkflowID, i int) {
	if wf != h.wf {
		h.wf, h.root = wf, timeline.Root(catalog.DefaultNamespace, wf, h.ab.run)
	}
	ctx = trace.ContextWithSpanContext(ctx, h.root)
	_, span := h.tracer.Start(ctx, "activity charge", h.start[0], h.start[1], trace.WithTimestamp(h.ab.from))
	if span.IsRecording() {
		span.SetAttributes(
			attribute.String(string(otelstore.AttrWorkflowID), wf.String()),
			attribute.String(string(otelstore.AttrRunID), h.ab.run.String()),
			attribute.Int64(string(otelstore.AttrActivityID), int64(i)),
			attribute.String(string(otelstore.AttrActivityOutcome), "succeeded"),
			attribute.Int64(string(otelstore.AttrRetryCount), 0))
		span.AddLink(h.links[0])
		span.AddLink(h.links[1])
	}
	span.End(trace.WithTimestamp(h.ab.to))
}

// BenchmarkAppendPairing: an append of one activity's dispatch and
// terminal, bare and decorated: the call's telemetry plus the lifecycle
// path through the pairing tracker.
//
// tracer=quiet: spans that record nothing. timeline_off is the decorator
// with a no-op tracer and the timeline off: metrics only. noop_tracer and
// global_default have the timeline on (the default) with a tracer that
// records nothing: a trace/noop provider, and the global default one
// (nothing installed; this test binary never sets it).
//
// tracer=sampled: a sampled SDK tracer. off has the append span only; on
// adds the timeline's activity span; hand_minimum adds a hand-written
// activity span to off instead (handActivity).
func BenchmarkAppendPairing(b *testing.B) {
	ab := newAppendBatches()
	quiet := func(b *testing.B, opts ...otelstore.Option) {
		ab.loop(b, newStore(b, eventstore.NewMemory(), append([]otelstore.Option{otelstore.WithMeterProvider(sdkMeter(b))}, opts...)...), nil)
	}
	b.Run("tracer=quiet/impl=timeline_off", func(b *testing.B) {
		quiet(b, otelstore.WithTracerProvider(tracenoop.NewTracerProvider()), otelstore.WithTimelineSpans(false))
	})
	b.Run("tracer=quiet/impl=bare", func(b *testing.B) { ab.loop(b, eventstore.NewMemory(), nil) })
	b.Run("tracer=quiet/impl=noop_tracer", func(b *testing.B) { quiet(b, otelstore.WithTracerProvider(tracenoop.NewTracerProvider())) })
	b.Run("tracer=quiet/impl=global_default", func(b *testing.B) { quiet(b) })
	sampled := func(b *testing.B, timelineOn bool) eventstore.Store {
		return newStore(b, eventstore.NewMemory(), otelstore.WithMeterProvider(sdkMeter(b)),
			otelstore.WithTracerProvider(sdkTracer(b, sdktrace.AlwaysSample())), otelstore.WithTimelineSpans(timelineOn))
	}
	b.Run("tracer=sampled/impl=off", func(b *testing.B) { ab.loop(b, sampled(b, false), nil) })
	b.Run("tracer=sampled/impl=on", func(b *testing.B) { ab.loop(b, sampled(b, true), nil) })
	b.Run("tracer=sampled/impl=hand_minimum", func(b *testing.B) {
		h := newHandActivity(sdkTracer(b, sdktrace.AlwaysSample()), ab)
		ctx := context.Background()
		ab.loop(b, sampled(b, false), func(wf eventstore.WorkflowID, i int) { h.span(ctx, wf, i) })
	})
}
