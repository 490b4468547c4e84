// Command goworkflows is a go-workflows service on a SQLite file, its
// backend wrapped by otelworkflows: an order workflow with a flaky payment
// activity (retried), a shipping activity, a timer and a notification
// sub-workflow; some orders fail, some are cancelled, and a poller
// workflow continues as new. Metrics are served for Prometheus at
// http://127.0.0.1:9465/metrics; at the end the program prints what
// go-workflows' own metrics said beside what the wrapper recorded, on the
// same run.
//
//	go run ./examples/goworkflows -duration 20s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/aionotel/aionotel/examples/internal/cpuprofile"
)

func main() {
	cfg := config{}
	flag.StringVar(&cfg.db, "db", filepath.Join(os.TempDir(), "aionotel-goworkflows.sqlite"), "the SQLite database file (created if missing; kept across runs, so a second run resumes what the first left)")
	flag.DurationVar(&cfg.duration, "duration", 15*time.Second, "how long to start workflows before draining and stopping")
	flag.StringVar(&cfg.listen, "listen", "127.0.0.1:9465", `address of the Prometheus /metrics endpoint ("" for none)`)
	flag.IntVar(&cfg.rate, "rate", 10, "orders started per second")
	flag.StringVar(&cfg.namespace, "namespace", "shop", "the aion.namespace of the telemetry")
	flag.StringVar(&cfg.exporter, "exporter", "prometheus", "prometheus (the -listen endpoint only) or otlp (also OTLP metrics and spans, configured by the OTEL_EXPORTER_OTLP_* variables)")
	profile := flag.String("cpuprofile", "", "write a CPU profile (pprof) of the whole run to this file")
	flag.Parse()
	os.Exit(start(cfg, *profile))
}

// start runs the service, profiled into profile if it is not "", and
// returns the exit status.
func start(cfg config, profile string) int {
	if profile != "" {
		stop, err := cpuprofile.Start(profile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "goworkflows: -cpuprofile:", err)
			return 1
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintln(os.Stderr, "goworkflows: -cpuprofile:", err)
			}
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, cfg, os.Stdout); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "goworkflows:", err)
		return 1
	}
	return 0
}

type config struct {
	db        string
	duration  time.Duration
	listen    string
	rate      int
	namespace string
	exporter  string                  // "prometheus" (or "") or "otlp"
	drained   func(metricsURL string) // tests: called after the summary, the endpoint still up
}

// logf prints a line of progress.
func logf(w io.Writer, format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
