package otelworkflows_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/core"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/instrumentation/github.com/cschleiden/go-workflows/otelworkflows"
	"github.com/aionotel/aionotel/pairing"
)

// startTask completes the first workflow task of the instance (i, e) of
// type W through b: a WorkflowExecutionStarted at sequence 1, an
// ActivityScheduled of type A at 2.
func startTask(t *testing.T, b backend.Backend) {
	t.Helper()
	ev := history.NewPendingEvent(timeZero, history.EventType_WorkflowExecutionStarted, &history.ExecutionStartedAttributes{Name: "W"})
	ev.SequenceID = 1
	act := history.NewPendingEvent(timeZero, history.EventType_ActivityScheduled, &history.ActivityScheduledAttributes{Name: "A"}, history.ScheduleEventID(2))
	act.SequenceID = 2
	task := &backend.WorkflowTask{WorkflowInstance: core.NewWorkflowInstance("i", "e")}
	if err := b.CompleteWorkflowTask(context.Background(), task, core.WorkflowInstanceStateActive, []*history.Event{ev, act}, []*history.Event{act}, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// handled collects what reaches otel.Handle while the test runs.
func handled(t *testing.T) func() []string {
	var mu sync.Mutex
	var got []string
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		got = append(got, err.Error())
		mu.Unlock()
	}))
	t.Cleanup(func() { otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) {})) })
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

// TestNilPointerOptionsAndBackend: a nil pointer in a provider option is
// "given nil" (the global provider), and a nil pointer as the backend is a
// nil backend (ErrNilBackend): neither panics, in New or at a call.
func TestNilPointerOptionsAndBackend(t *testing.T) {
	b := otelworkflows.New(&spy{},
		otelworkflows.WithMeterProvider((*sdkmetric.MeterProvider)(nil)),
		otelworkflows.WithTracerProvider((*sdktrace.TracerProvider)(nil)))
	startTask(t, b)

	var none *spy
	nb := otelworkflows.New(none)
	if _, err := nb.GetStats(context.Background()); !errors.Is(err, otelworkflows.ErrNilBackend) {
		t.Errorf("GetStats of a nil *spy backend: %v, want ErrNilBackend", err)
	}
	if err := nb.Close(); !errors.Is(err, otelworkflows.ErrNilBackend) {
		t.Errorf("Close of a nil *spy backend: %v, want ErrNilBackend", err)
	}
}

// TestAttributesNeverReplaceOwnKeys: WithAttributes cannot replace the
// namespace, the operation, the error type or any other key the decorator
// and its tracker set (each such key is dropped and reported), and the
// attributes it keeps reach every instrument, the tracker's included.
func TestAttributesNeverReplaceOwnKeys(t *testing.T) {
	reports := handled(t)
	reader := sdkmetric.NewManualReader()
	rec := tracetest.NewSpanRecorder()
	b := otelworkflows.New(&spy{},
		otelworkflows.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		otelworkflows.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))),
		otelworkflows.WithNamespace("shop"),
		otelworkflows.WithAttributes(attribute.String("aion.namespace", "evil"), attribute.String("db.operation.name", "x"),
			attribute.String("error_type", "y"), attribute.String("db.system.name", "z"), attribute.String("aion.workflow.type", "t"),
			attribute.String("cell", "c1")))
	startTask(t, b)

	if n := len(reports()); n != 5 {
		t.Errorf("%d reports, want one per refused key (5): %q", n, reports())
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, set := range pointSets(m) {
				seen[m.Name] = true
				want := map[string]string{"aion.namespace": "shop", "cell": "c1"}
				for k, v := range want {
					if got, _ := set.Value(attribute.Key(k)); got.AsString() != v {
						t.Errorf("%s point %v: %s %q, want %q", m.Name, set.ToSlice(), k, got.AsString(), v)
					}
				}
				if _, ok := set.Value("error.type"); ok {
					t.Errorf("%s point of a call that succeeded has error.type: %v", m.Name, set.ToSlice())
				}
				if op, ok := set.Value("db.operation.name"); ok && op.AsString() != string(otelworkflows.OpCompleteWorkflowTask) {
					t.Errorf("%s point: db.operation.name %q", m.Name, op.AsString())
				}
			}
		}
	}
	for _, name := range []string{"aion.store.operation.duration", "aion.workflows.started", "aion.inflight_activities", "aion.activities.dispatched"} {
		if !seen[name] {
			t.Errorf("no %s point read (seen %v)", name, seen)
		}
	}
	for _, sp := range rec.Ended() {
		for _, kv := range sp.Attributes() {
			if v := kv.Value.String(); v == "evil" || v == "x" || v == "y" || v == "z" || v == "t" {
				t.Errorf("span %s carries a refused attribute %s=%s", sp.Name(), kv.Key, v)
			}
		}
	}
}

// TestZeroTrackerIsNotShared: WithPairing given a zero pairing.Tracker
// (which records nothing) is reported, and New makes its own tracker.
func TestZeroTrackerIsNotShared(t *testing.T) {
	reports := handled(t)
	reader := sdkmetric.NewManualReader()
	b := otelworkflows.New(&spy{},
		otelworkflows.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		otelworkflows.WithPairing(&pairing.Tracker{}))
	startTask(t, b)
	if r := reports(); len(r) != 1 || !strings.Contains(r[0], "zero pairing.Tracker") {
		t.Errorf("reports %q, want one about the zero tracker", r)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "aion.inflight_activities" {
				return
			}
		}
	}
	t.Error("no aion.inflight_activities: the activity went to the zero tracker")
}

func pointSets(m metricdata.Metrics) []attribute.Set {
	var sets []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			sets = append(sets, dp.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, dp := range d.DataPoints {
			sets = append(sets, dp.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, dp := range d.DataPoints {
			sets = append(sets, dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			sets = append(sets, dp.Attributes)
		}
	}
	return sets
}

// TestClaimAfterRestartRecordsNoWait: an activity scheduled by one process
// and claimed by the next (a new decorator) is in the second's gauge, from
// the history read at the claim, and records no wait there, as the package
// doc says.
func TestClaimAfterRestartRecordsNoWait(t *testing.T) {
	started := history.NewPendingEvent(timeZero, history.EventType_WorkflowExecutionStarted, &history.ExecutionStartedAttributes{Name: "W"})
	started.SequenceID = 1
	sched := history.NewPendingEvent(timeZero, history.EventType_ActivityScheduled, &history.ActivityScheduledAttributes{Name: "A"}, history.ScheduleEventID(2))
	sched.SequenceID = 2
	wi := core.NewWorkflowInstance("i", "e")
	s := &spy{hist: []*history.Event{started, sched}, actTask: &backend.ActivityTask{WorkflowInstance: wi, Event: sched}}
	reader := sdkmetric.NewManualReader()
	b := otelworkflows.New(s, otelworkflows.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if _, err := b.GetActivityTask(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if err := otelworkflows.Flush(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var inflight int64 = -1
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "aion.activity.wait.duration":
				t.Errorf("a wait was recorded for an activity dispatched before the restart: %v", m.Data)
			case "aion.inflight_activities":
				inflight = sumBy(m, nil)[""]
			}
		}
	}
	if inflight != 1 {
		t.Errorf("aion.inflight_activities %d, want 1 (the activity read back)", inflight)
	}
}
