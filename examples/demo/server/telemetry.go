package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/internal/version"
)

// Exporter names where the demo's telemetry goes.
type Exporter string

// The exporters.
const (
	// ExporterPrometheus serves metrics at http://<listen>/metrics through
	// the OpenTelemetry Prometheus exporter. Spans have nowhere to go and are
	// not recorded.
	ExporterPrometheus Exporter = "prometheus"
	// ExporterOTLP pushes metrics and spans over OTLP/gRPC, configured by the
	// standard OTEL_EXPORTER_OTLP_* variables.
	ExporterOTLP Exporter = "otlp"
	// ExporterStdout writes metrics and spans as JSON lines to the output.
	ExporterStdout Exporter = "stdout"
)

// Exporters lists the valid exporters.
var Exporters = []Exporter{ExporterPrometheus, ExporterOTLP, ExporterStdout}

// ErrInvalidConfig is matched by every error of [Config.Validate] and
// [ParseExporter].
var ErrInvalidConfig = errors.New("invalid configuration")

// ParseExporter returns the exporter named s, or an error matching
// [ErrInvalidConfig].
func ParseExporter(s string) (Exporter, error) {
	for _, e := range Exporters {
		if string(e) == s {
			return e, nil
		}
	}
	return "", fmt.Errorf("%w: unknown exporter %q (want prometheus, otlp or stdout)", ErrInvalidConfig, s)
}

// DefaultServiceName is the service.name of the demo's resource when
// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) does not
// set one.
const DefaultServiceName = "aionotel-demo"

// DefaultMetricInterval is the metric export interval of the push exporters
// (otlp, stdout) when OTEL_METRIC_EXPORT_INTERVAL is not set: shorter than
// the SDK's 60 s, since a demo should show data soon.
const DefaultMetricInterval = 5 * time.Second

// NewResource returns the demo's resource: the SDK's telemetry.sdk.*
// attributes, service.name (default [DefaultServiceName]) and
// service.version (the aionotel module version), then what
// OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME say, which wins.
func NewResource(ctx context.Context) (*resource.Resource, error) {
	return resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(
			attribute.String("service.name", DefaultServiceName),
			attribute.String("service.version", version.Version),
		),
		resource.WithFromEnv(),
	)
}

// TelemetryConfig says where [StartTelemetry] sends telemetry.
type TelemetryConfig struct {
	Exporter Exporter
	// Listen is the Prometheus endpoint's address (host:port; port 0 picks a
	// free one). Only for ExporterPrometheus.
	Listen string
	// Output receives the JSON of ExporterStdout (os.Stdout if nil).
	Output io.Writer
}

// ListenError is returned by [StartTelemetry] when the Prometheus endpoint
// cannot listen on its address. errors.Is(err, syscall.EADDRINUSE) tells an
// address already in use.
type ListenError struct {
	Addr string
	Err  error
}

func (e *ListenError) Error() string {
	if errors.Is(e.Err, syscall.EADDRINUSE) {
		return "listen " + e.Addr + ": address already in use"
	}
	return "listen " + e.Addr + ": " + e.Err.Error()
}

// Unwrap returns the listener's error.
func (e *ListenError) Unwrap() error { return e.Err }

// Telemetry is the demo's OpenTelemetry pipeline: SDK meter and tracer
// providers on one resource, with the chosen exporter. Shutdown flushes and
// stops it. Safe for concurrent use.
type Telemetry struct {
	mp       *sdkmetric.MeterProvider
	tp       trace.TracerProvider
	sdkTP    *sdktrace.TracerProvider // nil when spans are not recorded
	srv      *http.Server
	addr     string
	serveErr chan error
	once     sync.Once
	err      error
}

