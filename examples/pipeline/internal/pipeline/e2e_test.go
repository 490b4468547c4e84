package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

const (
	// serviceName is the demo's service.name, which the Collector's
	// prometheus exporter turns into the job label.
	serviceName = "aionotel-e2e"
	// scrapeJob is the Prometheus job scraping the Collector; with
	// honor_labels it must never appear on the demo's series.
	scrapeJob = "otel-collector"
	// stopGrace is how long a process may take to stop on SIGINT before it
	// is killed.
	stopGrace = 10 * time.Second
)

// e2e is one run of the pipeline: the programs it started and where they
// listen.
type e2e struct {
	t    *testing.T
	root string // repository root
	tmp  string

	collectorBin, demoBin, jaegerBin string

	otlpGRPC, otlpHTTP, exporter, collectorMetrics, health, promWeb, direct string
	// Jaeger's OTLP/gRPC receiver and its query API (HTTP and gRPC).
	jaegerOTLP, jaegerQuery, jaegerQueryGRPC string

	mu      sync.Mutex
	procs   []*process
	stopped map[*process]bool // stopped by the test on purpose

	prom   promv1.API
	jaeger jaegerAPI
}

// TestEndToEnd runs the demo's OTLP telemetry through a Collector built from
// the official modules (collector-config.yaml) into a real Prometheus, and
// checks what a user of the dashboard and the alerts depends on: every
// catalog series arrives with its labels and the sender's job; every
// dashboard query returns data; the names equal those of the demo's own
// Prometheus endpoint; spans reach the Collector; Prometheus stores
// exemplars whose trace IDs are those of spans the Collector received;
// Prometheus evaluates the alert rules without error; log records cross the
// Collector's logs pipeline. Then the OTLP demo is stopped: the token totals
// it prints equal the sums of gen_ai_client_token_usage in Prometheus, and
// Jaeger, fed by the Collector's traces pipeline, holds workflow runs as
// traces (run span, activity spans, links to the store calls).
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end: builds a Collector and the demo and runs them with Prometheus")
	}
	promBin := requireTool(t, "prometheus")
	root, err := filepath.Abs(filepath.Join("..", "..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "examples", "demo")); err != nil {
		t.Fatalf("the end-to-end test runs the demo: %v", err)
	}
	// A cold build of the Collector and of Jaeger takes most of it.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	r := &e2e{t: t, root: root, tmp: t.TempDir()}
	t.Cleanup(r.stopAll)
	addrs, err := freeAddrs(10)
	if err != nil {
		t.Fatal(err)
	}
	r.otlpGRPC, r.otlpHTTP, r.exporter, r.collectorMetrics, r.health, r.promWeb, r.direct =
		addrs[0], addrs[1], addrs[2], addrs[3], addrs[4], addrs[5], addrs[6]
	r.jaegerOTLP, r.jaegerQuery, r.jaegerQueryGRPC = addrs[7], addrs[8], addrs[9]
	if r.prom, err = newPromAPI(r.promWeb); err != nil {
		t.Fatal(err)
	}
	r.jaeger = jaegerAPI{base: "http://" + r.jaegerQuery}

	r.build(ctx)
	r.validateConfig(ctx)
	r.startJaeger(ctx)
	r.startCollector(ctx)
	r.startPrometheus(ctx, promBin)
	r.startDemos()

	r.waitForCatalog(ctx)
	r.checkLabels(ctx)
	r.checkInstance(ctx)
	r.checkDashboardQueries(ctx)
	r.checkSameNamesAsDirect(ctx)
	r.checkSpans(ctx)
	r.checkExemplars(ctx)
	r.checkDirectExemplars(ctx)
	r.checkRules(ctx)
	r.checkLogs(ctx)

	// What is only final once the OTLP demo has stopped and flushed.
	tokens := r.stopDemo("demo-otlp")
	r.checkTokens(ctx, tokens)
	r.checkTimeline(ctx)
}

