#!/usr/bin/env bash
# Runs the pipeline checks of examples/pipeline: the Collector's components
# against its ocb manifest (builder-config.yaml), the dashboard against its
# Grafana schema, the alert rules under promtool, and the end-to-end run
# demo -> Collector (built by ocb) -> Prometheus with exemplar storage, and
# -> Jaeger v2 (built from its module) for the traces.
#
# Works from a fresh clone on a fresh Debian/Ubuntu machine: Prometheus and
# promtool come from the distribution package when they are not on PATH yet;
# ocb (go tool builder, pinned in examples/pipeline/go.mod), the
# Collector's modules and Jaeger's (github.com/jaegertracing/jaeger, pinned
# in internal/pipeline/jaeger.go) come through the Go module proxy.
# CI=true makes a missing tool a test failure instead of a skip.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
	sudo=""
	if [ "$(id -u)" -ne 0 ]; then
		sudo="sudo"
	fi
	echo "pipeline: installing Prometheus (Debian package prometheus)"
	$sudo apt-get update
	# The package's maintainer scripts may try to start a system service; in a
	# container there is none, and this script never uses one: the test starts
	# its own Prometheus on a free loopback port.
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends prometheus
fi

command -v prometheus >/dev/null
command -v promtool >/dev/null
prometheus --version 2>&1 | head -n 1

cd "$root/examples/pipeline"
export CI=true
# The module on its own, like every module in .ci/run; the end-to-end test's
# build of the demo then goes through examples/go.mod's replace directives.
export GOWORK=off
go vet ./...
# The end-to-end test runs ocb on builder-config.yaml and builds Jaeger into
# a temporary directory (the slow part on a cold build cache: several
# minutes each, concurrently) and runs the demo, the Collector, Jaeger and a
# Prometheus for a bounded time.
go test -race -count=1 -timeout 25m ./...
