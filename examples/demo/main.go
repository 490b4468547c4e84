// Command demo runs a simulated workflow server instrumented by aionotel:
// workflows started and closed by every status, reopened, signals,
// schedules, activities by every outcome, retries, the in-flight gauge,
// store and keyspace call durations, including real sequence conflicts
// between racing writers of one workflow, the outbox wake and agent
// transcripts, with their GenAI telemetry: token usage by model, tool calls
// and their failures, and one log record per model call (without content:
// set OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true to capture it).
// A few instruments move only when asked: pairing evictions
// (-max-inflight 24), and the resume and release counters (a node of a
// cluster, -store postgres:).
//
//	go run ./examples/demo                           # Prometheus at 127.0.0.1:9464/metrics, until Ctrl-C
//	go run ./examples/demo -exporter otlp            # OTLP to a Collector (collector-config.yaml)
//	go run ./examples/demo -keyspace bolt:k.db -duration 10s
//	go run ./examples/demo -store "postgres:$DSN" -node a -shards 16  # a node of a cluster
//	go run ./examples/demo check -store "postgres:$DSN" 127.0.0.1:9464 127.0.0.1:9465
//
// # Flags
//
//	-exporter prometheus|otlp|stdout|none  where telemetry goes (default prometheus; see Environment)
//	-listen HOST:PORT       the Prometheus endpoint's address (default 127.0.0.1:9464; a cluster
//	                        node given none takes a free port when another process has it)
//	-keyspace memory|bolt:PATH|postgres:DSN  where agent transcripts go (default memory)
//	-duration D             stop after D (default 0: run until interrupted)
//	-rate N                 workflows started per second (default 20)
//	-workers N              activity workers, each running one activity at a time; rows
//	                        wait in the outbox while all are busy (default 0: two per
//	                        workflow started per second, so work waits now and then)
//	-run-timeout D          each run's execution timeout (default 10s); a run still open
//	                        then closes as timed out, and its waiting work is dropped
//	-max-inflight N         bound of the activity pairing tracker; past it the oldest
//	                        in-flight activity is evicted (default 0: the tracker's default);
//	                        -max-inflight 24 shows evictions
//	-seed N                 seeds the random draws (default 1); IDs are random UUIDs
//	-drain D                once stopped, how long started workflows may finish before the
//	                        rest are cancelled (default 2s)
//	-retention D            how long closed workflows stay in the in-memory stores (default 10s)
//	-store memory|postgres:DSN  where histories go (default memory); postgres: makes the
//	                        process a node of a cluster of demos sharing the database
//	-node NAME              the node's name, which holds its shard leases (default: the
//	                        host name and a random suffix)
//	-shards N               the number of shards (default 0: the database's, 16 for a new one)
//	-lease D                how long a shard lease lasts unrenewed (default 10s)
//	-renew D                how often the node renews its leases and balances (default 2s;
//	                        at most half the lease)
//	-cpuprofile FILE        write a CPU profile (pprof) of the whole run to FILE, from the
//	                        flags parsed to the exit; examples/demo/cpushare reads it
//
// # Environment
//
// Exporters are built by go.opentelemetry.io/contrib/exporters/autoexport, so
// the standard variables apply: OTEL_METRICS_EXPORTER, OTEL_TRACES_EXPORTER,
// OTEL_LOGS_EXPORTER, OTEL_EXPORTER_OTLP_PROTOCOL (http/protobuf by default, or grpc),
// OTEL_EXPORTER_OTLP_ENDPOINT and the other OTEL_EXPORTER_OTLP_* variables
// (when none of the endpoint or insecure ones is set, OTLP goes without TLS
// to the Collector of collector-config.yaml on 127.0.0.1: port 4318 for
// http/protobuf, 4317 for grpc),
// OTEL_METRIC_EXPORT_INTERVAL (the demo's default is 5000 ms, not the SDK's
// 60 s), OTEL_TRACES_SAMPLER (always_off: the instrumentation gets a
// no-op tracer provider and starts no span at all). -exporter, when given, sets OTEL_METRICS_EXPORTER,
// OTEL_TRACES_EXPORTER and OTEL_LOGS_EXPORTER (prometheus: metrics only;
// stdout: console). Without -exporter the variables decide, metrics
// defaulting to prometheus, spans and log records to none. -listen sets OTEL_EXPORTER_PROMETHEUS_HOST and _PORT, unless they
// are set and -listen is not given. The resource has service.name
// (OTEL_SERVICE_NAME, default aionotel-demo), service.version,
// service.instance.id (a fresh UUID unless OTEL_RESOURCE_ATTRIBUTES gives one)
// and what the SDK's standard detectors find.
//
// # Running and stopping
//
// A progress line shows the counts every second (a plain line every 10 s when
// stdout is not a terminal); a summary is printed at the end, after it one
// line per request model and token type of the tokens the transcripts
// committed ("demo: gen_ai tokens model=M type=T total=N", T one of input,
// output, cache_read, cache_creation and reasoning: what
// gen_ai.client.token.usage sums to by gen_ai.token.type for the first two,
// and the gen_ai.client.inference.usage.cache_read.input_tokens,
// .cache_write.input_tokens and .reasoning.output_tokens counters for the
// others). -duration, or
// the first SIGINT/SIGTERM, stops starting workflows and drains; a second
// signal exits at once. The whole shutdown is bounded: the drain, then at most
// 3 s for the exporters' final flush. What could not be flushed is printed
// ("telemetry: metrics not flushed: <reason>") and does not fail the run.
//
// The in-memory stores prune closed workflows (and their transcripts) after
// the retention, so the demo's memory levels off; a durable keyspace keeps
// its transcripts, and a PostgreSQL store its histories.
//
// # A cluster on PostgreSQL
//
// With -store postgres:DSN the histories go to eventstore/pgstore, and the
// process is one node of a cluster: every demo on the same database and
// schema (the DSN's search_path) shares its shards (package
// internal/cluster). Each node holds an even share of the shards by lease,
// starts workflows only there, passes on the outbox rows it claims for
// other nodes' workflows, adopts the shards of a node whose leases expired
// (killed, or paused past its lease) and takes over its orphaned workflows
// (their activities in flight run again here; their runs close when their
// run timeout fires), and hands shards over when a node joins. Its
// telemetry follows: the otelstore decorator resumes each shard acquired
// and releases each shard lost. It logs every change of its shards and
// prints its service.instance.id and pid when it starts. On stop it
// drains, cancels what is still open in its shards, releases its leases
// (the others adopt at once) and leaves. Its connections are named
// "aionotel-demo NODE" (application_name) unless the DSN names them.
//
// # Check
//
// "demo check -store postgres:DSN NODE..." reads the open workflows'
// histories from a cluster's store and the aion_inflight_activities
// gauges of its live nodes (their Prometheus endpoints), and prints the
// activities in flight by type, from both, side by side; it holds the
// nodes' appends while it reads (-freeze=false does not) and exits 0 when
// they agree, 1 when they do not after -tries reads (default 10).
//
// # Exit status
//
// 0 after a clean run, even when the final telemetry flush failed (a warning
// says what was lost); 1 when the run could not start or end cleanly (the
// listen address in use, an exporter or keyspace that cannot be set up or
// closed, a cluster node that cannot connect or whose name another live
// process uses); 2 for bad flags; 130 when a second signal ended the
// process.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.opentelemetry.io/otel"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/boltstore"
	"github.com/aionotel/aionotel/keyspace/pgstore"

	"github.com/aionotel/aionotel/examples/demo/internal/cluster"
	"github.com/aionotel/aionotel/examples/demo/internal/sim"
	"github.com/aionotel/aionotel/examples/demo/internal/telemetry"
	"github.com/aionotel/aionotel/examples/internal/cpuprofile"
)

