package otelstore_test

import (
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