// collectorEnv points every endpoint of collector-config.yaml at this run's
// ports, through the variables the file documents.
func (r *e2e) collectorEnv() []string {
	host, port := splitAddr(r.collectorMetrics)
	return []string{
		"AIONOTEL_OTLP_GRPC_ENDPOINT=" + r.otlpGRPC,
		"AIONOTEL_OTLP_HTTP_ENDPOINT=" + r.otlpHTTP,
		"AIONOTEL_PROMETHEUS_ENDPOINT=" + r.exporter,
		"AIONOTEL_HEALTH_CHECK_ENDPOINT=" + r.health,
		"AIONOTEL_COLLECTOR_METRICS_HOST=" + host,
		"AIONOTEL_COLLECTOR_METRICS_PORT=" + port,
		"AIONOTEL_JAEGER_ENDPOINT=" + r.jaegerOTLP,
	}
}

func splitAddr(addr string) (host, port string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}

// build makes the Collector the way Collector distributions are made, with
// ocb from builder-config.yaml (this module's tool, so at the version
// go.mod pins) into the test's temporary directory, builds Jaeger in its
// own module (buildJaeger), and compiles the demo (in the examples module,
// whose replace directives reach the library and the backends of this
// checkout), concurrently.
func (r *e2e) build(ctx context.Context) {
	r.t.Helper()
	r.demoBin = filepath.Join(r.tmp, "demo")
	var collectorErr, demoErr, jaegerErr error
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		r.collectorBin, collectorErr = buildCollector(ctx, r.tmp)
		r.t.Logf("built the Collector in %s", time.Since(start).Round(time.Second))
	})
	wg.Go(func() {
		start := time.Now()
		r.jaegerBin, jaegerErr = buildJaeger(ctx, r.tmp)
		r.t.Logf("built Jaeger %s in %s", jaegerVersion, time.Since(start).Round(time.Second))
	})
	wg.Go(func() {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", r.demoBin, "./demo")
		cmd.Dir = filepath.Join(r.root, "examples")
		if out, err := cmd.CombinedOutput(); err != nil {
			demoErr = fmt.Errorf("go build ./demo: %v\n%s", err, out)
		}
	})
	wg.Wait()
	if err := errors.Join(collectorErr, jaegerErr, demoErr); err != nil {
		r.t.Fatal(err)
	}
}

// manifestOutputPath is the dist.output_path line of builder-config.yaml.
var manifestOutputPath = regexp.MustCompile(`(?m)^(\s*output_path:).*$`)

// buildCollector runs ocb on a copy of builder-config.yaml whose output path
// is under dir, and returns the path of the binary it built.
func buildCollector(ctx context.Context, dir string) (string, error) {
	moduleDir := filepath.Join("..", "..")
	raw, err := os.ReadFile(filepath.Join(moduleDir, "builder-config.yaml"))
	if err != nil {
		return "", err
	}
	if !manifestOutputPath.Match(raw) {
		return "", errors.New("builder-config.yaml has no dist.output_path")
	}
	out := filepath.Join(dir, "otelcol")
	manifest := filepath.Join(dir, "builder-config.yaml")
	if err := os.WriteFile(manifest, manifestOutputPath.ReplaceAll(raw, []byte("${1} "+out)), 0o600); err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "go", "tool", "builder", "--config", manifest)
	cmd.Dir = moduleDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go tool builder: %v\n%s", err, b)
	}
	return filepath.Join(out, "otelcol-aionotel"), nil
}

// validateConfig runs `otelcol-aionotel validate` on the repository's
// collector-config.yaml, as a user would before deploying it.
func (r *e2e) validateConfig(ctx context.Context) {
	r.t.Helper()
	cmd := exec.CommandContext(ctx, r.collectorBin, "validate", "--config", r.configPath())
	cmd.Env = append(os.Environ(), r.collectorEnv()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		r.t.Fatalf("otelcol-aionotel validate: %v\n%s", err, out)
	}
}

