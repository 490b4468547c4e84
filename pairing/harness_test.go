package pairing

import (
	"context"
	"sort"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// harness is a Tracker on its own SDK MeterProvider with a ManualReader.
type harness struct {
	t      testing.TB
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder // the timeline spans
	tr     *Tracker
	errs   []error // what the tracker reported to its error handler
}

func newHarness(t testing.TB, opts ...Option) *harness {
	t.Helper()
	return newHarnessSDK(t, nil, opts...)
}

// newHarnessSDK is newHarness with extra MeterProvider options.
func newHarnessSDK(t testing.TB, sdkOpts []sdkmetric.Option, opts ...Option) *harness {
	t.Helper()
	h := &harness{t: t, reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(append([]sdkmetric.Option{sdkmetric.WithReader(h.reader)}, sdkOpts...)...)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	all := append([]Option{WithMeterProvider(mp), WithTracerProvider(tp), withErrorHandler(func(err error) { h.errs = append(h.errs, err) })}, opts...)
	tr, err := New(all...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	h.tr = tr
	return h
}

// scope collects and returns the pairing scope's metrics (empty if none).
func (h *harness) scope() metricdata.ScopeMetrics {
	h.t.Helper()
	sm, err := collectScope(h.reader)
	if err != nil {
		h.t.Fatalf("Collect: %v", err)
	}
	return sm
}

// collectScope collects reader and returns the pairing scope's metrics.
// Unlike harness.scope it is safe to call from any goroutine.
func collectScope(reader *sdkmetric.ManualReader) (metricdata.ScopeMetrics, error) {
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		return metricdata.ScopeMetrics{}, err
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name == ScopeName {
			return sm, nil
		}
	}
	return metricdata.ScopeMetrics{}, nil
}

// metric collects and returns one instrument's data; ok is false if it has
// recorded nothing yet.
func (h *harness) metric(name string) (metricdata.Metrics, bool) {
	h.t.Helper()
	for _, m := range h.scope().Metrics {
		if m.Name == name {
			return m, true
		}
	}
	return metricdata.Metrics{}, false
}

// assertMetric compares one instrument's data with want, ignoring timestamps
// and exemplars. want nil asserts the instrument recorded nothing.
func (h *harness) assertMetric(want *metricdata.Metrics) {
	h.t.Helper()
	got, ok := h.metric(want.Name)
	if !ok {
		h.t.Errorf("metric %s: not exported, want %+v", want.Name, want.Data)
		return
	}
	metricdatatest.AssertEqual(h.t, *want, got, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

// assertAbsent asserts the instrument has exported no data point.
func (h *harness) assertAbsent(name string) {
	h.t.Helper()
	if m, ok := h.metric(name); ok {
		h.t.Errorf("metric %s: exported %+v, want nothing", name, m.Data)
	}
}

// Expected-data builders, one per instrument of the catalog.

func attrs(ns, typ string, outcome ...Outcome) attribute.Set {
	kvs := []attribute.KeyValue{catalog.Namespace.String(ns), catalog.ActivityType.String(typ)}
	for _, o := range outcome {
		kvs = append(kvs, catalog.ActivityOutcome.String(string(o)))
	}
	return attribute.NewSet(kvs...)
}

func point(set attribute.Set, v int64) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Attributes: set, Value: v}
}

func counter(name, desc string, pts ...metricdata.DataPoint[int64]) *metricdata.Metrics {
	return &metricdata.Metrics{
		Name: name, Description: desc, Unit: catalog.UnitActivity,
		Data: metricdata.Sum[int64]{DataPoints: pts, Temporality: metricdata.CumulativeTemporality, IsMonotonic: true},
	}
}

func wantDispatched(pts ...metricdata.DataPoint[int64]) *metricdata.Metrics {
	return counter(catalog.ActivitiesDispatched, "Activities dispatched to a worker (first dispatch of each activity).", pts...)
}

func wantCompleted(pts ...metricdata.DataPoint[int64]) *metricdata.Metrics {
	return counter(catalog.ActivitiesCompleted, "Dispatched activities that reached their first terminal, by outcome.", pts...)
}

func wantRetried(pts ...metricdata.DataPoint[int64]) *metricdata.Metrics {
	return counter(catalog.ActivitiesRetried, "Retries of activities that stay in flight.", pts...)
}

func wantEvicted(pts ...metricdata.DataPoint[int64]) *metricdata.Metrics {
	return counter(catalog.ActivityPairingEvicted, "Live activity entries dropped by the pairing tracker's memory bound.", pts...)
}

func wantInflight(pts ...metricdata.DataPoint[int64]) *metricdata.Metrics {
	return &metricdata.Metrics{
		Name: catalog.InflightActivities, Description: "Activities dispatched and not yet finished, as seen by this process.", Unit: catalog.UnitActivity,
		Data: metricdata.Sum[int64]{DataPoints: pts, Temporality: metricdata.CumulativeTemporality, IsMonotonic: false},
	}
}

// hist is the expected duration data point of set after samples.
func hist(set attribute.Set, samples ...float64) metricdata.HistogramDataPoint[float64] {
	dp := metricdata.HistogramDataPoint[float64]{
		Attributes:   set,
		Bounds:       catalog.WorkflowDurationBoundaries,
		BucketCounts: make([]uint64, len(catalog.WorkflowDurationBoundaries)+1),
		Count:        uint64(len(samples)),
	}
	if len(samples) == 0 {
		return dp
	}
	lo, hi := samples[0], samples[0]
	for _, s := range samples {
		dp.Sum += s
		// Buckets are upper-inclusive: a sample equal to a bound belongs to it.
		dp.BucketCounts[sort.SearchFloat64s(catalog.WorkflowDurationBoundaries, s)]++
		lo, hi = min(lo, s), max(hi, s)
	}
	dp.Min, dp.Max = metricdata.NewExtrema(lo), metricdata.NewExtrema(hi)
	return dp
}

func wantDuration(pts ...metricdata.HistogramDataPoint[float64]) *metricdata.Metrics {
	return &metricdata.Metrics{
		Name: catalog.ActivityDuration, Description: "Time from an activity's dispatch to its first terminal, across all attempts.", Unit: catalog.UnitSeconds,
		Data: metricdata.Histogram[float64]{DataPoints: pts, Temporality: metricdata.CumulativeTemporality},
	}
}

// Key helpers. Fixed IDs keep failures readable.

func wfID(n byte) eventstore.WorkflowID { return eventstore.WorkflowID{15: n, 0: 0xaa} }
func runID(n byte) eventstore.RunID     { return eventstore.RunID{15: n, 0: 0xbb} }

func key(ns string, wf, run byte, act uint64) Key {
	return Key{Namespace: ns, WorkflowID: wfID(wf), RunID: runID(run), ActivityID: eventstore.ActivityID(act)}
}

// t0 is the tests' epoch; ts(ms) is t0 plus ms milliseconds.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func ts(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

var bg = context.Background()
