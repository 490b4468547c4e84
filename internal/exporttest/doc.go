// Package exporttest checks, with the real exporters, that nothing a caller
// or a store controls can stop aionotel's telemetry from leaving the
// process: after any value in any attribute-bearing field, the collected
// metrics and spans encode as valid OTLP protobuf (sent to an in-process
// receiver that decodes them) and a Prometheus scrape succeeds.
//
// It is a module of its own, test-only, so that the library's module does
// not require the exporters, gRPC or the Prometheus client.
package exporttest
