// Command cpushare tells how much of a process's CPU time its telemetry
// takes: it reads CPU profiles (pprof, as the demo's -cpuprofile writes
// them) and charges each sample to this library, to OpenTelemetry Go or to
// the rest of the program.
//
//	go run ./examples/demo/cpushare [-top N] PROFILE...
//	go run ./examples/demo/cpushare -sink 127.0.0.1:4318
//
// # Classes
//
// A frame's class is decided by its function's package:
//   - library: github.com/aionotel/aionotel's otelstore, pairing, genai,
//     internal/... and the engines' instrumentations (instrumentation/...,
//     otelworkflows for go-workflows), and the root package, should it get
//     code;
//   - otel: go.opentelemetry.io/... (API, SDK, exporters, contrib);
//   - app: every other package with a dot in its path's first element: the
//     demo itself, the store backends (eventstore, keyspace and their
//     pgstore and boltstore: what the library decorates is not the
//     library), the conformance suite, pgx, the Prometheus client;
//   - runtime: the Go runtime and standard library, and the encoding and
//     transport modules google.golang.org/protobuf, google.golang.org/grpc
//     and golang.org/x/net, which work for whoever calls them.
//
// # Rules
//
// Each sample's CPU time is charged three ways:
//   - owner (the headline figure): to the class of the innermost frame on
//     the stack that is not of the runtime class, so the allocations,
//     map operations, hashing, clock reads and protobuf encoding a function
//     asks for are its own, but the store call a decorator wraps is not
//     (its frames are app, inside the library's). A stack of runtime
//     frames only (the garbage collector's background workers, the
//     scheduler, the network poller) stays runtime: part of the GC's share
//     is due to the telemetry's allocations, which this rule cannot tell;
//   - self: to the class of the innermost frame (pprof's flat time summed
//     by class); lower than owner for the library and OTel, since their
//     mallocs and map reads are runtime frames;
//   - on-stack: to every class with a frame anywhere on the stack (pprof's
//     cumulative time); an upper bound, the library's including the store
//     calls it wraps.
//
// The fractions are of the whole process's samples, so they hold on a
// loaded machine: other processes slow the run, not the ratio within it.
//
// With -sink ADDR it instead serves OTLP/HTTP on ADDR, answering every
// export with success and discarding it, so that a demo exporting spans,
// metrics and log records pays the whole cost of making and sending them
// without a Collector.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/google/pprof/profile"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("cpushare", flag.ContinueOnError)
	fs.SetOutput(stderr)
	top := fs.Int("top", 10, "how many of the library's and OTel's functions to list")
	sink := fs.String("sink", "", "serve a discarding OTLP/HTTP endpoint on this address instead")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *sink != "" {
		fmt.Fprintf(stdout, "cpushare: discarding OTLP/HTTP on %s\n", *sink)
		if err := http.ListenAndServe(*sink, Sink()); err != nil {
			fmt.Fprintln(stderr, "cpushare:", err)
			return 1
		}
		return 0
	}
	if fs.NArg() == 0 || *top < 0 {
		fmt.Fprintln(stderr, "cpushare: want one or more profiles and -top of 0 or more")
		return 2
	}
	status := 0
	for _, path := range fs.Args() {
		s, err := attributeFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "cpushare: %s: %v\n", path, err)
			status = 1
			continue
		}
		fmt.Fprintf(stdout, "== %s\n", path)
		s.Report(stdout, *top)
	}
	return status
}

func attributeFile(path string) (*Shares, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, err
	}
	return Attribute(p)
}

// Sink is an OTLP/HTTP endpoint that accepts every export (POST to
// /v1/traces, /v1/metrics or /v1/logs) and discards it: an empty
// protobuf message is a full success for all three.
func Sink() http.Handler {
	mux := http.NewServeMux()
	for _, path := range []string{"/v1/traces", "/v1/metrics", "/v1/logs"} {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-protobuf")
			w.WriteHeader(http.StatusOK)
		})
	}
	return mux
}