// flushTimeout bounds the exporters' final flush.
const flushTimeout = 3 * time.Second

func main() {
	ctx, stop := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "\ndemo: stopping (a second signal exits at once)")
		stop()
		<-sigs
		os.Exit(130)
	}()
	// Export errors during the run: the first few distinct ones, on stderr.
	var mu sync.Mutex
	seen := map[string]bool{}
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if !seen[err.Error()] && len(seen) < 20 {
			seen[err.Error()] = true
			fmt.Fprintln(os.Stderr, "telemetry:", err)
		}
	}))
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	exporter, listen, keyspace, store, node  string
	duration, drain, retention, lease, renew time.Duration
	runTimeout                               time.Duration
	rate                                     float64
	workers, maxInFlight, shards             int
	seed                                     uint64
	cpuprofile                               string
}

func parse(args []string, stderr io.Writer) (options, map[string]bool, error) {
	var o options
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.exporter, "exporter", "prometheus", "where telemetry goes: prometheus, otlp, stdout or none")
	fs.StringVar(&o.listen, "listen", "127.0.0.1:9464", "address of the Prometheus endpoint")
	fs.StringVar(&o.keyspace, "keyspace", "memory", "transcript keyspace: memory, bolt:PATH or postgres:DSN")
	fs.DurationVar(&o.duration, "duration", 0, "stop after this long (0: until interrupted)")
	fs.Float64Var(&o.rate, "rate", 20, "workflows started per second")
	fs.IntVar(&o.workers, "workers", 0, "activity workers, each running one activity at a time (0: two per workflow started per second)")
	fs.IntVar(&o.maxInFlight, "max-inflight", 0, "bound of the activity pairing tracker (0: its default)")
	fs.Uint64Var(&o.seed, "seed", 1, "seed of the random draws")
	fs.DurationVar(&o.drain, "drain", 2*time.Second, "how long started workflows may finish once stopped")
	fs.DurationVar(&o.retention, "retention", 10*time.Second, "how long closed workflows stay in memory")
	fs.DurationVar(&o.runTimeout, "run-timeout", sim.DefaultRunTimeout, "each run's execution timeout")
	fs.StringVar(&o.store, "store", "memory", "event store: memory, or postgres:DSN (a node of a cluster)")
	fs.StringVar(&o.node, "node", "", "with -store postgres: this node's name (default: the host name and a random suffix)")
	fs.IntVar(&o.shards, "shards", 0, "with -store postgres: the number of shards (0: the database's, 16 for a new one)")
	fs.DurationVar(&o.lease, "lease", cluster.DefaultLease, "with -store postgres: how long a shard lease lasts without renewal")
	fs.DurationVar(&o.renew, "renew", cluster.DefaultRenew, "with -store postgres: how often the node renews its leases and balances")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the run to this file")
	if err := fs.Parse(args); err != nil {
		return o, nil, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if _, ok := telemetry.Exporters[o.exporter]; !ok {
		errs = append(errs, fmt.Errorf("-exporter %q: want prometheus, otlp, stdout or none", o.exporter))
	}
	if _, _, err := net.SplitHostPort(o.listen); err != nil {
		errs = append(errs, fmt.Errorf("-listen %q: %v", o.listen, err))
	}
	if scheme, arg, _ := strings.Cut(o.keyspace, ":"); o.keyspace != "memory" && (scheme != "bolt" && scheme != "postgres" || arg == "") {
		errs = append(errs, errors.New("-keyspace: want memory, bolt:PATH or postgres:DSN"))
	}
	if !(o.rate > 0 && o.rate <= 10000) || math.IsNaN(o.rate) {
		errs = append(errs, fmt.Errorf("-rate %v: want a number in (0, 10000]", o.rate))
	}
	if o.workers < 0 || o.workers > 1024 {
		errs = append(errs, fmt.Errorf("-workers %d: want 0 (sized from -rate) to 1024", o.workers))
	}
	if o.runTimeout <= 0 {
		errs = append(errs, fmt.Errorf("-run-timeout %s: want a positive duration", o.runTimeout))
	}
	if o.maxInFlight < 0 {
		errs = append(errs, fmt.Errorf("-max-inflight %d: want 0 or more", o.maxInFlight))
	}
	if o.duration < 0 || o.drain < 0 || o.retention <= 0 {
		errs = append(errs, errors.New("-duration and -drain must not be negative, -retention must be positive"))
	}
	if scheme, arg, _ := strings.Cut(o.store, ":"); o.store != "memory" && (scheme != "postgres" || arg == "") {
		errs = append(errs, errors.New("-store: want memory or postgres:DSN"))
	}
	if o.store == "memory" && (set["node"] || set["shards"] || set["lease"] || set["renew"]) {
		errs = append(errs, errors.New("-node, -shards, -lease and -renew are for a cluster node: they need -store postgres:DSN"))
	}
	if o.shards < 0 || o.shards > 1<<16 {
		errs = append(errs, fmt.Errorf("-shards %d: want 0 (the database's) to 65536", o.shards))
	}
	if err := (cluster.Config{Lease: o.lease, Renew: o.renew}).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("-lease, -renew: %w", err))
	}
	return o, set, errors.Join(errs...)
}

