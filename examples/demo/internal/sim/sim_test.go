package sim

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/keyspace/boltstore"
)

// catalog is every instrument of the telemetry catalog.
var catalog = []string{
	"aion.store.operation.duration", "aion.workflows.started", "aion.workflows.completed",
	"aion.workflows.reopened", "aion.signals.delivered", "aion.schedules.fired",
	"aion.activities.dispatched", "aion.inflight_activities", "aion.activities.completed",
	"aion.activity.duration", "aion.activities.retried", "aion.activity.pairing.evicted",
	"aion.keyspace.operation.duration", "aion.keyspace.append.batch_size",
	"aion.workflow.duration", "aion.activity.oldest_inflight_age",
	"aion.activity.wait.duration", "aion.activity.oldest_waiting_age",
	"gen_ai.client.token.usage", "aion.gen_ai.tool.calls", "gen_ai.client.operation.duration",
	"gen_ai.client.operation.time_to_first_chunk", "gen_ai.execute_tool.duration", "gen_ai.invoke_agent.duration",
	"gen_ai.client.inference.usage.cache_read.input_tokens", "gen_ai.client.inference.usage.cache_write.input_tokens",
	"gen_ai.client.inference.usage.reasoning.output_tokens",
}

// tokenCounters are the counters of the token breakdowns, by the type the
// demo prints for them.
var tokenCounters = map[string]string{
	"gen_ai.client.inference.usage.cache_read.input_tokens":  "cache_read",
	"gen_ai.client.inference.usage.cache_write.input_tokens": "cache_creation",
	"gen_ai.client.inference.usage.reasoning.output_tokens":  "reasoning",
}

// observed is what a collection says, per instrument: the sum of its
// points (counts for histograms), and the values seen per attribute key.
type observed struct {
	total  map[string]float64
	values map[string]map[string]bool // "instrument attr" -> values
	// tokens sums gen_ai.client.token.usage and the breakdown counters by
	// request model and type.
	tokens map[TokenKey]float64
	// committed is what the server counted (Server.Tokens); logs the log
	// records emitted.
	committed []TokenTotal
	logs      int
}

func collect(t *testing.T, reader *sdkmetric.ManualReader) observed {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	o := observed{total: map[string]float64{}, values: map[string]map[string]bool{}, tokens: map[TokenKey]float64{}}
	note := func(name string, attrs attribute.Set, v float64) {
		o.total[name] += v
		for _, kv := range attrs.ToSlice() {
			k := name + " " + string(kv.Key)
			if o.values[k] == nil {
				o.values[k] = map[string]bool{}
			}
			o.values[k][kv.Value.String()] = true
		}
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					note(m.Name, p.Attributes, float64(p.Value))
					if typ, ok := tokenCounters[m.Name]; ok {
						model, _ := p.Attributes.Value("gen_ai.request.model")
						o.tokens[TokenKey{model.AsString(), typ}] += float64(p.Value)
					}
				}
			case metricdata.Sum[float64]:
				for _, p := range d.DataPoints {
					note(m.Name, p.Attributes, p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					note(m.Name, p.Attributes, float64(p.Count))
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					note(m.Name, p.Attributes, float64(p.Count))
					if m.Name == "gen_ai.client.token.usage" {
						model, _ := p.Attributes.Value("gen_ai.request.model")
						typ, _ := p.Attributes.Value("gen_ai.token.type")
						o.tokens[TokenKey{model.AsString(), typ.AsString()}] += float64(p.Sum)
					}
				}
			case metricdata.Gauge[float64]:
				for _, p := range d.DataPoints {
					note(m.Name, p.Attributes, p.Value)
				}
			default:
				t.Errorf("%s: unexpected data %T", m.Name, m.Data)
			}
		}
	}
	return o
}

