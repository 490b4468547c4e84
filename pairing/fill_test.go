package pairing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// adopted is a run its predecessor wrote up to position 5 (start,
// three dispatches, one completion, one retry) and this tracker's process
// goes on with: a retry, a terminal, a new dispatch and the close, in one
// batch at positions 6 to 9.
func adopted(t *testing.T) (store *eventstore.Memory, before, after []eventstore.Event) {
	t.Helper()
	run := runID(1)
	env := func(ms int) eventstore.Envelope { return eventstore.Envelope{RunID: run, RecordedAt: ts(ms)} }
	before = []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: env(0), WorkflowType: "flow"},
		eventstore.ActivityScheduled{Envelope: env(1000), ActivityID: 0, ActivityType: "charge"},
		eventstore.ActivityScheduled{Envelope: env(2000), ActivityID: 1, ActivityType: "ship"},
		eventstore.ActivityCompleted{Envelope: env(3000), ActivityID: 0},
		eventstore.ActivityFailed{Envelope: env(4000), ActivityID: 1, Error: eventstore.ActivityError{Kind: eventstore.Retryable}},
	}
	after = []eventstore.Event{
		eventstore.ActivityFailed{Envelope: env(5000), ActivityID: 1, Error: eventstore.ActivityError{Kind: eventstore.Retryable}},
		eventstore.ActivityCompleted{Envelope: env(7000), ActivityID: 1},
		eventstore.ActivityScheduled{Envelope: env(8000), ActivityID: 2, ActivityType: "llm"},
		eventstore.WorkflowCompleted{Envelope: env(10000)},
	}
	store = eventstore.NewMemory()
	if err := store.Append(bg, eventstore.RecorderToken(), wfID(1), before, 0); err != nil {
		t.Fatal(err)
	}
	if err := store.Append(bg, eventstore.RecorderToken(), wfID(1), after, uint64(len(before))); err != nil {
		t.Fatal(err)
	}
	return store, before, after
}

// A batch past what the tracker has seen of its workflow is a gap: the
// tracker reads that history once, in the background, and joins it, so
// that the terminal, the retry and the close committed here record their
// completions, durations and spans at history's times; what the
// predecessor committed counts nothing here (its completion of charge, its
// first retry, its dispatches).
func TestGapFilledFromHistory(t *testing.T) {
	store, before, after := adopted(t)
	h := newHarness(t, WithHistory(store))
	h.tr.Observe(bg, "default", wfID(1), uint64(len(before))+1, after)
	if err := h.tr.WaitFilled(bg); err != nil {
		t.Fatal(err)
	}
	checkAdopted(t, h)
	if got, want := h.tr.Fills(), (FillReport{Gaps: 1, Read: 1, Events: 9}); got != want {
		t.Errorf("Fills() = %+v, want %+v", got, want)
	}
	if got := h.sums(catalog.PairingResumed); len(got) != 1 || got[attribute.NewSet(catalog.Namespace.String("default"))] != 1 {
		t.Errorf("aion.pairing.resumed = %v, want 1 read", got)
	}
}

// checkAdopted checks the telemetry of the adopted run: exact against its
// history for what this process committed.
func checkAdopted(t *testing.T, h *harness) {
	t.Helper()
	h.assertMetric(wantCompleted(point(attrs("default", "ship", OutcomeSucceeded), 1), point(attrs("default", "llm", OutcomeAbandoned), 1)))
	h.assertMetric(wantDuration(hist(attrs("default", "ship", OutcomeSucceeded), 5), hist(attrs("default", "llm", OutcomeAbandoned), 2)))
	h.assertMetric(wantRetried(point(attrs("default", "ship"), 1)))
	h.assertMetric(wantDispatched(point(attrs("default", "llm"), 1)))
	if m, ok := h.metric(catalog.WorkflowDuration); !ok || len(m.Data.(metricdata.Histogram[float64]).DataPoints) != 1 || m.Data.(metricdata.Histogram[float64]).DataPoints[0].Sum != 10 {
		t.Errorf("workflow duration: %+v, want one run of 10 s", m.Data)
	}
	for _, v := range h.sums(catalog.InflightActivities) {
		if v != 0 {
			t.Errorf("in flight %d, want 0", v)
		}
	}
	spans := map[string]string{}
	for _, s := range h.spans.Ended() {
		spans[s.Name()] = fmt.Sprintf("%v..%v", s.StartTime().Sub(t0), s.EndTime().Sub(t0))
	}
	want := map[string]string{"workflow flow": "0s..10s", "activity ship": "2s..7s", "activity llm": "8s..10s"}
	if fmt.Sprint(spans) != fmt.Sprint(want) {
		t.Errorf("spans %v, want %v", spans, want)
	}
	checkParents(t, h.spans.Ended(), 2)
}