// run is the whole program but for the signals: ctx ending is the first
// signal. It returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "check" {
		return runCheck(ctx, args[1:], stdout, stderr)
	}
	// The progress line, the summary and a cluster node's log share stdout.
	tty := terminal(stdout)
	stdout = &syncWriter{w: stdout}
	o, set, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 2
	}
	if o.cpuprofile != "" {
		stopProfile, err := cpuprofile.Start(o.cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "demo: -cpuprofile:", err)
			return 1
		}
		defer func() {
			if err := stopProfile(); err != nil {
				fmt.Fprintln(stderr, "demo: -cpuprofile:", err)
			}
		}()
	}
	if strings.HasPrefix(o.store, "postgres:") && !set["listen"] &&
		os.Getenv("OTEL_EXPORTER_PROMETHEUS_HOST") == "" && os.Getenv("OTEL_EXPORTER_PROMETHEUS_PORT") == "" {
		// Several nodes on one host: the second one gets a port of its own.
		o.listen = freeAddr(o.listen)
	}
	configureEnv(o, set)

	keys, closeKeys, err := openKeyspace(ctx, o.keyspace)
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	status := 0
	defer func() {
		if err := closeKeys(); err != nil {
			fmt.Fprintln(stderr, "demo: closing the keyspace:", err)
			status = 1
		}
	}()
	tel, err := telemetry.Start(ctx, serviceName())
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		return 1
	}
	// Log records on, content capture off unless the conventions' variable
	// asks for it.
	capture := os.Getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") == "true"
	cfg := sim.Config{MeterProvider: tel.Meter, TracerProvider: tel.Spans, LoggerProvider: tel.Logger,
		ContentCapture: capture, Keyspace: keys, KeyspaceSystem: dbSystem(o.keyspace),
		Rate: o.rate, Workers: o.workers, MaxInFlight: o.maxInFlight, Seed: o.seed, Drain: o.drain, Retention: o.retention,
		RunTimeout: o.runTimeout}
	var node *cluster.Node
	if dsn, ok := strings.CutPrefix(o.store, "postgres:"); ok {
		if node, err = openNode(ctx, dsn, o, tel, stdout); err != nil {
			fmt.Fprintln(stderr, "demo:", err)
			tel.Shutdown(ctx)
			return 1
		}
		cfg.Store, cfg.StoreSystem, cfg.Cluster, cfg.ResumeReports = node.Store(), dbSystem(o.store), node, node.Resumed
	}
	srv, err := sim.New(cfg)
	if err == nil && node != nil {
		err = node.Start(ctx, srv.Store(), srv.Recover)
	}
	if err != nil {
		fmt.Fprintln(stderr, "demo:", err)
		if node != nil {
			node.Close(context.WithoutCancel(ctx))
		}
		tel.Shutdown(ctx)
		return 1
	}

	where := "exporting through " + os.Getenv("OTEL_METRICS_EXPORTER")
	if os.Getenv("OTEL_METRICS_EXPORTER") == "prometheus" {
		where = "metrics at http://" + o.listen + "/metrics"
	}
	fmt.Fprintf(stdout, "aionotel demo: %g workflows/s, keyspace %s, %s\n", o.rate, strings.SplitN(o.keyspace, ":", 2)[0], where)
	runCtx, cancel := context.WithCancel(ctx)
	if o.duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, o.duration)
	}
	defer cancel()
	// A node keeps its leases while the server drains, and balances only
	// until the run stops.
	renewCtx, stopRenew := context.WithCancel(context.WithoutCancel(ctx))
	var maintained sync.WaitGroup
	if node != nil {
		maintained.Go(func() { node.Maintain(runCtx, renewCtx) })
	}
	start := time.Now()
	progressDone := make(chan struct{})
	go func() { defer close(progressDone); progress(runCtx, stdout, tty, srv, node, start) }()
	srv.Run(runCtx)
	cancel()
	<-progressDone
	stopRenew()
	maintained.Wait()
	if node != nil {
		closeCtx, stopClose := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		if err := node.Close(closeCtx); err != nil {
			fmt.Fprintf(stderr, "demo: node %s: leaving the cluster: %v (its leases expire after %s)\n", node.Name(), err, o.lease)
		} else {
			fmt.Fprintf(stdout, "node %s: released its shards and left the cluster\n", node.Name())
		}
		stopClose()
	}

	fmt.Fprintf(stdout, "summary after %s:\n", time.Since(start).Round(time.Millisecond))
	stats := srv.Stats()
	for _, name := range sim.StatNames(stats) {
		fmt.Fprintf(stdout, "  %-32s %d\n", name, stats[name])
	}
	for _, tok := range srv.Tokens() {
		fmt.Fprintf(stdout, "demo: gen_ai tokens model=%s type=%s total=%d\n", tok.Model, tok.Type, tok.Total)
	}
	// The histories read in the background first (their completions and
	// spans), then the exporters, each within its own bound.
	fillCtx, stopFill := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	if err := srv.Flush(fillCtx); err != nil {
		fmt.Fprintln(stderr, "telemetry: histories still being read at exit:", err)
	}
	stopFill()
	flushCtx, stopFlush := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
	defer stopFlush()
	for _, warning := range tel.Shutdown(flushCtx) {
		fmt.Fprintln(stderr, "telemetry:", warning)
	}
	return status
}

