package otelworkflows

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/client"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/pairing"
)

// process is one program's decorator and what its telemetry recorded.
type process struct {
	b      backend.Backend
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
}

func newProcess(inner backend.Backend) *process {
	p := &process{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.spans), sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)))
	p.b = New(inner, WithMeterProvider(mp), WithTracerProvider(tp))
	return p
}

func sqliteAt(path string) backend.Backend {
	return sqlite.NewSqliteBackend(path, sqlite.WithBackendOptions(
		backend.WithStickyTimeout(0),
		backend.WithWorkflowLockTimeout(5*time.Second),
		backend.WithActivityLockTimeout(5*time.Second)))
}

// TestExactness runs the workload on a real go-workflows worker through the
// decorator and holds every figure to what the histories say.
func TestExactness(t *testing.T) {
	ctx := context.Background()
	bare := sqliteAt(filepath.Join(t.TempDir(), "workflows.sqlite"))
	p := newProcess(bare)
	defer p.b.Close()

	wctx, stop := context.WithCancel(ctx)
	w := newWorker(t, p.b, true, true)
	if err := w.Start(wctx); err != nil {
		t.Fatal(err)
	}
	c := client.New(p.b)
	instances := startWorkload(t, ctx, c)
	cancelWhenWaiting(t, ctx, c, bare, instances["cancel"])
	executions := drain(t, ctx, bare)
	stop()
	if err := w.WaitForCompletion(); err != nil {
		t.Fatal(err)
	}
	if err := Flush(ctx, p.b); err != nil {
		t.Fatal(err)
	}
	tr := readTruth(t, ctx, bare, executions)
	checkWorkloadShape(t, tr)
	checkTelemetry(t, tr, []*process{p})
}

// TestExactnessAcrossRestart runs the workload's first workflow tasks in one
// process (a workflow worker only, so that every instance has an activity
// in flight when it stops), then the rest in a second process with a new
// decorator on the same SQLite file: the telemetry of the two together
// equals the histories, and the second's gauge ends at 0.
func TestExactnessAcrossRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "workflows.sqlite")

	bare1 := sqliteAt(path)
	p1 := newProcess(bare1)
	wctx, stop := context.WithCancel(ctx)
	w1 := newWorker(t, p1.b, true, false)
	if err := w1.Start(wctx); err != nil {
		t.Fatal(err)
	}
	instances := startWorkload(t, ctx, client.New(p1.b))
	total := 0
	for _, l := range instances {
		total += len(l)
	}
	waitFor(t, "every instance's first activity", func() bool {
		s, err := bare1.GetStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := int64(0)
		for _, v := range s.PendingActivityTasks {
			n += v
		}
		return n == int64(total)
	})
	stop()
	if err := w1.WaitForCompletion(); err != nil {
		t.Fatal(err)
	}
	if got := p1.gauge(t); got != int64(total) {
		t.Errorf("first process: %d activities in flight at the restart, want %d", got, total)
	}
	if err := p1.b.Close(); err != nil {
		t.Fatal(err)
	}

	bare2 := sqliteAt(path)
	p2 := newProcess(bare2)
	defer p2.b.Close()
	wctx, stop = context.WithCancel(ctx)
	w2 := newWorker(t, p2.b, true, true)
	if err := w2.Start(wctx); err != nil {
		t.Fatal(err)
	}
	c := client.New(p2.b)
	cancelWhenWaiting(t, ctx, c, bare2, instances["cancel"])
	executions := drain(t, ctx, bare2)
	stop()
	if err := w2.WaitForCompletion(); err != nil {
		t.Fatal(err)
	}
	if err := Flush(ctx, p2.b); err != nil {
		t.Fatal(err)
	}
	tr := readTruth(t, ctx, bare2, executions)
	checkWorkloadShape(t, tr)
	checkTelemetry(t, tr, []*process{p1, p2})
}

// checkWorkloadShape makes sure the workload did what it is for, so that
// the exactness tests cannot pass on an empty run.
func checkWorkloadShape(t *testing.T, tr truth) {
	t.Helper()
	ok, fail, can, cancel := workload["ok"], workload["fail"], workload["can"], workload["cancel"]
	want := map[string]int64{"completed": int64(ok + can + ok + fail), "failed": int64(fail), "continued_as_new": int64(2 * can), "cancelled": int64(cancel)}
	if !mapsEqual(tr.closed, want) {
		t.Fatalf("the histories close %v, want %v", tr.closed, want)
	}
	if tr.retried["Flaky"] != int64(2*(ok+fail)) || tr.retried["Doomed"] != int64(fail) {
		t.Fatalf("the histories retry %v", tr.retried)
	}
}

