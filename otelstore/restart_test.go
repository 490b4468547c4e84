package otelstore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// A process restarts between an activity's dispatch and its terminal: the
// resumed process has the activity in flight, its age the true one, and
// when the terminal and the close commit it records one activity span, one
// run span and one duration point with history's times; the first process,
// gone without shutting down, recorded none of them.
func TestRestartResumesFromHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := eventstore.NewMemory()
		ctx, tok := context.Background(), eventstore.RecorderToken()
		start := time.Now().Add(-2 * time.Hour)
		at := func(d time.Duration) eventstore.Envelope { return eventstore.Envelope{RecordedAt: start.Add(d)} }
		wf, run := ids()
		withRun := func(e eventstore.Envelope) eventstore.Envelope { e.RunID = run; return e }

		before := newHarness(t)
		first := before.wrap(t, store)
		if err := first.Append(ctx, tok, wf, []eventstore.Event{
			eventstore.WorkflowStarted{Envelope: withRun(at(0)), WorkflowType: "order"},
			eventstore.ActivityScheduled{Envelope: withRun(at(time.Minute)), ActivityID: 0, ActivityType: "charge"},
		}, 0); err != nil {
			t.Fatal(err)
		}
		before.assertSum(t, "aion.inflight_activities", false, point(1, ns, charge))

		// The restart: the first process is gone, a second one resumes.
		after := newHarness(t)
		second := after.wrap(t, store)
		report, err := otelstore.Resume(ctx, second)
		if err != nil || report != (pairing.ResumeReport{Workflows: 1, Activities: 1, Runs: 1}) {
			t.Fatalf("Resume = %+v, %v", report, err)
		}
		after.assertSum(t, "aion.inflight_activities", false, point(1, ns, charge))
		after.assertSum(t, "aion.activities.dispatched", true)
		after.assertSum(t, "aion.workflows.started", true)
		if age := gaugeValue(t, after, "aion.activity.oldest_inflight_age"); age != (2*time.Hour - time.Minute).Seconds() {
			t.Errorf("oldest in-flight age after resume = %vs, want the dispatch's %vs", age, (2*time.Hour - time.Minute).Seconds())
		}

		if err := second.Append(ctx, tok, wf, []eventstore.Event{
			eventstore.ActivityCompleted{Envelope: withRun(at(90 * time.Minute)), ActivityID: 0},
			eventstore.WorkflowCompleted{Envelope: withRun(at(100 * time.Minute))},
		}, 2); err != nil {
			t.Fatal(err)
		}
		after.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
		after.assertSum(t, "aion.activities.completed", true, point(1, ns, charge, succeeded))
		for name, want := range map[string]float64{"aion.activity.duration": (89 * time.Minute).Seconds(), "aion.workflow.duration": (100 * time.Minute).Seconds()} {
			if got := histogramSum(t, after.metrics(t)[name]); got != want {
				t.Errorf("%s = %vs, want history's %vs", name, got, want)
			}
		}
		acts, runs := after.spansNamed("activity charge"), after.spansNamed("workflow order")
		if len(acts) != 1 || len(runs) != 1 {
			t.Fatalf("the resumed process ended %d activity and %d run spans, want one each", len(acts), len(runs))
		}
		for _, c := range []struct {
			s          sdktrace.ReadOnlySpan
			start, end time.Duration
		}{{acts[0], time.Minute, 90 * time.Minute}, {runs[0], 0, 100 * time.Minute}} {
			if !c.s.StartTime().Equal(start.Add(c.start)) || !c.s.EndTime().Equal(start.Add(c.end)) {
				t.Errorf("%s %v..%v, want history's %v..%v", c.s.Name(), c.s.StartTime(), c.s.EndTime(), start.Add(c.start), start.Add(c.end))
			}
		}
		if acts[0].Parent().SpanID() != runs[0].SpanContext().SpanID() {
			t.Errorf("the activity span's parent is not the run span")
		}
		if n := len(before.spansNamed("activity charge")) + len(before.spansNamed("workflow order")); n != 0 {
			t.Errorf("the first process ended %d timeline spans", n)
		}
	})
}

// Resume of a store New did not return is refused.
func TestResumeRefusesAStoreNotDecorated(t *testing.T) {
	if _, err := otelstore.Resume(context.Background(), eventstore.NewMemory()); err != otelstore.ErrNotDecorated {
		t.Errorf("Resume = %v, want ErrNotDecorated", err)
	}
}

// gaugeValue returns the value of a float gauge with one point.
func gaugeValue(t *testing.T, h *harness, name string) float64 {
	t.Helper()
	m, ok := h.metrics(t)[name]
	if !ok {
		t.Fatalf("no %s", name)
	}
	dp := m.Data.(metricdata.Gauge[float64]).DataPoints
	if len(dp) != 1 {
		t.Fatalf("%s has %d points, want 1", name, len(dp))
	}
	return dp[0].Value
}

// A resume runs while appends go on: terminals committing through the
// resumed process during its resume are each counted once, with history's
// durations, whichever reaches the tracker first, the live terminal or the
// history read back.
func TestResumeWhileAppendsGoOnConcurrentSafe(t *testing.T) {
	const workflows = 200
	store := eventstore.NewMemory()
	ctx, tok := context.Background(), eventstore.RecorderToken()
	type wf struct {
		id  eventstore.WorkflowID
		run eventstore.RunID
	}
	var wfs []wf
	first := newHarness(t).wrap(t, store)
	for range workflows {
		id, run := ids()
		wfs = append(wfs, wf{id, run})
		if err := first.Append(ctx, tok, id, []eventstore.Event{
			eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "order"},
			eventstore.ActivityScheduled{Envelope: env(run, time.Second), ActivityID: 0, ActivityType: "charge"},
		}, 0); err != nil {
			t.Fatal(err)
		}
	}
	after := newHarness(t)
	second := after.wrap(t, store)
	done := make(chan error, 1)
	go func() {
		_, err := otelstore.Resume(ctx, second, pairing.WithResumeConcurrency(3))
		done <- err
	}()
	for _, w := range wfs {
		if err := second.Append(ctx, tok, w.id, []eventstore.Event{
			eventstore.ActivityCompleted{Envelope: env(w.run, 11*time.Second), ActivityID: 0},
		}, 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	after.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
	after.assertSum(t, "aion.activities.completed", true, point(workflows, ns, charge, succeeded))
	if got := histogramSum(t, after.metrics(t)["aion.activity.duration"]); got != workflows*10 {
		t.Errorf("durations sum to %vs, want %d of 10s", got, workflows)
	}
	if got := len(after.spansNamed("activity charge")); got != workflows {
		t.Errorf("%d activity spans, want %d", got, workflows)
	}
}