func (r *e2e) configPath() string { return filepath.Join(r.root, "collector-config.yaml") }

// spansLog is where the test's debug/spans exporter writes every span the
// Collector receives, in the debug exporter's detailed format.
func (r *e2e) spansLog() string { return filepath.Join(r.tmp, "spans.log") }

// spansOverlay writes a second configuration the Collector merges over
// collector-config.yaml: a detailed debug exporter writing the traces
// pipeline's spans to spansLog, so the test knows which trace IDs the
// Collector received (the list of exporters replaces the file's, so it
// names Jaeger's too). The repository's file stays what users run.
func (r *e2e) spansOverlay() string {
	r.t.Helper()
	cfg := fmt.Sprintf(`exporters:
  debug/spans:
    verbosity: detailed
    use_internal_logger: false
    output_paths: [%q]
service:
  pipelines:
    traces:
      exporters: [%s, debug, debug/spans]
`, r.spansLog(), jaegerExporter)
	path := filepath.Join(r.tmp, "spans-overlay.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		r.t.Fatal(err)
	}
	return path
}

// start starts a program and registers it to be stopped; its log is printed
// if the test fails.
func (r *e2e) start(name string, env []string, argv ...string) *process {
	r.t.Helper()
	p, err := startProcess(name, r.tmp, filepath.Join(r.tmp, name+".log"), env, argv...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.procs = append(r.procs, p)
	r.mu.Unlock()
	r.t.Logf("started %s (pid %d)", name, p.pid())
	return p
}

// stopAll stops every program, the last started first (the demos before the
// Collector they send to), and on failure prints the end of each log.
func (r *e2e) stopAll() {
	r.mu.Lock()
	procs := r.procs
	r.procs = nil
	r.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(stopGrace)
	}
	if r.t.Failed() {
		for _, p := range procs {
			r.t.Logf("---- %s (pid %d) log tail ----\n%s", p.name, p.pid(), p.logTail(4<<10))
		}
	}
}

// alive returns an error naming the first started program that has exited:
// none of them is meant to stop during the test, except those stopDemo
// stopped.
func (r *e2e) alive() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.procs {
		if r.stopped[p] {
			continue
		}
		select {
		case <-p.exited():
			return permanent(fmt.Errorf("%s exited early: %v", p.name, p.exitErr()))
		default:
		}
	}
	return nil
}

// waitFor polls check, within d, failing the test with the last reason if
// it never succeeds. It gives up at once if a program dies.
func (r *e2e) waitFor(ctx context.Context, what string, d time.Duration, check func(context.Context) error) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := poll(ctx, 500*time.Millisecond, func(ctx context.Context) error {
		if err := r.alive(); err != nil {
			return err
		}
		return check(ctx)
	})
	if err != nil {
		r.t.Fatalf("%s: %v", what, err)
	}
}

