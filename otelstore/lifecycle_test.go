package otelstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aionotel/aionotel/conformance"
	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
)

// writer appends to one workflow through a decorated store, tracking the head.
type writer struct {
	t    *testing.T
	s    eventstore.Store
	wf   eventstore.WorkflowID
	run  eventstore.RunID
	head uint64
}

func newWriter(t *testing.T, s eventstore.Store) *writer {
	wf, run := ids()
	return &writer{t: t, s: s, wf: wf, run: run}
}

func (w *writer) append(events ...eventstore.Event) {
	w.t.Helper()
	if err := w.s.Append(context.Background(), eventstore.RecorderToken(), w.wf, events, w.head); err != nil {
		w.t.Fatalf("append: %v", err)
	}
	w.head += uint64(len(events))
}

func (w *writer) env(offset time.Duration) eventstore.Envelope { return env(w.run, offset) }

func (w *writer) scheduled(id eventstore.ActivityID, typ string, at time.Duration) eventstore.Event {
	return eventstore.ActivityScheduled{Envelope: w.env(at), ActivityID: id, ActivityType: typ, Input: payload, TaskQueue: "default"}
}

func (w *writer) completed(id eventstore.ActivityID, at time.Duration) eventstore.Event {
	return eventstore.ActivityCompleted{Envelope: w.env(at), ActivityID: id, Result: payload, Attempt: 1}
}

func (w *writer) failed(id eventstore.ActivityID, kind eventstore.ActivityErrorKind, at time.Duration) eventstore.Event {
	return eventstore.ActivityFailed{Envelope: w.env(at), ActivityID: id, Error: eventstore.ActivityError{Kind: kind, Message: "boom"}, Attempt: 1}
}

var (
	charge    = otelstore.AttrActivityType.String("charge")
	succeeded = otelstore.AttrActivityOutcome.String("succeeded")
)

// Seed rule: a dispatch raises the in-flight gauge and the dispatched counter.
func TestDispatchIncrementsCounterAndGauge(t *testing.T) {
	h := newHarness(t)
	w := newWriter(t, h.wrap(t, eventstore.NewMemory(), otelstore.WithNamespace("tenant-a")))
	w.append(w.scheduled(0, "charge", 0))
	tenantA := otelstore.AttrNamespace.String("tenant-a")
	h.assertSum(t, "aion.inflight_activities", false, point(1, tenantA, charge))
	h.assertSum(t, "aion.activities.dispatched", true, point(1, tenantA, charge))
}

// Seed rule: completion nets the gauge to zero and records succeeded, with
// the duration from dispatch to terminal.
func TestCompletionNetsGaugeToZero(t *testing.T) {
	h := newHarness(t)
	w := newWriter(t, h.wrap(t, eventstore.NewMemory()))
	w.append(w.scheduled(0, "charge", 0))
	w.append(w.completed(0, 1500*time.Millisecond))
	h.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
	h.assertSum(t, "aion.activities.completed", true, point(1, ns, charge, succeeded))
	if got := histogramSum(t, h.metrics(t)["aion.activity.duration"]); got != 1.5 {
		t.Errorf("activity duration %gs, want 1.5s (terminal RecordedAt - dispatch RecordedAt)", got)
	}
}

// Seed rules: terminal failure, cancellation and time-out each release the
// slot and record their outcome.
func TestTerminalsRecordTheirOutcome(t *testing.T) {
	testCases := []struct {
		name     string
		terminal func(w *writer) eventstore.Event
		outcome  string
	}{
		{"failed", func(w *writer) eventstore.Event { return w.failed(0, eventstore.Terminal, time.Second) }, "failed"},
		{"cancelled", func(w *writer) eventstore.Event {
			return eventstore.ActivityCancelled{Envelope: w.env(time.Second), ActivityID: 0, Attempt: 1}
		}, "cancelled"},
		{"timed out", func(w *writer) eventstore.Event {
			return eventstore.ActivityTimedOut{Envelope: w.env(time.Second), ActivityID: 0, Attempt: 1}
		}, "timed_out"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			w := newWriter(t, h.wrap(t, eventstore.NewMemory()))
			w.append(w.scheduled(0, "charge", 0))
			w.append(tc.terminal(w))
			h.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
			h.assertSum(t, "aion.activities.completed", true, point(1, ns, charge, otelstore.AttrActivityOutcome.String(tc.outcome)))
		})
	}
}

