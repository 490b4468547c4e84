package server

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"syscall"
)

// Exit statuses of [Command].
const (
	ExitOK    = 0 // a clean run, or -h
	ExitError = 1 // the run failed: an address in use, a keyspace that cannot be opened
	ExitUsage = 2 // bad flags, or a -keyspace backend the build lacks
)

// Command is the demo's command line: it parses args (the flags, without the
// program name), runs [Main] with the keyspace backends given besides the
// built-in memory one, and returns the exit status. Usage and errors go to
// stderr, prefixed "demo: "; see [Main] for what goes to stdout.
//
// Bad flags, a positional argument and a -keyspace NAME:ARG whose NAME is
// not among backends return [ExitUsage] after printing the error and the
// usage; for bolt and postgres, the error says which demo has them. A failed
// run, an unusable [Backend] included, returns [ExitError]; a clean one, or
// -h, [ExitOK].
//
// With a keyspace other than memory and no -seed, the seed is drawn at
// random, so that runs on one durable keyspace do not draw the same IDs (see
// [Config].Keyspace); the start banner shows it.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer, backends ...Backend) int {
	if err := checkBackends(backends); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return ExitError
	}
	cfg := DefaultConfig()
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	exporter := string(cfg.Exporter)
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "how long to run, then drain and exit (0: until Ctrl-C or SIGTERM)")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "workflow workers, and as many activity workers")
	fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "workflows started per second")
	fs.StringVar(&exporter, "exporter", exporter, "where telemetry goes: prometheus, otlp or stdout")
	fs.StringVar(&cfg.Listen, "listen", cfg.Listen, "address of the Prometheus /metrics endpoint (prometheus exporter)")
	fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the simulation's random source (with a keyspace other than memory: random unless given)")
	fs.IntVar(&cfg.MaxInFlight, "max-inflight", cfg.MaxInFlight, "bound of the activity pairing tracker; past it the oldest in-flight activity is evicted (0: the tracker's default)")
	fs.DurationVar(&cfg.DrainGrace, "drain", cfg.DrainGrace, "on stop, how long started workflows may finish before the rest are cancelled")
	fs.StringVar(&cfg.Keyspace, "keyspace", cfg.Keyspace, describeKeyspaceFlag(backends))
	fs.Usage = func() { usage(fs) }

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK
		}
		return ExitUsage // the flag package has printed the error and the usage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "demo: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return ExitUsage
	}
	cfg.Exporter = Exporter(exporter)
	if err := cfg.validate(backends); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		fs.Usage()
		return ExitUsage
	}
	if scheme, _, _ := parseKeyspace(cfg.Keyspace); scheme != MemoryKeyspace && !flagSet(fs, "seed") {
		cfg.Seed = rand.Uint64()
	}

	if err := Main(ctx, cfg, stdout, stderr, backends...); err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			fmt.Fprintf(stderr, "demo: %v; choose another with -listen\n", err)
		} else {
			fmt.Fprintf(stderr, "demo: %v\n", err)
		}
		return ExitError
	}
	return ExitOK
}

// flagSet reports whether the command line set the flag name.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `Usage: go run ./examples/demo [flags]
   or: cd keyspace/boltstore && go run ./cmd/demo [flags]   (adds -keyspace bolt:PATH)
   or: cd keyspace/pgstore && go run ./cmd/demo [flags]     (adds -keyspace postgres:DSN)

Runs a simulated workflow server on aionotel's instrumented stores and exports
its metrics (and, with otlp or stdout, its spans). Workflow histories are kept
in memory; agent transcripts too, or with -keyspace in a bbolt file or in
PostgreSQL.

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
