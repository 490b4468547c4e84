package exporttest

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	colmetric "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
)

// receiver is an in-process OTLP/HTTP endpoint: it decodes every request
// with the OTLP protobuf definitions (which refuse invalid UTF-8) and
// answers 400 to one that does not decode.
type receiver struct {
	srv *httptest.Server

	mu      sync.Mutex
	metrics []*colmetric.ExportMetricsServiceRequest // every request received
	spans   []*coltrace.ExportTraceServiceRequest
}

func newReceiver(tb testing.TB) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	tb.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var msg, resp proto.Message
	switch req.URL.Path {
	case "/v1/metrics":
		m := &colmetric.ExportMetricsServiceRequest{}
		msg, resp = m, &colmetric.ExportMetricsServiceResponse{}
		r.metrics = append(r.metrics, m)
	case "/v1/traces":
		m := &coltrace.ExportTraceServiceRequest{}
		msg, resp = m, &coltrace.ExportTraceServiceResponse{}
		r.spans = append(r.spans, m)
	default:
		http.NotFound(w, req)
		return
	}
	if err := proto.Unmarshal(body, msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out, _ := proto.Marshal(resp)
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// exporters are the OTLP exporters pointed at a receiver, without retries,
// so that a refused export fails at once.
type exporters struct {
	metrics *otlpmetrichttp.Exporter
	spans   *otlptrace.Exporter
}

func newExporters(tb testing.TB, r *receiver) exporters {
	ctx := context.Background()
	m, err := otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpointURL(r.srv.URL+"/v1/metrics"),
		otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false}))
	if err != nil {
		tb.Fatal(err)
	}
	s, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(r.srv.URL+"/v1/traces"),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = m.Shutdown(ctx)
		_ = s.Shutdown(ctx)
	})
	return exporters{metrics: m, spans: s}
}

// pipeline is one process's telemetry: a meter provider read both by a
// manual reader (for OTLP) and by the Prometheus exporter, and a tracer
// provider whose spans are recorded.
type pipeline struct {
	reader   *sdkmetric.ManualReader
	mp       *sdkmetric.MeterProvider
	registry *prometheus.Registry
	spans    *tracetest.SpanRecorder
	tp       *sdktrace.TracerProvider
}

func newPipeline(tb testing.TB) *pipeline {
	p := &pipeline{reader: sdkmetric.NewManualReader(), registry: prometheus.NewRegistry(), spans: tracetest.NewSpanRecorder()}
	prom, err := promexporter.New(promexporter.WithRegisterer(p.registry))
	if err != nil {
		tb.Fatal(err)
	}
	p.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.reader), sdkmetric.WithReader(prom))
	p.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.spans))
	tb.Cleanup(func() {
		_ = p.mp.Shutdown(context.Background())
		_ = p.tp.Shutdown(context.Background())
	})
	return p
}

