package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/google/uuid"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// defaultServiceName is the service.name of -exporter otlp (the job label
// the Collector's Prometheus exporter gives the series, which the Grafana
// dashboard selects) unless OTEL_SERVICE_NAME says otherwise.
const defaultServiceName = "aionotel-goworkflows"

// otlpOptions returns what -exporter otlp adds to the meter and tracer
// providers: a resource (service.name, a service.instance.id per process,
// then OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES), a periodic OTLP
// metric reader and a batching OTLP span exporter, built by autoexport
// from the standard OTEL_EXPORTER_OTLP_* variables (OTLP/HTTP to
// localhost:4318 unless they say otherwise; OTEL_METRIC_EXPORT_INTERVAL
// sets the period, 60 s by default). OTEL_METRICS_EXPORTER and
// OTEL_TRACES_EXPORTER are set to otlp when unset: the flag chose.
func otlpOptions(ctx context.Context) ([]sdkmetric.Option, []sdktrace.TracerProviderOption, error) {
	for _, key := range []string{"OTEL_METRICS_EXPORTER", "OTEL_TRACES_EXPORTER"} {
		if os.Getenv(key) == "" {
			os.Setenv(key, "otlp")
		}
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(semconv.ServiceName(defaultServiceName), semconv.ServiceInstanceID(uuid.NewString())),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, nil, fmt.Errorf("telemetry resource: %w", err)
	}
	reader, err := autoexport.NewMetricReader(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("metrics exporter %q: %w", os.Getenv("OTEL_METRICS_EXPORTER"), err)
	}
	spans, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, nil, errors.Join(fmt.Errorf("traces exporter %q: %w", os.Getenv("OTEL_TRACES_EXPORTER"), err), reader.Shutdown(ctx))
	}
	mopts := []sdkmetric.Option{sdkmetric.WithResource(res), sdkmetric.WithReader(reader)}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if !autoexport.IsNoneSpanExporter(spans) {
		topts = append(topts, sdktrace.WithBatcher(spans))
	}
	return mopts, topts, nil
}
