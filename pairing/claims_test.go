package pairing

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/historytest"
)

// checkWaits verifies the waiting state: the waiting heaps hold exactly
// the activities in flight with a staged row and no claim, each at its
// index; every type with a staged dispatch has a waiting point; claims
// are sorted, distinct and bounded. j.mu is held (check calls it).
func (j *join) checkWaits() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	inHeaps := 0
	for ta, h := range j.waits {
		for i, a := range h.list {
			if !a.waiting || int(a.heapAt[slotWaiting]) != i || a.ta != ta {
				fail("waiting heap: activity %d at %d says %d (waiting %v)", a.id, i, a.heapAt[slotWaiting], a.waiting)
			}
			inHeaps++
		}
	}
	waiting := 0
	for w := range j.workflows.all {
		for r := range w.runs {
			for a := range r.activities {
				if want := a.state == actLive && a.staged && len(a.claims()) == 0; a.waiting != want {
					fail("activity %d: waiting %v, want %v (state %d, staged %v, %d claims)", a.id, a.waiting, want, a.state, a.staged, len(a.claims()))
				}
				if a.waiting {
					waiting++
				}
				if c := a.claims(); len(c) > maxClaims || !slices.IsSorted(c) || len(slices.Compact(slices.Clone(c))) != len(c) {
					fail("activity %d: claims %v", a.id, c)
				}
				if a.staged && a.dispatched && j.waits[a.ta] == nil {
					fail("activity %d: staged and dispatched, its type has no waiting point", a.id)
				}
			}
		}
	}
	if inHeaps != waiting {
		fail("%d activities wait, %d in the waiting heaps", waiting, inHeaps)
	}
	return errors.Join(errs...)
}

// row is the outbox row of the activity k.
func row(k Key) eventstore.OutboxRow {
	return eventstore.OutboxRow{WorkflowID: k.WorkflowID, RunID: k.RunID, Ordinal: k.ActivityID, ActivityType: "as staged"}
}

func (h *harness) stage(k Key) int {
	return h.tr.Staged(bg, k.Namespace, k.WorkflowID, []eventstore.OutboxRow{row(k)})
}

func (h *harness) claim(k Key, at time.Time) int {
	return h.tr.Claimed(bg, k.Namespace, []eventstore.OutboxRow{row(k)}, at)
}

func wantWait(pts ...metricdata.HistogramDataPoint[float64]) *metricdata.Metrics {
	return &metricdata.Metrics{
		Name: catalog.ActivityWaitDuration, Description: "Time an activity waited for a worker: from its dispatch to the first claim of its outbox row.", Unit: catalog.UnitSeconds,
		Data: metricdata.Histogram[float64]{DataPoints: pts, Temporality: metricdata.CumulativeTemporality},
	}
}

// claimEvents renders a span's claim events as "count@ms" after t0.
func claimEvents(s sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, e := range s.Events() {
		if e.Name != catalog.ClaimEvent {
			continue
		}
		n := int64(-1)
		for _, kv := range e.Attributes {
			if kv.Key == catalog.ClaimCount {
				n = kv.Value.AsInt64()
			}
		}
		out = append(out, fmt.Sprintf("%d@%d", n, e.Time.Sub(t0).Milliseconds()))
	}
	return out
}

