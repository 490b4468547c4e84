package sim

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

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
}

// observed is what a collection says, per instrument: the sum of its
// points (counts for histograms), and the values seen per attribute key.
type observed struct {
	total  map[string]float64
	values map[string]map[string]bool // "instrument attr" -> values
}

func collect(t *testing.T, reader *sdkmetric.ManualReader) observed {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	o := observed{total: map[string]float64{}, values: map[string]map[string]bool{}}
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
		cfg.MeterProvider, cfg.TracerProvider = mp, tp
		srv, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), d)
		defer cancel()
		srv.Run(ctx)
		o, stats, spans = collect(t, reader), srv.Stats(), rec.Ended()
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
}

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
