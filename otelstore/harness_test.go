package otelstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// harness is an SDK meter provider with a manual reader and a tracer provider
// with a span recorder: what every test asserts through.
type harness struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	h.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(h.reader))
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() {
		_ = h.mp.Shutdown(context.Background())
		_ = h.tp.Shutdown(context.Background())
	})
	return h
}

// options returns the provider options plus extra ones.
func (h *harness) options(extra ...otelstore.Option) []otelstore.Option {
	return append([]otelstore.Option{otelstore.WithMeterProvider(h.mp), otelstore.WithTracerProvider(h.tp)}, extra...)
}

// keyspaceOptions returns the provider options plus extra ones, for
// NewKeyspace.
func (h *harness) keyspaceOptions(extra ...otelstore.KeyspaceOption) []otelstore.KeyspaceOption {
	return append([]otelstore.KeyspaceOption{otelstore.WithMeterProvider(h.mp), otelstore.WithTracerProvider(h.tp)}, extra...)
}

// wrap decorates inner with the harness's providers.
func (h *harness) wrap(t *testing.T, inner eventstore.Store, extra ...otelstore.Option) eventstore.Store {
	t.Helper()
	s, err := otelstore.New(inner, h.options(extra...)...)
	if err != nil {
		t.Fatalf("otelstore.New: %v", err)
	}
	return s
}

// metrics collects and returns every metric by name.
func (h *harness) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collect: %v", err)
	}
	out := make(map[string]metricdata.Metrics)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// assertSum checks that the named counter or up-down counter has exactly the
// given points (attributes -> value).
func (h *harness) assertSum(t *testing.T, name string, monotonic bool, want ...metricdata.DataPoint[int64]) {
	t.Helper()
	m, ok := h.metrics(t)[name]
	if !ok {
		if len(want) == 0 {
			return
		}
		t.Fatalf("metric %s not recorded", name)
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("metric %s is %T, want Sum[int64]", name, m.Data)
	}
	expected := metricdata.Sum[int64]{
		Temporality: metricdata.CumulativeTemporality,
		IsMonotonic: monotonic,
		DataPoints:  want,
	}
	metricdatatest.AssertAggregationsEqual(t, expected, sum, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

// point builds an expected data point.
func point(v int64, attrs ...attribute.KeyValue) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Attributes: attribute.NewSet(attrs...), Value: v}
}

// histogramCounts returns, for the named float histogram, the sample count of
// each attribute set.
func (h *harness) histogramCounts(t *testing.T, name string) map[attribute.Distinct]uint64 {
	t.Helper()
	out := make(map[attribute.Distinct]uint64)
	for set, p := range histogramPoints[float64](t, h, name, nil) {
		out[set] = p.count
	}
	return out
}

// histPoint is what a test asserts of one histogram point.
type histPoint struct {
	count uint64
	sum   float64
}

// histogramPoints returns the named histogram's points by attribute set (nil
// if it was not exported), checking its bounds unless bounds is nil.
func histogramPoints[N int64 | float64](t *testing.T, h *harness, name string, bounds []float64) map[attribute.Distinct]histPoint {
	t.Helper()
	m, ok := h.metrics(t)[name]
	if !ok {
		return nil
	}
	hist, ok := m.Data.(metricdata.Histogram[N])
	if !ok {
		t.Fatalf("metric %s is %T, want %T", name, m.Data, hist)
	}
	out := map[attribute.Distinct]histPoint{}
	for _, dp := range hist.DataPoints {
		if bounds != nil && !slices.Equal(dp.Bounds, bounds) {
			t.Errorf("%s bounds %v, want %v", name, dp.Bounds, bounds)
		}
		out[dp.Attributes.Equivalent()] = histPoint{dp.Count, float64(dp.Sum)}
	}
	return out
}

// distinct is the map key of an attribute set.
func distinct(attrs ...attribute.KeyValue) attribute.Distinct {
	s := attribute.NewSet(attrs...)
	return s.Equivalent()
}

var (
	ns = otelstore.AttrNamespace.String("default")
	// The db.system.name of a decorator not told what it wraps.
	storeSystem    = semconv.DBSystemNameKey.String("aion.eventstore")
	keyspaceSystem = semconv.DBSystemNameKey.String("aion.keyspace")
	t0             = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	payload        = eventstore.Payload{ContentType: "application/json", Data: []byte(`{}`)}
)

// ids returns a fresh workflow and run.
func ids() (eventstore.WorkflowID, eventstore.RunID) {
	return eventstore.NewWorkflowID(), eventstore.NewRunID()
}

// env is an envelope of run at time t0+offset.
func env(run eventstore.RunID, offset time.Duration) eventstore.Envelope {
	return eventstore.Envelope{RunID: run, RecordedAt: t0.Add(offset)}
}

// histogramSum returns the sum of every sample of a float histogram.
func histogramSum(t *testing.T, m metricdata.Metrics) float64 {
	t.Helper()
	hist, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("metric %q is %T, want Histogram[float64]", m.Name, m.Data)
	}
	var sum float64
	for _, dp := range hist.DataPoints {
		sum += dp.Sum
	}
	return sum
}

// sumPoints returns a counter's values by attribute set.
func sumPoints(t *testing.T, m metricdata.Metrics) map[attribute.Set]int64 {
	t.Helper()
	sum, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("metric %q is %T, want Sum[int64]", m.Name, m.Data)
	}
	out := make(map[attribute.Set]int64, len(sum.DataPoints))
	for _, dp := range sum.DataPoints {
		out[dp.Attributes] = dp.Value
	}
	return out
}

// newTracker makes a pairing tracker on the harness's meter provider.
func newTracker(t *testing.T, h *harness) *pairing.Tracker {
	t.Helper()
	tr, err := pairing.New(pairing.WithMeterProvider(h.mp))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}