// The wait: from the dispatch to the first claim known when the two meet,
// once per dispatch, in whatever order they arrive; every claim is an
// event on the activity span, at its time.
func TestWaitIsDispatchToFirstClaim(t *testing.T) {
	k := key("n", 1, 1, 0)
	run := eventstore.Envelope{RunID: k.RunID}
	at := func(ms int) eventstore.Envelope { e := run; e.RecordedAt = ts(ms); return e }
	testCases := []struct {
		name   string
		steps  func(h *harness)
		waits  []float64 // charge's wait samples, seconds
		events []string  // the claim events of the activity span, nil: none
	}{
		{"claimed after its dispatch", func(h *harness) {
			h.tr.Dispatched(bg, k, "charge", ts(0))
			h.stage(k)
			h.claim(k, ts(1500))
			h.tr.Finished(bg, k, OutcomeSucceeded, ts(4000))
		}, []float64{1.5}, []string{"1@1500"}},
		{"claimed before its dispatch arrived", func(h *harness) {
			h.claim(k, ts(2000))
			h.stage(k)
			h.tr.Dispatched(bg, k, "charge", ts(0))
			h.tr.Finished(bg, k, OutcomeSucceeded, ts(3000))
		}, []float64{2}, []string{"1@2000"}},
		{"the same claim twice", func(h *harness) {
			h.tr.Dispatched(bg, k, "charge", ts(0))
			h.claim(k, ts(1000))
			h.claim(k, ts(1000))
			h.tr.Finished(bg, k, OutcomeSucceeded, ts(3000))
		}, []float64{1}, []string{"1@1000"}},
		{"re-armed and claimed again", func(h *harness) {
			h.tr.Dispatched(bg, k, "charge", ts(0))
			h.claim(k, ts(1000))
			h.claim(k, ts(5000))
			h.tr.Finished(bg, k, OutcomeSucceeded, ts(6000))
		}, []float64{1}, []string{"1@1000", "2@5000"}},
		{"both claims before the dispatch, the later first", func(h *harness) {
			h.claim(k, ts(5000))
			h.claim(k, ts(1000))
			h.tr.Dispatched(bg, k, "charge", ts(0))
			h.tr.Finished(bg, k, OutcomeSucceeded, ts(6000))
		}, []float64{1}, []string{"1@1000", "2@5000"}},
		{"claimed before the dispatch's time", func(h *harness) {
			h.tr.Dispatched(bg, k, "charge", ts(1000))
			h.claim(k, ts(0))
			h.tr.Finished(bg, k, OutcomeSucceeded, ts(2000))
		}, []float64{0}, []string{"1@1000"}}, // within the span
		{"never claimed", func(h *harness) {
			h.tr.Dispatched(bg, k, "charge", ts(0))
			h.stage(k)
			h.tr.Finished(bg, k, OutcomeCancelled, ts(1000))
		}, nil, nil},
		{"claimed after its completion was recorded", func(h *harness) {
			h.tr.Dispatched(bg, k, "charge", ts(0))
			h.tr.Finished(bg, k, OutcomeSucceeded, ts(1000))
			h.claim(k, ts(500))
		}, nil, nil},
		{"claimed with no staged row seen", func(h *harness) {
			h.tr.Dispatched(bg, k, "charge", ts(0))
			h.claim(k, ts(700))
			h.tr.Finished(bg, k, OutcomeSucceeded, ts(1000))
		}, []float64{0.7}, []string{"1@700"}},
		{"claimed, then its run abandoned", func(h *harness) {
			h.tr.Dispatched(bg, k, "charge", ts(0))
			h.claim(k, ts(250))
			h.tr.AbandonRun(bg, "n", k.WorkflowID, k.RunID, ts(900))
		}, []float64{0.25}, []string{"1@250"}},
		{"claimed while its settlement waits for a position", func(h *harness) {
			h.tr.Observe(bg, "n", k.WorkflowID, 1, []eventstore.Event{eventstore.ActivityScheduled{Envelope: at(0), ActivityID: 0, ActivityType: "charge"}})
			h.tr.Observe(bg, "n", k.WorkflowID, 3, []eventstore.Event{eventstore.ActivityCompleted{Envelope: at(3000), ActivityID: 0}})
			h.claim(k, ts(1000))
			h.tr.Observe(bg, "n", k.WorkflowID, 2, []eventstore.Event{eventstore.SignalReceived{Envelope: at(2000)}})
		}, []float64{1}, []string{"1@1000"}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			tc.steps(h)
			if err := h.tr.join.check(); err != nil {
				t.Fatal(err)
			}
			if tc.waits == nil {
				h.assertAbsent(catalog.ActivityWaitDuration)
			} else {
				h.assertMetric(wantWait(hist(attrs("n", "charge"), tc.waits...)))
			}
			spans := h.spans.Ended()
			if len(spans) != 1 || spans[0].Name() != "activity charge" {
				t.Fatalf("%d spans ended, want the activity span", len(spans))
			}
			if got := claimEvents(spans[0]); !slices.Equal(got, tc.events) {
				t.Errorf("claim events %v, want %v", got, tc.events)
			}
			if len(h.errs) > 0 {
				t.Errorf("reported: %v", h.errs)
			}
		})
	}
}

