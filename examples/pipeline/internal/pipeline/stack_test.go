package pipeline

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

// The end-to-end tests are scenarios run against one pipeline per test
// binary, the stack: the Collector (collector-config.yaml), a Prometheus
// scraping it with the alert rules loaded, and Jaeger (jaeger-config.yaml)
// fed by the Collector's traces pipeline. The first scenario starts it;
// TestMain stops it once every test is done. A scenario starts its own demo
// processes, sending as a job of its own (service.name), and every check
// filters on that job, so scenarios can run side by side (t.Parallel) and
// adding one costs its demo runs, not a pipeline. To add one:
//
//	func TestEndToEndSomething(t *testing.T) {
//		t.Parallel()
//		r := newScenario(t, "aionotel-e2e-something")
//		r.otlpDemo("demo", "-duration", "10m")
//		ctx := r.context(5 * time.Minute)
//		r.waitForCatalog(ctx)
//		...
//	}

const (
	// scrapeJob is the Prometheus job scraping the Collector; with
	// honor_labels it must never appear on a sender's series.
	scrapeJob = "otel-collector"
	// stopGrace is how long a process may take to stop on SIGINT before it
	// is killed.
	stopGrace = 10 * time.Second
	// jaegerExporter is the traces exporter of collector-config.yaml that
	// sends to Jaeger.
	jaegerExporter = "otlp_grpc/jaeger"
)

// The Collector and Jaeger are the README's builds (examples/pipeline's
// README, "Demo -> Collector -> Prometheus"), where its commands put them: the tests never
// build them, so CI builds each once, with the README's own commands
// (`bash .ci/readme.sh collector jaeger` from the repository root).
var (
	pipelineDir   = filepath.Join("..", "..") // examples/pipeline
	collectorPath = filepath.Join(pipelineDir, "_build", "otelcol-aionotel")
	jaegerPath    = filepath.Join(pipelineDir, "_build", "jaeger")
)

const buildHint = "build it with the README's commands (from the repository root: bash .ci/readme.sh collector jaeger)"

// requireBuilt returns the absolute path of the program the README builds
// at path, or ends the test as requireTool does: a skip saying how to build
// it when CI is unset, a failure when CI=true.
func requireBuilt(t testing.TB, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = os.Stat(abs)
	switch toolPolicy(err == nil, os.Getenv("CI")) {
	case toolFail:
		t.Fatalf("%s: %v (CI is set, so this is a failure); %s", path, err, buildHint)
	case toolSkip:
		t.Skipf("%s: %v; %s", path, err, buildHint)
	}
	return abs
}

// stack is the pipeline every scenario shares: its programs and where they
// listen. It is safe for concurrent use by scenarios once started.
type stack struct {
	root, tmp string // the repository root; the stack's own directory (logs, TSDB)

	collectorBin, jaegerBin, promBin, demoBin string

	otlpGRPC, otlpHTTP, exporter, collectorMetrics, health, promWeb string
	// Jaeger's OTLP/gRPC receiver and its query API (HTTP and gRPC).
	jaegerOTLP, jaegerQuery, jaegerQueryGRPC string

	backends []*process // Jaeger, the Collector, Prometheus, in start order
	prom     promv1.API
	jaeger   jaegerAPI
}

// shared is the stack of this test binary, started at most once.
var shared struct {
	once sync.Once
	s    *stack
	err  error
}

// TestMain stops the shared stack after the last test.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.s != nil {
		shared.s.stop()
	}
	os.Exit(code)
}

// sharedStack returns the stack, starting it on the first call. A test
// that cannot have it fails, or skips outside CI when a program is missing
// (Prometheus, or the README's builds).
func sharedStack(t *testing.T) *stack {
	t.Helper()
	if testing.Short() {
		t.Skip("end-to-end: runs the demo, the Collector, Prometheus and Jaeger")
	}
	promBin := requireTool(t, "prometheus")
	collectorBin := requireBuilt(t, collectorPath)
	jaegerBin := requireBuilt(t, jaegerPath)
	shared.once.Do(func() {
		shared.s, shared.err = startStack(t, promBin, collectorBin, jaegerBin)
	})
	if shared.err != nil {
		t.Fatalf("the end-to-end pipeline did not start: %v", shared.err)
	}
	return shared.s
}

