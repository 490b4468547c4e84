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
	"gen_ai.client.token.usage", "aion.gen_ai.tool.calls", "gen_ai.client.operation.duration",
}

// observed is what a collection says, per instrument: the sum of its
// points (counts for histograms), and the values seen per attribute key.
type observed struct {
	total  map[string]float64
	values map[string]map[string]bool // "instrument attr" -> values
	// tokens sums gen_ai.client.token.usage by request model and type.
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
		o, stats, spans = collect(t, reader), srv.Stats(), rec.Ended()
		o.committed, o.logs = srv.Tokens(), int(logs.n.Load())
		if n := logs.untraced.Load(); n > 0 {
			t.Errorf("%d log records in no trace", n)
		}
		// Transcripts are written while their activity is in flight: their
		// records are in the activity's span, unless a small bound evicted
		// it.
		activitySpans := map[trace.SpanID]bool{}
		for _, s := range spans {
			if strings.HasPrefix(s.Name(), "activity ") {
				activitySpans[s.SpanContext().SpanID()] = true
			}
		}
		in := 0
		for _, id := range logs.spanIDs() {
			if activitySpans[id] {
				in++
			}
		}
		if cfg.MaxInFlight == 0 && o.logs > 0 && in < o.logs*9/10 {
			t.Errorf("%d of %d log records are in an activity span, want nearly all", in, o.logs)
		}
	})
	return o, stats, spans
}

// TestRunMovesEveryInstrument runs the simulation for a while and checks
// that every instrument of the catalog moved, with every workflow status
// and activity outcome, real sequence conflicts in both stores, and that no
// activity is left in flight once Run has returned.
func TestRunMovesEveryInstrument(t *testing.T) {
	o, stats, spans := runFor(t, 8*time.Second, Config{Rate: 50, MaxInFlight: 64, Drain: 500 * time.Millisecond, Retention: time.Second, Seed: 7})
	for _, name := range catalog {
		if name != "aion.inflight_activities" && name != "aion.activity.oldest_inflight_age" && o.total[name] <= 0 {
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
	checkGenAI(t, o, stats)
}

// checkGenAI checks the GenAI telemetry of a run: token usage by three
// models and both types, summing to exactly what the server committed,
// failed tool calls, and log records.
func checkGenAI(t *testing.T, o observed, stats map[string]int64) {
	t.Helper()
	want := map[string][]string{
		"gen_ai.client.token.usage gen_ai.request.model": {"gpt-4o", "claude-sonnet-4", "gemini-2.5-flash"},
		"gen_ai.client.token.usage gen_ai.token.type":    {"input", "output"},
		"gen_ai.client.token.usage gen_ai.provider.name": {"openai", "anthropic", "gcp.gemini"},
		"aion.gen_ai.tool.calls error.type":              {"_OTHER"},
		"aion.gen_ai.tool.calls gen_ai.tool.name":        {"lookup_account", "search_orders", "send_email"},
	}
	for key, values := range want {
		for _, v := range values {
			if !o.values[key][v] {
				t.Errorf("%s: no %q in %v", key, v, o.values[key])
			}
		}
	}
	if len(o.committed) != 6 || len(o.tokens) != 6 {
		t.Errorf("committed token totals %v, metric sums %v: want 3 models x 2 types", o.committed, o.tokens)
	}
	for _, c := range o.committed {
		if got := o.tokens[c.TokenKey]; got != float64(c.Total) || c.Total == 0 {
			t.Errorf("gen_ai.client.token.usage %v sums to %v, the server committed %d", c.TokenKey, got, c.Total)
		}
	}
	// One record per committed transcript event, none for the ephemeral
	// statuses.
	if int64(o.logs) != stats["transcript.events"] || o.logs == 0 {
		t.Errorf("%d log records for %d committed transcript events", o.logs, stats["transcript.events"])
	}
	if stats["transcript.tool_errors"] == 0 {
		t.Errorf("no failed tool call: %v", stats)
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
