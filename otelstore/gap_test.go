package otelstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
)

// An adopter (here a process started over the store, without Resume)
// that closes an orphaned run in its first write records that run exactly:
// the completion and duration of the activity its predecessor dispatched,
// the run's duration, the run span from history's start and the activity
// span under it. New alone does it: the gap is filled from the inner store.
func TestNewAloneFillsTheGapOfAnAdoptedRun(t *testing.T) {
	ctx, tok := context.Background(), eventstore.RecorderToken()
	inner := eventstore.NewMemory()
	wf, run := ids()
	predecessor := newHarness(t)
	before := predecessor.wrap(t, inner)
	if err := before.Append(ctx, tok, wf, []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "flow"},
		eventstore.ActivityScheduled{Envelope: env(run, time.Second), ActivityID: 0, ActivityType: "charge"},
	}, 0); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t)
	after := h.wrap(t, inner)
	if err := after.Append(ctx, tok, wf, []eventstore.Event{
		eventstore.ActivityCompleted{Envelope: env(run, 4*time.Second), ActivityID: 0},
		eventstore.WorkflowCompleted{Envelope: env(run, 6*time.Second)},
	}, 2); err != nil {
		t.Fatal(err)
	}
	// Flush waits for the background fill, as a process does before it
	// shuts its providers down (and this test instead of sleeping).
	if err := otelstore.Flush(ctx, after); err != nil {
		t.Fatal(err)
	}
	if err := otelstore.Flush(ctx, inner); !errors.Is(err, otelstore.ErrNotDecorated) {
		t.Errorf("Flush of an undecorated store: %v, want ErrNotDecorated", err)
	}
	h.assertSum(t, "aion.activities.completed", true, point(1, ns, charge, succeeded))
	m := h.metrics(t)
	if got := histogramSum(t, m["aion.activity.duration"]); got != 3 {
		t.Errorf("activity duration %v, want 3 s", got)
	}
	if got := histogramSum(t, m["aion.workflow.duration"]); got != 6 {
		t.Errorf("workflow duration %v, want 6 s", got)
	}
	if _, ok := m["aion.activities.dispatched"]; ok {
		if d := m["aion.activities.dispatched"].Data.(metricdata.Sum[int64]); len(d.DataPoints) > 0 && d.DataPoints[0].Value != 0 {
			t.Errorf("the predecessor's dispatch counted again: %+v", d)
		}
	}
	var runSpan, actSpan int
	for _, s := range h.spans.Ended() {
		switch s.Name() {
		case "workflow flow":
			runSpan++
			if !s.StartTime().Equal(t0) || !s.EndTime().Equal(t0.Add(6*time.Second)) {
				t.Errorf("run span %v..%v", s.StartTime(), s.EndTime())
			}
		case "activity charge":
			actSpan++
		}
	}
	if runSpan != 1 || actSpan != 1 {
		t.Fatalf("%d run spans, %d activity spans; want 1 and 1", runSpan, actSpan)
	}
	checkParentIsRun(t, h)
}

// With an SDK provider without pairing.NewIDGenerator, one Append holding
// a whole run parents the activity span under the run span.
func TestSingleAppendRunParentsActivityUnderRunSpan(t *testing.T) {
	h := newHarness(t)
	s := h.wrap(t, eventstore.NewMemory())
	wf, run := ids()
	if err := s.Append(context.Background(), eventstore.RecorderToken(), wf, []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "flow"},
		eventstore.ActivityScheduled{Envelope: env(run, time.Second), ActivityID: 0, ActivityType: "charge"},
		eventstore.ActivityCompleted{Envelope: env(run, 2*time.Second), ActivityID: 0},
		eventstore.WorkflowCompleted{Envelope: env(run, 3*time.Second)},
	}, 0); err != nil {
		t.Fatal(err)
	}
	checkParentIsRun(t, h)
}

func checkParentIsRun(t *testing.T, h *harness) {
	t.Helper()
	var runSC, parent [2]string
	for _, s := range h.spans.Ended() {
		switch s.Name() {
		case "workflow flow":
			runSC = [2]string{s.SpanContext().TraceID().String(), s.SpanContext().SpanID().String()}
		case "activity charge":
			parent = [2]string{s.Parent().TraceID().String(), s.Parent().SpanID().String()}
		}
	}
	if runSC != parent || runSC[1] == "" {
		t.Errorf("activity span parent %v, run span %v", parent, runSC)
	}
}

// After a restart without Resume, the first write to a workflow makes its
// fill put that workflow's activities still in flight back in the gauge
// (its other activities and other workflows wait for their own first
// write, or for Resume), and counts no dispatch but the one written here.
func TestFirstWriteAfterRestartFillsTheGauge(t *testing.T) {
	ctx, tok := context.Background(), eventstore.RecorderToken()
	inner := eventstore.NewMemory()
	before := newHarness(t).wrap(t, inner)
	var wfs []eventstore.WorkflowID
	var runs []eventstore.RunID
	for range 3 {
		wf, run := ids()
		if err := before.Append(ctx, tok, wf, []eventstore.Event{
			eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "flow"},
			eventstore.ActivityScheduled{Envelope: env(run, time.Second), ActivityID: 0, ActivityType: "charge"},
			eventstore.ActivityScheduled{Envelope: env(run, time.Second), ActivityID: 1, ActivityType: "charge"},
		}, 0); err != nil {
			t.Fatal(err)
		}
		wfs, runs = append(wfs, wf), append(runs, run)
	}
	h := newHarness(t)
	after := h.wrap(t, inner)
	if err := after.Append(ctx, tok, wfs[0], []eventstore.Event{
		eventstore.ActivityScheduled{Envelope: env(runs[0], 2*time.Second), ActivityID: 2, ActivityType: "charge"},
	}, 3); err != nil {
		t.Fatal(err)
	}
	if err := otelstore.Flush(ctx, after); err != nil {
		t.Fatal(err)
	}
	h.assertSum(t, "aion.inflight_activities", false, point(3, ns, charge))
	h.assertSum(t, "aion.activities.dispatched", true, point(1, ns, charge))
}
