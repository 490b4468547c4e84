// Package pipeline tests the path aionotel's telemetry takes in production,
// with the real components: the instrumented program sends OTLP to an
// OpenTelemetry Collector, the Collector exposes Prometheus metrics, a
// Prometheus server scrapes them, and Grafana and the alert rules read them.
//
// It lives in a module of its own (github.com/aionotel/aionotel/examples/pipeline)
// so that the Collector's large dependency graph reaches neither the library
// nor the examples module; that module is not in the repository's go.work,
// and has a go.work of its own so that the go command works in its
// directory. The package is internal and has no API: its code serves its
// tests.
//
// # What is tested
//
//   - The repository's collector-config.yaml, loaded by otelcol-aionotel,
//     the Collector ocb builds from builder-config.yaml (in process: package
//     [github.com/aionotel/aionotel/examples/pipeline/internal/collector],
//     whose components.go is checked against the manifest): its `validate`
//     subcommand, its defaults and every documented environment override.
//   - examples/grafana/aionotel-overview.json against the Grafana dashboard
//     schema of github.com/grafana/grafana-foundation-sdk/go (strict decoding,
//     then Validate), and against the telemetry catalog: every query reads
//     catalog series and labels only, every catalog metric has a panel, every
//     rate window is $__rate_interval.
//   - examples/prometheus/alerts.yml with promtool (check rules, test rules),
//     plus mutations of each alert that alerts_test.yml must catch.
//   - End to end (TestEndToEnd): ocb builds the Collector from
//     builder-config.yaml; the demo (examples/demo, built in the examples
//     module) sends metrics and spans over OTLP/gRPC to it; a
//     Debian-packaged Prometheus with exemplar storage scrapes it every
//     second. The test waits for the health_check extension, then, with
//     deadlines, until every
//     catalog series is stored; checks their labels and that job is the
//     sender's service.name; runs every dashboard query with its variables
//     substituted (the namespace from the variable's own label_values query)
//     until each returns a finite value; compares the metric families the
//     Collector exposes with those of a second demo serving its own Prometheus
//     endpoint (same names, types and labels: one dashboard for both paths);
//     checks that spans went through the traces pipeline; finds in
//     Prometheus (/api/v1/query_exemplars) an exemplar whose trace_id is
//     that of a span the Collector received; and waits until Prometheus has
//     evaluated every alert rule without error.
//
// # Running
//
// From examples/pipeline:
//
//	go test ./...                  # everything; the e2e test builds the Collector (slow the first time)
//	go test -short ./...           # everything but the e2e test
//
// Prometheus and promtool come from the Debian package:
// apt-get install -y --no-install-recommends prometheus. Without them the
// tests that need them skip, saying so; with CI=true they fail instead, so a
// CI run can never pass by skipping. .ci/pipeline.sh installs the package
// when needed and runs these tests with CI=true.
//
// # Decisions
//
//   - Names. The Collector's prometheus exporter pins translation_strategy to
//     UnderscoreEscapingWithSuffixes, which yields the names of the OTel Go
//     Prometheus exporter's default translation (the names of the catalog);
//     the e2e test proves the two paths agree rather than assuming it.
//   - job. The Collector's exporter labels series with the sender's
//     service.name as job; Prometheus must scrape it with honor_labels: true,
//     or job becomes the scrape job's name and the original moves to
//     exported_job. The test's Prometheus does so, and the test checks it.
//   - Evictions. The demo runs with a small -max-inflight so that the pairing
//     tracker evicts and aion_activity_pairing_evicted_total exists; without
//     evictions that counter is never exported and its panel would have no
//     data to check.
//   - Processes. Every program a test starts runs in its own process group;
//     stopping sends SIGINT to the group, then SIGKILL after a grace period.
//     When a program exits, the rest of its group is killed while the group
//     ID is still held by the unreaped leader, so no orphan survives and no
//     unrelated process is ever signalled. On Linux the kernel also kills
//     the programs if the test binary itself dies (-timeout, a killed runner).
//   - Waiting. Every wait polls a condition with a deadline and reports, on
//     timeout, why the last attempt failed (which series, which panel);
//     nothing waits on a fixed sleep.
//   - Ports. Every listener is on a free loopback port chosen at run time
//     and handed to the Collector through the environment variables of
//     collector-config.yaml, so runs do not collide with each other or with
//     a Collector already running on the default ports.
//   - Received spans. The test merges a second --config over
//     collector-config.yaml that adds a detailed debug exporter writing the
//     traces pipeline to a file, and reads the trace IDs from it: no
//     component beyond the core debug exporter, and the shipped file stays
//     what users run. (The contrib file exporter was the alternative; its
//     module's test dependencies are not on the module proxy at v0.165.1,
//     so `go mod tidy`, which ocb runs, fails with it.)
//   - Prometheus is queried with client_golang's api/prometheus/v1 client.
package pipeline
