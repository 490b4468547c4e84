package pairing

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/version"
)

// The scope and the eleven instruments are exactly those of the catalog:
// names, kinds, units, one-line descriptions, histogram boundaries.
func TestInstrumentsMatchCatalog(t *testing.T) {
	h := newHarness(t, WithMaxInFlight(1))
	h.tr.Dispatched(bg, key("n", 1, 1, 0), "t", ts(0))
	h.tr.Retried(bg, key("n", 1, 1, 0), ts(0))
	h.stage(key("n", 1, 1, 0))
	h.claim(key("n", 1, 1, 0), ts(5))
	h.tr.Dispatched(bg, key("n", 1, 1, 1), "t", ts(0))
	h.tr.Finished(bg, key("n", 1, 1, 1), OutcomeSucceeded, ts(0))
	h.tr.RunStarted(bg, "n", wfID(2), runID(2), "w", ts(0))
	h.tr.RunStarted(bg, "n", wfID(3), runID(3), "w", ts(0)) // evicts the first run
	h.tr.RunClosed(bg, "n", wfID(3), runID(3), eventstore.StatusCompleted, ts(5))

	sm := h.scope()
	if sm.Scope.Name != "github.com/aionotel/aionotel/pairing" || sm.Scope.Version != version.Version || Version() != version.Version {
		t.Errorf("scope = %q %q (Version() %q), want the import path and %q", sm.Scope.Name, sm.Scope.Version, Version(), version.Version)
	}
	if sm.Scope.SchemaURL != catalog.SchemaURL || !strings.HasPrefix(catalog.SchemaURL, "https://opentelemetry.io/schemas/") {
		t.Errorf("scope schema URL = %q, want the semantic conventions' %q", sm.Scope.SchemaURL, catalog.SchemaURL)
	}
	type want struct {
		unit      string
		monotonic bool
		histogram bool
		gauge     bool
	}
	wants := map[string]want{
		"aion.activities.dispatched":        {unit: "{activity}", monotonic: true},
		"aion.inflight_activities":          {unit: "{activity}"},
		"aion.activities.completed":         {unit: "{activity}", monotonic: true},
		"aion.activity.duration":            {unit: "s", histogram: true},
		"aion.activities.retried":           {unit: "{activity}", monotonic: true},
		"aion.activity.pairing.evicted":     {unit: "{activity}", monotonic: true},
		"aion.activity.oldest_inflight_age": {unit: "s", gauge: true},
		"aion.activity.wait.duration":       {unit: "s", histogram: true},
		"aion.activity.oldest_waiting_age":  {unit: "s", gauge: true},
		"aion.workflow.duration":            {unit: "s", histogram: true},
		"aion.workflow.pairing.evicted":     {unit: "{workflow}", monotonic: true},
	}
	if len(sm.Metrics) != len(wants) {
		t.Errorf("exported %d metrics, want %d", len(sm.Metrics), len(wants))
	}
	for _, m := range sm.Metrics {
		w, ok := wants[m.Name]
		if !ok {
			t.Errorf("unexpected metric %q", m.Name)
			continue
		}
		if m.Unit != w.unit {
			t.Errorf("%s unit = %q, want %q", m.Name, m.Unit, w.unit)
		}
		if m.Description == "" || strings.Contains(m.Description, "\n") {
			t.Errorf("%s description %q, want one non-empty line", m.Name, m.Description)
		}
		switch d := m.Data.(type) {
		case metricdata.Gauge[float64]:
			if !w.gauge {
				t.Errorf("%s: a gauge, want otherwise", m.Name)
			}
		case metricdata.Sum[int64]:
			if w.histogram || w.gauge || d.IsMonotonic != w.monotonic {
				t.Errorf("%s: Sum monotonic=%v, want histogram=%v monotonic=%v", m.Name, d.IsMonotonic, w.histogram, w.monotonic)
			}
		case metricdata.Histogram[float64]:
			if !w.histogram {
				t.Errorf("%s: a histogram, want a sum", m.Name)
			}
			b := d.DataPoints[0].Bounds
			if len(b) != len(catalog.WorkflowDurationBoundaries) {
				t.Fatalf("%s bounds = %v, want %v", m.Name, b, catalog.WorkflowDurationBoundaries)
			}
			for i := range b {
				if b[i] != catalog.WorkflowDurationBoundaries[i] {
					t.Errorf("%s bounds = %v, want %v", m.Name, b, catalog.WorkflowDurationBoundaries)
					break
				}
			}
		default:
			t.Errorf("%s: data %T", m.Name, m.Data)
		}
	}
}

// faultyProvider hands out faultyMeter, or a nil meter when nilMeter is set.
type faultyProvider struct {
	noop.MeterProvider
	meter    metric.Meter
	nilMeter bool
}

func (p faultyProvider) Meter(string, ...metric.MeterOption) metric.Meter {
	if p.nilMeter {
		return nil
	}
	return p.meter
}

// faultyMeter returns err from every instrument creation it supports, with
// the inner meter's instrument (or nil when inner is nil). Its up-down
// counter panics while panicking is set.
type faultyMeter struct {
	noop.Meter
	inner     metric.Meter
	err       error
	panicking *atomic.Bool
}

func (m faultyMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	if m.inner == nil {
		return nil, m.err
	}
	c, _ := m.inner.Int64Counter(name, opts...)
	return c, m.err
}

