// Package telemetry sets up the demo's OpenTelemetry SDK the standard way:
// contrib autoexport picks the metric reader, the span exporter and the log
// exporter from OTEL_METRICS_EXPORTER, OTEL_TRACES_EXPORTER and
// OTEL_LOGS_EXPORTER, on a resource built by the SDK's standard detectors.
// The tracer provider derives the timeline's span IDs
// (pairing.NewIDGenerator), so every run's trace is one tree. With
// OTEL_TRACES_SAMPLER=always_off no span can ever record, and the
// instrumentation is handed a no-op tracer provider instead (Telemetry.Spans),
// so that it runs as in a program exporting metrics only: no span started.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/google/uuid"
	"go.opentelemetry.io/contrib/exporters/autoexport"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/pairing"
)

// Exporters maps the demo's -exporter values onto autoexport's names for
// the metric, the span and the log exporter.
var Exporters = map[string][3]string{
	"prometheus": {"prometheus", "none", "none"},
	"otlp":       {"otlp", "otlp", "otlp"},
	"stdout":     {"console", "console", "console"},
	"none":       {"none", "none", "none"},
}

// Telemetry is the demo's meter, tracer and logger providers.
type Telemetry struct {
	Resource *resource.Resource
	Meter    *sdkmetric.MeterProvider
	Tracer   *sdktrace.TracerProvider
	Logger   *sdklog.LoggerProvider
	// Spans is the tracer provider to give the instrumentation: Tracer, or
	// a no-op provider when OTEL_TRACES_SAMPLER is always_off.
	Spans trace.TracerProvider
}

// Start builds the resource and the providers from the environment (see
// autoexport for the variables).
func Start(ctx context.Context, serviceName string) (*Telemetry, error) {
	version := "(devel)"
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		version = bi.Main.Version
	}
	res, err := resource.New(ctx,
		// Defaults first: OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
		// (WithFromEnv) override them.
		resource.WithAttributes(semconv.ServiceName(serviceName), semconv.ServiceVersion(version),
			semconv.ServiceInstanceID(uuid.NewString())),
		resource.WithFromEnv(), resource.WithTelemetrySDK(), resource.WithHost(),
		resource.WithOS(), resource.WithProcessRuntimeName(), resource.WithProcessRuntimeVersion(), resource.WithProcessPID())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}
	var reader sdkmetric.Reader
	if os.Getenv("OTEL_METRICS_EXPORTER") == "prometheus" {
		reader, err = newPrometheusReader() // autoexport's, serving OpenMetrics (exemplars)
	} else {
		reader, err = autoexport.NewMetricReader(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("metrics exporter %q: %w", os.Getenv("OTEL_METRICS_EXPORTER"), err)
	}
	spans, err := autoexport.NewSpanExporter(ctx)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("traces exporter %q: %w", os.Getenv("OTEL_TRACES_EXPORTER"), err), reader.Shutdown(ctx))
	}
	logs, err := autoexport.NewLogExporter(ctx)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("logs exporter %q: %w", os.Getenv("OTEL_LOGS_EXPORTER"), err), reader.Shutdown(ctx), spans.Shutdown(ctx))
	}
	t := &Telemetry{
		Resource: res,
		Meter:    sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader)),
	}
	// The timeline's IDs are derived from the runs: each run's trace is one
	// tree, whichever node saw which part of it.
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res), sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil))}
	if !autoexport.IsNoneSpanExporter(spans) {
		tpOpts = append(tpOpts, sdktrace.WithBatcher(spans))
	}
	t.Tracer = sdktrace.NewTracerProvider(tpOpts...)
	t.Spans = t.Tracer
	if strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")) == "always_off" {
		t.Spans = tracenoop.NewTracerProvider()
	}
	lpOpts := []sdklog.LoggerProviderOption{sdklog.WithResource(res)}
	if !autoexport.IsNoneLogExporter(logs) {
		lpOpts = append(lpOpts, sdklog.WithProcessor(sdklog.NewBatchProcessor(logs)))
	}
	t.Logger = sdklog.NewLoggerProvider(lpOpts...)
	return t, nil
}

// Shutdown flushes and stops the providers, at the same time, within ctx.
// It returns one line per signal that could not be flushed.
func (t *Telemetry) Shutdown(ctx context.Context) []string {
	errs := make(chan string, 3)
	go func() {
		if err := t.Meter.Shutdown(ctx); err != nil {
			errs <- "metrics not flushed: " + err.Error()
			return
		}
		errs <- ""
	}()
	go func() {
		if err := t.Tracer.Shutdown(ctx); err != nil {
			errs <- "spans not flushed: " + err.Error()
			return
		}
		errs <- ""
	}()
	go func() {
		if err := t.Logger.Shutdown(ctx); err != nil {
			errs <- "log records not flushed: " + err.Error()
			return
		}
		errs <- ""
	}()
	var out []string
	for range 3 {
		if e := <-errs; e != "" {
			out = append(out, e)
		}
	}
	return out
}
