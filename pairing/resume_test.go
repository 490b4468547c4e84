package pairing

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// appendTo appends events to wf in m at its head.
func appendTo(t *testing.T, m *eventstore.Memory, wf eventstore.WorkflowID, events ...eventstore.Event) {
	t.Helper()
	h, err := m.ReadHistory(bg, wf)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Append(bg, eventstore.RecorderToken(), wf, events, uint64(len(h))); err != nil {
		t.Fatal(err)
	}
}

func env(run eventstore.RunID, sec int) eventstore.Envelope {
	return eventstore.Envelope{RunID: run, RecordedAt: ts(sec)}
}

// A tracker resumed from a store has in flight what history has, counts
// nothing again, and records a later terminal's completion, duration and
// span at history's times; settled and closed work stays silent.
func TestResumeFromHistory(t *testing.T) {
	m := eventstore.NewMemory()
	open, closed := wfID(1), wfID(2)
	run := runID(1)
	appendTo(t, m, open,
		eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "flow"},
		eventstore.ActivityScheduled{Envelope: env(run, 10), ActivityID: 0, ActivityType: "slow"},
		eventstore.ActivityScheduled{Envelope: env(run, 20), ActivityID: 1, ActivityType: "fast"},
		eventstore.ActivityFailed{Envelope: env(run, 25), ActivityID: 0, Error: eventstore.ActivityError{Kind: eventstore.Retryable}},
		eventstore.ActivityCompleted{Envelope: env(run, 30), ActivityID: 1},
	)
	appendTo(t, m, closed,
		eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "flow"},
		eventstore.ActivityScheduled{Envelope: env(run, 1), ActivityID: 0, ActivityType: "slow"},
		eventstore.WorkflowCompleted{Envelope: env(run, 2)},
	)
	h := newHarness(t)
	report, err := h.tr.Resume(bg, "n", m)
	if err != nil {
		t.Fatal(err)
	}
	if report != (ResumeReport{Workflows: 1, Activities: 1, Runs: 1}) {
		t.Errorf("report %+v, want one open workflow, one activity in flight, one open run", report)
	}
	if h.tr.InFlight() != 1 {
		t.Errorf("InFlight = %d, want 1", h.tr.InFlight())
	}
	h.assertMetric(wantInflight(point(attrs("n", "slow"), 1), point(attrs("n", "fast"), 0)))
	for _, name := range []string{catalog.ActivitiesDispatched, catalog.ActivitiesCompleted, catalog.ActivitiesRetried} {
		if got := h.sums(name); len(got) != 0 {
			t.Errorf("%s counted resumed facts: %v", name, got)
		}
	}
	if n := len(h.spans.Ended()); n != 0 {
		t.Errorf("%d spans ended for what history had settled", n)
	}
	if got := h.sums(catalog.PairingResumed); got[attribute.NewSet(catalog.Namespace.String("n"))] != 1 {
		t.Errorf("aion.pairing.resumed = %v, want 1 workflow", got)
	}

	// The terminal commits after the restart: observed live.
	h.tr.Observe(bg, "n", open, 6, []eventstore.Event{eventstore.ActivityCompleted{Envelope: env(run, 70), ActivityID: 0}})
	h.tr.Observe(bg, "n", open, 7, []eventstore.Event{eventstore.WorkflowCompleted{Envelope: env(run, 100)}})
	h.assertMetric(wantCompleted(point(attrs("n", "slow", OutcomeSucceeded), 1)))
	h.assertMetric(wantDuration(hist(attrs("n", "slow", OutcomeSucceeded), ts(70).Sub(ts(10)).Seconds())))
	ended := h.spans.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans, want the activity's and the run's", len(ended))
	}
	act, runSpan := ended[0], ended[1]
	if !act.StartTime().Equal(ts(10)) || !act.EndTime().Equal(ts(70)) || len(act.Events()) != 1 {
		t.Errorf("activity span %v..%v with %d events, want history's 10..70 with its retry", act.StartTime(), act.EndTime(), len(act.Events()))
	}
	if !runSpan.StartTime().Equal(ts(0)) || !runSpan.EndTime().Equal(ts(100)) || act.Parent().SpanID() != runSpan.SpanContext().SpanID() {
		t.Errorf("run span %v..%v, want history's 0..100 as the activity's parent", runSpan.StartTime(), runSpan.EndTime())
	}
}

// Resume meets the appends that commit while it runs in any order: a live
// terminal observed before its history was read still completes once.
func TestResumeMeetsLiveFactsInAnyOrder(t *testing.T) {
	m := eventstore.NewMemory()
	wf, run := wfID(1), runID(1)
	appendTo(t, m, wf,
		eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "flow"},
		eventstore.ActivityScheduled{Envelope: env(run, 10), ActivityID: 0, ActivityType: "a"},
	)
	terminal := eventstore.ActivityCompleted{Envelope: env(run, 40), ActivityID: 0}
	appendTo(t, m, wf, terminal)
	for _, liveFirst := range []bool{true, false} {
		h := newHarness(t)
		live := func() { h.tr.Observe(bg, "n", wf, 3, []eventstore.Event{terminal}) }
		if liveFirst {
			live()
		}
		if _, err := h.tr.Resume(bg, "n", m); err != nil {
			t.Fatal(err)
		}
		if !liveFirst {
			live()
		}
		h.assertMetric(wantCompleted(point(attrs("n", "a", OutcomeSucceeded), 1)))
		h.assertMetric(wantDuration(hist(attrs("n", "a", OutcomeSucceeded), ts(40).Sub(ts(10)).Seconds())))
		if h.tr.InFlight() != 0 {
			t.Errorf("live first %v: %d in flight", liveFirst, h.tr.InFlight())
		}
	}
}

