// Package collector is otelcol-aionotel in process: the OpenTelemetry
// Collector distribution of the aionotel examples, built by the
// OpenTelemetry Collector Builder (ocb) from examples/pipeline's
// builder-config.yaml. Its tests load the repository's
// collector-config.yaml with the very components and configuration
// providers of that build, without building it.
//
// # Components
//
// components.go is the file ocb generates from the manifest (package main
// renamed, gofmt applied); do not edit it. TestComponentsMatchManifest runs
// ocb (a tool of this module: go tool builder) with --skip-compilation and
// fails when the two differ; to regenerate after editing the manifest:
//
//	go test ./internal/collector -run TestComponentsMatchManifest -args -regenerate
//
// TestManifestVersions checks that the manifest's module versions are those
// this module builds with, so the in-process tests and the ocb build run the
// same code. [Components] returns the factories; [Settings] the command's
// settings, with the manifest's env and file providers (env is the default
// scheme, as in the official distributions, so ${NAME} works as well as
// ${env:NAME:-default}).
//
// # Generated, not committed
//
// The distribution itself (main.go, go.mod, the binary) is what ocb
// writes under dist.output_path, examples/pipeline/_build, which git
// ignores: only the manifest is the source, as in the Collector's own
// release repository. The README's command builds it there (GOWORK=off, so
// that examples/pipeline/go.work does not claim ocb's module); CI runs that
// command and the end-to-end test runs its binary. ocb fetches modules
// through the Go module proxy (the only network it needs), and the build
// cache makes later runs fast.
package collector
