package otelworkflows_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/client"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/diag"
	"github.com/cschleiden/go-workflows/worker"
	"github.com/cschleiden/go-workflows/workflow"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/instrumentation/github.com/cschleiden/go-workflows/otelworkflows"
	"github.com/aionotel/aionotel/pairing"
)

// A second workload, of what the exactness tests' does not have: signals
// (two per instance, one sent before the instance's first task ran),
// activities in parallel within one task, an activity that panics, and a
// workflow cancelled while its activity runs.

func Quick(ctx context.Context, n int) (int, error) { return n, nil }

func Panicky(ctx context.Context) error { panic("activity panics") }

// slowStarted and slowRelease let the test cancel a workflow while its Slow
// activity runs, and end that activity afterwards.
var (
	slowStarted = make(chan struct{}, 16)
	slowRelease = make(chan struct{})
)

func Slow(ctx context.Context) error {
	slowStarted <- struct{}{}
	<-slowRelease
	return nil
}

func Waiter(ctx workflow.Context) error {
	ch := workflow.NewSignalChannel[int](ctx, "go")
	for range 2 {
		ch.Receive(ctx)
	}
	var fs []workflow.Future[int]
	for i := range 3 {
		fs = append(fs, workflow.ExecuteActivity[int](ctx, workflow.ActivityOptions{}, Quick, i))
	}
	p := workflow.ExecuteActivity[any](ctx, workflow.ActivityOptions{RetryOptions: workflow.RetryOptions{MaxAttempts: 1}}, Panicky)
	for _, f := range fs {
		if _, err := f.Get(ctx); err != nil {
			return err
		}
	}
	_, _ = p.Get(ctx) // its failure is recorded; the workflow goes on
	return nil
}

// Stuck waits for Slow, then an hour: cancelled while Slow runs (go-workflows
// lets the activity finish, since a workflow may not close with a pending
// future), it closes as cancelled at its timer.
func Stuck(ctx workflow.Context) error {
	if _, err := workflow.ExecuteActivity[any](ctx, workflow.ActivityOptions{}, Slow).Get(ctx); err != nil {
		return err
	}
	_, err := workflow.ScheduleTimer(ctx, time.Hour).Get(ctx)
	return err
}

func TestSignalsParallelActivitiesAndPanics(t *testing.T) {
	ctx := context.Background()
	bare := sqlite.NewSqliteBackend(filepath.Join(t.TempDir(), "wf.sqlite"), sqlite.WithBackendOptions(backend.WithStickyTimeout(0)))
	reader, spans := sdkmetric.NewManualReader(), tracetest.NewSpanRecorder()
	b := otelworkflows.New(bare,
		otelworkflows.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		otelworkflows.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans), sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)))))
	defer b.Close()

	wctx, stop := context.WithCancel(ctx)
	w := worker.New(b, nil)
	for _, wf := range []any{Waiter, Stuck} {
		if err := w.RegisterWorkflow(wf); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []any{Quick, Panicky, Slow} {
		if err := w.RegisterActivity(a); err != nil {
			t.Fatal(err)
		}
	}
	c := client.New(b)
	var waiters, stuck []*workflow.Instance
	for i := range 3 {
		wi, err := c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: fmt.Sprintf("waiter-%d", i)}, Waiter)
		if err != nil {
			t.Fatal(err)
		}
		// A signal before any worker runs: it is in the first task.
		if err := c.SignalWorkflow(ctx, wi.InstanceID, "go", 1); err != nil {
			t.Fatal(err)
		}
		waiters = append(waiters, wi)
	}
	for i := range 2 {
		wi, err := c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: fmt.Sprintf("stuck-%d", i)}, Stuck)
		if err != nil {
			t.Fatal(err)
		}
		stuck = append(stuck, wi)
	}
	if err := w.Start(wctx); err != nil {
		t.Fatal(err)
	}
	for _, wi := range waiters {
		if err := c.SignalWorkflow(ctx, wi.InstanceID, "go", 2); err != nil {
			t.Fatal(err)
		}
	}
	for range stuck {
		<-slowStarted
	}
	for _, wi := range stuck {
		if err := c.CancelWorkflowInstance(ctx, wi); err != nil {
			t.Fatal(err)
		}
	}
	close(slowRelease) // the Slow activities complete on cancelled instances
	executions := finishedExecutions(t, ctx, bare, 5)
	stop()
	if err := w.WaitForCompletion(); err != nil {
		t.Fatal(err)
	}
	if err := otelworkflows.Flush(ctx, b); err != nil {
		t.Fatal(err)
	}

	want := historyFigures(t, ctx, bare, executions)
	if want.completed["Slow|succeeded"] != 2 || want.completed["Panicky|failed"] != 3 || want.signals != 6 || want.closed["cancelled"] != 2 {
		t.Fatalf("the workload did not run as designed: %+v", want)
	}
	checkHistoryFigures(t, collectAll(t, reader), want,
		figureRow{"aion.signals.delivered", nil, map[string]int64{"": want.signals}})
	// One run span per execution, and one activity span per activity.
	runs, acts := 0, 0
	for _, sp := range spans.Ended() {
		switch {
		case strings.HasPrefix(sp.Name(), "workflow "):
			runs++
		case strings.HasPrefix(sp.Name(), "activity "):
			acts++
		}
	}
	var dispatched int64
	for _, n := range want.dispatched {
		dispatched += n
	}
	if runs != len(executions) || int64(acts) != dispatched {
		t.Errorf("%d run spans and %d activity spans, want %d and %d", runs, acts, len(executions), dispatched)
	}
}