// freeAddr returns addr if nothing listens there yet, else a free port on
// its host (another process may take it before the exporter does: the
// start then fails as for a -listen in use).
func freeAddr(addr string) string {
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		ln.Close()
		return addr
	}
	host, _, _ := net.SplitHostPort(addr)
	if ln, err = net.Listen("tcp", net.JoinHostPort(host, "0")); err != nil {
		return addr
	}
	defer ln.Close()
	return ln.Addr().String()
}

// syncWriter writes to w one call at a time.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// configureEnv maps -exporter and -listen onto autoexport's variables.
func configureEnv(o options, set map[string]bool) {
	names := telemetry.Exporters[o.exporter]
	setenv := func(key, value string, force bool) {
		if force || os.Getenv(key) == "" {
			os.Setenv(key, value)
		}
	}
	setenv("OTEL_METRICS_EXPORTER", names[0], set["exporter"])
	setenv("OTEL_TRACES_EXPORTER", names[1], set["exporter"])
	setenv("OTEL_LOGS_EXPORTER", names[2], set["exporter"])
	setenv("OTEL_METRIC_EXPORT_INTERVAL", "5000", false)
	host, port, _ := net.SplitHostPort(o.listen)
	force := set["listen"] || os.Getenv("OTEL_EXPORTER_PROMETHEUS_HOST") == "" && os.Getenv("OTEL_EXPORTER_PROMETHEUS_PORT") == ""
	setenv("OTEL_EXPORTER_PROMETHEUS_HOST", host, force)
	setenv("OTEL_EXPORTER_PROMETHEUS_PORT", port, force)
	// OTLP defaults to the Collector of collector-config.yaml on loopback,
	// without TLS, unless an endpoint or TLS setting says otherwise.
	if names[0] == "otlp" || names[1] == "otlp" || names[2] == "otlp" || os.Getenv("OTEL_METRICS_EXPORTER") == "otlp" ||
		os.Getenv("OTEL_TRACES_EXPORTER") == "otlp" || os.Getenv("OTEL_LOGS_EXPORTER") == "otlp" {
		for _, key := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
			"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_INSECURE"} {
			if os.Getenv(key) != "" {
				return
			}
		}
		endpoint := "http://127.0.0.1:4318"
		if os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL") == "grpc" {
			endpoint = "http://127.0.0.1:4317"
		}
		os.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint)
	}
}