// failingStore fails ReadHistory of one workflow, or the listing.
type failingStore struct {
	eventstore.Store
	bad     eventstore.WorkflowID
	listing bool
}

var errBroken = errors.New("broken")

func (f failingStore) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	if wf == f.bad {
		return nil, errBroken
	}
	return f.Store.ReadHistory(ctx, wf)
}

func (f failingStore) ListActive(ctx context.Context) ([]eventstore.WorkflowID, error) {
	if f.listing {
		return nil, errBroken
	}
	return f.Store.ListActive(ctx)
}

// A store error part-way is returned with the report and leaves the
// tracker consistent: the other workflows are resumed whole; a listing
// error resumes nothing. Each failed read is counted with error.type.
func TestResumeStoreErrors(t *testing.T) {
	m := eventstore.NewMemory()
	for i := range byte(5) {
		appendTo(t, m, wfID(i+1),
			eventstore.WorkflowStarted{Envelope: env(runID(1), 0), WorkflowType: "flow"},
			eventstore.ActivityScheduled{Envelope: env(runID(1), 1), ActivityID: 0, ActivityType: "a"},
		)
	}
	h := newHarness(t)
	report, err := h.tr.Resume(bg, "n", failingStore{Store: m, bad: wfID(3)}, WithResumeConcurrency(2))
	if !errors.Is(err, errBroken) || report.Workflows != 4 || report.Failed != 1 || report.Activities != 4 {
		t.Errorf("Resume = %+v, %v; want 4 workflows, 1 failed, 4 activities and the store's error", report, err)
	}
	if err := h.tr.join.check(); err != nil || h.tr.InFlight() != 4 {
		t.Errorf("after a partial resume: %v, %d in flight", err, h.tr.InFlight())
	}
	failed := attribute.NewSet(catalog.Namespace.String("n"), catalog.ErrorType.String(catalog.OtherError))
	if got := h.sums(catalog.PairingResumed)[failed]; got != 1 {
		t.Errorf("failed reads counted %d, want 1", got)
	}

	h2 := newHarness(t)
	if report, err := h2.tr.Resume(bg, "n", failingStore{Store: m, listing: true}); !errors.Is(err, errBroken) || report != (ResumeReport{}) || h2.tr.InFlight() != 0 {
		t.Errorf("a listing error: %+v, %v, %d in flight", report, err, h2.tr.InFlight())
	}

	h3 := newHarness(t)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if _, err := h3.tr.Resume(ctx, "n", m); !errors.Is(err, context.Canceled) {
		t.Errorf("a done context: %v", err)
	}
}

// ResumeShards resumes the workflows of the listed shards only.
func TestResumeShards(t *testing.T) {
	m := eventstore.NewMemory(eventstore.WithShardCount(4))
	perShard := map[int]int{}
	for i := range byte(40) {
		wf := wfID(i + 1)
		wf[7] = i // spread over the shards
		perShard[eventstore.ShardOf(wf, 4)]++
		appendTo(t, m, wf,
			eventstore.WorkflowStarted{Envelope: env(runID(1), 0), WorkflowType: "flow"},
			eventstore.ActivityScheduled{Envelope: env(runID(1), 1), ActivityID: 0, ActivityType: "a"},
		)
	}
	h := newHarness(t)
	report, err := h.tr.Resume(bg, "n", m, WithResumeShards(4, 1, 3))
	if err != nil || report.Workflows != perShard[1]+perShard[3] {
		t.Fatalf("Resume = %+v, %v; want the %d workflows of shards 1 and 3", report, err, perShard[1]+perShard[3])
	}
	if n := h.tr.ReleaseShards(bg, "n", 4, 3); n != 2*perShard[3] {
		t.Errorf("ReleaseShards released %d, want the %d activities and runs of shard 3", n, 2*perShard[3])
	}
	if h.tr.InFlight() != perShard[1] {
		t.Errorf("InFlight = %d, want shard 1's %d", h.tr.InFlight(), perShard[1])
	}
	h.assertMetric(wantInflight(point(attrs("n", "a"), int64(perShard[1]))))
	if got := h.sums(catalog.PairingReleased)[attribute.NewSet(catalog.Namespace.String("n"))]; got != int64(2*perShard[3]) {
		t.Errorf("aion.pairing.released = %d", got)
	}
	if err := h.tr.join.check(); err != nil {
		t.Error(err)
	}
}

// Releasing a workflow drops its open spans unended and records no
// completion; the same facts arriving again afterwards start over.
func TestReleaseRecordsNothing(t *testing.T) {
	h := newHarness(t)
	k := key("n", 1, 1, 0)
	h.tr.RunStarted(bg, "n", k.WorkflowID, k.RunID, "flow", ts(0))
	h.tr.Dispatched(bg, k, "a", ts(1))
	shard := eventstore.ShardOf(k.WorkflowID, 16)
	if n := h.tr.ReleaseShards(bg, "n", 16, shard); n != 2 {
		t.Fatalf("released %d, want the activity and the run", n)
	}
	h.tr.Finished(bg, k, OutcomeSucceeded, ts(2))
	h.tr.RunClosed(bg, "n", k.WorkflowID, k.RunID, eventstore.StatusCompleted, ts(3))
	if n := len(h.spans.Ended()); n != 0 {
		t.Errorf("%d spans ended after the release", n)
	}
	if got := h.sums(catalog.ActivitiesCompleted); len(got) != 0 {
		t.Errorf("completions after the release: %v", got)
	}
	if h.tr.InFlight() != 0 {
		t.Errorf("%d in flight", h.tr.InFlight())
	}
}
