// Package pipeline tests the path aionotel's telemetry takes in production,
// with the real components: the instrumented program sends OTLP to an
// OpenTelemetry Collector, the Collector exposes Prometheus metrics, a
// Prometheus server scrapes them, and Grafana and the alert rules read them.
//
// It lives in a module of its own (github.com/aionotel/aionotel/examples/pipeline)
// so that the Collector's dependencies reach neither the library nor the
// examples module; that module has a go.work of its own and is not in the
// repository's. The package is internal and has no API: its code serves its
// tests.
//
// # What is tested
//
//   - collector-config.yaml, loaded by a Collector built from the official
//     modules (cmd/otelcol-aionotel): validate, the defaults and every
//     documented environment override.
//   - examples/grafana/aionotel-overview.json against the Grafana dashboard
//     schema and the telemetry catalog: every query reads catalog series and
//     labels only, every catalog metric has a panel.
//   - examples/prometheus/alerts.yml with promtool, plus mutations of each
//     alert that its tests must catch.
//   - End to end (TestEndToEnd): the demo sends metrics and spans over OTLP
//     to the Collector, which Prometheus scrapes; the test waits until every
//     catalog series is stored with its labels, every dashboard query returns
//     a finite value and every alert rule evaluates without error; it checks
//     that a second demo serving its own Prometheus endpoint exposes the same
//     metric families (one dashboard for both paths) and that spans went
//     through the traces pipeline.
//
// # Running
//
// From examples/pipeline:
//
//	go test ./...                  # everything; the e2e test builds the Collector
//	go test -short ./...           # everything but the e2e test
//	go test -run TestEndToEnd ./internal/pipeline -args -update   # redraw testdata/e2e-run.png
//
// Prometheus and promtool come from the Debian package prometheus. Without
// them the tests that need them skip, saying so; with CI=true they fail
// instead, so a CI run can never pass by skipping.
//
// Every program a test starts runs in its own process group and is stopped
// with it; every wait polls with a deadline and says on timeout what never
// arrived; every listener is on a free loopback port.
//
// # Decisions
//
//   - Names: the Collector's prometheus exporter uses the translation that
//     yields the OTel Go Prometheus exporter's default names (the catalog's);
//     the end-to-end test proves the two paths agree.
//   - job: the Collector labels series with the sender's service.name as job,
//     so Prometheus must scrape it with honor_labels: true; the test checks it.
//   - Evictions: the demo runs with a small -max-inflight so that the pairing
//     tracker evicts and the eviction counter is exported and checked.
package pipeline
