package pairing

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// readCall is one history read held by a stepped reader: the test steps
// it twice, once to take its snapshot of the store, once to return it.
type readCall struct {
	id   eventstore.WorkflowID
	step chan struct{}
	ack  chan struct{}
}

// stepped is a store whose reads the test orders: each read announces
// itself on calls, takes its snapshot when stepped, and returns when
// stepped again. It lists the workflows of order as active, in that
// order.
type stepped struct {
	*eventstore.Memory
	order []eventstore.WorkflowID
	calls chan *readCall
}

func (s *stepped) ListActive(context.Context) ([]eventstore.WorkflowID, error) {
	return s.order, nil
}

func (s *stepped) ListPaused(context.Context) ([]eventstore.WorkflowID, error) { return nil, nil }

func (s *stepped) ReadHistory(ctx context.Context, id eventstore.WorkflowID) ([]eventstore.Event, error) {
	return s.ReadHistoryFrom(ctx, id, 0)
}

func (s *stepped) ReadHistoryFrom(ctx context.Context, id eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
	c := &readCall{id: id, step: make(chan struct{}), ack: make(chan struct{})}
	s.calls <- c
	<-c.step
	var history []eventstore.Event
	var err error
	if from <= 1 {
		history, err = s.Memory.ReadHistory(ctx, id)
	} else {
		history, err = s.Memory.ReadHistoryFrom(ctx, id, from)
	}
	c.ack <- struct{}{}
	<-c.step
	return history, err
}

// snapshot has c read the store now; finish returns what it read.
func (c *readCall) snapshot() { c.step <- struct{}{}; <-c.ack }
func (c *readCall) finish()   { c.step <- struct{}{} }

// next is the next read announced on calls. The timeout only turns a
// hang (a read that never comes) into a failure.
func next(t *testing.T, calls chan *readCall, what string) *readCall {
	t.Helper()
	select {
	case c := <-calls:
		return c
	case <-time.After(10 * time.Second):
		t.Fatalf("no read for %s", what)
		return nil
	}
}

// The steps of the race of issue #33's resume test, one workflow of it: a
// predecessor wrote the run's start (1) and a dispatch (2); here a resume
// reads the history (Rs: its snapshot of the store, Rj: its return and
// join), and the terminal commits (Lc: in the store, Lo: observed here,
// at position 3). When the terminal is observed before the resume joined
// the workflow, it is a gap, and a fill reads the history too (Fs, Fj).
var overlapSteps = []string{"Rs", "Rj", "Lc", "Lo", "Fs", "Fj"}

// overlapOrders is every order of the steps that can happen: each read's
// snapshot before its return, the commit before its observation, the
// fill after the observation that found the gap, and a fill only if the
// terminal was observed before the resume joined.
func overlapOrders() [][]string {
	var orders [][]string
	var walk func(order []string, left []string)
	walk = func(order []string, left []string) {
		if len(left) == 0 {
			at := map[string]int{}
			for i, s := range order {
				at[s] = i
			}
			_, fill := at["Fs"]
			ok := at["Rs"] < at["Rj"] && at["Lc"] < at["Lo"]
			if fill {
				ok = ok && at["Lo"] < at["Rj"] && at["Lo"] < at["Fs"] && at["Fs"] < at["Fj"]
			} else {
				ok = ok && at["Rj"] < at["Lo"]
			}
			if ok {
				orders = append(orders, append([]string(nil), order...))
			}
			return
		}
		for i, s := range left {
			rest := append(append([]string(nil), left[:i]...), left[i+1:]...)
			walk(append(order, s), rest)
		}
	}
	walk(nil, overlapSteps)
	walk(nil, overlapSteps[:4])
	return orders
}

// Resume's read, the live terminal and a fill's read, in every order they
// can happen: once Resume has returned and the terminal's Observe has
// returned, with no further wait, the gauge is 0, the completion, its
// duration and its span are recorded once, at history's times, under the
// run span, and nothing counts the predecessor's facts again. Resume does
// not return while a fill of a workflow it read is pending (the fill may
// still be joining the facts it decides).
func TestResumeLiveAndFillInEveryOrder(t *testing.T) {
	orders := overlapOrders()
	if len(orders) != 3+12 {
		t.Fatalf("%d orders, want 15", len(orders))
	}
	for _, order := range orders {
		t.Run(strings.Join(order, ","), func(t *testing.T) {
			runOverlap(t, order)
		})
	}
}

