package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"
)

// DefaultListen is the Prometheus endpoint's default address.
const DefaultListen = "127.0.0.1:9464"

// Config is the demo's command line: what [Main] runs.
type Config struct {
	// Duration is how long to run before draining; 0 runs until ctx is done
	// (Ctrl-C or SIGTERM in the demo).
	Duration time.Duration
	Workers  int     // workflow workers, and as many activity workers
	Rate     float64 // workflows started per second
	Exporter Exporter
	Listen   string // Prometheus endpoint address
	Seed     uint64
	// MaxInFlight bounds the pairing tracker (0: its default).
	MaxInFlight int
	// DrainGrace is how long started workflows may go on finishing once the
	// run stops, before the rest are cancelled.
	DrainGrace time.Duration
}

// DefaultConfig returns the demo's defaults.
func DefaultConfig() Config {
	return Config{
		Workers:    DefaultWorkers,
		Rate:       DefaultRate,
		Exporter:   ExporterPrometheus,
		Listen:     DefaultListen,
		Seed:       DefaultSeed,
		DrainGrace: DefaultDrainGrace,
	}
}

// Validate reports every invalid field, each as an error matching
// [ErrInvalidConfig], joined.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Duration < 0 {
		bad("-duration %s: must not be negative", c.Duration)
	}
	if c.Workers < 1 {
		bad("-workers %d: must be at least 1", c.Workers)
	}
	if math.IsNaN(c.Rate) || c.Rate <= 0 || c.Rate > maxRate {
		bad("-rate %g: must be above 0 and at most %d workflows per second", c.Rate, maxRate)
	}
	if _, err := ParseExporter(string(c.Exporter)); err != nil {
		errs = append(errs, err)
	}
	if c.Exporter == ExporterPrometheus && c.Listen == "" {
		bad("-listen: an address is needed for the prometheus exporter")
	}
	if c.MaxInFlight < 0 {
		bad("-max-inflight %d: must not be negative", c.MaxInFlight)
	}
	if c.DrainGrace < 0 {
		bad("-drain %s: must not be negative", c.DrainGrace)
	}
	return errors.Join(errs...)
}

// Main runs the demo: it starts the telemetry pipeline, runs a [Server] with
// a progress display until cfg.Duration has passed or ctx is done, drains it,
// prints the summary, and flushes and shuts the pipeline down.
//
// Progress and summary go to stdout, except with the stdout exporter, whose
// JSON takes stdout: they go to stderr then. The progress display is a live
// line if that writer is a terminal ([IsTerminal]), plain lines every 5 s
// otherwise.
//
// It returns an error matching [ErrInvalidConfig] for a bad cfg, a
// *[ListenError] when the Prometheus endpoint cannot listen, and otherwise
// the errors of starting or shutting down the pipeline.
func Main(ctx context.Context, cfg Config, stdout, stderr io.Writer) (err error) {
	if err := cfg.Validate(); err != nil {
		return err
	}
	status := stdout
	tcfg := TelemetryConfig{Exporter: cfg.Exporter, Listen: cfg.Listen}
	if cfg.Exporter == ExporterStdout {
		tcfg.Output, status = stdout, stderr
	}
	tel, err := StartTelemetry(ctx, tcfg)
	if err != nil {
		return err
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if serr := tel.Shutdown(sctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("telemetry shutdown: %w", serr))
		}
	}()

	srv, err := New(
		WithMeterProvider(tel.MeterProvider()),
		WithTracerProvider(tel.TracerProvider()),
		WithWorkers(cfg.Workers),
		WithRate(cfg.Rate),
		WithSeed(cfg.Seed),
		WithMaxInFlight(cfg.MaxInFlight),
		WithDrainGrace(cfg.DrainGrace),
	)
	if err != nil {
		return err
	}
	switch cfg.Exporter {
	case ExporterPrometheus:
		fmt.Fprintf(status, "serving metrics at http://%s/metrics\n", tel.Addr())
	case ExporterOTLP:
		fmt.Fprintf(status, "exporting metrics and spans over OTLP/gRPC to %s\n", otlpTarget())
	}
	until := "until interrupted (Ctrl-C)"
	if cfg.Duration > 0 {
		until = "for " + cfg.Duration.String()
	}
	fmt.Fprintf(status, "running %g workflows/s on %d workers %s\n", cfg.Rate, cfg.Workers, until)

	runCtx := ctx
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	terminal := IsTerminal(status)
	interval := PlainProgressInterval
	if terminal {
		interval = TerminalProgressInterval
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	progressDone := make(chan struct{})
	go func() {
		defer close(progressDone)
		progress := NewProgress(status, terminal)
		progress.Run(runCtx, ticker.C, srv.Stats)
		if terminal {
			progress.Report(srv.Stats()) // bring the live line up to date
		}
		progress.Finish()
		hint := ""
		if cfg.Duration == 0 {
			hint = " (interrupt again to quit at once)"
		}
		fmt.Fprintf(status, "stopping: workflows may finish for up to %s, then the rest are cancelled%s\n", cfg.DrainGrace, hint)
	}()

	sum, err := srv.Run(runCtx)
	<-progressDone
	if err != nil {
		return err
	}
	_, err = sum.WriteTo(status)
	return err
}

// otlpTarget describes where the OTLP exporters send, for the start banner.
func otlpTarget() string {
	if !otlpEnvSet() {
		return LocalOTLPEndpoint + " (insecure; set OTEL_EXPORTER_OTLP_ENDPOINT to change)"
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := os.Getenv(k); v != "" {
			return v
		}
	}
	return "the endpoint the OTEL_EXPORTER_OTLP_* variables set"
}