// Claimed returns the waits it recorded; Staged the activities it put to
// waiting. Rows of another workflow than the staging's are ignored.
func TestStagedAndClaimedResults(t *testing.T) {
	h := newHarness(t)
	k0, k1, other := key("n", 1, 1, 0), key("n", 1, 1, 1), key("n", 2, 1, 0)
	h.tr.Dispatched(bg, k0, "charge", ts(0))
	h.tr.Dispatched(bg, other, "charge", ts(0))
	rows := []eventstore.OutboxRow{row(k0), row(k1), row(other)}
	if n := h.tr.Staged(bg, "n", k0.WorkflowID, rows); n != 1 {
		t.Errorf("Staged = %d, want 1 (k1 is not dispatched, the third row names another workflow)", n)
	}
	if n := h.tr.Staged(bg, "n", k0.WorkflowID, rows); n != 0 {
		t.Errorf("Staged again = %d, want 0", n)
	}
	h.tr.Dispatched(bg, k1, "charge", ts(0))
	if n := h.tr.Claimed(bg, "n", rows, ts(1000)); n != 3 {
		t.Errorf("Claimed = %d, want 3 waits", n)
	}
	if n := h.tr.Claimed(bg, "n", rows, ts(2000)); n != 0 {
		t.Errorf("Claimed again = %d, want 0: a re-claim records no wait", n)
	}
	var nilTracker *Tracker
	if nilTracker.Staged(bg, "n", k0.WorkflowID, rows) != 0 || nilTracker.Claimed(bg, "n", rows, ts(0)) != 0 {
		t.Error("a nil tracker did something")
	}
	if err := h.tr.join.check(); err != nil {
		t.Fatal(err)
	}
}

// gaugePoints returns one gauge's points by attribute set.
func (h *harness) gaugePoints(name string) map[attribute.Set]float64 {
	out := map[attribute.Set]float64{}
	if m, ok := h.metric(name); ok {
		for _, dp := range m.Data.(metricdata.Gauge[float64]).DataPoints {
			out[dp.Attributes] = dp.Value
		}
	}
	return out
}

// The waiting age: per (namespace, type), the age of the oldest activity
// in flight whose row is staged and unclaimed, as the clock moves; 0 once
// none is, and no point for a type never staged. The in-flight age keeps
// counting the activities claimed and running.
func TestOldestWaitingAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		now := time.Now()
		charge, ship := attrs("n", "charge"), attrs("n", "ship")
		want := func(step string, c, s float64, inflightCharge float64) {
			t.Helper()
			if err := h.tr.join.check(); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
			got := h.gaugePoints(catalog.ActivityOldestWaitingAge)
			if len(got) != 2 || got[charge] != c || got[ship] != s {
				t.Errorf("%s: waiting ages %v, want charge %v and ship %v", step, got, c, s)
			}
			if in := h.gaugePoints(catalog.ActivityOldestInflightAge); in[charge] != inflightCharge {
				t.Errorf("%s: in-flight age of charge %v, want %v", step, in[charge], inflightCharge)
			}
		}
		k0, k1, k2, k3, k4 := key("n", 1, 1, 0), key("n", 1, 1, 1), key("n", 1, 1, 2), key("n", 1, 1, 3), key("n", 2, 1, 0)
		h.tr.Dispatched(bg, k0, "charge", now.Add(-10*time.Minute))
		h.stage(k0)
		h.stage(k1) // staged before its dispatch arrives
		h.tr.Dispatched(bg, k1, "charge", now.Add(-30*time.Minute))
		h.tr.Dispatched(bg, k2, "ship", now.Add(-time.Hour)) // no row: never waits
		if got := h.gaugePoints(catalog.ActivityOldestWaitingAge); len(got) != 1 || got[charge] != 1800 {
			t.Errorf("before a ship row: waiting ages %v, want charge 1800 only", got)
		}
		h.tr.Dispatched(bg, k3, "ship", now)
		h.stage(k3)
		want("staged", 1800, 0, 1800)
		time.Sleep(time.Minute)
		want("a minute later", 1860, 60, 1860)
		h.claim(k1, time.Now())
		want("oldest charge claimed", 660, 60, 1860) // claimed: running, still in flight
		h.tr.Finished(bg, k0, OutcomeCancelled, time.Now())
		want("the other charge settled unclaimed", 0, 60, 1860)
		h.tr.Dispatched(bg, k4, "ship", now.Add(-2*time.Minute))
		h.claim(k4, time.Now()) // claimed before its row's staging is seen
		h.stage(k4)
		want("a ship claimed, then staged", 0, 60, 1860)
		h.claim(k3, time.Now())
		want("the last row claimed", 0, 0, 1860)
	})
}