func serviceName() string {
	if name := os.Getenv("OTEL_SERVICE_NAME"); name != "" {
		return name
	}
	return "aionotel-demo"
}

// openNode opens the event store of a cluster node on PostgreSQL, named by
// -node, with the process's service.instance.id, and says so.
func openNode(ctx context.Context, dsn string, o options, tel *telemetry.Telemetry, stdout io.Writer) (*cluster.Node, error) {
	instance, _ := tel.Resource.Set().Value(semconv.ServiceInstanceIDKey)
	node, err := cluster.Open(ctx, dsn, cluster.Config{Node: o.node, Shards: o.shards, Lease: o.lease, Renew: o.renew,
		Grace: o.drain, Instance: instance.AsString(), Log: stdout})
	if err != nil {
		return nil, fmt.Errorf("-store postgres: %w", err)
	}
	fmt.Fprintf(stdout, "node %s: service.instance.id=%s, pid %d, %d shards, leases of %s renewed every %s\n",
		node.Name(), instance.AsString(), os.Getpid(), node.ShardCount(), o.lease, o.renew)
	return node, nil
}

// dbSystem is the db.system.name of a -keyspace or -store backend: the
// semantic conventions' value for PostgreSQL, otelstore's default
// otherwise (bbolt and the in-memory stores have no well-known value).
func dbSystem(spec string) string {
	if strings.HasPrefix(spec, "postgres:") {
		return semconv.DBSystemNamePostgreSQL.Value.AsString()
	}
	return ""
}

