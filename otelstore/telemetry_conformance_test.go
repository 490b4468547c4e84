package otelstore_test

import (
	"context"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/conformance"
	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
)

// TestTelemetryConformance runs the telemetry suite on New: every metric
// and span of generated histories, timeline included, against the model of
// package conformance.
func TestTelemetryConformance(t *testing.T) {
	conformance.TestTelemetry(t, func(inner eventstore.Store, mp metric.MeterProvider, tp trace.TracerProvider) eventstore.Store {
		s, err := otelstore.New(inner, otelstore.WithMeterProvider(mp), otelstore.WithTracerProvider(tp))
		if err != nil {
			t.Error(err)
		}
		return s
	}, conformance.WithTimeline())
}

// TestTelemetryConformanceCatches: the suite catches New's telemetry made
// wrong on its way to the SDK: activity durations in milliseconds, retries
// dropped, a completion counted twice.
func TestTelemetryConformanceCatches(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault skewFault
		rule  string
	}{
		{"milliseconds", skewFault{millis: true}, conformance.RuleTelDurations},
		{"retries dropped", skewFault{dropRetries: true}, conformance.RuleTelCounters},
		{"completion twice", skewFault{doubleCompleted: true}, conformance.RuleTelCounters},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := conformance.CheckTelemetry(t.Context(), func(inner eventstore.Store, mp metric.MeterProvider, tp trace.TracerProvider) eventstore.Store {
				s, err := otelstore.New(inner, otelstore.WithMeterProvider(skewMP{mp, c.fault}), otelstore.WithTracerProvider(tp))
				if err != nil {
					t.Error(err)
				}
				return s
			}, conformance.WithTimeline())
			var rules []string
			for _, re := range conformance.RuleErrors(err) {
				rules = append(rules, re.Rule)
			}
			if !slices.Contains(rules, c.rule) {
				t.Errorf("not caught by rule %q (failed: %v)", c.rule, rules)
			}
		})
	}
}

type skewFault struct{ millis, dropRetries, doubleCompleted bool }

// skewMP hands New instruments that get one thing wrong.
type skewMP struct {
	metric.MeterProvider
	f skewFault
}

func (p skewMP) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	return skewMeter{p.MeterProvider.Meter(name, opts...), p.f}
}

type skewMeter struct {
	metric.Meter
	f skewFault
}

func (m skewMeter) Float64Histogram(name string, opts ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	h, err := m.Meter.Float64Histogram(name, opts...)
	if m.f.millis && name == "aion.activity.duration" {
		return msHistogram{h}, err
	}
	return h, err
}

func (m skewMeter) Int64Counter(name string, opts ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	c, err := m.Meter.Int64Counter(name, opts...)
	if (m.f.dropRetries && name == "aion.activities.retried") || (m.f.doubleCompleted && name == "aion.activities.completed") {
		return skewCounter{c, m.f}, err
	}
	return c, err
}

type msHistogram struct{ metric.Float64Histogram }

func (h msHistogram) Record(ctx context.Context, v float64, opts ...metric.RecordOption) {
	h.Float64Histogram.Record(ctx, v*1000, opts...)
}

type skewCounter struct {
	metric.Int64Counter
	f skewFault
}

func (c skewCounter) Add(ctx context.Context, n int64, opts ...metric.AddOption) {
	if c.f.dropRetries {
		return
	}
	c.Int64Counter.Add(ctx, 2*n, opts...)
}