func mapsEqual[K comparable](a, b map[K]int64) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	for k, v := range b {
		if a[k] != v {
			return false
		}
	}
	return true
}

// gauge sums aion.inflight_activities over its points.
func (p *process) gauge(t *testing.T) int64 {
	t.Helper()
	var n int64
	for _, pt := range collect(t, p.reader, "aion.inflight_activities") {
		n += pt.value
	}
	return n
}

type point struct {
	attrs attribute.Set
	value int64
	hist  metricdata.HistogramDataPoint[float64]
}

func collect(t *testing.T, r *sdkmetric.ManualReader, name string) []point {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var out []point
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{attrs: dp.Attributes, value: dp.Value})
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					out = append(out, point{attrs: dp.Attributes, hist: dp})
				}
			default:
				t.Fatalf("%s: unexpected data %T", name, m.Data)
			}
		}
	}
	return out
}

func attr(s attribute.Set, k string) string {
	v, _ := s.Value(attribute.Key(k))
	return v.AsString()
}

// sums adds a counter's points over the processes, keyed by the listed
// attributes.
func sums(t *testing.T, ps []*process, name string, keys ...string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, p := range ps {
		for _, pt := range collect(t, p.reader, name) {
			var parts []string
			for _, k := range keys {
				parts = append(parts, attr(pt.attrs, k))
			}
			if pt.value != 0 {
				out[strings.Join(parts, "|")] += pt.value
			}
		}
	}
	return out
}

func keyed[K comparable](m map[K]int64, key func(K) string) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		out[key(k)] += v
	}
	return out
}

func pair(k [2]string) string { return k[0] + "|" + k[1] }

func checkCounts(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	if !mapsEqual(got, want) {
		t.Errorf("%s: telemetry %v, histories %v", what, got, want)
	}
}