// StartTelemetry builds the pipeline. For ExporterPrometheus it listens on
// cfg.Listen before returning, so that an address in use fails here (as a
// *ListenError) and [Telemetry.Addr] reports the bound address.
func StartTelemetry(ctx context.Context, cfg TelemetryConfig) (*Telemetry, error) {
	res, err := NewResource(ctx)
	if err != nil {
		// A partial resource comes back with the error (a malformed
		// OTEL_RESOURCE_ATTRIBUTES, say); it is still usable.
		if res == nil {
			return nil, fmt.Errorf("telemetry resource: %w", err)
		}
	}
	t := &Telemetry{}
	switch cfg.Exporter {
	case ExporterPrometheus:
		err = t.startPrometheus(res, cfg.Listen)
	case ExporterOTLP:
		err = t.startOTLP(ctx, res)
	case ExporterStdout:
		out := cfg.Output
		if out == nil {
			out = os.Stdout
		}
		err = t.startStdout(res, out)
	default:
		_, err = ParseExporter(string(cfg.Exporter))
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

func (t *Telemetry) startPrometheus(res *resource.Resource, listen string) error {
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return fmt.Errorf("prometheus exporter: %w", err)
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return &ListenError{Addr: listen, Err: err}
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(exp))
	t.tp = tracenoop.NewTracerProvider()
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	t.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	t.addr = ln.Addr().String()
	t.serveErr = make(chan error, 1)
	go func() { t.serveErr <- t.srv.Serve(ln) }()
	return nil
}

// periodicReaderOptions leaves the interval to OTEL_METRIC_EXPORT_INTERVAL
// when it is set, and otherwise uses DefaultMetricInterval.
func periodicReaderOptions() []sdkmetric.PeriodicReaderOption {
	if os.Getenv("OTEL_METRIC_EXPORT_INTERVAL") != "" {
		return nil
	}
	return []sdkmetric.PeriodicReaderOption{sdkmetric.WithInterval(DefaultMetricInterval)}
}

// otlpEnvSet reports whether any variable that says where or how to reach
// the OTLP endpoint is set.
func otlpEnvSet() bool {
	for _, k := range []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_METRICS_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE",
	} {
		if os.Getenv(k) != "" {
			return true
		}
	}
	return false
}

// LocalOTLPEndpoint is where the otlp exporter sends, without TLS, when no
// OTEL_EXPORTER_OTLP_* variable says otherwise: the Collector of
// collector-config.yaml on this machine.
const LocalOTLPEndpoint = "127.0.0.1:4317"

func (t *Telemetry) startOTLP(ctx context.Context, res *resource.Resource) error {
	var mopts []otlpmetricgrpc.Option
	var topts []otlptracegrpc.Option
	if !otlpEnvSet() {
		mopts = append(mopts, otlpmetricgrpc.WithEndpoint(LocalOTLPEndpoint), otlpmetricgrpc.WithInsecure())
		topts = append(topts, otlptracegrpc.WithEndpoint(LocalOTLPEndpoint), otlptracegrpc.WithInsecure())
	}
	mexp, err := otlpmetricgrpc.New(ctx, mopts...)
	if err != nil {
		return fmt.Errorf("otlp metric exporter: %w", err)
	}
	texp, err := otlptracegrpc.New(ctx, topts...)
	if err != nil {
		return errors.Join(fmt.Errorf("otlp trace exporter: %w", err), mexp.Shutdown(ctx))
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, periodicReaderOptions()...)))
	t.sdkTP = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(texp))
	t.tp = t.sdkTP
	return nil
}

func (t *Telemetry) startStdout(res *resource.Resource, out io.Writer) error {
	mexp, err := stdoutmetric.New(stdoutmetric.WithWriter(out))
	if err != nil {
		return fmt.Errorf("stdout metric exporter: %w", err)
	}
	texp, err := stdouttrace.New(stdouttrace.WithWriter(out))
	if err != nil {
		return fmt.Errorf("stdout trace exporter: %w", err)
	}
	t.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res),
		sdkmetric.WithReader(sdkmetric.NewPeriodicReader(mexp, periodicReaderOptions()...)))
	t.sdkTP = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithBatcher(texp))
	t.tp = t.sdkTP
	return nil
}

// MeterProvider returns the provider to instrument with.
func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.mp }

// TracerProvider returns the provider to instrument with (a no-op one for
// the Prometheus exporter).
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tp }

// Addr returns the address the Prometheus endpoint listens on ("" for the
// other exporters).
func (t *Telemetry) Addr() string { return t.addr }

// Shutdown flushes what is buffered (a last metric export, the queued spans),
// shuts the providers down and closes the Prometheus endpoint. Later calls
// return the first call's result.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	t.once.Do(func() {
		var errs []error
		if t.sdkTP != nil {
			errs = append(errs, t.sdkTP.Shutdown(ctx))
		}
		errs = append(errs, t.mp.Shutdown(ctx))
		if t.srv != nil {
			errs = append(errs, t.srv.Shutdown(ctx))
			if err := <-t.serveErr; !errors.Is(err, http.ErrServerClosed) {
				errs = append(errs, err)
			}
		}
		t.err = errors.Join(errs...)
	})
	return t.err
}
