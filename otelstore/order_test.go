package otelstore_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
)

// gated is a store whose Append at one expected seq commits, then holds its
// return until released: the race in which a later append returns first.
type gated struct {
	*eventstore.Memory
	holdAt  uint64
	reached chan struct{}
	release chan struct{}
}

func newGated(holdAt uint64) *gated {
	return &gated{Memory: eventstore.NewMemory(), holdAt: holdAt, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *gated) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	err := g.Memory.Append(ctx, tok, wf, events, expectedSeq)
	if expectedSeq == g.holdAt {
		close(g.reached)
		<-g.release
	}
	return err
}

// raceAppends commits early (held) and then late, lets late return first,
// then releases early.
func raceAppends(t *testing.T, s eventstore.Store, g *gated, w *writer, early, late []eventstore.Event) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Append(context.Background(), eventstore.RecorderToken(), w.wf, early, g.holdAt); err != nil {
			t.Errorf("early append: %v", err)
		}
	})
	<-g.reached
	if err := s.Append(context.Background(), eventstore.RecorderToken(), w.wf, late, g.holdAt+uint64(len(early))); err != nil {
		t.Fatalf("late append: %v", err)
	}
	close(g.release)
	wg.Wait()
}

// A dispatch whose append returns after the append that cancels it must not
// leak an in-flight slot.
func TestObservationFollowsHistoryOrderNoLeak(t *testing.T) {
	h := newHarness(t)
	g := newGated(1)
	s := h.wrap(t, struct{ eventstore.Store }{g})
	w := newWriter(t, s)
	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "checkout"})
	raceAppends(t, s, g, w,
		[]eventstore.Event{w.scheduled(0, "charge", 0)},
		[]eventstore.Event{
			eventstore.ActivityCancelled{Envelope: w.env(time.Second), ActivityID: 0},
			eventstore.WorkflowCancelled{Envelope: w.env(time.Second)},
		})
	h.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
	h.assertSum(t, "aion.activities.completed", true, point(1, ns, charge, otelstore.AttrActivityOutcome.String("cancelled")))
}

// A terminal whose append returns after the workflow's completion keeps its
// own outcome; it is not settled as abandoned.
func TestObservationFollowsHistoryOrderOutcome(t *testing.T) {
	h := newHarness(t)
	g := newGated(2)
	s := h.wrap(t, struct{ eventstore.Store }{g})
	w := newWriter(t, s)
	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "checkout"}, w.scheduled(0, "charge", 0))
	raceAppends(t, s, g, w,
		[]eventstore.Event{w.completed(0, time.Second)},
		[]eventstore.Event{eventstore.WorkflowCompleted{Envelope: w.env(2 * time.Second)}})
	h.assertSum(t, "aion.activities.completed", true, point(1, ns, charge, succeeded))
	h.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
}

// A batch held back by an earlier append is released when that append fails.
func TestObservationNotStuckBehindFailedAppend(t *testing.T) {
	h := newHarness(t)
	g := newGated(1) // a stale append at seq 1: it conflicts, after holding
	s := h.wrap(t, struct{ eventstore.Store }{g})
	w := newWriter(t, s)
	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "checkout"})
	w.head = 1
	if err := g.Memory.Append(context.Background(), eventstore.RecorderToken(), w.wf, []eventstore.Event{eventstore.SignalReceived{Envelope: w.env(0)}}, 1); err != nil {
		t.Fatal(err) // another writer took seq 2: the held append will conflict
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Append(context.Background(), eventstore.RecorderToken(), w.wf, []eventstore.Event{w.scheduled(9, "lost", 0)}, 1); err == nil {
			t.Error("the stale append succeeded")
		}
	})
	<-g.reached
	w.head = 2
	w.append(w.scheduled(0, "charge", 0))
	h.assertSum(t, "aion.activities.dispatched", true) // held behind the earlier append
	close(g.release)
	wg.Wait()
	h.assertSum(t, "aion.activities.dispatched", true, point(1, ns, charge))
	h.assertSum(t, "aion.inflight_activities", false, point(1, ns, charge))
}

// Regression (issue 12.2): a batch that waits behind an earlier in-flight
// append is observed as it was when Append returned, whatever the caller
// does with its slice afterwards.
func TestWaitingBatchIgnoresCallerSliceReuse(t *testing.T) {
	h := newHarness(t)
	g := newGated(1)
	s := h.wrap(t, struct{ eventstore.Store }{g})
	w := newWriter(t, s)
	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "checkout"})
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := s.Append(context.Background(), eventstore.RecorderToken(), w.wf, []eventstore.Event{eventstore.SignalReceived{Envelope: w.env(0)}}, 1); err != nil {
			t.Errorf("early append: %v", err)
		}
	})
	<-g.reached
	late := []eventstore.Event{w.scheduled(0, "charge", 0), w.completed(0, time.Second)}
	if err := s.Append(context.Background(), eventstore.RecorderToken(), w.wf, late, 2); err != nil {
		t.Fatalf("late append: %v", err)
	}
	// The call has returned: the slice is the caller's again.
	late[0] = eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "phantom"}
	late[1] = w.scheduled(1, "phantom", 0)
	close(g.release)
	wg.Wait()
	h.assertSum(t, "aion.workflows.started", true, point(1, ns, otelstore.AttrWorkflowType.String("checkout")))
	h.assertSum(t, "aion.activities.dispatched", true, point(1, ns, charge))
	h.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
	h.assertSum(t, "aion.activities.completed", true, point(1, ns, charge, succeeded))
}

