// Command demo runs a simulated workflow server instrumented by aionotel and
// exports its telemetry: a Prometheus endpoint at 127.0.0.1:9464/metrics by
// default, OTLP/gRPC to a Collector, or JSON on stdout.
//
//	go run ./examples/demo                      # until Ctrl-C
//	go run ./examples/demo -duration 30s -rate 50
//	go run ./examples/demo -exporter otlp       # to the Collector of collector-config.yaml
//
// Agent transcripts go to an in-memory keyspace (-keyspace memory, the
// default). The durable backends live in modules of their own, so that this
// build links no database driver; each has the same command with its
// backend added:
//
//	cd keyspace/boltstore && go run ./cmd/demo -keyspace bolt:/tmp/demo.db
//	cd keyspace/pgstore && go run ./cmd/demo -keyspace postgres:postgres://USER:PASSWORD@localhost:5432/DB
//
// Here -keyspace bolt:... or postgres:... is a usage error that says so.
//
// The flags, the simulation and the exit status live in package server
// (server.Command); this file only wires the signals to it. Exit status: 0
// after a clean run, 1 when the run fails (an address already in use, a
// keyspace that cannot be opened), 2 for bad flags.
package main

import (
	"context"
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
	os.Exit(server.Command(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
