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
	// Keyspace names the transcript keyspace: [MemoryKeyspace] (or ""), or
	// NAME:ARG for the [Backend] whose Scheme is NAME, opened with ARG (a
	// bbolt file's path, a PostgreSQL DSN). [Config.Validate] checks the
	// syntax; [Main] checks that NAME is one of its backends. The workflow
	// histories are in memory whatever it says. A durable keyspace outlives
	// the run: run again with the same Seed, the server draws the same
	// workflow and run IDs, and the transcripts of the streams already
	// written are dropped as re-deliveries ([Command] draws a random seed
	// when -seed is not given, for this reason).
	Keyspace string
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
		Keyspace:   MemoryKeyspace,
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
	if _, _, err := parseKeyspace(c.Keyspace); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// validate is [Config.Validate], plus the check that the keyspace is the
// memory one or one of backends.
func (c Config) validate(backends []Backend) error {
	err := c.Validate()
	if _, _, perr := parseKeyspace(c.Keyspace); perr == nil {
		if _, _, rerr := resolveKeyspace(c.Keyspace, backends); rerr != nil {
			err = errors.Join(err, rerr)
		}
	}
	return err
}

// Main runs the demo: it opens the transcript keyspace cfg.Keyspace names
// (a keyspace.Memory, or one of backends), starts the telemetry pipeline,
// runs a [Server] with a progress display until cfg.Duration has passed or
// ctx is done, drains it, prints the summary, flushes and shuts the pipeline
// down, and closes the keyspace.
//
// Progress and summary go to stdout, except with the stdout exporter, whose
// JSON takes stdout: they go to stderr then. The progress display is a live
// line if that writer is a terminal ([IsTerminal]), plain lines every 5 s
// otherwise.
//
// It returns an error matching [ErrInvalidBackend] for an unusable backend,
// one matching [ErrInvalidConfig] for a bad cfg (and [ErrUnknownBackend] too
// for a keyspace none of backends has), both before opening or starting
// anything; one matching [ErrKeyspaceOpen] when the keyspace cannot be
// opened; a *[ListenError] when the Prometheus endpoint cannot listen; and
// otherwise the errors of starting or shutting down the pipeline and of
// closing the keyspace.
func Main(ctx context.Context, cfg Config, stdout, stderr io.Writer, backends ...Backend) (err error) {
	if err := checkBackends(backends); err != nil {
		return err
	}
	if err := cfg.validate(backends); err != nil {
		return err
	}
	backend, arg, err := resolveKeyspace(cfg.Keyspace, backends)
	if err != nil {
		return err // not reached: validate resolved it
	}
	keys, closer, err := openKeyspace(ctx, backend, arg)
	if err != nil {
		return err
	}
	if closer != nil {
		// Deferred first, so run last: after the telemetry shutdown, when
		// nothing writes to the keyspace any more.
		defer func() {
			if cerr := closer.Close(); cerr != nil {
				err = errors.Join(err, fmt.Errorf("-keyspace %s:...: close: %w", backend.Scheme, cerr))
			}
		}()
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
		WithKeyspace(keys),
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
	if backend.Scheme != "" {
		fmt.Fprintf(status, "keeping agent transcripts in the %s keyspace (IDs from seed %d); workflow histories stay in memory\n", backend.Scheme, cfg.Seed)
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
