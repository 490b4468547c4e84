package otelstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
)

// withClock and withHandler reach the config's test seams.
func withClock(now func() time.Time) Option { return optionFunc(func(c *config) { c.now = now }) }
func withHandler(h func(error)) Option      { return optionFunc(func(c *config) { c.handle = h }) }

// brokenMeterProvider fails every instrument creation, as a misconfigured SDK
// might.
type brokenMeterProvider struct{ noop.MeterProvider }

func (brokenMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return brokenMeter{} }

type brokenMeter struct{ noop.Meter }

var errInstrument = errors.New("instrument refused")

func (brokenMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return nil, errInstrument
}

func (brokenMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errInstrument
}

func (brokenMeter) Int64Histogram(string, ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	return nil, errInstrument
}

// Instrument creation failures go to the error handler, and the decorator
// still forwards every call.
func TestInstrumentFailureIsHandledAndStoreForwards(t *testing.T) {
	var handled []error
	s, err := New(eventstore.NewMemory(), WithMeterProvider(brokenMeterProvider{}), withHandler(func(err error) { handled = append(handled, err) }))
	if err != nil {
		t.Fatalf("New failed because of telemetry: %v", err)
	}
	if len(handled) == 0 || !errors.Is(handled[0], errInstrument) {
		t.Fatalf("handled %v, want the instrument errors", handled)
	}
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	ev := []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: run}, WorkflowType: "checkout"},
		eventstore.ActivityScheduled{Envelope: eventstore.Envelope{RunID: run}, ActivityType: "charge"},
	}
	if err := s.Append(context.Background(), eventstore.RecorderToken(), wf, ev, 0); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadHistory(context.Background(), wf)
	if err != nil || len(got) != 2 {
		t.Fatalf("ReadHistory = %d events, %v; want the 2 appended", len(got), err)
	}
}

// The duration is the clock difference around the inner call alone.
func TestDurationIsInnerCallTime(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	clock := time.Unix(0, 0)
	tick := func() time.Time { clock = clock.Add(250 * time.Millisecond); return clock }
	s, err := New(eventstore.NewMemory(), WithMeterProvider(mp), withClock(tick))
	if err != nil {
		t.Fatal(err)
	}
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	// The append's lifecycle work reads the clock too (the events have no
	// RecordedAt); it must not be inside the timed window.
	ev := []eventstore.Event{eventstore.ActivityScheduled{Envelope: eventstore.Envelope{RunID: run}, ActivityType: "charge"}}
	if err := s.Append(context.Background(), eventstore.RecorderToken(), wf, ev, 0); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "aion.store.operation.duration" {
				continue
			}
			dp := m.Data.(metricdata.Histogram[float64]).DataPoints[0]
			if dp.Count != 1 || dp.Sum != 0.25 {
				t.Fatalf("duration count %d sum %g, want one sample of 0.25s", dp.Count, dp.Sum)
			}
			return
		}
	}
	t.Fatal("no duration recorded")
}