// gate is a HistoryReader that waits for its gate to open, then reads
// from its store, or fails with err.
type gate struct {
	store HistoryReader
	open  chan struct{}
	err   error
	mu    sync.Mutex
	reads int
}

func (g *gate) ReadHistory(ctx context.Context, id eventstore.WorkflowID) ([]eventstore.Event, error) {
	return g.ReadHistoryFrom(ctx, id, 0)
}

func (g *gate) ReadHistoryFrom(ctx context.Context, id eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
	g.mu.Lock()
	g.reads++
	g.mu.Unlock()
	if g.open != nil {
		<-g.open
	}
	if g.err != nil {
		return nil, g.err
	}
	if from <= 1 {
		return g.store.ReadHistory(ctx, id)
	}
	return g.store.ReadHistoryFrom(ctx, id, from)
}

// Whatever the order of the fill, a resume and the live batches (the fill
// read before, between or after them, a resume before or after), the
// telemetry is the same, and the history is read once by the fill.
func TestGapFillOrderDoesNotMatter(t *testing.T) {
	for _, order := range []string{"live,fill,resume", "resume,live,fill", "live,resume,fill", "fill-blocked,live2"} {
		t.Run(order, func(t *testing.T) {
			store, before, after := adopted(t)
			g := &gate{store: store, open: make(chan struct{})}
			h := newHarness(t)
			first := uint64(len(before)) + 1
			switch order {
			case "live,fill,resume":
				h.tr.ObserveFrom(bg, g, "default", wfID(1), first, after)
				close(g.open)
				_ = h.tr.WaitFilled(bg)
				if _, err := h.tr.Resume(bg, "default", store); err != nil {
					t.Fatal(err)
				}
			case "resume,live,fill":
				if _, err := h.tr.Resume(bg, "default", store); err != nil {
					t.Fatal(err)
				}
				h.tr.ObserveFrom(bg, g, "default", wfID(1), first, after)
				close(g.open)
			case "live,resume,fill":
				h.tr.ObserveFrom(bg, g, "default", wfID(1), first, after)
				if _, err := h.tr.Resume(bg, "default", store); err != nil {
					t.Fatal(err)
				}
				close(g.open)
			case "fill-blocked,live2": // the live batch in two, the fill read between
				h.tr.ObserveFrom(bg, g, "default", wfID(1), first+2, after[2:])
				close(g.open)
				_ = h.tr.WaitFilled(bg)
				h.tr.ObserveFrom(bg, g, "default", wfID(1), first, after[:2])
			}
			if err := h.tr.WaitFilled(bg); err != nil {
				t.Fatal(err)
			}
			checkAdopted(t, h)
			if g.reads > 1 {
				t.Errorf("history read %d times by fills", g.reads)
			}
		})
	}
}

// A gap whose history cannot be read is counted (aion.pairing.resumed with
// error.type, Fills().Failed), not guessed: no completion is recorded for
// a terminal whose dispatch was not read, and the gap is not read again by
// the batches that follow.
func TestGapFillFailureCounted(t *testing.T) {
	store, before, after := adopted(t)
	g := &gate{store: store, err: fmt.Errorf("gone: %w", eventstore.ErrNotFound)}
	h := newHarness(t, WithHistory(g))
	first := uint64(len(before)) + 1
	h.tr.Observe(bg, "default", wfID(1), first, after[:2])
	_ = h.tr.WaitFilled(bg)
	h.tr.Observe(bg, "default", wfID(1), first+2, after[2:])
	_ = h.tr.WaitFilled(bg)
	if got, want := h.tr.Fills(), (FillReport{Gaps: 1, Failed: 1}); got != want {
		t.Errorf("Fills() = %+v, want %+v", got, want)
	}
	want := attribute.NewSet(catalog.Namespace.String("default"), catalog.ErrorType.String("not_found"))
	if got := h.sums(catalog.PairingResumed); got[want] != 1 || len(got) != 1 {
		t.Errorf("aion.pairing.resumed = %v, want 1 not_found", got)
	}
	if got := h.sums(catalog.ActivitiesCompleted); got[attrs("default", "ship", OutcomeSucceeded)] != 0 {
		t.Errorf("a completion guessed: %v", got)
	}
	if g.reads != 1 {
		t.Errorf("history read %d times, want 1", g.reads)
	}
}