// openKeyspace opens the -keyspace backend: nil for memory (the server makes
// its own). Errors never quote the DSN, which may hold a password.
func openKeyspace(ctx context.Context, spec string) (keyspace.Store, func() error, error) {
	scheme, arg, _ := strings.Cut(spec, ":")
	switch scheme {
	case "bolt":
		s, err := boltstore.Open(arg)
		if err != nil {
			return nil, nil, fmt.Errorf("-keyspace bolt: %w", err)
		}
		return s, s.Close, nil
	case "postgres":
		s, err := pgstore.Open(ctx, arg)
		if err != nil {
			return nil, nil, errors.New("-keyspace postgres: cannot connect (check the DSN and that the server is up)")
		}
		return s, s.Close, nil
	}
	return nil, func() error { return nil }, nil
}

// terminal reports whether w is the process's standard output on a
// terminal.
func terminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	st, err := os.Stdout.Stat()
	return ok && f == os.Stdout && err == nil && st.Mode()&os.ModeCharDevice != 0
}

// progress prints the counts every second on a terminal (rewriting one
// line), every 10 s as plain lines otherwise, until ctx ends.
func progress(ctx context.Context, w io.Writer, tty bool, srv *sim.Server, node *cluster.Node, start time.Time) {
	every, prefix, suffix := 10*time.Second, "", "\n"
	if tty {
		every, prefix, suffix = time.Second, "\r\033[K", ""
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if tty {
				fmt.Fprintln(w)
			}
			return
		case <-tick.C:
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		s := srv.Stats()
		shards := ""
		if node != nil {
			shards = fmt.Sprintf("  shards %v", node.Shards())
		}
		fmt.Fprintf(w, "%s%6s  workflows %d started, %d completed  activities %d running, %d retried  conflicts %d  pruned %d  heap %.1f MiB%s%s",
			prefix, time.Since(start).Round(time.Second), s["workflows.started"], s["workflows.completed"], s["activities.running"],
			s["activities.retried"], s["store.conflicts"], s["workflows.pruned"], float64(ms.HeapInuse)/(1<<20), shards, suffix)
	}
}