// An activity leaves the waiting set with flight, whichever way: evicted
// by the memory bound, or its run closed.
func TestWaitingEndsWithFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, WithMaxInFlight(2))
		now := time.Now()
		k0, k1, k2 := key("n", 1, 1, 0), key("n", 1, 1, 1), key("n", 2, 1, 0)
		for i, k := range []Key{k0, k1} {
			h.tr.Dispatched(bg, k, "charge", now.Add(-time.Duration(10-i)*time.Minute))
			h.stage(k)
		}
		h.tr.Dispatched(bg, k2, "charge", now) // evicts k0, the oldest in arrival order
		h.stage(k2)
		if got := h.gaugePoints(catalog.ActivityOldestWaitingAge)[attrs("n", "charge")]; got != 540 {
			t.Errorf("after an eviction: waiting age %v, want 540 (k1)", got)
		}
		h.tr.RunClosed(bg, "n", k1.WorkflowID, k1.RunID, eventstore.StatusFailed, now)
		h.tr.AbandonRun(bg, "n", k2.WorkflowID, k2.RunID, now)
		if got := h.gaugePoints(catalog.ActivityOldestWaitingAge)[attrs("n", "charge")]; got != 0 {
			t.Errorf("every run closed: waiting age %v, want 0", got)
		}
		if err := h.tr.join.check(); err != nil {
			t.Fatal(err)
		}
	})
}

// readBack feeds a history as a resume reads it back: positions from the
// events, facts not seen committing.
func readBack(tr *Tracker, namespace string, wf eventstore.WorkflowID, history []eventstore.Event) {
	fx := getEffects(bg)
	defer putEffects(fx)
	for _, ev := range history {
		f, at, seq := factOf(ev)
		if seq == 0 {
			seq = envelopeOf(ev).Seq
		}
		fx.ranges = append(fx.ranges, seqRange{seq, seq})
		if f.kind != factNone {
			f.pos.seq, f.at = seq, nanos(at)
			fx.facts = append(fx.facts, f)
		}
	}
	tr.observe(fx, namespace, wf)
}

// After a restart, the waiting state starts empty: claims and rows are
// not in history. A dispatch read back (a resume) is in flight and not
// waiting; a claim of it records no wait, since its row may have been
// claimed before the restart, but is an event on its span. If the append
// of the dispatch then returns here (it raced with the resume), the
// dispatch is this process's and its wait is recorded.
func TestResumedDispatchRecordsNoWait(t *testing.T) {
	k := key("n", 1, 1, 0)
	env := func(seq uint64, ms int) eventstore.Envelope {
		return eventstore.Envelope{WorkflowID: k.WorkflowID, RunID: k.RunID, Seq: seq, RecordedAt: ts(ms)}
	}
	history := []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: env(1, 0), WorkflowType: "flow"},
		eventstore.ActivityScheduled{Envelope: env(2, 0), ActivityID: 0, ActivityType: "charge"},
	}
	completed := []eventstore.Event{eventstore.ActivityCompleted{Envelope: env(3, 3000), ActivityID: 0}}
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("append returns late %v", late), func(t *testing.T) {
			h := newHarness(t)
			readBack(h.tr, "n", k.WorkflowID, history)
			if h.tr.InFlight() != 1 {
				t.Fatalf("%d in flight after the resume, want 1", h.tr.InFlight())
			}
			if n := h.claim(k, ts(1000)); n != 0 {
				t.Errorf("a claim of a resumed dispatch recorded %d waits", n)
			}
			if got := h.gaugePoints(catalog.ActivityOldestWaitingAge); len(got) != 0 {
				t.Errorf("waiting ages %v after a resume, want none", got)
			}
			if late {
				h.tr.Observe(bg, "n", k.WorkflowID, 1, history)
			}
			h.tr.Observe(bg, "n", k.WorkflowID, 3, completed)
			if err := h.tr.join.check(); err != nil {
				t.Fatal(err)
			}
			if late {
				h.assertMetric(wantWait(hist(attrs("n", "charge"), 1)))
			} else {
				h.assertAbsent(catalog.ActivityWaitDuration)
			}
			var events []string
			for _, s := range h.spans.Ended() {
				if s.Name() == "activity charge" {
					events = append(events, claimEvents(s)...)
				}
			}
			if !slices.Equal(events, []string{"1@1000"}) {
				t.Errorf("claim events %v, want one at 1000ms", events)
			}
		})
	}
}