// A gap of a workflow deleted by retention after its batch committed: the
// store reads an unknown workflow as empty, without an error. That is a
// failed fill too (error.type not_found, Fills().Failed), not a history
// read, through a single read and through a batch reader alike; nothing is
// guessed.
func TestGapFillOfADeletedWorkflowCounted(t *testing.T) {
	_, before, after := adopted(t)
	for name, reader := range map[string]HistoryReader{
		"single read": eventstore.NewMemory(),
		"batch read":  &fillStore{m: eventstore.NewMemory()},
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, WithHistory(reader))
			h.tr.Observe(bg, "default", wfID(1), uint64(len(before))+1, after)
			if err := h.tr.WaitFilled(bg); err != nil {
				t.Fatal(err)
			}
			if got, want := h.tr.Fills(), (FillReport{Gaps: 1, Failed: 1}); got != want {
				t.Errorf("Fills() = %+v, want %+v", got, want)
			}
			want := attribute.NewSet(catalog.Namespace.String("default"), catalog.ErrorType.String("not_found"))
			if got := h.sums(catalog.PairingResumed); got[want] != 1 || len(got) != 1 {
				t.Errorf("aion.pairing.resumed = %v, want 1 not_found", got)
			}
			if got := h.sums(catalog.ActivitiesCompleted); got[attrs("default", "ship", OutcomeSucceeded)] != 0 {
				t.Errorf("a completion guessed: %v", got)
			}
		})
	}
}

// A fill whose history comes back after its workflow's shard was released
// joins nothing: the gauge keeps to what this node serves.
func TestGapFillAfterReleaseJoinsNothing(t *testing.T) {
	store, before, _ := adopted(t)
	g := &gate{store: store, open: make(chan struct{})}
	h := newHarness(t, WithHistory(g))
	// The dead node left charge and ship in flight; a signal is the first
	// touch here.
	h.tr.Observe(bg, "default", wfID(1), uint64(len(before))-1, before[len(before)-2:len(before)-1])
	h.tr.ReleaseShards(bg, "default", 1, 0)
	close(g.open)
	_ = h.tr.WaitFilled(bg)
	if n := h.tr.InFlight(); n != 0 {
		t.Errorf("%d in flight after the release, want 0", n)
	}
	if got := h.tr.Fills(); got.Skipped != 1 || got.Read != 0 {
		t.Errorf("Fills() = %+v, want the fill skipped", got)
	}
	for _, v := range h.sums(catalog.InflightActivities) {
		if v != 0 {
			t.Errorf("gauge %d, want 0", v)
		}
	}
}

// A reader that panics is a failed read, reported by count, and the
// tracker goes on.
func TestGapFillReaderPanics(t *testing.T) {
	_, before, after := adopted(t)
	h := newHarness(t, WithHistory(panicReader{}))
	h.tr.Observe(bg, "default", wfID(1), uint64(len(before))+1, after)
	_ = h.tr.WaitFilled(bg)
	if got := h.tr.Fills(); got.Failed != 1 {
		t.Errorf("Fills() = %+v, want 1 failed", got)
	}
}

type panicReader struct{}

func (panicReader) ReadHistory(context.Context, eventstore.WorkflowID) ([]eventstore.Event, error) {
	panic("boom")
}

func (panicReader) ReadHistoryFrom(context.Context, eventstore.WorkflowID, uint64) ([]eventstore.Event, error) {
	panic("boom")
}

// WaitFilled returns ctx's error while a fill is blocked.
func TestWaitFilledHonoursContext(t *testing.T) {
	store, before, after := adopted(t)
	g := &gate{store: store, open: make(chan struct{})}
	h := newHarness(t, WithHistory(g))
	h.tr.Observe(bg, "default", wfID(1), uint64(len(before))+1, after)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	if err := h.tr.WaitFilled(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("WaitFilled = %v, want context.Canceled", err)
	}
	close(g.open)
	if err := h.tr.WaitFilled(bg); err != nil {
		t.Fatal(err)
	}
	checkAdopted(t, h)
}
