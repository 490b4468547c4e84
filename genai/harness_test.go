package genai_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/genai"
	"github.com/aionotel/aionotel/internal/genaitest"
	"github.com/aionotel/aionotel/keyspace"
)

// harness is what the tests assert through: an SDK meter provider read by
// a ManualReader and a tracer provider recording into a SpanRecorder.
type harness struct {
	// The meter provider and what reads it.
	mp     *sdkmetric.MeterProvider
	reader *sdkmetric.ManualReader
	// The tracer provider and what records its spans.
	tp    *sdktrace.TracerProvider
	spans *tracetest.SpanRecorder
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	reader, rec := sdkmetric.NewManualReader(), tracetest.NewSpanRecorder()
	h := &harness{reader: reader, spans: rec, mp: sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)),
		tp: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))}
	t.Cleanup(func() {
		_ = h.tp.Shutdown(context.Background())
		_ = h.mp.Shutdown(context.Background())
	})
	return h
}

// collect returns the collected scope metrics.
func (h *harness) collect(t *testing.T) []metricdata.ScopeMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm.ScopeMetrics
}

// metrics returns the collected metrics by name.
func (h *harness) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	byName := map[string]metricdata.Metrics{}
	for _, sm := range h.collect(t) {
		for _, m := range sm.Metrics {
			byName[m.Name] = m
		}
	}
	return byName
}

// spansNamed returns the ended spans called name, in end order.
func (h *harness) spansNamed(name string) []sdktrace.ReadOnlySpan {
	return slices.DeleteFunc(h.spans.Ended(), func(s sdktrace.ReadOnlySpan) bool { return s.Name() != name })
}

// fed is a keyspace that feeds a Tracker each batch it commits, the way an
// engine keeping its transcripts elsewhere uses the package.
type fed struct {
	keyspace.Store
	tracker *genai.Tracker
}

func (f *fed) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	head, err := f.Store.AppendEvents(ctx, expectedSeq, events)
	if err == nil {
		f.tracker.Observe(ctx, expectedSeq, events)
	}
	return head, err
}

func (f *fed) EndAgentSpans() { f.tracker.EndAgentSpans() }

// newGenAIKeyspace returns inner fed to a Tracker on the harness's
// providers with the extra options.
func newGenAIKeyspace(t *testing.T, h *harness, inner keyspace.Store, extra ...genai.Option) *fed {
	t.Helper()
	opts := append([]genai.Option{genai.WithMeterProvider(h.mp), genai.WithTracerProvider(h.tp)}, extra...)
	return &fed{Store: inner, tracker: genai.New(opts...)}
}

var (
	ns = attribute.String("aion.namespace", "default")
	t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
)

func ids() (eventstore.WorkflowID, eventstore.RunID) {
	return eventstore.NewWorkflowID(), eventstore.NewRunID()
}

func distinct(attrs ...attribute.KeyValue) attribute.Distinct {
	set := attribute.NewSet(attrs...)
	return set.Equivalent()
}

// agentEvents turns contents into events of one stream, emitted a second
// apart from t0.
func agentEvents(wf eventstore.WorkflowID, run eventstore.RunID, contents ...keyspace.Content) []keyspace.ActivityEvent {
	return genaitest.Events(wf, run, t0, contents...)
}

type points = genaitest.Points

// histogram returns the named histogram's points, checking its bounds
// unless bounds is nil.
func histogram(t *testing.T, h *harness, name string, bounds []float64) points {
	t.Helper()
	return genaitest.HistogramPoints(t, h.metrics(t)[name], bounds)
}

// sums returns a counter's values by attribute set.
func sums(t *testing.T, m metricdata.Metrics) map[attribute.Set]int64 {
	t.Helper()
	out := map[attribute.Set]int64{}
	if m.Data == nil {
		return out
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is %T, not an int64 sum", m.Name, m.Data)
	}
	for _, dp := range sum.DataPoints {
		out[dp.Attributes] = dp.Value
	}
	return out
}

// scriptedAttempt is genaitest.ScriptedAttempt from t0.
func scriptedAttempt(wf eventstore.WorkflowID, run eventstore.RunID) []keyspace.ActivityEvent {
	return genaitest.ScriptedAttempt(wf, run, t0)
}

// pointAttrs returns the attribute sets of m's points.
func pointAttrs(m metricdata.Metrics) []attribute.Set {
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		return setsOf(d.DataPoints, func(dp metricdata.DataPoint[int64]) attribute.Set { return dp.Attributes })
	case metricdata.Histogram[int64]:
		return setsOf(d.DataPoints, func(dp metricdata.HistogramDataPoint[int64]) attribute.Set { return dp.Attributes })
	case metricdata.Histogram[float64]:
		return setsOf(d.DataPoints, func(dp metricdata.HistogramDataPoint[float64]) attribute.Set { return dp.Attributes })
	}
	return nil
}

func setsOf[P any](dps []P, attrs func(P) attribute.Set) []attribute.Set {
	sets := make([]attribute.Set, len(dps))
	for i, dp := range dps {
		sets[i] = attrs(dp)
	}
	return sets
}

// spanAttr returns sp's value of key.
func spanAttr(sp sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range sp.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// assertSpanAttr checks that sp has want.
func assertSpanAttr(t *testing.T, sp sdktrace.ReadOnlySpan, want attribute.KeyValue) {
	t.Helper()
	if got, ok := spanAttr(sp, want.Key); !ok || got != want.Value {
		t.Errorf("span %s: %s = %s (set: %v), want %s", sp.Name(), want.Key, got.String(), ok, want.Value.String())
	}
}
