// Package pipeline tests the path aionotel's telemetry takes in production,
// with the real components: the instrumented program sends OTLP to an
// OpenTelemetry Collector, the Collector exposes Prometheus metrics, a
// Prometheus server scrapes them, and Grafana and the alert rules read them.
// It lives in a module of its own (examples/pipeline, with its own go.work)
// so that the Collector's dependency graph reaches neither the library nor
// the examples module. The package has no API: its code serves its tests.
//
// # What is tested
//
//   - collector-config.yaml, loaded in process by the components of
//     builder-config.yaml (package
//     [github.com/aionotel/aionotel/examples/pipeline/internal/collector]).
//   - examples/grafana/aionotel-overview.json against the Grafana schema
//     (grafana-foundation-sdk) and the telemetry catalog: catalog names only,
//     every metric on a panel, every query filtered by $job, rates per
//     second, the error ratio counted as its alert counts it.
//   - examples/prometheus/alerts.yml with promtool, mutations of each alert
//     that alerts_test.yml must catch, and a RUNBOOK.md section per alert.
//   - End to end (TestEndToEnd): ocb builds the Collector from
//     builder-config.yaml; the demo sends OTLP/gRPC to it; a Debian-packaged
//     Prometheus with exemplar storage scrapes it every second. The test
//     waits for health_check, then until every catalog series is stored with
//     its labels, the sender's job and one instance (service.instance.id,
//     with its target_info); every dashboard query, its variables resolved
//     by their own queries, returns data; the families equal those of a demo
//     serving its own endpoint; spans crossed the traces pipeline; an
//     exemplar in Prometheus (/api/v1/query_exemplars) has the trace_id of a
//     span the Collector received, and the demo's own endpoint serves
//     exemplars in OpenMetrics; every alert rule evaluates.
//
// From examples/pipeline: `go test -short ./...` runs all but the e2e test.
// Prometheus and promtool come from the Debian package prometheus; without
// them those tests skip, and with CI=true (.ci/pipeline.sh) they fail.
//
// # Decisions
//
//   - Names and job: the exporter's UnderscoreEscapingWithSuffixes names are
//     the OTel Go Prometheus exporter's, which the e2e test proves; the
//     test's Prometheus scrapes with honor_labels so job stays service.name.
//   - Evictions: the demo runs with a small -max-inflight so that the
//     eviction counter exists.
//   - Processes run in their own process group, stopped with SIGINT then
//     SIGKILL; every wait polls with a deadline and says why it failed; every
//     listener is on a free loopback port handed over through the
//     environment variables of collector-config.yaml.
//   - Received spans: a second --config merged over collector-config.yaml
//     adds a detailed debug exporter writing the traces pipeline to a file,
//     whose trace IDs the test reads; the shipped file stays what users run.
//     (The contrib file exporter would need its module's test dependencies,
//     which are not on the module proxy at v0.165.1, for ocb's go mod tidy.)
//   - Prometheus is queried with client_golang's api/prometheus/v1 client.
package pipeline