// Many writers race on a few workflows, each appending a dispatch and its
// terminal at the head it last saw: the losers conflict and retry. Every
// committed dispatch is settled in its own batch, so whatever the
// interleaving the gauge ends at zero and every counter matches the
// histories.
func TestAppendConcurrentSafe(t *testing.T) {
	h := newHarness(t)
	s := h.wrap(t, eventstore.NewMemory())
	const workflows, writers, batches = 4, 4, 50
	var wg sync.WaitGroup
	for range workflows {
		w := newWriter(t, s)
		for range writers {
			wg.Go(func() {
				ctx := context.Background()
				for done := 0; done < batches; {
					history, err := s.ReadHistory(ctx, w.wf)
					if err != nil {
						t.Error(err)
						return
					}
					id := eventstore.ActivityID(len(history))
					batch := []eventstore.Event{w.scheduled(id, "charge", 0), w.completed(id, time.Second)}
					err = s.Append(ctx, eventstore.RecorderToken(), w.wf, batch, uint64(len(history)))
					switch {
					case err == nil:
						done++
					case !errors.Is(err, eventstore.ErrSequenceConflict):
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	const total = workflows * writers * batches
	h.assertSum(t, "aion.activities.dispatched", true, point(total, ns, charge))
	h.assertSum(t, "aion.activities.completed", true, point(total, ns, charge, succeeded))
	h.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
}

// Regression: past the waiting bound, later batches are observed ahead of
// an earlier append still in flight. When that append finally returned
// with a dispatch whose run's close had been observed ahead, the dispatch
// took a gauge slot that nothing would ever settle. The run is now settled
// again after the late batch: the dispatch ends as abandoned.
func TestLateDispatchAfterCloseObservedAheadNoLeak(t *testing.T) {
	h := newHarness(t)
	g := newGated(1)
	s := h.wrap(t, struct{ eventstore.Store }{g})
	w := newWriter(t, s)
	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "checkout"})
	var late []eventstore.Event
	for range 1100 { // past the bound of facts a workflow holds waiting
		late = append(late, eventstore.SignalReceived{Envelope: w.env(0)})
	}
	late = append(late, eventstore.WorkflowCancelled{Envelope: w.env(time.Second)})
	raceAppends(t, s, g, w, []eventstore.Event{w.scheduled(0, "charge", 0)}, late)
	h.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
	h.assertSum(t, "aion.activities.completed", true, point(1, ns, charge, otelstore.AttrActivityOutcome.String("abandoned")))
	h.assertSum(t, "aion.store.lifecycle.unordered", true, point(1, ns))
}

// A run started by a batch that returns after the batch closing it was
// observed ahead (past the waiting bound) is closed again with that close:
// its run span ends at the close's time and its duration is recorded,
// rather than the run holding a tracker slot until evicted.
func TestLateStartAfterCloseObservedAheadClosesRun(t *testing.T) {
	h := newHarness(t)
	g := newGated(0)
	s := h.wrap(t, struct{ eventstore.Store }{g})
	w := newWriter(t, s)
	var late []eventstore.Event
	for range 1100 { // past the bound of facts a workflow holds waiting
		late = append(late, eventstore.SignalReceived{Envelope: w.env(time.Second)})
	}
	late = append(late, eventstore.WorkflowCompleted{Envelope: w.env(time.Hour), Result: payload})
	raceAppends(t, s, g, w, []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "checkout"},
		w.scheduled(0, "charge", time.Second),
	}, late)
	h.assertSum(t, "aion.store.lifecycle.unordered", true, point(1, ns))
	h.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
	runs := h.spansNamed("workflow checkout")
	if len(runs) != 1 || !runs[0].StartTime().Equal(t0) || !runs[0].EndTime().Equal(t0.Add(time.Hour)) {
		t.Fatalf("run spans %v, want one from %v to %v", runs, t0, t0.Add(time.Hour))
	}
	if got := histogramSum(t, h.metrics(t)["aion.workflow.duration"]); got != 3600 {
		t.Errorf("workflow duration %v, want 3600", got)
	}
}

// panicOnce is a span processor that panics in OnStart of the first span
// whose name has the prefix, then behaves.
type panicOnce struct {
	sdktrace.SpanProcessor
	prefix string
	fired  atomic.Bool
}

func (p *panicOnce) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	if strings.HasPrefix(s.Name(), p.prefix) && p.fired.CompareAndSwap(false, true) {
		panic("span processor")
	}
	p.SpanProcessor.OnStart(ctx, s)
}

// A panic of the span pipeline while a committed batch is observed reaches
// neither the caller nor the history order: the append returns nil (the
// panic goes to otel.Handle), and the workflow's later appends are observed
// at once, leaving nothing in flight.
func TestTelemetryPanicKeepsHistoryOrder(t *testing.T) {
	for _, prefix := range []string{"activity", "workflow"} {
		t.Run(prefix, func(t *testing.T) {
			h := newHarness(t)
			proc := &panicOnce{SpanProcessor: tracetest.NewSpanRecorder(), prefix: prefix}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(proc))
			s, err := otelstore.New(eventstore.NewMemory(), otelstore.WithMeterProvider(h.mp), otelstore.WithTracerProvider(tp))
			if err != nil {
				t.Fatal(err)
			}
			w := newWriter(t, s)
			w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "checkout"}, w.scheduled(0, "charge", 0))
			w.append(w.scheduled(1, "charge", time.Second), w.completed(1, 2*time.Second), w.completed(0, 3*time.Second),
				eventstore.WorkflowCompleted{Envelope: w.env(4 * time.Second), Result: payload})
			if !proc.fired.Load() {
				t.Fatal("the span processor never panicked")
			}
			h.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
			h.assertSum(t, "aion.workflows.completed", true, point(1, ns, otelstore.AttrWorkflowStatus.String("completed")))
		})
	}
}