// scrape serves one Prometheus scrape as the exporter's users do
// (promhttp's default: an error fails the scrape with 500).
func (p *pipeline) scrape() (int, string) {
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(p.registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return rec.Code, rec.Body.String()
}

// export sends what the pipeline holds through both OTLP exporters.
func (p *pipeline) export(ctx context.Context, e exporters) error {
	var rm metricdata.ResourceMetrics
	if err := p.reader.Collect(ctx, &rm); err != nil {
		return err
	}
	var errs []error
	if err := e.metrics.Export(ctx, &rm); err != nil {
		errs = append(errs, err)
	}
	if spans := p.spans.Ended(); len(spans) > 0 {
		if err := e.spans.ExportSpans(ctx, spans); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// inputs are the values of every attribute-bearing field a caller or a store
// controls, and the numbers and times of an agent's usage.
type inputs struct {
	workflowType, activityType, namespace, attribute, errorType, errorMessage string
	usage                                                                     usageInputs
}

// usageInputs are the counts and times an agent reports for a model call.
type usageInputs struct {
	input, output, cacheRead, cacheCreation, reasoning uint64
	startedAt, firstChunkAt                            int64 // Unix nanoseconds, 0: unset
}

// drive runs one workflow through decorators built from in: a start, an
// activity dispatched and completed, a failing read (the store's message,
// classified by in.errorType), and a failing keyspace call.
func drive(tb testing.TB, p *pipeline, in inputs) {
	ctx, tok := context.Background(), eventstore.RecorderToken()
	storeErr := errors.New(in.errorMessage)
	classify := func(error) string { return in.errorType }
	s, err := otelstore.New(failingStore{eventstore.NewMemory(), storeErr},
		otelstore.WithMeterProvider(p.mp), otelstore.WithTracerProvider(p.tp),
		otelstore.WithNamespace(in.namespace),
		otelstore.WithAttributes(attribute.String("deployment", in.attribute), attribute.StringSlice("tags", []string{in.attribute})),
		otelstore.WithErrorClassifier(classify))
	if err != nil {
		tb.Fatal(err)
	}
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	env := eventstore.Envelope{RunID: run, RecordedAt: time.Unix(1, 0)}
	events := []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: env, WorkflowType: in.workflowType},
		eventstore.ActivityScheduled{Envelope: env, ActivityID: 0, ActivityType: in.activityType},
		eventstore.ActivityCompleted{Envelope: env, ActivityID: 0},
		eventstore.ActivityScheduled{Envelope: env, ActivityID: 1, ActivityType: in.activityType},
		// Closes the run: the timeline's run span and the abandoned
		// activity's span are exported too.
		eventstore.WorkflowFailed{Envelope: env, Message: in.errorMessage},
	}
	if err := s.Append(ctx, tok, wf, events, 0); err != nil {
		tb.Fatal(err)
	}
	if _, err := s.ReadHistory(ctx, wf); err == nil {
		tb.Fatal("the failing store did not fail")
	}
	ks, err := otelstore.NewKeyspace(failingKeyspace{keyspace.NewMemory(), storeErr},
		otelstore.WithMeterProvider(p.mp), otelstore.WithTracerProvider(p.tp),
		otelstore.WithAttributes(attribute.String("deployment", in.attribute)),
		otelstore.WithErrorClassifier(classify))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := ks.Head(ctx, keyspace.StreamKey{WorkflowID: wf, RunID: run}); err == nil {
		tb.Fatal("the failing keyspace did not fail")
	}
	// GenAI telemetry of a transcript: the same hostile values as tool,
	// provider, model and operation names.
	agents, err := otelstore.NewKeyspace(keyspace.NewMemory(),
		otelstore.WithMeterProvider(p.mp), otelstore.WithTracerProvider(p.tp),
		otelstore.WithNamespace(in.namespace), otelstore.WithContentCapture(true))
	if err != nil {
		tb.Fatal(err)
	}
	u := in.usage
	unix := func(ns int64) time.Time {
		if ns == 0 {
			return time.Time{}
		}
		return time.Unix(0, ns)
	}
	turn := []keyspace.Content{
		keyspace.ToolCall{CallID: in.attribute, Name: in.workflowType, Arguments: in.errorMessage},
		keyspace.ToolResult{CallID: in.attribute, IsError: true, Output: in.errorMessage},
		keyspace.Usage{InputTokens: 3, OutputTokens: 1, Provider: in.namespace, RequestModel: in.activityType,
			ResponseModel: in.attribute, Operation: in.errorType},
		// The agent's own numbers and times, hostile ones included (-1
		// written as "unknown" is math.MaxUint64), then a plausible call:
		// its points must stay valid after the hostile one.
		keyspace.Usage{InputTokens: u.input, OutputTokens: u.output, CacheReadInputTokens: u.cacheRead,
			CacheCreationInputTokens: u.cacheCreation, ReasoningOutputTokens: u.reasoning, Provider: in.namespace,
			RequestModel: in.activityType, StartedAt: unix(u.startedAt), FirstChunkAt: unix(u.firstChunkAt)},
		keyspace.Usage{InputTokens: 3, OutputTokens: 1, CacheReadInputTokens: 1, ReasoningOutputTokens: 1, Provider: in.namespace,
			RequestModel: in.activityType, StartedAt: time.Unix(1, 0)},
		keyspace.Status{State: "completed", Detail: in.errorMessage},
	}
	batch := make([]keyspace.ActivityEvent, len(turn))
	for i, c := range turn {
		batch[i] = keyspace.ActivityEvent{WorkflowID: wf, RunID: run, Attempt: 1, WorkerSeq: uint64(i + 1),
			AgentID: in.attribute, AgentRole: in.workflowType, EmittedAt: time.Unix(int64(i+1), 0), Content: c}
	}
	if _, err := agents.AppendEvents(ctx, 0, batch); err != nil {
		tb.Fatal(err)
	}
}

// checkSums fails unless every sum the pipeline holds (counters and
// histogram sums, in the OTLP requests the receiver decoded and in a
// Prometheus scrape) is at least 0: an implausible token count must not
// make one negative, then or later.
func checkSums(tb testing.TB, r *receiver, scrape string) {
	tb.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, req := range r.metrics {
		for _, rm := range req.GetResourceMetrics() {
			for _, sm := range rm.GetScopeMetrics() {
				for _, m := range sm.GetMetrics() {
					for _, dp := range m.GetSum().GetDataPoints() {
						if dp.GetAsInt() < 0 || dp.GetAsDouble() < 0 {
							tb.Fatalf("OTLP %s: a negative sum %v", m.GetName(), dp)
						}
					}
					for _, dp := range m.GetHistogram().GetDataPoints() {
						if dp.GetSum() < 0 {
							tb.Fatalf("OTLP %s: a negative histogram sum %v", m.GetName(), dp.GetSum())
						}
					}
				}
			}
		}
	}
	for line := range strings.Lines(scrape) {
		if strings.HasPrefix(line, "#") || !strings.HasPrefix(line, "gen_ai") && !strings.HasPrefix(line, "aion_gen_ai") {
			continue
		}
		// "name{labels} value": the exporter writes no timestamps, and a
		// label value may hold spaces, so the value is the last field.
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		if value := fields[len(fields)-1]; strings.HasPrefix(value, "-") {
			tb.Fatalf("scrape: a negative value: %s", line)
		}
	}
}

type failingStore struct {
	eventstore.Store
	err error
}

func (f failingStore) ReadHistory(context.Context, eventstore.WorkflowID) ([]eventstore.Event, error) {
	return nil, f.err
}

type failingKeyspace struct {
	keyspace.Store
	err error
}

func (f failingKeyspace) Head(context.Context, keyspace.StreamKey) (uint64, error) { return 0, f.err }

var clean = inputs{"checkout", "charge", "payments", "eu-1", "throttled", "backend unavailable",
	usageInputs{1200, 300, 800, 100, 50, 1_000_000_000, 1_500_000_000}}

// Regression (issue 12.1): after a hostile workflow type, a Prometheus
// scrape still returns 200 with every other series, and OTLP exports to an
// in-process receiver still succeed, then and at the next export.
func TestHostileWorkflowTypeKeepsExportWorking(t *testing.T) {
	r := newReceiver(t)
	e := newExporters(t, r)
	p := newPipeline(t)
	drive(t, p, clean)
	hostile := clean
	hostile.workflowType = "bad\xff\xfe"
	drive(t, p, hostile)
	ctx := context.Background()
	for round := range 2 { // the cumulative state keeps every series: export twice
		code, body := p.scrape()
		if code != http.StatusOK {
			t.Fatalf("scrape %d: HTTP %d: %.300s", round, code, body)
		}
		for _, series := range []string{
			`aion_workflows_started_total{aion_namespace="payments",aion_workflow_type="checkout"`,
			`aion_workflows_started_total{aion_namespace="payments",aion_workflow_type="bad` + "\uFFFD" + `"`,
			`aion_activities_completed_total{aion_activity_outcome="succeeded",aion_activity_type="charge",aion_namespace="payments"`,
			`aion_store_operation_duration_seconds_count{aion_namespace="payments",db_operation_name="read_history",db_system_name="aion.eventstore",deployment="eu-1",error_type="throttled"`,
		} {
			if !strings.Contains(body, series) {
				t.Errorf("scrape %d has no series %s", round, series)
			}
		}
		if err := p.export(ctx, e); err != nil {
			t.Fatalf("OTLP export %d: %v", round, err)
		}
		checkSums(t, r, body)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.metrics) != 2 || len(r.spans) != 2 {
		t.Fatalf("the receiver decoded %d metric and %d span requests, want 2 and 2", len(r.metrics), len(r.spans))
	}
}

// The checks above can fail: a value the library did not clean, recorded
// straight on the SDK, breaks both the scrape and the OTLP export.
func TestUncleanValueBreaksExport(t *testing.T) {
	r := newReceiver(t)
	e := newExporters(t, r)
	p := newPipeline(t)
	c, err := p.mp.Meter("raw").Int64Counter("raw.counter")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(context.Background(), 1, metric.WithAttributes(attribute.String("k", "bad\xff")))
	if code, _ := p.scrape(); code == http.StatusOK {
		t.Error("a scrape with an invalid UTF-8 label value succeeded")
	}
	if err := p.export(context.Background(), e); err == nil {
		t.Error("an OTLP export with an invalid UTF-8 attribute value succeeded")
	}
}

// FuzzExport feeds arbitrary bytes into every attribute-bearing field
// (workflow type, activity type, namespace, WithAttributes values,
// classifier results, error messages of a failing inner store, agent,
// tool, model and provider names) and arbitrary numbers and times into an
// agent's usage (token counts past 2^63, times before 1970 or far ahead, a
// first chunk before the start): whatever arrives, the metrics and spans
// encode as OTLP protobuf that decodes, a Prometheus scrape succeeds, and
// no sum is negative.
func FuzzExport(f *testing.F) {
	most := uint64(math.MaxUint64)
	seeds := []inputs{
		clean,
		{"bad\xff\xfe", "\xc0\x80", "ns\xff", "\x00\xfe", "kind\xff", "store said \xff\xfe",
			usageInputs{most, most, most, most, most, -1, math.MinInt64}},
		{strings.Repeat("é", 300), strings.Repeat("\xff", 1000), "", "", "", "",
			usageInputs{1 << 63, 1<<63 - 1, 1 << 32, 1<<32 + 1, 0, math.MaxInt64, 1}},
		{"_other", "_unknown", "default", "\u2028", "_OTHER", strings.Repeat("x", 10_000),
			usageInputs{10, 5, 20, 30, 40, 2_000_000_000, 1_000_000_000}},
	}
	for _, s := range seeds {
		u := s.usage
		f.Add(s.workflowType, s.activityType, s.namespace, s.attribute, s.errorType, s.errorMessage,
			u.input, u.output, u.cacheRead, u.cacheCreation, u.reasoning, u.startedAt, u.firstChunkAt)
	}
	r := newReceiver(f)
	e := newExporters(f, r)
	f.Fuzz(func(t *testing.T, workflowType, activityType, namespace, attr, errorType, errorMessage string,
		input, output, cacheRead, cacheCreation, reasoning uint64, startedAt, firstChunkAt int64) {
		p := newPipeline(t)
		drive(t, p, inputs{workflowType, activityType, namespace, attr, errorType, errorMessage,
			usageInputs{input, output, cacheRead, cacheCreation, reasoning, startedAt, firstChunkAt}})
		for round := range 2 { // cumulative: the later export must hold too
			code, body := p.scrape()
			if code != http.StatusOK {
				t.Fatalf("scrape %d: HTTP %d: %.300s", round, code, body)
			}
			if err := p.export(context.Background(), e); err != nil {
				t.Fatalf("OTLP export %d: %v", round, err)
			}
			checkSums(t, r, body)
		}
	})
}
