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
// The flags, the simulation, the signal handling (the first Ctrl-C or
// SIGTERM drains, a second one ends the process at once) and the exit status
// live in package server (server.Exec, server.Command). Exit status: 0
// after a clean run, 1 when the run fails (an address already in use, a
// keyspace that cannot be opened), 2 for bad flags.
package main

import "github.com/aionotel/aionotel/examples/demo/server"

func main() { server.Exec() }