// finishedExecutions polls the database until n executions exist and all
// have finished.
func finishedExecutions(t *testing.T, ctx context.Context, bare backend.Backend, n int) []*core.WorkflowInstance {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		refs, err := bare.(diag.Backend).GetWorkflowInstances(ctx, "", "", 100)
		if err != nil {
			t.Fatal(err)
		}
		var out []*core.WorkflowInstance
		for _, r := range refs {
			if r.State == core.WorkflowInstanceStateFinished {
				out = append(out, r.Instance)
			}
		}
		if len(out) == n && len(refs) == n {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d executions finished", len(out), len(refs))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// figureRow is a counter or gauge, the attributes its points are summed
// by, and the sums the histories give.
type figureRow struct {
	name string
	keys []string
	want map[string]int64
}

// checkHistoryFigures compares the workflow and activity counters, the
// in-flight gauge, the activity durations and the extra rows with what
// the histories give.
func checkHistoryFigures(t *testing.T, m map[string]metricdata.Metrics, want figures, extra ...figureRow) {
	t.Helper()
	rows := append([]figureRow{
		{"aion.workflows.started", []string{"aion.workflow.type"}, want.started},
		{"aion.workflows.completed", []string{"aion.workflow.status"}, want.closed},
		{"aion.activities.dispatched", []string{"aion.activity.type"}, want.dispatched},
		{"aion.activities.completed", []string{"aion.activity.type", "aion.activity.outcome"}, want.completed},
		{"aion.inflight_activities", []string{"aion.activity.type"}, want.zeroes},
	}, extra...)
	for _, c := range rows {
		if got := sumBy(m[c.name], c.keys); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%s: %v, want the histories' %v", c.name, got, c.want)
		}
	}
	gotDur := durationsBy(m["aion.activity.duration"], "aion.activity.type", "aion.activity.outcome")
	for k, ds := range want.durations {
		var sum float64
		for _, d := range ds {
			sum += d
		}
		if g := gotDur[k]; g.n != uint64(len(ds)) || math.Abs(g.sum-sum) > 1e-6 {
			t.Errorf("aion.activity.duration %s: %d points summing %.6f s, want %d summing %.6f s", k, g.n, g.sum, len(ds), sum)
		}
	}
	if len(gotDur) != len(want.durations) {
		t.Errorf("aion.activity.duration series %v, want %v", gotDur, want.durations)
	}
}

type figures struct {
	started, closed, dispatched, completed, zeroes map[string]int64
	durations                                      map[string][]float64
	signals                                        int64
}

// historyFigures reads what the histories say, through the bare backend.
func historyFigures(t *testing.T, ctx context.Context, bare backend.Backend, executions []*core.WorkflowInstance) figures {
	t.Helper()
	f := figures{started: map[string]int64{}, closed: map[string]int64{}, dispatched: map[string]int64{}, completed: map[string]int64{},
		zeroes: map[string]int64{}, durations: map[string][]float64{}}
	for _, wi := range executions {
		h, err := bare.GetWorkflowInstanceHistory(ctx, wi, nil)
		if err != nil {
			t.Fatal(err)
		}
		type sched struct {
			name string
			at   time.Time
		}
		open := map[int64]sched{}
		settle := func(s sched, outcome string, at time.Time) {
			k := s.name + "|" + outcome
			f.completed[k]++
			f.durations[k] = append(f.durations[k], at.Sub(s.at).Seconds())
		}
		for _, e := range h {
			switch e.Type {
			case history.EventType_WorkflowExecutionStarted:
				f.started[e.Attributes.(*history.ExecutionStartedAttributes).Name]++
			case history.EventType_SignalReceived:
				f.signals++
			case history.EventType_ActivityScheduled:
				name := e.Attributes.(*history.ActivityScheduledAttributes).Name
				f.dispatched[name]++
				f.zeroes[name] = 0
				open[e.ScheduleEventID] = sched{name, e.Timestamp}
			case history.EventType_ActivityCompleted, history.EventType_ActivityFailed:
				outcome := "succeeded"
				if e.Type == history.EventType_ActivityFailed {
					outcome = "failed"
				}
				settle(open[e.ScheduleEventID], outcome, e.Timestamp)
				delete(open, e.ScheduleEventID)
			case history.EventType_WorkflowExecutionFinished:
				status := "completed"
				if a := e.Attributes.(*history.ExecutionCompletedAttributes); a.Error != nil {
					status = "failed"
					if errors.Is(a.Error, workflow.Canceled) || strings.HasSuffix(a.Error.Error(), "context canceled") {
						status = "cancelled"
					}
				}
				f.closed[status]++
				for _, s := range open {
					settle(s, "abandoned", e.Timestamp)
				}
				open = map[int64]sched{}
			}
		}
	}
	return f
}

func collectAll(t *testing.T, r *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func labelOf(set attribute.Set, keys []string) string {
	parts := make([]string, len(keys))
	for i, k := range keys {
		v, _ := set.Value(attribute.Key(k))
		parts[i] = v.AsString()
	}
	return strings.Join(parts, "|")
}

// sumBy sums a counter's or gauge's points by the values of keys.
func sumBy(m metricdata.Metrics, keys []string) map[string]int64 {
	out := map[string]int64{}
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			out[labelOf(dp.Attributes, keys)] += dp.Value
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			out[labelOf(dp.Attributes, keys)] += dp.Value
		}
	}
	return out
}

type hist struct {
	n   uint64
	sum float64
}

func durationsBy(m metricdata.Metrics, k1, k2 string) map[string]hist {
	out := map[string]hist{}
	if d, ok := m.Data.(metricdata.Histogram[float64]); ok {
		for _, dp := range d.DataPoints {
			k := labelOf(dp.Attributes, []string{k1, k2})
			h := out[k]
			h.n += dp.Count
			h.sum += dp.Sum
			out[k] = h
		}
	}
	return out
}