func (m faultyMeter) Int64UpDownCounter(name string, opts ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	if m.inner == nil {
		return nil, m.err
	}
	c, _ := m.inner.Int64UpDownCounter(name, opts...)
	if m.panicking != nil {
		return panicUpDown{Int64UpDownCounter: c, panicking: m.panicking}, m.err
	}
	return c, m.err
}

func (m faultyMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	if m.inner == nil {
		return nil, m.err
	}
	hist, _ := m.inner.Float64Histogram(name, opts...)
	return hist, m.err
}

type panicUpDown struct {
	metric.Int64UpDownCounter
	panicking *atomic.Bool
}

func (c panicUpDown) Add(ctx context.Context, v int64, opts ...metric.AddOption) {
	if c.panicking.Load() {
		panic("instrument failure")
	}
	c.Int64UpDownCounter.Add(ctx, v, opts...)
}

// Instrument creation trouble goes to the error handler, once, and never
// fails New or the pairing itself; a usable instrument returned with an
// error is kept.
func TestInstrumentCreationErrorsHandled(t *testing.T) {
	errBoom := errors.New("boom")
	reader := sdkmetric.NewManualReader()
	sdk := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })

	testCases := []struct {
		name      string
		mp        metric.MeterProvider
		wantErr   error
		recording bool // the SDK instruments returned alongside the error are used
	}{
		{"nil instruments and errors", faultyProvider{meter: faultyMeter{err: errBoom}}, errBoom, false},
		{"nil instruments without errors", faultyProvider{meter: faultyMeter{}}, nil, false},
		{"nil meter", faultyProvider{nilMeter: true}, nil, false},
		{"instruments with errors", faultyProvider{meter: faultyMeter{inner: sdk.Meter(ScopeName), err: errBoom}}, errBoom, true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			var handled []error
			tr, err := New(WithMeterProvider(tc.mp), withErrorHandler(func(err error) { handled = append(handled, err) }))
			if err != nil {
				t.Fatalf("New failed on telemetry trouble: %v", err)
			}
			if len(handled) != 1 {
				t.Fatalf("handler got %d errors, want 1: %v", len(handled), handled)
			}
			if tc.wantErr != nil && !errors.Is(handled[0], tc.wantErr) {
				t.Errorf("handled %v, want it to wrap %v", handled[0], tc.wantErr)
			}
			k := key("n", 1, 1, 0)
			if !tr.Dispatched(bg, k, "t", ts(0)) || tr.Dispatched(bg, k, "t", ts(0)) || tr.InFlight() != 1 {
				t.Error("dispatch pairing wrong with faulty instruments")
			}
			if !tr.Retried(bg, k, ts(1)) || !tr.Finished(bg, k, OutcomeSucceeded, ts(2)) || tr.Finished(bg, k, OutcomeSucceeded, ts(2)) || tr.InFlight() != 0 {
				t.Error("terminal pairing wrong with faulty instruments")
			}
			if tc.recording {
				var rm metricdata.ResourceMetrics
				if err := reader.Collect(bg, &rm); err != nil {
					t.Fatal(err)
				}
				if n := len(rm.ScopeMetrics); n != 1 || len(rm.ScopeMetrics[0].Metrics) != 5 {
					t.Errorf("instruments returned with an error were not used: %+v", rm.ScopeMetrics)
				}
			}
		})
	}
}

// A panic raised by an instrument is reported, never passed to the caller,
// and leaves no lock held and no half-made entry: the tracker carries on.
func TestPanicLeavesNoLockHeld(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	sdk := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	var panicking atomic.Bool
	mp := faultyProvider{meter: faultyMeter{inner: sdk.Meter(ScopeName), panicking: &panicking}}
	var reported atomic.Int64
	tr, err := New(WithMeterProvider(mp), withErrorHandler(func(err error) {
		if strings.Contains(err.Error(), "panic") {
			reported.Add(1)
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	call := func(name string, f func()) {
		t.Helper()
		before := reported.Load()
		func() {
			defer func() {
				if r := recover(); r != nil {
					t.Errorf("%s: an instrument panic reached the caller: %v", name, r)
				}
			}()
			f()
		}()
		if reported.Load() == before {
			t.Errorf("%s: the instrument panic was not reported", name)
		}
		if !tr.join.mu.TryLock() {
			t.Fatalf("%s: the join's lock is still held after a panic", name)
		}
		tr.join.mu.Unlock()
		if err := tr.join.check(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	a, b := key("n", 1, 1, 0), key("n", 1, 1, 1)
	panicking.Store(true)
	call("Dispatched", func() { tr.Dispatched(bg, a, "t", ts(0)) })
	tr.Retried(bg, a, ts(1)) // the counter does not panic
	call("Finished", func() { tr.Finished(bg, a, OutcomeSucceeded, ts(2)) })
	panicking.Store(false)
	if tr.InFlight() != 0 {
		t.Errorf("InFlight = %d after the dispatch and its terminal, want 0", tr.InFlight())
	}
	if !tr.Dispatched(bg, b, "t", ts(3)) || tr.InFlight() != 1 || !tr.Finished(bg, b, OutcomeSucceeded, ts(4)) {
		t.Error("the tracker did not carry on after the panics")
	}
}