// Seed rule: a duplicate or unmatched terminal never underflows the gauge and
// never counts a phantom completion.
func TestUnmatchedTerminalNeverUnderflows(t *testing.T) {
	h := newHarness(t)
	w := newWriter(t, h.wrap(t, eventstore.NewMemory()))
	w.append(w.scheduled(0, "charge", 0), w.scheduled(1, "charge", 0))
	w.append(w.completed(0, time.Second))
	w.append(w.completed(0, 2*time.Second)) // duplicate
	w.append(w.completed(7, 2*time.Second)) // never dispatched
	h.assertSum(t, "aion.inflight_activities", false, point(1, ns, charge))
	h.assertSum(t, "aion.activities.completed", true, point(1, ns, charge, succeeded))
}

// Seed rule: namespaces are isolated.
func TestGaugeIsolatedPerNamespace(t *testing.T) {
	h := newHarness(t)
	inner := eventstore.NewMemory()
	a := newWriter(t, h.wrap(t, inner, otelstore.WithNamespace("tenant-a")))
	// tenant-b cannot read tenant-a's histories, as a store scoped by
	// tenant would refuse: its gap fill finds nothing to pair with.
	b := h.wrap(t, noHistory{inner}, otelstore.WithNamespace("tenant-b"))
	a.append(a.scheduled(0, "charge", 0))
	// tenant-b sees a terminal for the same workflow and activity: it must not
	// release tenant-a's slot.
	if err := b.Append(context.Background(), eventstore.RecorderToken(), a.wf, []eventstore.Event{a.completed(0, time.Second)}, a.head); err != nil {
		t.Fatal(err)
	}
	h.assertSum(t, "aion.inflight_activities", false, point(1, otelstore.AttrNamespace.String("tenant-a"), charge))
	h.assertSum(t, "aion.activities.completed", true)
}

// A retryable failure counts a retry and keeps the activity in flight; the
// final duration covers every attempt.
func TestRetryKeepsActivityInFlight(t *testing.T) {
	h := newHarness(t)
	w := newWriter(t, h.wrap(t, eventstore.NewMemory()))
	w.append(w.scheduled(0, "charge", 0))
	w.append(w.failed(0, eventstore.Retryable, time.Second))
	h.assertSum(t, "aion.inflight_activities", false, point(1, ns, charge))
	h.assertSum(t, "aion.activities.retried", true, point(1, ns, charge))
	w.append(w.completed(0, 3*time.Second))
	h.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
	if got := histogramSum(t, h.metrics(t)["aion.activity.duration"]); got != 3 {
		t.Errorf("activity duration %gs, want 3s across both attempts", got)
	}
}

// A closing workflow event settles its run's activities as abandoned.
func TestWorkflowTerminalAbandonsInFlight(t *testing.T) {
	closers := []struct {
		status string
		event  func(w *writer) eventstore.Event
	}{
		{"completed", func(w *writer) eventstore.Event {
			return eventstore.WorkflowCompleted{Envelope: w.env(time.Second), Result: payload}
		}},
		{"failed", func(w *writer) eventstore.Event { return eventstore.WorkflowFailed{Envelope: w.env(time.Second)} }},
		{"cancelled", func(w *writer) eventstore.Event { return eventstore.WorkflowCancelled{Envelope: w.env(time.Second)} }},
		{"timed_out", func(w *writer) eventstore.Event { return eventstore.WorkflowTimedOut{Envelope: w.env(time.Second)} }},
		{"continued_as_new", func(w *writer) eventstore.Event {
			return eventstore.WorkflowContinuedAsNew{Envelope: w.env(time.Second), NewRunID: eventstore.NewRunID()}
		}},
	}
	for _, tc := range closers {
		t.Run(tc.status, func(t *testing.T) {
			h := newHarness(t)
			w := newWriter(t, h.wrap(t, eventstore.NewMemory()))
			w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "checkout", Input: payload})
			w.append(w.scheduled(0, "charge", 0))
			w.append(tc.event(w))
			h.assertSum(t, "aion.workflows.completed", true, point(1, ns, otelstore.AttrWorkflowStatus.String(tc.status)))
			h.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
			h.assertSum(t, "aion.activities.completed", true, point(1, ns, charge, otelstore.AttrActivityOutcome.String("abandoned")))
		})
	}
}

// The workflow counters follow the events that commit.
func TestWorkflowCounters(t *testing.T) {
	h := newHarness(t)
	w := newWriter(t, h.wrap(t, eventstore.NewMemory()))
	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "checkout", Input: payload})
	w.append(
		eventstore.SignalReceived{Envelope: w.env(0), SignalName: "approve", Input: payload},
		eventstore.ScheduleTriggered{Envelope: w.env(0), ScheduleID: "nightly"},
		eventstore.WorkflowCompleted{Envelope: w.env(0)},
		eventstore.WorkflowReopened{Envelope: w.env(0)},
	)
	h.assertSum(t, "aion.workflows.started", true, point(1, ns, otelstore.AttrWorkflowType.String("checkout")))
	h.assertSum(t, "aion.signals.delivered", true, point(1, ns, otelstore.AttrSignalDelivery.String("resident")))
	h.assertSum(t, "aion.schedules.fired", true, point(1, ns))
	h.assertSum(t, "aion.workflows.reopened", true, point(1, ns))
	h.assertSum(t, "aion.workflows.completed", true, point(1, ns, otelstore.AttrWorkflowStatus.String("completed")))
}