// startStack checks the Collector build against builder-config.yaml and
// collector-config.yaml, builds the demo, and starts Jaeger, the Collector
// and Prometheus on free loopback ports. On failure it stops what it
// started and the error carries the programs' log tails.
func startStack(t *testing.T, promBin, collectorBin, jaegerBin string) (s *stack, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, err := filepath.Abs(filepath.Join(pipelineDir, "..", ".."))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(root, "examples", "demo")); err != nil {
		return nil, fmt.Errorf("the end-to-end tests run the demo: %w", err)
	}
	tmp, err := os.MkdirTemp("", "aionotel-e2e-")
	if err != nil {
		return nil, err
	}
	s = &stack{root: root, tmp: tmp, collectorBin: collectorBin, jaegerBin: jaegerBin, promBin: promBin}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, s.logTails())
			s.stop()
		}
	}()
	addrs, err := freeAddrs(9)
	if err != nil {
		return s, err
	}
	s.otlpGRPC, s.otlpHTTP, s.exporter, s.collectorMetrics, s.health, s.promWeb =
		addrs[0], addrs[1], addrs[2], addrs[3], addrs[4], addrs[5]
	s.jaegerOTLP, s.jaegerQuery, s.jaegerQueryGRPC = addrs[6], addrs[7], addrs[8]
	if s.prom, err = newPromAPI(s.promWeb); err != nil {
		return s, err
	}
	s.jaeger = jaegerAPI{base: "http://" + s.jaegerQuery}

	// The demo builds while the backends start.
	demoErr := make(chan error, 1)
	go func() { demoErr <- s.buildDemo(ctx) }()
	start := time.Now()
	err = errors.Join(
		s.checkCollectorBuild(ctx),
		s.validateConfig(ctx),
	)
	if err == nil {
		err = s.startJaeger(ctx)
	}
	if err == nil {
		err = s.startCollector(ctx)
	}
	if err == nil {
		err = s.startPrometheus(ctx)
	}
	if derr := <-demoErr; err == nil {
		err = derr
	}
	if err != nil {
		return s, err
	}
	t.Logf("pipeline started in %s: Collector %s, Prometheus %s, Jaeger %s (logs in %s)",
		time.Since(start).Round(time.Second), s.otlpGRPC, s.promWeb, s.jaegerQuery, s.tmp)
	return s, nil
}

// buildDemo compiles the demo, in the examples module, whose replace
// directives reach the library and the backends of this checkout.
func (s *stack) buildDemo(ctx context.Context) error {
	s.demoBin = filepath.Join(s.tmp, "demo")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", s.demoBin, "./demo")
	cmd.Dir = filepath.Join(s.root, "examples")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./demo: %v\n%s", err, out)
	}
	return nil
}

// componentModule is a "gomod:" line of builder-config.yaml or a "module:"
// line of `otelcol-aionotel components`: a component's module and version.
var (
	manifestModule  = regexp.MustCompile(`(?m)^\s*-?\s*gomod:\s*(\S+ \S+)\s*$`)
	telemetryModule = regexp.MustCompile(`(?m)^telemetry:\s*\n\s+gomod:\s*(\S+ \S+)\s*$`)
	builtModule     = regexp.MustCompile(`(?m)^\s*module:\s*(\S+ \S+)\s*$`)
)

// checkCollectorBuild compares the components the built Collector reports
// (`otelcol-aionotel components`) with the modules of builder-config.yaml:
// a binary built from another manifest, an older checkout's, is refused
// rather than tested.
func (s *stack) checkCollectorBuild(ctx context.Context) error {
	raw, err := os.ReadFile(filepath.Join(pipelineDir, "builder-config.yaml"))
	if err != nil {
		return err
	}
	var want []string
	for _, m := range manifestModule.FindAllSubmatch(raw, -1) {
		want = append(want, string(m[1]))
	}
	if m := telemetryModule.FindSubmatch(raw); m != nil {
		want = slices.DeleteFunc(want, func(s string) bool { return s == string(m[1]) })
	}
	out, err := exec.CommandContext(ctx, s.collectorBin, "components").Output()
	if err != nil {
		return fmt.Errorf("%s components: %w", s.collectorBin, err)
	}
	var got []string
	for _, m := range builtModule.FindAllSubmatch(out, -1) {
		got = append(got, string(m[1]))
	}
	slices.Sort(want)
	slices.Sort(got)
	if len(want) == 0 || !slices.Equal(got, want) {
		return fmt.Errorf("%s was built with the components %v, builder-config.yaml lists %v; %s",
			s.collectorBin, got, want, buildHint)
	}
	return nil
}

// collectorEnv points every endpoint of collector-config.yaml at this
// stack's ports, through the variables the file documents.
func (s *stack) collectorEnv() []string {
	host, port := splitAddr(s.collectorMetrics)
	return []string{
		"AIONOTEL_OTLP_GRPC_ENDPOINT=" + s.otlpGRPC,
		"AIONOTEL_OTLP_HTTP_ENDPOINT=" + s.otlpHTTP,
		"AIONOTEL_PROMETHEUS_ENDPOINT=" + s.exporter,
		"AIONOTEL_HEALTH_CHECK_ENDPOINT=" + s.health,
		"AIONOTEL_COLLECTOR_METRICS_HOST=" + host,
		"AIONOTEL_COLLECTOR_METRICS_PORT=" + port,
		"AIONOTEL_JAEGER_ENDPOINT=" + s.jaegerOTLP,
	}
}