func runOverlap(t *testing.T, order []string) {
	mem := eventstore.NewMemory()
	tok := eventstore.RecorderToken()
	w, d, run := wfID(1), wfID(2), runID(1)
	env := func(ms int) eventstore.Envelope { return eventstore.Envelope{RunID: run, RecordedAt: ts(ms)} }
	if err := mem.Append(bg, tok, w, []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: env(0), WorkflowType: "order"},
		eventstore.ActivityScheduled{Envelope: env(1000), ActivityID: 0, ActivityType: "charge"},
	}, 0); err != nil {
		t.Fatal(err)
	}
	// d is read after w: its read announces that w was joined.
	if err := mem.Append(bg, tok, d, []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: runID(2), RecordedAt: ts(0)}, WorkflowType: "order"},
	}, 0); err != nil {
		t.Fatal(err)
	}
	resumeStore := &stepped{Memory: mem, order: []eventstore.WorkflowID{w, d}, calls: make(chan *readCall)}
	fillReader := &stepped{Memory: mem, calls: make(chan *readCall)}
	h := newHarness(t, WithHistory(fillReader))

	type resumed struct {
		report ResumeReport
		err    error
	}
	done := make(chan resumed, 1)
	waits := make(chan struct{}, 1)
	h.tr.fill.onWait = func() {
		select {
		case waits <- struct{}{}:
		default:
		}
	}
	go func() {
		r, err := h.tr.Resume(bg, "default", resumeStore, WithResumeConcurrency(1))
		done <- resumed{r, err}
	}()
	rc := next(t, resumeStore.calls, "the resume of w")
	if rc.id != w {
		t.Fatalf("resume read %v first, want %v", rc.id, w)
	}
	terminal := []eventstore.Event{eventstore.ActivityCompleted{Envelope: env(11000), ActivityID: 0}}
	var fc *readCall
	fillPending := false
	for _, step := range order {
		switch step {
		case "Rs":
			rc.snapshot()
		case "Rj":
			rc.finish()
			dc := next(t, resumeStore.calls, "the resume of d") // w is joined
			dc.snapshot()
			dc.finish()
		case "Lc":
			if err := mem.Append(bg, tok, w, terminal, 2); err != nil {
				t.Fatal(err)
			}
		case "Lo":
			h.tr.Observe(bg, "default", w, 3, terminal)
			if slices.Index(order, "Fs") >= 0 {
				fc = next(t, fillReader.calls, "the fill of w")
				fillPending = true
			}
		case "Fs":
			fc.snapshot()
		case "Fj":
			if slices.Index(order, "Rj") > slices.Index(order, "Fj") {
				fc.finish()
				if err := h.tr.WaitFilled(bg); err != nil {
					t.Fatal(err)
				}
				fillPending = false
				break
			}
			// Resume has joined w: it waits for the fill, which may
			// still decide, join or record w's facts.
			select {
			case r := <-done:
				t.Fatalf("Resume returned (%+v, %v) while the fill of a workflow it read was pending", r.report, r.err)
			case <-waits:
			}
			fc.finish() // the last step: Resume's return is the wait
			fillPending = false
		}
		if err := h.tr.join.check(); err != nil {
			t.Fatalf("after %s: %v", step, err)
		}
	}
	if fillPending {
		t.Fatal("the order left the fill pending")
	}
	r := <-done
	if r.err != nil || r.report.Workflows != 2 {
		t.Fatalf("Resume = %+v, %v", r.report, r.err)
	}

	// No WaitFilled here: Resume and the live call have returned.
	h.assertMetric(wantInflight(point(attrs("default", "charge"), 0)))
	h.assertMetric(wantCompleted(point(attrs("default", "charge", OutcomeSucceeded), 1)))
	h.assertMetric(wantDuration(hist(attrs("default", "charge", OutcomeSucceeded), 10)))
	h.assertAbsent(catalog.ActivitiesDispatched)
	if n := h.tr.InFlight(); n != 0 {
		t.Errorf("InFlight() = %d, want 0", n)
	}
	ended := h.spans.Ended()
	if len(ended) != 1 || ended[0].Name() != "activity charge" {
		t.Fatalf("ended spans %v, want one activity span", spanNames(ended))
	}
	a := ended[0]
	if !a.StartTime().Equal(ts(1000)) || !a.EndTime().Equal(ts(11000)) {
		t.Errorf("activity span %v..%v, want history's 1s..11s", a.StartTime().Sub(t0), a.EndTime().Sub(t0))
	}
	var runSpans int
	for _, s := range h.spans.Started() {
		if s.Name() != "workflow order" || s.SpanContext().TraceID() != a.SpanContext().TraceID() {
			continue
		}
		runSpans++
		if a.Parent().SpanID() != s.SpanContext().SpanID() {
			t.Errorf("the activity span's parent is not its run span")
		}
		if !s.StartTime().Equal(ts(0)) {
			t.Errorf("run span starts at %v, want history's 0s", s.StartTime().Sub(t0))
		}
	}
	if runSpans != 1 {
		t.Errorf("%d run spans started for w, want 1", runSpans)
	}
	if len(h.errs) > 0 {
		t.Errorf("reported: %v", h.errs)
	}
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name())
	}
	return names
}

