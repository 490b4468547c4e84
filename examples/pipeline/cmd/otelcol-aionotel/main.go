// Command otelcol-aionotel is an OpenTelemetry Collector built from the
// official modules with exactly the components the repository's
// collector-config.yaml uses (see package
// github.com/aionotel/aionotel/examples/pipeline/internal/collector).
//
// Usage, from examples/pipeline:
//
//	go build -o otelcol-aionotel ./cmd/otelcol-aionotel
//	./otelcol-aionotel validate --config ../../collector-config.yaml
//	./otelcol-aionotel --config ../../collector-config.yaml
//
// It stops gracefully on SIGINT or SIGTERM.
package main

import (
	"os"

	"go.opentelemetry.io/collector/otelcol"

	"github.com/aionotel/aionotel/examples/pipeline/internal/collector"
)

func main() {
	// The command prints its own error (cobra's "Error: ..." line).
	if err := otelcol.NewCommand(collector.Settings()).Execute(); err != nil {
		os.Exit(1)
	}
}
