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
//     every metric on a panel, every series selector filtered by $job and
//     $namespace (read by Prometheus' PromQL parser), rates per second, the
//     error ratio counted as its alert counts it.
//   - examples/prometheus/alerts.yml with promtool, mutations of each alert
//     that alerts_test.yml must catch, and a RUNBOOK.md section per alert.
//   - End to end (TestEndToEnd; the full list on the test): the demo sends
//     OTLP/gRPC to the Collector, which feeds a Prometheus (Debian package,
//     exemplar storage) and a Jaeger v2 (jaeger-config.yaml). Catalog
//     series, labels, dashboard queries, exemplars, rules, spans and log
//     records through the Collector; after the demo stops, its token totals
//     in Prometheus and its workflow runs in Jaeger's query API (v3) as the
//     timeline promises.
//   - A cluster (TestEndToEndCluster, cluster_test.go): three demo nodes on
//     PostgreSQL, one killed with SIGKILL mid-run; gauges, completions and
//     Jaeger's spans checked against the histories in the database
//     (history.go folds them by the pairing rules; cluster.go reads them
//     through pgstore and freezes them to compare).
//   - go-workflows (TestEndToEndGoWorkflows, goworkflows_test.go): the
//     examples/goworkflows service, its backend wrapped by otelworkflows,
//     sends OTLP/gRPC to the Collector; every dashboard query returns data
//     on its job, except those reading only the families it has no facts
//     for (listed there with the reason), which must return none; in
//     Jaeger, a continued execution's next_run link leads to the next
//     execution's run span.
//
// The end-to-end tests run the Collector and Jaeger the README's commands
// build into examples/pipeline/_build (`bash .ci/readme.sh collector
// jaeger` from the repository root runs them); they never build them, so
// each is built once, by the commands users run. One stack (Collector,
// Prometheus, Jaeger) serves every scenario of the test binary, each
// scenario sending as a job of its own (stack_test.go says how to add one).
//
// From examples/pipeline: `go test -short ./...` runs all but the e2e test.
// Prometheus and promtool come from the Debian package prometheus; without
// them, or without the two builds, those tests skip, and with CI=true
// (.ci/run, .ci/pipeline.sh) they fail.
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
//   - Prometheus is queried with client_golang's api/prometheus/v1 client;
//     Jaeger's answers are decoded with the Collector's pdata JSON
//     unmarshaler, since API v3 answers in OTLP JSON.
//   - Jaeger is not a tool of this module: its Collector modules (v0.140)
//     and ours (v0.165) cannot share a build list; the README builds
//     cmd/jaeger in its own downloaded module, with its go.sum and replace
//     directives.
//   - A Collector binary built from another manifest (an older checkout's)
//     is refused, not tested: its `components` must list exactly the
//     modules of builder-config.yaml.
//   - Span times: the in-memory demo's history is out of reach, so
//     TestEndToEnd checks what follows from it: activities inside their
//     run, each starting no later than the store call that scheduled it
//     ends and ending no later than the one that settled it ends. The
//     cluster scenario's history is in PostgreSQL: it compares the times
//     themselves.
//   - The truth of the cluster scenario is read through pgstore, from a
//     Store of a node that never runs an election and whose writing
//     methods the test never calls: events decode as they were written. A
//     freeze (a SHARE lock on the workflows table, which every append
//     updates) holds appends and lets reads, leases, timers and claims go
//     on; the killed node's sessions are ended inside it, so that none of
//     its appends commits after its death.
package pipeline