// Outbox facts in churn past both bounds, with claims and stagings of
// activities never dispatched, settled long ago, or claimed many times:
// the join stays whole after every call (the waiting heaps included), the
// gauge equals the activities in flight, and a claim whose dispatch never
// comes is dropped without counting as forgotten.
func TestClaimsBoundsHoldUnderChurn(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for c := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed+c, 5))
		h := newHarness(t, WithMaxInFlight(1+rng.IntN(6)), WithMaxRemembered(1+rng.IntN(12)))
		var batches []historytest.Batch
		for range 3 {
			batches = append(batches, historytest.Cut(rng, historytest.Generate(rng))...)
		}
		for i, b := range historytest.Shuffle(rng, batches, true) {
			h.tr.Observe(trace.ContextWithSpanContext(bg, b.Call), b.Namespace, b.WorkflowID, b.FirstSeq, b.Events)
			for range rng.IntN(4) {
				k := Key{Namespace: b.Namespace, WorkflowID: b.WorkflowID, RunID: historytest.RunID(1 + rng.IntN(3)), ActivityID: eventstore.ActivityID(rng.IntN(14))}
				if rng.IntN(2) == 0 {
					h.stage(k)
				} else {
					h.claim(k, time.Unix(1_000_000+rng.Int64N(100), 0))
				}
			}
			if err := h.tr.join.check(); err != nil {
				t.Fatalf("seed %d, batch %d: %v", seed+c, i, err)
			}
			var gauge int64
			for _, v := range readSnapshot(h.scope()).inflight {
				gauge += v
			}
			if gauge != int64(h.tr.InFlight()) {
				t.Fatalf("seed %d, batch %d: gauge %d, %d in flight", seed+c, i, gauge, h.tr.InFlight())
			}
		}
	}
	// Claims alone, of dispatches never seen, past the bound: silent.
	h := newHarness(t, WithMaxRemembered(4))
	for i := range 32 {
		h.claim(key("n", byte(i), 1, 0), ts(i))
		h.stage(key("n", byte(i), 2, 0))
	}
	if err := h.tr.join.check(); err != nil {
		t.Fatal(err)
	}
	h.assertAbsent(catalog.PairingForgotten)
}

// Stagings, claims, dispatches, terminals and collections from many
// goroutines leave the join whole, nothing waiting once every row is
// claimed, and one wait per claimed dispatch.
func TestClaimsConcurrentSafe(t *testing.T) {
	h := newHarness(t)
	const workers, acts = 8, 100
	var wg sync.WaitGroup
	for g := range workers {
		wg.Go(func() {
			for i := range acts {
				k := key("n", byte(g), 1, uint64(i))
				if i%2 == 0 {
					h.claim(k, ts(1000*i+5000))
					h.stage(k)
					h.tr.Dispatched(bg, k, "charge", ts(1000*i))
				} else {
					h.tr.Dispatched(bg, k, "charge", ts(1000*i))
					h.stage(k)
					h.claim(k, ts(1000*i+5000))
				}
				h.claim(k, ts(1000*i+5000)) // a repeat
				if i%3 == 0 {
					h.tr.Finished(bg, k, OutcomeSucceeded, ts(1000*i+9000))
				}
			}
		})
	}
	wg.Go(func() {
		for range 20 {
			if _, err := collectScope(h.reader); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Wait()
	if err := h.tr.join.check(); err != nil {
		t.Fatal(err)
	}
	if got := h.gaugePoints(catalog.ActivityOldestWaitingAge)[attrs("n", "charge")]; got != 0 {
		t.Errorf("waiting age %v with every row claimed, want 0", got)
	}
	samples := make([]float64, workers*acts)
	for i := range samples {
		samples[i] = 5
	}
	h.assertMetric(wantWait(hist(attrs("n", "charge"), samples...)))
}