func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return permanent(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

func (r *e2e) startCollector(ctx context.Context) {
	r.t.Helper()
	r.start("collector", r.collectorEnv(), r.collectorBin,
		"--config", r.configPath(), "--config", r.spansOverlay())
	// health_check answers 200 once every component has started.
	r.waitFor(ctx, "Collector's health_check", time.Minute, func(ctx context.Context) error {
		return httpOK(ctx, "http://"+r.health+"/")
	})
	if err := httpOK(ctx, "http://"+r.exporter+"/metrics"); err != nil {
		r.t.Fatalf("Collector healthy, but its prometheus exporter: %v", err)
	}
}

// startPrometheus writes a configuration that scrapes the Collector every
// second, keeping the job and instance labels the exporter derives from the
// sender's resource (honor_labels), and loads the alert rules. Exemplar
// storage is a feature flag in Prometheus 2 (the Debian package); with it,
// Prometheus scrapes OpenMetrics and keeps the exemplars.
func (r *e2e) startPrometheus(ctx context.Context, bin string) {
	r.t.Helper()
	cfg := fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
rule_files:
  - %q
scrape_configs:
  - job_name: %s
    honor_labels: true
    static_configs:
      - targets: [%q]
`, filepath.Join(r.root, "examples", "prometheus", "alerts.yml"), scrapeJob, r.exporter)
	path := filepath.Join(r.tmp, "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		r.t.Fatal(err)
	}
	r.start("prometheus", nil, bin,
		"--config.file="+path,
		"--storage.tsdb.path="+filepath.Join(r.tmp, "tsdb"),
		"--web.listen-address="+r.promWeb,
		"--enable-feature=exemplar-storage",
	)
	r.waitFor(ctx, "Prometheus ready", time.Minute, func(ctx context.Context) error {
		return httpOK(ctx, "http://"+r.promWeb+"/-/ready")
	})
}

// startDemos runs the demo twice: over OTLP into the Collector (what the
// dashboard is checked on), and with its own Prometheus endpoint (whose names
// must be the same). Both run longer than the test needs; the test stops them.
func (r *e2e) startDemos() {
	r.t.Helper()
	common := []string{"-duration", "10m", "-rate", "40", "-workers", "4", "-max-inflight", "24"}
	r.start("demo-otlp", []string{
		"OTEL_SERVICE_NAME=" + serviceName,
		// autoexport's default protocol is http/protobuf; the Collector's
		// gRPC receiver is the path this test checks.
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + r.otlpGRPC,
		"OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_METRIC_EXPORT_INTERVAL=1000",
		"OTEL_BSP_SCHEDULE_DELAY=500",
	}, append([]string{r.demoBin, "-exporter", "otlp"}, common...)...)
	r.start("demo-prometheus", []string{"OTEL_SERVICE_NAME=" + serviceName + "-direct"},
		append([]string{r.demoBin, "-exporter", "prometheus", "-listen", r.direct}, common...)...)
}

// waitForCatalog waits until Prometheus holds every series of the catalog.
func (r *e2e) waitForCatalog(ctx context.Context) {
	r.t.Helper()
	want := catalogSeries()
	r.waitFor(ctx, "every catalog series in Prometheus", 2*time.Minute, func(ctx context.Context) error {
		got, err := instant(ctx, r.prom, `count by (__name__) ({__name__=~"(aion|gen_ai)_.+"})`)
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, s := range got {
			have[s.Labels["__name__"]] = true
		}
		var missing []string
		for name := range want {
			if !have[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return fmt.Errorf("missing %s", strings.Join(missing, ", "))
		}
		return nil
	})
}

// checkLabels checks every catalog series in Prometheus: the catalog's labels
// (attribute names translated: aion.namespace -> aion_namespace), and the
// sender's service.name as job.
func (r *e2e) checkLabels(ctx context.Context) {
	r.t.Helper()
	for _, m := range catalogMetrics {
		name := m.seriesNames()[0]
		got, err := instant(ctx, r.prom, name)
		if err != nil {
			r.t.Fatalf("%s: %v", name, err)
		}
		allowed := map[string]bool{"__name__": true, "job": true, "instance": true, "le": true}
		for _, l := range append(append([]string{}, m.Labels...), m.Optional...) {
			allowed[l] = true
		}
		// One report per kind of problem, with an example series, not one per
		// series.
		problems := map[string]map[string]string{}
		report := func(problem string, labels map[string]string) {
			if problems[problem] == nil {
				problems[problem] = labels
			}
		}
		for _, s := range got {
			for _, l := range m.Labels {
				if _, ok := s.Labels[l]; !ok {
					report("lacks label "+l, s.Labels)
				}
			}
			for l := range s.Labels {
				if !allowed[l] && !targetLabel(l) {
					report("has label "+l+", not in the catalog", s.Labels)
				}
			}
			if s.Labels["job"] != serviceName {
				report(fmt.Sprintf("job = %q, want the sender's service.name %q (and never the scrape job %q)",
					s.Labels["job"], serviceName, scrapeJob), s.Labels)
			}
		}
		for problem, example := range problems {
			r.t.Errorf("%s: %s (e.g. %v)", name, problem, example)
		}
	}
}

// checkInstance checks what service.instance.id buys through the
// Collector: every catalog series of the sender carries one instance label,
// its service.instance.id, and the exporter writes a target_info series for
// that job and instance (it writes none for a resource without an instance).
func (r *e2e) checkInstance(ctx context.Context) {
	r.t.Helper()
	r.waitFor(ctx, "instance label and target_info", time.Minute, func(ctx context.Context) error {
		instances, err := instant(ctx, r.prom, fmt.Sprintf(`count by (instance) ({__name__=~"(aion|gen_ai)_.+", job=%q})`, serviceName))
		if err != nil {
			return err
		}
		if len(instances) != 1 || instances[0].Labels["instance"] == "" {
			return permanent(fmt.Errorf("the sender's series carry instances %v, want one non-empty service.instance.id", instances))
		}
		info, err := instant(ctx, r.prom, fmt.Sprintf(`target_info{job=%q}`, serviceName))
		if err != nil {
			return err
		}
		if len(info) != 1 || info[0].Labels["instance"] != instances[0].Labels["instance"] {
			return fmt.Errorf("target_info{job=%q} = %v, want one series with instance %q", serviceName, info, instances[0].Labels["instance"])
		}
		return nil
	})
}

// checkDashboardQueries runs every query of the dashboard, its variables
// substituted as Grafana would, until each returns at least one finite
// value. The namespace variable is resolved by its own query.
func (r *e2e) checkDashboardQueries(ctx context.Context) {
	r.t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		r.t.Fatal(err)
	}
	queries, err := dashboardQueries(raw, "${datasource}")
	if err != nil {
		r.t.Fatal(err)
	}
	vars, err := dashboardVariables(raw)
	if err != nil {
		r.t.Fatal(err)
	}
	// The query variables in order (namespace's query uses $job), each
	// resolved by its own label_values query, as Grafana does on load.
	resolved := e2eVariables("", "")
	for _, v := range vars {
		if v.Type != "query" {
			continue
		}
		q, err := substitute(v.Query, resolved)
		if err != nil {
			r.t.Fatalf("variable %s: %v", v.Name, err)
		}
		sel, label, err := labelValuesQuery(q)
		if err != nil {
			r.t.Fatal(err)
		}
		var values []string
		r.waitFor(ctx, v.Name+" variable values", time.Minute, func(ctx context.Context) error {
			got, _, _, err := r.prom.LabelValues(ctx, label, []string{sel}, time.Time{}, time.Time{})
			values = values[:0]
			for _, v := range got {
				values = append(values, regexp.QuoteMeta(string(v)))
			}
			if err == nil && len(values) == 0 {
				err = fmt.Errorf("label_values(%s, %s) is empty", sel, label)
			}
			return err
		})
		if v.Name == "job" && !slices.Equal(values, []string{regexp.QuoteMeta(serviceName)}) {
			r.t.Errorf("job variable values %v, want exactly the sender's service.name %q", values, serviceName)
		}
		resolved[v.Name] = strings.Join(values, "|")
	}
	for _, name := range []string{"job", "namespace"} {
		if resolved[name] == "" {
			r.t.Fatalf("the dashboard has no %s variable", name)
		}
	}
	values := resolved

	exprs := make([]string, len(queries))
	for i, q := range queries {
		if exprs[i], err = substitute(q.Expr, values); err != nil {
			r.t.Fatalf("panel %q: %v", q.Panel, err)
		}
	}
	pending := map[int]string{}
	for i := range queries {
		pending[i] = "not run"
	}
	r.waitFor(ctx, "every dashboard query returning data", 2*time.Minute, func(ctx context.Context) error {
		for i := range pending {
			got, err := instant(ctx, r.prom, exprs[i])
			if err != nil {
				if badQuery(err) {
					return permanent(fmt.Errorf("panel %q query %s %q: %w", queries[i].Panel, queries[i].RefID, exprs[i], err))
				}
				pending[i] = err.Error()
				continue
			}
			if hasFinite(got) {
				delete(pending, i)
			} else {
				pending[i] = fmt.Sprintf("%d series, none finite", len(got))
			}
		}
		if len(pending) == 0 {
			return nil
		}
		var lines []string
		for i, why := range pending {
			lines = append(lines, fmt.Sprintf("panel %q query %s (%s): %s", queries[i].Panel, queries[i].RefID, exprs[i], why))
		}
		sort.Strings(lines)
		return fmt.Errorf("%d of %d queries without data:\n\t%s", len(pending), len(queries), strings.Join(lines, "\n\t"))
	})
	r.t.Logf("all %d dashboard queries returned data (job %s, namespaces %s)", len(queries), values["job"], values["namespace"])
}

func hasFinite(samples []sample) bool {
	for _, s := range samples {
		if !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0) {
			return true
		}
	}
	return false
}

// checkSameNamesAsDirect compares the aion_ families the Collector exposes
// with those the demo's own Prometheus endpoint serves: same names, types and
// label names, so the dashboard and the alerts work on either path.
func (r *e2e) checkSameNamesAsDirect(ctx context.Context) {
	r.t.Helper()
	r.waitFor(ctx, "same families through the Collector as from the demo's endpoint", time.Minute, func(ctx context.Context) error {
		viaCollector, err := scrape(ctx, "http://"+r.exporter+"/metrics")
		if err != nil {
			return err
		}
		direct, err := scrape(ctx, "http://"+r.direct+"/metrics")
		if err != nil {
			return err
		}
		a, b := shapes(direct, catalogPrefixes...), shapes(viaCollector, catalogPrefixes...)
		if len(a) != len(catalogMetrics) {
			return fmt.Errorf("the demo's endpoint has %d catalog families (%v), want %d: %v", len(a), catalogPrefixes, len(catalogMetrics), a)
		}
		if diffs := diffShapes("demo endpoint", a, "Collector", b); len(diffs) > 0 {
			return fmt.Errorf("the two paths differ:\n\t%s", strings.Join(diffs, "\n\t"))
		}
		return nil
	})
}

// checkSpans reads the Collector's own metrics: the OTLP receiver accepted
// spans and the traces pipeline's otlp_grpc/jaeger exporter sent them to
// Jaeger, without failures.
func (r *e2e) checkSpans(ctx context.Context) {
	r.t.Helper()
	r.waitFor(ctx, "spans through the Collector's traces pipeline into Jaeger", time.Minute, func(ctx context.Context) error {
		fams, err := scrape(ctx, "http://"+r.collectorMetrics+"/metrics")
		if err != nil {
			return err
		}
		if total, _ := sumFamilies(fams, "otelcol_receiver_accepted_spans"); total <= 0 {
			return fmt.Errorf("otelcol_receiver_accepted_spans is %v", total)
		}
		if sent := sumLabeled(fams, "otelcol_exporter_sent_spans", "exporter", jaegerExporter); sent <= 0 {
			return fmt.Errorf("otelcol_exporter_sent_spans{exporter=%q} is %v", jaegerExporter, sent)
		}
		if failed := sumLabeled(fams, "otelcol_exporter_send_failed_spans", "exporter", jaegerExporter); failed > 0 {
			return fmt.Errorf("otelcol_exporter_send_failed_spans{exporter=%q} is %v", jaegerExporter, failed)
		}
		return nil
	})
}

// jaegerExporter is the traces exporter of collector-config.yaml that sends
// to Jaeger.
const jaegerExporter = "otlp_grpc/jaeger"

// checkExemplars waits until Prometheus stores, on a catalog histogram, an
// exemplar whose trace_id is the trace of a span the Collector received:
// exemplars survive the OTLP path, the exporter's OpenMetrics and the scrape,
// and point at traces that exist.
func (r *e2e) checkExemplars(ctx context.Context) {
	r.t.Helper()
	since := time.Now().Add(-10 * time.Minute)
	r.waitFor(ctx, "an exemplar of a received trace", time.Minute, func(ctx context.Context) error {
		results, err := r.prom.QueryExemplars(ctx, `{__name__=~"aion_.+_bucket"}`, since, time.Now())
		if err != nil {
			if badQuery(err) {
				return permanent(err)
			}
			return err
		}
		if len(results) == 0 {
			return errors.New("Prometheus holds no exemplar on aion_ buckets")
		}
		traces, err := receivedTraceIDs(r.spansLog())
		if err != nil {
			return err
		}
		if len(traces) == 0 {
			return fmt.Errorf("no span in %s yet", r.spansLog())
		}
		n, sample := 0, ""
		for _, res := range results {
			for _, e := range res.Exemplars {
				n++
				id := string(e.Labels["trace_id"])
				if traces[id] {
					r.t.Logf("exemplar trace_id %s on %v is a trace the Collector received", id, res.SeriesLabels)
					return nil
				}
				sample = id
			}
		}
		return fmt.Errorf("%d exemplars on aion_ buckets (e.g. trace_id %q), none of the %d traces the Collector received", n, sample, len(traces))
	})
}

// checkDirectExemplars scrapes the demo's own Prometheus endpoint as
// Prometheus does, asking for OpenMetrics, and waits for an exemplar on a
// catalog histogram bucket: the other export path keeps exemplars too.
func (r *e2e) checkDirectExemplars(ctx context.Context) {
	r.t.Helper()
	r.waitFor(ctx, "an exemplar on the demo's own endpoint", time.Minute, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.direct+"/metrics", nil)
		if err != nil {
			return permanent(err)
		}
		req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
			return permanent(fmt.Errorf("the demo's endpoint answers OpenMetrics with Content-Type %q: no exemplars", ct))
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(string(body), "\n") {
			if strings.HasPrefix(line, "aion_") && strings.Contains(line, "_bucket{") && directExemplar.MatchString(line) {
				return nil
			}
		}
		return errors.New("no aion_ bucket with a trace_id exemplar yet")
	})
}

// directExemplar is an OpenMetrics exemplar with a trace ID.
var directExemplar = regexp.MustCompile(` # \{[^}]*trace_id="[0-9a-f]{32}"`)

// traceIDLine is how the debug exporter's detailed output shows a span's
// trace ID.
var traceIDLine = regexp.MustCompile(`Trace ID\s+: ([0-9a-f]{32})`)

// receivedTraceIDs returns the trace IDs of the spans in a debug exporter
// output file; a missing file is no spans yet.
func receivedTraceIDs(path string) (map[string]bool, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, m := range traceIDLine.FindAllSubmatch(raw, -1) {
		ids[string(m[1])] = true
	}
	return ids, nil
}

// checkRules waits until Prometheus has evaluated every alert rule of
// alerts.yml on the real data, and checks none failed to evaluate.
func (r *e2e) checkRules(ctx context.Context) {
	r.t.Helper()
	r.waitFor(ctx, "alert rules evaluated", time.Minute, func(ctx context.Context) error {
		rules, err := r.prom.Rules(ctx, nil)
		if err != nil {
			return err
		}
		n := 0
		for _, g := range rules.Groups {
			for _, rule := range g.Rules {
				a, ok := rule.(promv1.AlertingRule)
				if !ok {
					continue
				}
				n++
				switch a.Health {
				case promv1.RuleHealthGood:
				case promv1.RuleHealthBad:
					return permanent(fmt.Errorf("rule %s: %s", a.Name, a.LastError))
				default:
					return fmt.Errorf("rule %s not evaluated yet (%s)", a.Name, a.Health)
				}
			}
		}
		if want := len(alertNames(r.t)); n != want {
			return permanent(fmt.Errorf("Prometheus loaded %d alerting rules, alerts.yml has %d", n, want))
		}
		return nil
	})
}