// Resume waits only for the fills of the workflows it read: a fill of
// another workflow, held, does not hold it.
func TestResumeDoesNotWaitForOtherFills(t *testing.T) {
	mem := eventstore.NewMemory()
	tok := eventstore.RecorderToken()
	w, other, run := wfID(1), wfID(3), runID(1)
	env := func(ms int) eventstore.Envelope { return eventstore.Envelope{RunID: run, RecordedAt: ts(ms)} }
	for _, id := range []eventstore.WorkflowID{w, other} {
		if err := mem.Append(bg, tok, id, []eventstore.Event{
			eventstore.WorkflowStarted{Envelope: env(0), WorkflowType: "order"},
			eventstore.ActivityScheduled{Envelope: env(1000), ActivityID: 0, ActivityType: "charge"},
		}, 0); err != nil {
			t.Fatal(err)
		}
	}
	fillReader := &stepped{Memory: mem, calls: make(chan *readCall)}
	h := newHarness(t, WithHistory(fillReader))
	h.tr.fill.onWait = func() { t.Error("Resume waited for the fill of a workflow it did not read") }
	terminal := []eventstore.Event{eventstore.ActivityCompleted{Envelope: env(11000), ActivityID: 0}}
	if err := mem.Append(bg, tok, other, terminal, 2); err != nil {
		t.Fatal(err)
	}
	h.tr.Observe(bg, "default", other, 3, terminal)
	fc := next(t, fillReader.calls, "the fill of the other workflow")
	resumeStore := &stepped{Memory: mem, order: []eventstore.WorkflowID{w}, calls: make(chan *readCall)}
	done := make(chan error, 1)
	go func() {
		_, err := h.tr.Resume(bg, "default", resumeStore)
		done <- err
	}()
	rc := next(t, resumeStore.calls, "the resume of w")
	rc.snapshot()
	rc.finish()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Resume waits for the fill of a workflow it did not read")
	}
	// w resumed in flight; the other workflow's completion waits for its fill.
	if n := h.tr.InFlight(); n != 1 {
		t.Errorf("InFlight() = %d, want w's activity", n)
	}
	h.tr.fill.onWait = nil
	fc.snapshot()
	fc.finish()
	if err := h.tr.WaitFilled(bg); err != nil {
		t.Fatal(err)
	}
	h.assertMetric(wantInflight(point(attrs("default", "charge"), 1)))
	h.assertMetric(wantCompleted(point(attrs("default", "charge", OutcomeSucceeded), 1)))
	h.assertMetric(wantDuration(hist(attrs("default", "charge", OutcomeSucceeded), 10)))
}