// runFor runs a server in a synctest bubble for d of fake time and returns
// what its telemetry recorded.
func runFor(t *testing.T, d time.Duration, cfg Config) (observed, map[string]int64, []sdktrace.ReadOnlySpan) {
	t.Helper()
	var o observed
	var stats map[string]int64
	var spans []sdktrace.ReadOnlySpan
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		logs := &countingExporter{}
		lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(logs)))
		cfg.MeterProvider, cfg.TracerProvider, cfg.LoggerProvider = mp, tp, lp
		srv, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), d)
		defer cancel()
		srv.Run(ctx)
		// As the demo does before it shuts its providers down: the
		// histories its decorator still reads in the background.
		if err := srv.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		o, stats, spans = collect(t, reader), srv.Stats(), rec.Ended()
		o.committed, o.logs = srv.Tokens(), int(logs.n.Load())
		if n := logs.untraced.Load(); n > 0 {
			t.Errorf("%d log records in no trace", n)
		}
		// Transcripts are written while their activity is in flight: each
		// record is in a model call's span, under the attempt's
		// invoke_agent span, under the activity's span, unless a small
		// bound evicted it.
		byID := map[trace.SpanID]sdktrace.ReadOnlySpan{}
		for _, s := range spans {
			byID[s.SpanContext().SpanID()] = s
		}
		under := func(id trace.SpanID, names ...string) bool {
			for _, prefix := range names {
				s, ok := byID[id]
				if !ok || !strings.HasPrefix(s.Name(), prefix) {
					return false
				}
				id = s.Parent().SpanID()
			}
			return true
		}
		in := 0
		for _, id := range logs.spanIDs() {
			if under(id, "chat ", "invoke_agent", "activity ") {
				in++
			}
		}
		if cfg.MaxInFlight == 0 && o.logs > 0 && in < o.logs*9/10 {
			t.Errorf("%d of %d log records are in a model call under its agent and activity span, want nearly all", in, o.logs)
		}
	})
	return o, stats, spans
}

// TestRunMovesEveryInstrument runs the simulation for a while and checks
// that every instrument of the catalog moved, with every workflow status
// and activity outcome, real sequence conflicts in both stores, and that no
// activity is left in flight once Run has returned.
func TestRunMovesEveryInstrument(t *testing.T) {
	o, stats, spans := runFor(t, 8*time.Second, Config{Rate: 50, Workers: 150, MaxInFlight: 64, Drain: 500 * time.Millisecond, Retention: time.Second, Seed: 7, RunTimeout: 3 * time.Second})
	for _, name := range catalog {
		if gauge := name == "aion.inflight_activities" || strings.HasPrefix(name, "aion.activity.oldest_"); gauge && o.values[name+" aion.activity.type"] == nil || !gauge && o.total[name] <= 0 {
			t.Errorf("%s did not move", name)
		}
	}
	if got := o.total["aion.inflight_activities"]; got != 0 || len(o.values["aion.inflight_activities aion.activity.type"]) == 0 {
		t.Errorf("aion.inflight_activities after Run: %v over %v, want 0 over some types", got, o.values["aion.inflight_activities aion.activity.type"])
	}
	want := map[string][]string{
		"aion.workflows.completed aion.workflow.status":      {"completed", "failed", "cancelled", "timed_out", "continued_as_new"},
		"aion.activities.completed aion.activity.outcome":    {"succeeded", "failed", "cancelled", "timed_out", "abandoned"},
		"aion.store.operation.duration error.type":           {"sequence_conflict"},
		"aion.keyspace.operation.duration error.type":        {"sequence_conflict"},
		"aion.store.operation.duration db.operation.name":    {"append_with_outbox", "read_history", "claim_outbox_rows", "schedule_timer", "expired_timers", "retire_timer", "settle_workflow_outbox_rows_cancelled"},
		"aion.keyspace.operation.duration db.operation.name": {"append_events", "read_from"},
	}
	for key, values := range want {
		for _, v := range values {
			if !o.values[key][v] {
				t.Errorf("%s: no %q in %v", key, v, o.values[key])
			}
		}
	}
	for _, name := range []string{"workflows.pruned", "outbox.wakes", "store.conflicts", "signals.dropped", "transcript.redelivered", "timers.fired"} {
		if stats[name] == 0 {
			t.Errorf("stat %s is 0: %v", name, stats)
		}
	}
	if stats["activities.running"] != 0 || stats["transcript.errors"] != 0 {
		t.Errorf("stats after Run: %v", stats)
	}
	kinds := map[string]int{}
	for _, s := range spans {
		kinds[strings.Fields(s.Name())[0]]++
	}
	for _, k := range []string{"append_with_outbox", "workflow", "activity"} {
		if kinds[k] == 0 {
			t.Errorf("no %q span among %v", k, kinds)
		}
	}
	checkGenAI(t, o, stats, spans)
}

