// Package collector describes otelcol-aionotel, the OpenTelemetry Collector
// distribution of the aionotel examples: the components it is built from and
// the settings its command line runs with.
//
// # Components
//
// Exactly what the repository's collector-config.yaml uses, from the official
// modules: the OTLP receiver (gRPC and HTTP), the memory_limiter and batch
// processors, the debug exporter, the contrib prometheus exporter, and the
// otelconftelemetry factory for the Collector's own logs and metrics (without
// a telemetry factory the service section of any configuration fails to
// load). [Components] returns them.
//
// # Configuration sources
//
// [Settings] accepts configuration from files (a plain path, or file:path) and
// from environment variables, so a configuration can say
// ${env:NAME:-default}. The env provider is also the default scheme, as in the
// official distributions.
//
// # Why a hand-written distribution
//
// The OpenTelemetry Collector Builder (ocb) generates the same two functions
// from a manifest. Writing them by hand keeps the build a plain `go build`
// inside this nested module, with no generator to install, and keeps the
// Collector's large dependency graph out of the root module.
package collector
