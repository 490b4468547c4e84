package main

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// process is one life of the quickstart's set-up: its providers (a manual
// reader and a span recorder in place of the stdout exporters) and the
// store wrapped as the front page wraps it.
type process struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	store  eventstore.Store
}

func start(t *testing.T, inner eventstore.Store) *process {
	t.Helper()
	p := &process{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.spans), sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) })
	store, err := otelstore.New(inner, otelstore.WithMeterProvider(mp), otelstore.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	p.store = store
	return p
}

// TestAcrossARestart runs the quickstart's workflow across a restart: the
// first process starts the run and dispatches the activity, a second one,
// set up as the front page says and nothing more, over the same store,
// completes both. The second process records the activity's completion
// and duration and the run's at history's times, counts no dispatch again,
// leaves nothing in flight, and exports the run as one trace rooted at its
// run span with the activity span under it.
func TestAcrossARestart(t *testing.T) {
	ctx, tok := context.Background(), eventstore.RecorderToken()
	inner := eventstore.NewMemory()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	wf, runID := eventstore.NewWorkflowID(), eventstore.NewRunID()
	at := func(d time.Duration) eventstore.Envelope {
		return eventstore.Envelope{RunID: runID, RecordedAt: t0.Add(d)}
	}
	first := start(t, inner)
	if err := first.store.Append(ctx, tok, wf, []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: at(0), WorkflowType: "greeting"},
		eventstore.ActivityScheduled{Envelope: at(time.Second), ActivityID: 0, ActivityType: "send_email"},
	}, 0); err != nil {
		t.Fatal(err)
	}
	// The first process dies here; the second starts over the same store.
	second := start(t, inner)
	if err := second.store.Append(ctx, tok, wf, []eventstore.Event{
		eventstore.ActivityCompleted{Envelope: at(4 * time.Second), ActivityID: 0, Attempt: 1},
		eventstore.WorkflowCompleted{Envelope: at(6 * time.Second)},
	}, 2); err != nil {
		t.Fatal(err)
	}
	if err := otelstore.Flush(ctx, second.store); err != nil {
		t.Fatal(err)
	}

	var rm metricdata.ResourceMetrics
	if err := second.reader.Collect(ctx, &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{} // sums and gauges by name; histograms as "name count" and "name sum"
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					got[m.Name] += float64(p.Value)
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					got[m.Name+" count"] += float64(p.Count)
					got[m.Name+" sum"] += p.Sum
				}
			}
		}
	}
	for name, want := range map[string]float64{
		"aion.activities.completed":           1,
		"aion.activities.dispatched":          0, // the first process counted it
		"aion.inflight_activities":            0,
		"aion.workflows.completed":            1,
		"aion.activity.duration count":        1,
		"aion.activity.duration sum":          3,
		"aion.workflow.duration count":        1,
		"aion.workflow.duration sum":          6,
		"aion.store.operation.duration count": 1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v", name, got[name], want)
		}
	}

	var run, act sdktrace.ReadOnlySpan
	for _, s := range second.spans.Ended() {
		switch s.Name() {
		case "workflow greeting":
			run = s
		case "activity send_email":
			act = s
		}
	}
	if run == nil || act == nil {
		t.Fatalf("the second process ended %d spans, want the run's and the activity's among them", len(second.spans.Ended()))
	}
	if run.Parent().IsValid() || !run.StartTime().Equal(t0) || !run.EndTime().Equal(t0.Add(6*time.Second)) {
		t.Errorf("run span: parent %v, %v..%v; want a root from %v to 6 s later", run.Parent(), run.StartTime(), run.EndTime(), t0)
	}
	if act.Parent().SpanID() != run.SpanContext().SpanID() || act.SpanContext().TraceID() != run.SpanContext().TraceID() ||
		!act.StartTime().Equal(t0.Add(time.Second)) || !act.EndTime().Equal(t0.Add(4*time.Second)) {
		t.Errorf("activity span: parent %v, %v..%v; want the run span's child from 1 s to 4 s", act.Parent(), act.StartTime(), act.EndTime())
	}
}