func splitAddr(addr string) (host, port string) {
	i := strings.LastIndexByte(addr, ':')
	return addr[:i], addr[i+1:]
}

// validateConfig runs `otelcol-aionotel validate` on the repository's
// collector-config.yaml, as a user would before deploying it.
func (s *stack) validateConfig(ctx context.Context) error {
	cmd := exec.CommandContext(ctx, s.collectorBin, "validate", "--config", s.configPath())
	cmd.Env = append(os.Environ(), s.collectorEnv()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("otelcol-aionotel validate: %v\n%s", err, out)
	}
	return nil
}

func (s *stack) configPath() string { return filepath.Join(s.root, "collector-config.yaml") }

// spansLog is where the test's debug/spans exporter writes every span the
// Collector receives, in the debug exporter's detailed format.
func (s *stack) spansLog() string { return filepath.Join(s.tmp, "spans.log") }

// spansOverlay writes a second configuration the Collector merges over
// collector-config.yaml: a detailed debug exporter writing the traces
// pipeline's spans to spansLog, so the test knows which trace IDs the
// Collector received (the list of exporters replaces the file's, so it
// names Jaeger's too). The repository's file stays what users run.
func (s *stack) spansOverlay() (string, error) {
	cfg := fmt.Sprintf(`exporters:
  debug/spans:
    verbosity: detailed
    use_internal_logger: false
    output_paths: [%q]
service:
  pipelines:
    traces:
      exporters: [%s, debug, debug/spans]
`, s.spansLog(), jaegerExporter)
	path := filepath.Join(s.tmp, "spans-overlay.yaml")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// startBackend starts one of the stack's programs; TestMain stops it.
func (s *stack) startBackend(name string, env []string, argv ...string) error {
	p, err := startProcess(name, s.tmp, filepath.Join(s.tmp, name+".log"), env, argv...)
	if err != nil {
		return err
	}
	s.backends = append(s.backends, p)
	return nil
}

// alive returns a permanent error naming the first backend that has
// exited: none of them is meant to stop before the tests are done.
func (s *stack) alive() error {
	for _, p := range s.backends {
		select {
		case <-p.exited():
			return permanent(fmt.Errorf("%s exited early: %v", p.name, p.exitErr()))
		default:
		}
	}
	return nil
}

// waitFor polls check within d and says what never happened; it gives up
// at once if a backend dies.
func (s *stack) waitFor(ctx context.Context, what string, d time.Duration, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := poll(ctx, 500*time.Millisecond, func(ctx context.Context) error {
		if err := s.alive(); err != nil {
			return err
		}
		return check(ctx)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

// stop stops the backends, the last started first, and removes the
// stack's directory.
func (s *stack) stop() {
	for i := len(s.backends) - 1; i >= 0; i-- {
		s.backends[i].stop(stopGrace)
	}
	os.RemoveAll(s.tmp)
}

// logTails returns the end of each backend's log, for a failure message.
func (s *stack) logTails() string {
	var b strings.Builder
	for _, p := range s.backends {
		fmt.Fprintf(&b, "\n---- %s (pid %d) log tail ----\n%s", p.name, p.pid(), p.logTail(4<<10))
	}
	return b.String()
}

// startJaeger runs the README's Jaeger build with jaeger-config.yaml, on
// this stack's loopback ports, and waits until its query API answers. The
// Collector's exporter retries until the OTLP receiver, started after the
// query extension, accepts.
func (s *stack) startJaeger(ctx context.Context) error {
	err := s.startBackend("jaeger", []string{
		"AIONOTEL_JAEGER_OTLP_GRPC_ENDPOINT=" + s.jaegerOTLP,
		"AIONOTEL_JAEGER_QUERY_HTTP_ENDPOINT=" + s.jaegerQuery,
		"AIONOTEL_JAEGER_QUERY_GRPC_ENDPOINT=" + s.jaegerQueryGRPC,
	}, s.jaegerBin, "--config", filepath.Join(s.root, "examples", "pipeline", "jaeger-config.yaml"))
	if err != nil {
		return err
	}
	return s.waitFor(ctx, "Jaeger's query API", time.Minute, func(ctx context.Context) error {
		return httpOK(ctx, "http://"+s.jaegerQuery+"/api/v3/services")
	})
}

func (s *stack) startCollector(ctx context.Context) error {
	overlay, err := s.spansOverlay()
	if err != nil {
		return err
	}
	if err := s.startBackend("collector", s.collectorEnv(), s.collectorBin,
		"--config", s.configPath(), "--config", overlay); err != nil {
		return err
	}
	// health_check answers 200 once every component has started.
	if err := s.waitFor(ctx, "Collector's health_check", time.Minute, func(ctx context.Context) error {
		return httpOK(ctx, "http://"+s.health+"/")
	}); err != nil {
		return err
	}
	if err := httpOK(ctx, "http://"+s.exporter+"/metrics"); err != nil {
		return fmt.Errorf("Collector healthy, but its prometheus exporter: %w", err)
	}
	return nil
}

// startPrometheus writes a configuration that scrapes the Collector every
// second, keeping the job and instance labels the exporter derives from the
// sender's resource (honor_labels), and loads the alert rules. Exemplar
// storage is a feature flag in Prometheus 2 (the Debian package); with it,
// Prometheus scrapes OpenMetrics and keeps the exemplars.
func (s *stack) startPrometheus(ctx context.Context) error {
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
`, filepath.Join(s.root, "examples", "prometheus", "alerts.yml"), scrapeJob, s.exporter)
	path := filepath.Join(s.tmp, "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return err
	}
	if err := s.startBackend("prometheus", nil, s.promBin,
		"--config.file="+path,
		"--storage.tsdb.path="+filepath.Join(s.tmp, "tsdb"),
		"--web.listen-address="+s.promWeb,
		"--enable-feature=exemplar-storage",
	); err != nil {
		return err
	}
	return s.waitFor(ctx, "Prometheus ready", time.Minute, func(ctx context.Context) error {
		return httpOK(ctx, "http://"+s.promWeb+"/-/ready")
	})
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

// e2e is one scenario: demo runs that send as one job through the shared
// stack, and the checks of what arrived. Its methods are for its test's
// goroutine, except that its programs may be stopped from a cleanup.
type e2e struct {
	*stack
	t   *testing.T
	job string // the demos' service.name: their job label, their service in Jaeger
	tmp string
	// direct is the Prometheus endpoint of a demo run with -exporter
	// prometheus, when the scenario starts one (directDemo).
	direct string

	mu      sync.Mutex
	procs   []*process
	stopped map[*process]bool // stopped by the test on purpose
}

// newScenario returns a scenario sending as job through the shared stack;
// its programs are stopped when the test ends, and their logs (and the
// backends') are printed if it failed.
func newScenario(t *testing.T, job string) *e2e {
	t.Helper()
	r := &e2e{stack: sharedStack(t), t: t, job: job, tmp: t.TempDir()}
	t.Cleanup(r.stopAll)
	return r
}

// context returns a context for the scenario's checks, ended after d or
// with the test.
func (r *e2e) context(d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(r.t.Context(), d)
	r.t.Cleanup(cancel)
	return ctx
}

// start starts a program of the scenario and registers it to be stopped.
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

// otlpDemo starts the demo sending its telemetry as r.job over OTLP/gRPC to
// the Collector, exporting every second, with args added to
// -exporter otlp.
func (r *e2e) otlpDemo(name string, args ...string) *process {
	r.t.Helper()
	return r.start(name, []string{
		"OTEL_SERVICE_NAME=" + r.job,
		// autoexport's default protocol is http/protobuf; the Collector's
		// gRPC receiver is the path this test checks.
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + r.otlpGRPC,
		"OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_METRIC_EXPORT_INTERVAL=1000",
		"OTEL_BSP_SCHEDULE_DELAY=500",
		// The default queue (2,048 spans) overflows, and drops spans, when
		// a loaded machine slows the exports: the tests count every span.
		"OTEL_BSP_MAX_QUEUE_SIZE=65536",
	}, append([]string{r.demoBin, "-exporter", "otlp"}, args...)...)
}

// directDemo starts the demo serving its own Prometheus endpoint on a free
// port (r.direct), as the job r.job+"-direct", which nothing scrapes: the
// test reads it.
func (r *e2e) directDemo(name string, args ...string) *process {
	r.t.Helper()
	addrs, err := freeAddrs(1)
	if err != nil {
		r.t.Fatal(err)
	}
	r.direct = addrs[0]
	return r.start(name, []string{"OTEL_SERVICE_NAME=" + r.job + "-direct"},
		append([]string{r.demoBin, "-exporter", "prometheus", "-listen", r.direct}, args...)...)
}

// stopAll stops the scenario's programs, the last started first, and on
// failure prints the end of each log, the backends' too.
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
		r.t.Log(r.logTails())
	}
}

// alive returns an error naming the first program of the scenario or of
// the stack that has exited: none of them is meant to stop during the
// test, except those stopDemo stopped.
func (r *e2e) alive() error {
	if err := r.stack.alive(); err != nil {
		return err
	}
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