// checkGenAI checks the GenAI telemetry of a run: token usage by three
// models and every type, summing to exactly what the server committed,
// caching and reasoning models, failed tool calls, one log record per model
// call, and every transcript an invoke_agent span with its model calls and
// tool executions as children.
func checkGenAI(t *testing.T, o observed, stats map[string]int64, spans []sdktrace.ReadOnlySpan) {
	t.Helper()
	want := map[string][]string{
		"gen_ai.client.token.usage gen_ai.request.model":                             {"gpt-4o", "claude-sonnet-4", "gemini-2.5-flash"},
		"gen_ai.client.token.usage gen_ai.token.type":                                {"input", "output"},
		"gen_ai.client.token.usage gen_ai.provider.name":                             {"openai", "anthropic", "gcp.gemini"},
		"gen_ai.client.inference.usage.reasoning.output_tokens gen_ai.request.model": {"claude-sonnet-4", "gemini-2.5-flash"},
		"aion.gen_ai.tool.calls error.type":                                          {"_OTHER"},
		"aion.gen_ai.tool.calls gen_ai.tool.name":                                    {"lookup_account", "search_orders", "send_email"},
		"gen_ai.execute_tool.duration gen_ai.tool.name":                              {"lookup_account", "search_orders", "send_email"},
	}
	for key, values := range want {
		for _, v := range values {
			if !o.values[key][v] {
				t.Errorf("%s: no %q in %v", key, v, o.values[key])
			}
		}
	}
	if len(o.committed) != 3*len(TokenTypes) || len(o.tokens) != 3*len(TokenTypes) {
		t.Errorf("committed token totals %v, metric sums %v: want 3 models x %d types", o.committed, o.tokens, len(TokenTypes))
	}
	nonZero := map[string]bool{}
	for _, c := range o.committed {
		if got := o.tokens[c.TokenKey]; got != float64(c.Total) {
			t.Errorf("token series %v sums to %v, the server committed %d", c.TokenKey, got, c.Total)
		}
		if c.Total > 0 {
			nonZero[c.Type] = true
		}
	}
	for _, typ := range TokenTypes {
		if !nonZero[typ] {
			t.Errorf("no model reported %s tokens: %v", typ, o.committed)
		}
	}
	// One record per model call: three per committed transcript.
	calls := 0
	for _, s := range spans {
		if strings.HasPrefix(s.Name(), "chat ") {
			calls++
		}
	}
	if o.logs != calls || o.logs == 0 {
		t.Errorf("%d log records for %d model calls", o.logs, calls)
	}
	if stats["transcript.tool_errors"] == 0 {
		t.Errorf("no failed tool call: %v", stats)
	}
	agents, children := map[trace.SpanID]int{}, 0
	for _, s := range spans {
		if s.Name() == "invoke_agent" {
			agents[s.SpanContext().SpanID()] = 0
		}
	}
	for _, s := range spans {
		if n := s.Name(); strings.HasPrefix(n, "chat ") || strings.HasPrefix(n, "execute_tool ") {
			if _, ok := agents[s.Parent().SpanID()]; ok {
				agents[s.Parent().SpanID()]++
				children++
			}
		}
	}
	if len(agents) == 0 || children < len(agents)*6*9/10 {
		t.Errorf("%d invoke_agent spans with %d model-call and tool children, want 6 each", len(agents), children)
	}
}

