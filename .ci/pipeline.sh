#!/usr/bin/env bash
# .ci/pipeline.sh: the checks of the examples/pipeline module, for .ci/run
# and by hand: the Collector's components against its ocb manifest
# (builder-config.yaml), the dashboard against its Grafana schema and the
# catalog, the alert rules under promtool, and the end-to-end run demo ->
# Collector -> Prometheus (exemplar storage) and -> Jaeger, with a cluster
# of demo nodes on PostgreSQL.
#
#   bash .ci/pipeline.sh            everything: what is missing is installed
#                                   or built first
#   bash .ci/pipeline.sh PHASE...   some of: tools vet staticcheck
#                                   test-collector test-harness (test: both)
#
# tools installs Prometheus and promtool from the Debian package when they
# are not on PATH, and builds the Collector and Jaeger with the README's own
# commands (.ci/readme.sh collector jaeger) when examples/pipeline/_build
# lacks them: the end-to-end test runs those builds and never builds them
# itself. CI=true (set here) makes a missing tool a test failure, not a skip.
# STATICCHECK names the staticcheck binary (default: go run of v0.8.2).
#
# Flags, chosen so that the Collector's ~900 packages compile once: the
# module's in-process Collector (internal/collector) is vetted, analysed and
# tested with the flags ocb builds the Collector with (-trimpath,
# CGO_ENABLED=0), so those three share the README build's compiled packages
# instead of compiling the Collector's dependency graph twice more (plain
# for vet and staticcheck, instrumented for -race). The race detector has no
# code of ours to watch there: it is the Collector's own code, loading our
# configuration. Every other package, the harness with its processes, polls
# and the end-to-end test, runs under -race as everywhere else.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root/examples/pipeline"
export CI=true
# The module on its own, like every module in .ci/run; the end-to-end
# test's build of the demo then goes through examples/go.mod's replace
# directives.
export GOWORK=off

# The in-process Collector, checked with ocb's build flags.
collector_pkgs=./internal/collector/...
ocb_env=(env CGO_ENABLED=0)

phase_tools() {
  if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "pipeline: installing Prometheus (Debian package prometheus)"
    $sudo apt-get update
    # The package's maintainer scripts may try to start a system service;
    # in a container there is none, and the tests never use one: they start
    # their own Prometheus on a free loopback port.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends prometheus
  fi
  command -v prometheus >/dev/null
  command -v promtool >/dev/null
  prometheus --version 2>&1 | head -n 1
  [ -x _build/otelcol-aionotel ] || bash "$root/.ci/readme.sh" collector
  [ -x _build/jaeger ] || bash "$root/.ci/readme.sh" jaeger
}

# other_pkgs prints the module's packages but the in-process Collector's.
other_pkgs() { go list ./... | grep -v '/internal/collector\(/\|$\)'; }

phase_vet() {
  "${ocb_env[@]}" go vet -trimpath "$collector_pkgs"
  # shellcheck disable=SC2046 # one package path per word
  go vet -race $(other_pkgs)
}

phase_staticcheck() {
  local sc=("${STATICCHECK:-}")
  [ -n "${sc[0]}" ] || sc=(go run honnef.co/go/tools/cmd/staticcheck@v0.8.2)
  # staticcheck reads export data through go list, which takes GOFLAGS.
  "${ocb_env[@]}" GOFLAGS=-trimpath "${sc[@]}" ./...
}

phase_test-collector() {
  "${ocb_env[@]}" go test -trimpath -count=1 "$collector_pkgs"
}

# The end-to-end test runs a few minutes, on the builds of phase tools,
# and its cluster scenario on a PostgreSQL (.ci/postgres.sh starts one when
# AIONOTEL_POSTGRES_DSN is not set).
phase_test-harness() {
  if [ -z "${AIONOTEL_POSTGRES_DSN:-}" ]; then
    eval "$(bash "$root/.ci/postgres.sh")"
  fi
  # The end-to-end tests print the programs' log tails after a failure,
  # which pushes the failure itself out of a CI log's tail: repeat the
  # failed tests and their messages last.
  local out rc=0
  out="$(mktemp)"
  # shellcheck disable=SC2046 # one package path per word
  go test -race -count=1 -timeout 20m $(other_pkgs) 2>&1 | tee "$out" || rc=$?
  if [ "$rc" -ne 0 ]; then
    echo "pipeline: the failures, repeated:"
    grep -E -e '--- FAIL|^panic:|^\s+[a-z_0-9]+\.go:[0-9]+: |^ +'$'\t' "$out" | grep -v 'log tail' | head -n 60 || true
  fi
  rm -f "$out"
  return "$rc"
}

phase_test() {
  phase_test-collector
  phase_test-harness
}

phases=("$@")
[ ${#phases[@]} -gt 0 ] || phases=(tools vet staticcheck test)
for phase in "${phases[@]}"; do
  case "$phase" in
    tools | vet | staticcheck | test | test-collector | test-harness) "phase_$phase" ;;
    *) echo "usage: $0 [tools|vet|staticcheck|test|test-collector|test-harness]..." >&2; exit 2 ;;
  esac
done