// A failed append observes nothing of its events.
func TestFailedAppendRecordsNoLifecycle(t *testing.T) {
	h := newHarness(t)
	w := newWriter(t, h.wrap(t, eventstore.NewMemory()))
	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "checkout"})
	stale := []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "checkout"},
		w.scheduled(0, "charge", 0),
	}
	if err := w.s.Append(context.Background(), eventstore.RecorderToken(), w.wf, stale, 0); err == nil {
		t.Fatal("stale append succeeded")
	}
	h.assertSum(t, "aion.workflows.started", true, point(1, ns, otelstore.AttrWorkflowType.String("checkout")))
	h.assertSum(t, "aion.activities.dispatched", true)
	h.assertSum(t, "aion.inflight_activities", false)
}

// Past the cardinality limit, new workflow and activity types become _other.
func TestTypeCardinalityGuard(t *testing.T) {
	h := newHarness(t)
	s := h.wrap(t, eventstore.NewMemory())
	const n = 10_000
	for i := range n {
		w := newWriter(t, s)
		typ := fmt.Sprintf("type-%d", i)
		w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: typ}, w.scheduled(0, typ, 0))
	}
	for _, name := range []string{"aion.workflows.started", "aion.activities.dispatched"} {
		m := h.metrics(t)[name]
		points := sumPoints(t, m)
		if len(points) != otelstore.DefaultTypeCardinalityLimit+1 {
			t.Errorf("%s has %d series, want %d admitted types + _other", name, len(points), otelstore.DefaultTypeCardinalityLimit)
		}
		var other, total int64
		for attrs, v := range points {
			total += v
			for _, kv := range attrs.ToSlice() {
				if kv.Value.AsString() == "_other" {
					other = v
				}
			}
		}
		if total != n || other != n-otelstore.DefaultTypeCardinalityLimit {
			t.Errorf("%s: total %d, _other %d; want %d and %d", name, total, other, n, n-otelstore.DefaultTypeCardinalityLimit)
		}
	}
}

// Without WithPairing each decorator has its own tracker; with it, two
// decorators share one, so a terminal seen by one settles a dispatch seen by
// the other.
func TestSharedPairingTracker(t *testing.T) {
	h := newHarness(t)
	tracker := newTracker(t, h)
	inner := eventstore.NewMemory()
	a := newWriter(t, h.wrap(t, inner, otelstore.WithPairing(tracker)))
	b := h.wrap(t, inner, otelstore.WithPairing(tracker))
	a.append(a.scheduled(0, "charge", 0))
	if err := b.Append(context.Background(), eventstore.RecorderToken(), a.wf, []eventstore.Event{a.completed(0, time.Second)}, a.head); err != nil {
		t.Fatal(err)
	}
	if tracker.InFlight() != 0 {
		t.Errorf("shared tracker has %d live entries, want 0", tracker.InFlight())
	}
	h.assertSum(t, "aion.activities.completed", true, point(1, ns, charge, succeeded))
}

// An inner store may accept events the decorator cannot observe: a nil
// event, or a nil pointer to an event. The call returns the
// inner result and observes the events it knows, with or without an
// earlier append of the workflow in flight.
func TestUnobservableEventsAreIgnored(t *testing.T) {
	h := newHarness(t)
	spy := conformance.NewSpy(conformance.CapOutbox)
	s := h.wrap(t, spy.Store())
	w := newWriter(t, s)
	odd := []eventstore.Event{nil, (*eventstore.ActivityScheduled)(nil), (*eventstore.WorkflowCompleted)(nil), w.scheduled(0, "charge", 0)}
	if err := s.Append(context.Background(), eventstore.RecorderToken(), w.wf, odd, 0); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := s.(eventstore.Outbox).AppendWithOutbox(context.Background(), eventstore.RecorderToken(), w.wf, odd[:3], 4, nil); err != nil {
		t.Fatalf("AppendWithOutbox: %v", err)
	}
	h.assertSum(t, "aion.inflight_activities", false, point(1, ns, charge))
}

// noHistory is a store whose histories cannot be read.
type noHistory struct{ eventstore.Store }

func (noHistory) ReadHistory(context.Context, eventstore.WorkflowID) ([]eventstore.Event, error) {
	return nil, eventstore.ErrNotFound
}

func (noHistory) ReadHistoryFrom(context.Context, eventstore.WorkflowID, uint64) ([]eventstore.Event, error) {
	return nil, eventstore.ErrNotFound
}