// countingExporter counts the log records exported, and those outside any
// trace.
type countingExporter struct {
	n, untraced atomic.Int64
	mu          sync.Mutex
	spans       []trace.SpanID
}

func (c *countingExporter) spanIDs() []trace.SpanID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spans
}

func (c *countingExporter) Export(_ context.Context, recs []sdklog.Record) error {
	c.n.Add(int64(len(recs)))
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range recs {
		c.spans = append(c.spans, r.SpanID())
		if !r.TraceID().IsValid() {
			c.untraced.Add(1)
		}
	}
	return nil
}
func (c *countingExporter) Shutdown(context.Context) error   { return nil }
func (c *countingExporter) ForceFlush(context.Context) error { return nil }

// TestRunWithBoltKeyspace runs the simulation with its transcripts in a
// bbolt file, which keeps them after the run.
func TestRunWithBoltKeyspace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	keys, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	o, stats, _ := runFor(t, 2*time.Second, Config{Keyspace: keys, Rate: 20, Drain: 200 * time.Millisecond})
	if err := keys.Close(); err != nil {
		t.Fatal(err)
	}
	if stats["transcript.events"] == 0 || stats["transcript.errors"] != 0 || o.total["aion.keyspace.append.batch_size"] == 0 {
		t.Fatalf("transcripts: stats %v, batches %v", stats, o.total["aion.keyspace.append.batch_size"])
	}
}

// TestRetentionBoundsTheStores runs the simulation for minutes of fake time
// and checks that the event store holds only the workflows of the last few
// seconds (closed ones are pruned after the retention), so memory levels
// off instead of growing with every workflow ever started.
func TestRetentionBoundsTheStores(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
		srv, err := New(Config{MeterProvider: mp, TracerProvider: sdktrace.NewTracerProvider(), Rate: 20, Retention: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); srv.Run(ctx) }()
		defer func() { cancel(); <-done }()
		// At most the rate times (retention + a run's lifetime + a pruning
		// period), with room to spare: 20/s * (5s + 3 * 3s + 1.25s).
		const bound = 400
		for minute := 1; minute <= 2; minute++ {
			time.Sleep(time.Minute)
			ids, err := srv.mem.ListWorkflowIDs(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(ids) > bound {
				t.Errorf("after %d min the store holds %d workflows, want at most %d", minute, len(ids), bound)
			}
		}
		if srv.Stats()["workflows.pruned"] < 1200 {
			t.Errorf("pruned %d workflows in 2 min at 20/s", srv.Stats()["workflows.pruned"])
		}
	})
}

// TestTimelineSpansLinkTheirCalls runs the simulation with the tracker's
// default bound (nothing evicted) and checks that every run span links the
// calls that wrote its start and its close, and every activity span the
// calls that wrote its dispatch and its settlement: exactly one link of
// each role, whatever order the server's concurrent appends returned in.
func TestTimelineSpansLinkTheirCalls(t *testing.T) {
	_, _, spans := runFor(t, 20*time.Second, Config{Rate: 20, Workers: 150, Drain: 2 * time.Second, Seed: 11, RunTimeout: 10 * time.Second})
	roles := map[string][]string{"workflow": {"started", "closed"}, "activity": {"scheduled", "settled"}}
	checked := map[string]int{}
	for _, s := range spans {
		kind := strings.Fields(s.Name())[0]
		want, ok := roles[kind]
		if !ok {
			continue
		}
		checked[kind]++
		got := map[string]int{}
		for _, l := range s.Links() {
			for _, kv := range l.Attributes {
				if kv.Key == "aion.timeline.link" {
					got[kv.Value.AsString()]++
				}
			}
		}
		for _, role := range want {
			if got[role] != 1 {
				t.Errorf("%s: %d %s links (all: %v), want one", s.Name(), got[role], role, got)
			}
		}
	}
	if checked["workflow"] < 100 || checked["activity"] < 500 {
		t.Errorf("checked %v spans, want at least 100 run and 500 activity spans", checked)
	}
	t.Logf("checked the links of %v spans", checked)
}