// checkHistograms holds a duration histogram, merged over the processes,
// to the durations history gives: the count, sum, min and max of each
// series.
func checkHistograms(t *testing.T, ps []*process, name string, k1, k2 string, want map[[2]string][]float64) {
	t.Helper()
	type agg struct {
		count    uint64
		sum      float64
		min, max float64
	}
	got := map[string]*agg{}
	for _, p := range ps {
		for _, pt := range collect(t, p.reader, name) {
			k := attr(pt.attrs, k1) + "|" + attr(pt.attrs, k2)
			a := got[k]
			if a == nil {
				a = &agg{min: math.Inf(1), max: math.Inf(-1)}
				got[k] = a
			}
			a.count += pt.hist.Count
			a.sum += pt.hist.Sum
			if v, ok := pt.hist.Min.Value(); ok {
				a.min = math.Min(a.min, v)
			}
			if v, ok := pt.hist.Max.Value(); ok {
				a.max = math.Max(a.max, v)
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: series %v, histories have %d", name, sortedKeys(got, func(a, b string) bool { return a < b }), len(want))
	}
	const eps = 1e-6
	for k, ds := range want {
		a := got[pair(k)]
		if a == nil {
			t.Errorf("%s %v: no series", name, k)
			continue
		}
		sum, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
		for _, d := range ds {
			sum, lo, hi = sum+d, math.Min(lo, d), math.Max(hi, d)
		}
		if a.count != uint64(len(ds)) || math.Abs(a.sum-sum) > eps || math.Abs(a.min-lo) > eps || math.Abs(a.max-hi) > eps {
			t.Errorf("%s %v: count %d sum %g min %g max %g, histories: count %d sum %g min %g max %g", name, k, a.count, a.sum, a.min, a.max, len(ds), sum, lo, hi)
		}
	}
}

func checkTelemetry(t *testing.T, tr truth, ps []*process) {
	t.Helper()
	last := ps[len(ps)-1]
	id := func(k string) string { return k }
	checkCounts(t, "aion.workflows.started", sums(t, ps, "aion.workflows.started", "aion.workflow.type"), keyed(tr.started, id))
	checkCounts(t, "aion.workflows.completed", sums(t, ps, "aion.workflows.completed", "aion.workflow.status"), keyed(tr.closed, id))
	checkCounts(t, "aion.activities.dispatched", sums(t, ps, "aion.activities.dispatched", "aion.activity.type"), keyed(tr.dispatched, id))
	checkCounts(t, "aion.activities.retried", sums(t, ps, "aion.activities.retried", "aion.activity.type"), keyed(tr.retried, id))
	checkCounts(t, "aion.activities.completed", sums(t, ps, "aion.activities.completed", "aion.activity.type", "aion.activity.outcome"), keyed(tr.completed, pair))
	checkHistograms(t, ps, "aion.activity.duration", "aion.activity.type", "aion.activity.outcome", tr.durations)
	checkHistograms(t, ps, "aion.workflow.duration", "aion.workflow.type", "aion.workflow.status", tr.runDur)
	if g := last.gauge(t); g != 0 {
		t.Errorf("aion.inflight_activities: %d after the drain, want 0", g)
	}
	for _, pt := range collect(t, last.reader, "aion.inflight_activities") {
		if pt.value != 0 {
			t.Errorf("aion.inflight_activities{%s}: %d after the drain, want 0", attr(pt.attrs, "aion.activity.type"), pt.value)
		}
	}
	checkSpans(t, tr, ps)
}

// checkSpans: one run span per execution, at its history's start and close,
// a root; one activity span per activity, at its dispatch and settlement,
// a child of its run's span; nothing else on the timeline.
func checkSpans(t *testing.T, tr truth, ps []*process) {
	t.Helper()
	runs := map[string]trace.SpanContext{}
	var activities []sdktrace.ReadOnlySpan
	for _, p := range ps {
		for _, s := range p.spans.Ended() {
			wf := attrOf(s, "aion.workflow.id")
			switch {
			case strings.HasPrefix(s.Name(), "workflow "):
				want, ok := tr.runs[wf]
				if !ok {
					t.Errorf("run span %q of no finished execution (%s)", s.Name(), wf)
					continue
				}
				if _, dup := runs[wf]; dup {
					t.Errorf("two run spans for execution %s (%v)", wf, tr.instances[wf])
				}
				runs[wf] = s.SpanContext()
				if s.Name() != "workflow "+tr.runType[wf] || !s.StartTime().Equal(want[0]) || !s.EndTime().Equal(want[1]) {
					t.Errorf("run span %q %v..%v, history: %q %v..%v (%v)", s.Name(), s.StartTime(), s.EndTime(), tr.runType[wf], want[0], want[1], tr.instances[wf])
				}
				if s.Parent().IsValid() {
					t.Errorf("run span of %v has a parent", tr.instances[wf])
				}
				if wi := tr.instances[wf]; attrOf(s, "go_workflows.instance.id") != wi.InstanceID || attrOf(s, "go_workflows.execution.id") != wi.ExecutionID {
					t.Errorf("run span of %v: go-workflows IDs %q %q", wi, attrOf(s, "go_workflows.instance.id"), attrOf(s, "go_workflows.execution.id"))
				}
			case strings.HasPrefix(s.Name(), "activity "):
				activities = append(activities, s)
			}
		}
	}
	if len(runs) != len(tr.runs) {
		t.Errorf("%d run spans, %d finished executions", len(runs), len(tr.runs))
	}
	seen := map[string]bool{}
	for _, s := range activities {
		wf := attrOf(s, "aion.workflow.id")
		key := fmt.Sprintf("%s/%s", wf, attrOf(s, "aion.activity.id"))
		want, ok := tr.activities[key]
		if !ok || seen[key] {
			t.Errorf("activity span %q %s: in history %v, seen before %v", s.Name(), key, ok, seen[key])
			continue
		}
		seen[key] = true
		if attrOf(s, "go_workflows.instance.id") != tr.instances[wf].InstanceID {
			t.Errorf("activity span %s: go_workflows.instance.id %q", key, attrOf(s, "go_workflows.instance.id"))
		}
		if !s.StartTime().Equal(want[0]) || !s.EndTime().Equal(want[1]) {
			t.Errorf("activity span %s %v..%v, history %v..%v", key, s.StartTime(), s.EndTime(), want[0], want[1])
		}
		if run, ok := runs[wf]; !ok || s.Parent().SpanID() != run.SpanID() || s.SpanContext().TraceID() != run.TraceID() {
			t.Errorf("activity span %s is not under its run's span", key)
		}
	}
	if len(seen) != len(tr.activities) {
		t.Errorf("%d activity spans, histories have %d activities", len(seen), len(tr.activities))
	}
}

func attrOf(s sdktrace.ReadOnlySpan, k string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == k {
			return kv.Value.String()
		}
	}
	return ""
}
