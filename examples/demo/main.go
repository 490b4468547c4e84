// Command demo runs a simulated workflow server instrumented by aionotel and
// exports its telemetry: a Prometheus endpoint at 127.0.0.1:9464/metrics by
// default, OTLP/gRPC to a Collector, or JSON on stdout.
//
//	go run ./examples/demo                      # until Ctrl-C
//	go run ./examples/demo -duration 30s -rate 50
//	go run ./examples/demo -exporter otlp       # to the Collector of collector-config.yaml
//
// The simulation itself lives in package server; this file only maps flags to
// it. Exit status: 0 after a clean run, 1 when the run fails (an address
// already in use, say), 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/aionotel/aionotel/examples/demo/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		// After the first interrupt the demo drains; restoring the default
		// handling lets a second one end the process at once.
		<-ctx.Done()
		stop()
	}()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run parses args, runs the demo and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := server.DefaultConfig()
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	exporter := string(cfg.Exporter)
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to run, then drain and exit (0: until Ctrl-C or SIGTERM)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "workflow workers, and as many activity workers")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "workflows started per second")
	fs.StringVar(&exporter, "exporter", exporter, "where telemetry goes: prometheus, otlp or stdout")
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "address of the Prometheus /metrics endpoint (prometheus exporter)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the simulation's random source")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", cfg.MaxInFlight, "bound of the activity pairing tracker; past it the oldest in-flight activity is evicted (0: the tracker's default)")
	fs.DurationVar(&cfg.DrainGrace, "drain", cfg.DrainGrace, "on stop, how long started workflows may finish before the rest are cancelled")
	fs.Usage = func() { usage(fs) }

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2 // the flag package has printed the error and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demo: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	cfg.Exporter = server.Exporter(exporter)
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		fs.Usage()
		return 2
	}

	if err := server.Main(ctx, cfg, stdout, stderr); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			fmt.Fprintf(stderr, "demo: %v; choose another with -listen\n", err)
		} else {
			fmt.Fprintf(stderr, "demo: %v\n", err)
		}
		return 1
	}
	return 0
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `Usage: go run ./examples/demo [flags]

Runs a simulated workflow server on aionotel's instrumented in-memory stores
and exports its metrics (and, with otlp or stdout, its spans).

Flags:
`)
	fs.PrintDefaults()
	fmt.Fprint(w, `
Environment:
  OTEL_SERVICE_NAME             service.name of the resource (default aionotel-demo)
  OTEL_RESOURCE_ATTRIBUTES      more resource attributes
  OTEL_EXPORTER_OTLP_ENDPOINT   OTLP target, and the other OTEL_EXPORTER_OTLP_*
                                variables (otlp; default 127.0.0.1:4317 without TLS)
  OTEL_METRIC_EXPORT_INTERVAL   metric push interval in ms (otlp, stdout; default 5000)
`)
}
