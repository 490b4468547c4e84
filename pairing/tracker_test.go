package pairing

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// Seed rule: a dispatch raises the in-flight gauge and the dispatched counter,
// under the namespace and the activity type, and records nothing else.
func TestDispatchRaisesGaugeAndCounter(t *testing.T) {
	h := newHarness(t)
	if !h.tr.Dispatched(bg, key("tenant-a", 1, 1, 0), "charge", ts(0)) {
		t.Fatal("Dispatched of a new key = false, want true")
	}
	if got := h.tr.InFlight(); got != 1 {
		t.Errorf("InFlight = %d, want 1", got)
	}
	h.assertMetric(wantInflight(point(attrs("tenant-a", "charge"), 1)))
	h.assertMetric(wantDispatched(point(attrs("tenant-a", "charge"), 1)))
	h.assertAbsent(catalog.ActivitiesCompleted)
	h.assertAbsent(catalog.ActivityDuration)
	h.assertAbsent(catalog.ActivityPairingEvicted)
}

// A duplicate dispatch of a live key (a re-driven append) changes nothing:
// no second count, no second gauge slot, and the first dispatch time and
// type stay, as the later duration and attributes show.
func TestDuplicateDispatchChangesNothing(t *testing.T) {
	h := newHarness(t)
	k := key("tenant-a", 1, 1, 0)
	h.tr.Dispatched(bg, k, "charge", ts(0))
	if h.tr.Dispatched(bg, k, "charge", ts(400)) {
		t.Fatal("Dispatched of a live key = true, want false")
	}
	h.assertMetric(wantInflight(point(attrs("tenant-a", "charge"), 1)))
	h.assertMetric(wantDispatched(point(attrs("tenant-a", "charge"), 1)))

	// A duplicate claiming another type does not retype the entry. (Its
	// provisional gauge increment is taken back, which may leave a 0 point
	// for that type.)
	if h.tr.Dispatched(bg, k, "refund", ts(450)) {
		t.Fatal("Dispatched of a live key with another type = true, want false")
	}
	s := readSnapshot(h.scope())
	if s.inflight[nt{"tenant-a", "charge"}] != 1 || s.inflight[nt{"tenant-a", "refund"}] != 0 {
		t.Errorf("gauge = %v, want charge 1 and refund 0", s.inflight)
	}
	h.assertMetric(wantDispatched(point(attrs("tenant-a", "charge"), 1)))

	h.tr.Finished(bg, k, OutcomeSucceeded, ts(500))
	h.assertMetric(wantDuration(hist(attrs("tenant-a", "charge", OutcomeSucceeded), 0.5)))
	h.assertMetric(wantCompleted(point(attrs("tenant-a", "charge", OutcomeSucceeded), 1)))
	if got := h.tr.InFlight(); got != 0 {
		t.Errorf("InFlight = %d, want 0", got)
	}
}

// Seed rule: a completion nets the gauge back to zero and records the
// succeeded outcome and the dispatch-to-terminal duration.
func TestCompletionNetsGaugeToZero(t *testing.T) {
	h := newHarness(t)
	k := key("tenant-a", 1, 1, 0)
	h.tr.Dispatched(bg, k, "charge", ts(0))
	if !h.tr.Finished(bg, k, OutcomeSucceeded, ts(30)) {
		t.Fatal("Finished of a live key = false, want true")
	}
	if got := h.tr.InFlight(); got != 0 {
		t.Errorf("InFlight = %d, want 0", got)
	}
	h.assertMetric(wantInflight(point(attrs("tenant-a", "charge"), 0)))
	h.assertMetric(wantCompleted(point(attrs("tenant-a", "charge", OutcomeSucceeded), 1)))
	h.assertMetric(wantDuration(hist(attrs("tenant-a", "charge", OutcomeSucceeded), 0.03)))
}

// Seed rules: every terminal outcome decrements the gauge exactly once and
// records its own outcome on the counter and the histogram.
func TestTerminalOutcomes(t *testing.T) {
	testCases := []struct {
		name    string
		outcome Outcome
		want    string
	}{
		{"succeeded", OutcomeSucceeded, "succeeded"},
		{"failed", OutcomeFailed, "failed"},
		{"cancelled", OutcomeCancelled, "cancelled"},
		{"timed out", OutcomeTimedOut, "timed_out"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if string(tc.outcome) != tc.want {
				t.Fatalf("Outcome constant = %q, want %q", tc.outcome, tc.want)
			}
			h := newHarness(t)
			k := key("tenant-a", 1, 1, 0)
			h.tr.Dispatched(bg, k, "charge", ts(0))
			if !h.tr.Finished(bg, k, tc.outcome, ts(2000)) {
				t.Fatal("Finished = false, want true")
			}
			h.assertMetric(wantInflight(point(attrs("tenant-a", "charge"), 0)))
			h.assertMetric(wantCompleted(point(attrs("tenant-a", "charge", tc.outcome), 1)))
			h.assertMetric(wantDuration(hist(attrs("tenant-a", "charge", tc.outcome), 2)))
		})
	}
}

// Bad input: a terminal time before the dispatch time records 0, never a
// negative sample; the completion still counts.
func TestTerminalBeforeDispatchRecordsZero(t *testing.T) {
	h := newHarness(t)
	k := key("tenant-a", 1, 1, 0)
	h.tr.Dispatched(bg, k, "charge", ts(1000))
	h.tr.Finished(bg, k, OutcomeFailed, ts(10))
	h.assertMetric(wantDuration(hist(attrs("tenant-a", "charge", OutcomeFailed), 0)))
	h.assertMetric(wantCompleted(point(attrs("tenant-a", "charge", OutcomeFailed), 1)))
}

// A dispatch whose terminal, or whose run's close, arrived first is new
// (Dispatched returns true, the dispatch is counted) and settled at once:
// never in flight, the gauge not raised.
func TestDispatchAfterItsSettlerIsNewNotInFlight(t *testing.T) {
	h := newHarness(t)
	k := key("tenant-a", 1, 1, 0)
	h.tr.Finished(bg, k, OutcomeSucceeded, ts(2000))
	if !h.tr.Dispatched(bg, k, "charge", ts(1000)) {
		t.Error("a dispatch after its terminal = false, want true (new)")
	}
	closed := key("tenant-a", 2, 2, 0)
	h.tr.RunClosed(bg, "tenant-a", closed.WorkflowID, closed.RunID, eventstore.StatusCompleted, ts(3000))
	if !h.tr.Dispatched(bg, closed, "charge", ts(1000)) {
		t.Error("a dispatch after its run's close = false, want true (new)")
	}
	if n := h.tr.InFlight(); n != 0 {
		t.Errorf("InFlight = %d, want 0", n)
	}
	h.assertMetric(wantDispatched(point(attrs("tenant-a", "charge"), 2)))
	h.assertMetric(wantCompleted(point(attrs("tenant-a", "charge", OutcomeSucceeded), 1), point(attrs("tenant-a", "charge", OutcomeAbandoned), 1)))
}

// Seed rule: a duplicate terminal and a terminal for a never-dispatched key
// are no-ops: the gauge never drops below the true in-flight count and no
// phantom completion is counted.
func TestUnmatchedTerminalNeverUnderflows(t *testing.T) {
	h := newHarness(t)
	a, b := key("tenant-a", 1, 1, 0), key("tenant-a", 1, 1, 1)
	h.tr.Dispatched(bg, a, "charge", ts(0))
	h.tr.Dispatched(bg, b, "charge", ts(0))
	h.tr.Finished(bg, a, OutcomeSucceeded, ts(1))

	if h.tr.Finished(bg, a, OutcomeSucceeded, ts(2)) {
		t.Error("duplicate Finished = true, want false")
	}
	if h.tr.Finished(bg, key("tenant-a", 9, 9, 9), OutcomeFailed, ts(2)) {
		t.Error("Finished of a never-dispatched key = true, want false")
	}
	if got := h.tr.InFlight(); got != 1 {
		t.Errorf("InFlight = %d, want 1", got)
	}
	h.assertMetric(wantInflight(point(attrs("tenant-a", "charge"), 1)))
	h.assertMetric(wantCompleted(point(attrs("tenant-a", "charge", OutcomeSucceeded), 1)))
	h.assertMetric(wantDuration(hist(attrs("tenant-a", "charge", OutcomeSucceeded), 0.001)))

	// A terminal that reaches a fresh tracker (its dispatch seen by another
	// process) records nothing at all.
	fresh := newHarness(t)
	if fresh.tr.Finished(bg, a, OutcomeSucceeded, ts(3)) {
		t.Error("Finished on an empty tracker = true, want false")
	}
	if sm := fresh.scope(); len(sm.Metrics) != 0 {
		t.Errorf("empty tracker exported %d metrics after an unmatched terminal, want 0", len(sm.Metrics))
	}
}

// Seed rule: namespaces are isolated: the same (workflow, run, activity) in
// two namespaces is two entries, and one namespace's traffic never moves the
// other's gauge. The empty namespace is "default".
func TestNamespacesIsolated(t *testing.T) {
	h := newHarness(t)
	h.tr.Dispatched(bg, key("tenant-a", 1, 1, 0), "charge", ts(0))
	if !h.tr.Dispatched(bg, key("tenant-b", 1, 1, 0), "charge", ts(0)) {
		t.Fatal("same IDs in another namespace were not a new entry")
	}
	h.tr.Finished(bg, key("tenant-b", 1, 1, 0), OutcomeSucceeded, ts(5))
	h.assertMetric(wantInflight(
		point(attrs("tenant-a", "charge"), 1),
		point(attrs("tenant-b", "charge"), 0),
	))

	// "" and "default" are one namespace: the second dispatch is a duplicate
	// and the terminal under the other spelling pairs with it.
	h.tr.Dispatched(bg, key("", 2, 1, 0), "charge", ts(0))
	if h.tr.Dispatched(bg, key("default", 2, 1, 0), "charge", ts(0)) {
		t.Error(`"default" did not alias ""`)
	}
	h.assertMetric(wantInflight(
		point(attrs("tenant-a", "charge"), 1),
		point(attrs("tenant-b", "charge"), 0),
		point(attrs("default", "charge"), 1),
	))
	if !h.tr.Finished(bg, key("default", 2, 1, 0), OutcomeSucceeded, ts(1)) {
		t.Error(`terminal under "default" did not pair with a dispatch under ""`)
	}
	if got := h.tr.InFlight(); got != 1 {
		t.Errorf("InFlight = %d, want 1 (tenant-a only)", got)
	}
}

// New rule: two continue-as-new generations reuse activity position 0 under
// the same workflow ID; their runs differ, so they are separate entries and a
// terminal of one never settles the other.
func TestRunsAreSeparateEntries(t *testing.T) {
	h := newHarness(t)
	gen1, gen2 := key("tenant-a", 1, 1, 0), key("tenant-a", 1, 2, 0)
	h.tr.Dispatched(bg, gen1, "charge", ts(0))
	if !h.tr.Dispatched(bg, gen2, "charge", ts(100)) {
		t.Fatal("the second run's activity 0 was taken for a duplicate of the first run's")
	}
	h.assertMetric(wantInflight(point(attrs("tenant-a", "charge"), 2)))

	h.tr.Finished(bg, gen2, OutcomeSucceeded, ts(300))
	h.assertMetric(wantInflight(point(attrs("tenant-a", "charge"), 1)))
	h.tr.Finished(bg, gen1, OutcomeFailed, ts(400))
	h.assertMetric(wantInflight(point(attrs("tenant-a", "charge"), 0)))
	h.assertMetric(wantDuration(
		hist(attrs("tenant-a", "charge", OutcomeSucceeded), 0.2),
		hist(attrs("tenant-a", "charge", OutcomeFailed), 0.4),
	))
}

// New rule: a retry keeps the activity in flight and counts a retry; the
// duration recorded at the terminal runs from the first dispatch, covering
// every attempt. A retry of a key that is not live is a no-op.
func TestRetryKeepsInFlight(t *testing.T) {
	h := newHarness(t)
	k := key("tenant-a", 1, 1, 0)
	h.tr.Dispatched(bg, k, "charge", ts(0))
	for i := 1; i <= 2; i++ {
		if !h.tr.Retried(bg, k, ts(i*1000)) {
			t.Fatalf("Retried #%d of a live key = false, want true", i)
		}
	}
	h.assertMetric(wantInflight(point(attrs("tenant-a", "charge"), 1)))
	h.assertMetric(wantRetried(point(attrs("tenant-a", "charge"), 2)))
	h.assertAbsent(catalog.ActivitiesCompleted)

	h.tr.Finished(bg, k, OutcomeSucceeded, ts(2500))
	h.assertMetric(wantDuration(hist(attrs("tenant-a", "charge", OutcomeSucceeded), 2.5)))

	if h.tr.Retried(bg, k, ts(3000)) {
		t.Error("Retried of a finished key = true, want false")
	}
	h.assertMetric(wantRetried(point(attrs("tenant-a", "charge"), 2)))
	h.assertMetric(wantInflight(point(attrs("tenant-a", "charge"), 0)))
}

// New rule: AbandonRun settles exactly the run's live entries with outcome
// abandoned (gauge, counter, duration from each dispatch), and leaves other
// runs of the same workflow, other workflows and other namespaces alone.
func TestAbandonRunSettlesOnlyThatRun(t *testing.T) {
	h := newHarness(t)
	h.tr.Dispatched(bg, key("tenant-a", 1, 1, 0), "charge", ts(0))
	h.tr.Dispatched(bg, key("tenant-a", 1, 1, 1), "ship", ts(100))
	h.tr.Dispatched(bg, key("tenant-a", 1, 1, 2), "ship", ts(200))
	h.tr.Finished(bg, key("tenant-a", 1, 1, 2), OutcomeSucceeded, ts(250)) // already settled
	h.tr.Dispatched(bg, key("tenant-a", 1, 2, 0), "charge", ts(0))         // next run
	h.tr.Dispatched(bg, key("tenant-a", 2, 1, 0), "charge", ts(0))         // other workflow
	h.tr.Dispatched(bg, key("tenant-b", 1, 1, 0), "charge", ts(0))         // other namespace

	if got := h.tr.AbandonRun(bg, "tenant-a", wfID(1), runID(1), ts(1000)); got != 2 {
		t.Fatalf("AbandonRun settled %d entries, want 2", got)
	}
	if got := h.tr.InFlight(); got != 3 {
		t.Errorf("InFlight = %d, want 3", got)
	}
	h.assertMetric(wantInflight(
		point(attrs("tenant-a", "charge"), 2),
		point(attrs("tenant-a", "ship"), 0),
		point(attrs("tenant-b", "charge"), 1),
	))
	h.assertMetric(wantCompleted(
		point(attrs("tenant-a", "charge", OutcomeAbandoned), 1),
		point(attrs("tenant-a", "ship", OutcomeAbandoned), 1),
		point(attrs("tenant-a", "ship", OutcomeSucceeded), 1),
	))
	h.assertMetric(wantDuration(
		hist(attrs("tenant-a", "charge", OutcomeAbandoned), 1),
		hist(attrs("tenant-a", "ship", OutcomeAbandoned), 0.9),
		hist(attrs("tenant-a", "ship", OutcomeSucceeded), 0.05),
	))
	for _, k := range []Key{key("tenant-a", 1, 1, 0), key("tenant-a", 1, 1, 1)} {
		if h.tr.Finished(bg, k, OutcomeSucceeded, ts(2000)) {
			t.Errorf("terminal of abandoned entry %v paired again", k.ActivityID)
		}
	}
	if got := h.tr.AbandonRun(bg, "tenant-a", wfID(1), runID(1), ts(3000)); got != 0 {
		t.Errorf("second AbandonRun settled %d, want 0", got)
	}
	// The empty namespace is "default" for AbandonRun too.
	h.tr.Dispatched(bg, key("default", 3, 1, 0), "charge", ts(0))
	if got := h.tr.AbandonRun(bg, "", wfID(3), runID(1), ts(1)); got != 1 {
		t.Errorf(`AbandonRun("") settled %d entries of namespace "default", want 1`, got)
	}
}

// New rule: past WithMaxInFlight the oldest dispatch is evicted: its gauge
// slot is released under its own type, the evicted counter counts it under
// its namespace, no completion or duration is recorded for it, and its late
// terminal is a no-op. The gauge keeps equal to the live entry count.
func TestEvictionReleasesOldest(t *testing.T) {
	h := newHarness(t, WithMaxInFlight(2))
	oldest, mid, newest := key("tenant-a", 1, 1, 0), key("tenant-b", 1, 1, 1), key("tenant-a", 1, 1, 2)
	h.tr.Dispatched(bg, oldest, "charge", ts(0))
	h.tr.Dispatched(bg, mid, "ship", ts(1))
	h.tr.Retried(bg, oldest, ts(2)) // a retry does not make it younger
	if !h.tr.Dispatched(bg, newest, "ship", ts(3)) {
		t.Fatal("Dispatched past the bound = false, want true")
	}
	if got := h.tr.InFlight(); got != 2 {
		t.Errorf("InFlight = %d, want 2", got)
	}
	h.assertMetric(wantInflight(
		point(attrs("tenant-a", "charge"), 0),
		point(attrs("tenant-a", "ship"), 1),
		point(attrs("tenant-b", "ship"), 1),
	))
	h.assertMetric(wantEvicted(point(attribute.NewSet(catalog.Namespace.String("tenant-a")), 1)))
	h.assertAbsent(catalog.ActivitiesCompleted)
	h.assertAbsent(catalog.ActivityDuration)

	if h.tr.Finished(bg, oldest, OutcomeSucceeded, ts(4)) {
		t.Error("terminal of the evicted entry paired, want a no-op")
	}
	if !h.tr.Finished(bg, mid, OutcomeSucceeded, ts(4)) {
		t.Error("terminal of a surviving entry did not pair")
	}
}

// Eviction follows dispatch order through removals in the middle of the
// order: finishing an entry takes it out of the eviction queue.
func TestEvictionIsFIFOAfterRemovals(t *testing.T) {
	h := newHarness(t, WithMaxInFlight(3))
	a, b, c, d, e := key("n", 1, 1, 0), key("n", 1, 1, 1), key("n", 1, 1, 2), key("n", 1, 1, 3), key("n", 1, 1, 4)
	h.tr.Dispatched(bg, a, "t", ts(0))
	h.tr.Dispatched(bg, b, "t", ts(0))
	h.tr.Dispatched(bg, c, "t", ts(0))
	h.tr.Finished(bg, b, OutcomeSucceeded, ts(1))
	h.tr.Dispatched(bg, d, "t", ts(2)) // room left: no eviction
	h.tr.Dispatched(bg, e, "t", ts(3)) // evicts a
	h.tr.Dispatched(bg, b, "t", ts(4)) // b again: a repeat of a settled dispatch, nothing evicted
	for _, tc := range []struct {
		name string
		k    Key
		live bool
	}{{"a", a, false}, {"c", c, true}, {"d", d, true}, {"e", e, true}, {"b", b, false}} {
		if got := h.tr.Retried(bg, tc.k, ts(5)); got != tc.live {
			t.Errorf("%s live = %v, want %v", tc.name, got, tc.live)
		}
	}
	h.assertMetric(wantEvicted(point(attribute.NewSet(catalog.Namespace.String("n")), 1)))
	h.assertMetric(wantInflight(point(attrs("n", "t"), 3)))
}

// Bad input: an empty activity type is recorded as "_unknown".
func TestEmptyActivityTypeRecordedUnknown(t *testing.T) {
	h := newHarness(t)
	k := key("tenant-a", 1, 1, 0)
	h.tr.Dispatched(bg, k, "", ts(0))
	h.tr.Finished(bg, k, OutcomeSucceeded, ts(1))
	h.assertMetric(wantDispatched(point(attrs("tenant-a", catalog.UnknownType), 1)))
	h.assertMetric(wantCompleted(point(attrs("tenant-a", catalog.UnknownType, OutcomeSucceeded), 1)))
}

// Past WithTypeCardinalityLimit distinct types, new types are recorded as
// "_other" (pairing still exact); admitted types stay; "_unknown" does not
// use up the limit.
func TestTypeCardinalityLimit(t *testing.T) {
	h := newHarness(t, WithTypeCardinalityLimit(2))
	h.tr.Dispatched(bg, key("n", 1, 1, 0), "a", ts(0))
	h.tr.Dispatched(bg, key("n", 1, 1, 1), "", ts(0))
	h.tr.Dispatched(bg, key("n", 1, 1, 2), "b", ts(0))
	h.tr.Dispatched(bg, key("n", 1, 1, 3), "c", ts(0))
	h.tr.Dispatched(bg, key("n", 1, 1, 4), "d", ts(0))
	h.tr.Dispatched(bg, key("m", 1, 1, 5), "a", ts(0)) // admitted in any namespace
	h.tr.Finished(bg, key("n", 1, 1, 3), OutcomeSucceeded, ts(1))
	h.assertMetric(wantDispatched(
		point(attrs("n", "a"), 1),
		point(attrs("n", catalog.UnknownType), 1),
		point(attrs("n", "b"), 1),
		point(attrs("n", catalog.OtherType), 2),
		point(attrs("m", "a"), 1),
	))
	h.assertMetric(wantInflight(
		point(attrs("n", "a"), 1),
		point(attrs("n", catalog.UnknownType), 1),
		point(attrs("n", "b"), 1),
		point(attrs("n", catalog.OtherType), 1),
		point(attrs("m", "a"), 1),
	))
	h.assertMetric(wantCompleted(point(attrs("n", catalog.OtherType, OutcomeSucceeded), 1)))
}

// Bad input: an outcome outside the constants is refused with a typed error
// on the telemetry error handler; nothing is lost: the entry stays live and
// a correct terminal still pairs.
func TestInvalidOutcomeRefused(t *testing.T) {
	h := newHarness(t)
	k := key("tenant-a", 1, 1, 0)
	h.tr.Dispatched(bg, k, "charge", ts(0))
	for _, o := range []Outcome{"", "done", "Succeeded"} {
		if h.tr.Finished(bg, k, o, ts(1)) {
			t.Errorf("Finished(%q) = true, want false", o)
		}
	}
	if len(h.errs) != 3 {
		t.Fatalf("handler got %d errors, want 3: %v", len(h.errs), h.errs)
	}
	for _, err := range h.errs {
		if !errors.Is(err, ErrInvalidOutcome) {
			t.Errorf("handler error %v does not match ErrInvalidOutcome", err)
		}
	}
	h.assertAbsent(catalog.ActivitiesCompleted)
	h.assertMetric(wantInflight(point(attrs("tenant-a", "charge"), 1)))
	if !h.tr.Finished(bg, k, OutcomeSucceeded, ts(2)) {
		t.Error("a valid terminal after refused ones did not pair")
	}
}

// WithAttributes adds its attributes to every pairing measurement.
func TestWithAttributesOnEveryMetric(t *testing.T) {
	cell := attribute.String("deployment.cell", "eu-1")
	h := newHarness(t, WithAttributes(cell), WithMaxInFlight(1))
	h.tr.Dispatched(bg, key("n", 1, 1, 0), "t", ts(0))
	h.tr.Retried(bg, key("n", 1, 1, 0), ts(0))
	h.tr.Dispatched(bg, key("n", 1, 1, 1), "t", ts(0)) // evicts the first
	h.tr.Finished(bg, key("n", 1, 1, 1), OutcomeSucceeded, ts(0))
	h.tr.RunStarted(bg, "n", wfID(2), runID(2), "w", ts(0))
	h.tr.RunStarted(bg, "n", wfID(3), runID(3), "w", ts(0)) // evicts the first run
	h.tr.RunClosed(bg, "n", wfID(3), runID(3), eventstore.StatusCompleted, ts(5))

	sm := h.scope()
	if len(sm.Metrics) != 9 {
		t.Fatalf("exported %d pairing metrics, want all 9", len(sm.Metrics))
	}
	for _, m := range sm.Metrics {
		sets, ok := pointSets(m)
		if !ok {
			t.Fatalf("%s: unexpected data type %T", m.Name, m.Data)
		}
		for _, s := range sets {
			if v, ok := s.Value(cell.Key); !ok || v != cell.Value {
				t.Errorf("%s: data point %v lacks %s", m.Name, s.ToSlice(), cell.Key)
			}
		}
	}
}

// ctx reaches the instruments: a measurement made under a sampled span
// carries an exemplar pointing at that span.
func TestMeasurementsUseCallerContext(t *testing.T) {
	h := newHarness(t)
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{1, 2, 3},
		SpanID:     trace.SpanID{4, 5, 6},
		TraceFlags: trace.FlagsSampled,
	})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	h.tr.Dispatched(ctx, key("n", 1, 1, 0), "t", ts(0))
	h.tr.Finished(ctx, key("n", 1, 1, 0), OutcomeSucceeded, ts(1))

	m, _ := h.metric(catalog.ActivitiesDispatched)
	ex := m.Data.(metricdata.Sum[int64]).DataPoints[0].Exemplars
	if len(ex) != 1 || trace.TraceID(ex[0].TraceID) != sc.TraceID() || trace.SpanID(ex[0].SpanID) != sc.SpanID() {
		t.Errorf("dispatched exemplars = %+v, want one for span %s", ex, sc.SpanID())
	}
	m, _ = h.metric(catalog.ActivityDuration)
	hex := m.Data.(metricdata.Histogram[float64]).DataPoints[0].Exemplars
	if len(hex) != 1 || trace.SpanID(hex[0].SpanID) != sc.SpanID() {
		t.Errorf("duration exemplars = %+v, want one for span %s", hex, sc.SpanID())
	}
}

// Every method of a nil *Tracker is a no-op instead of a panic.
func TestNilTracker(t *testing.T) {
	for name, tr := range map[string]*Tracker{"nil": nil, "zero": new(Tracker)} {
		k := key("n", 1, 1, 0)
		if tr.Dispatched(bg, k, "t", ts(0)) || tr.Finished(bg, k, OutcomeSucceeded, ts(0)) ||
			tr.Retried(bg, k, ts(0)) || tr.AbandonRun(bg, "n", wfID(1), runID(1), ts(0)) != 0 || tr.InFlight() != 0 {
			t.Errorf("a %s *Tracker reported work done", name)
		}
	}
}

// TestTrackerConcurrentSafe runs 8 goroutines dispatching, finishing,
// retrying and abandoning overlapping keys (run it under -race), while a
// ninth collects and checks that no exported gauge point is ever negative.
// At the end the exported telemetry must agree with what the calls reported:
// gauge == InFlight(), dispatched == new dispatches, completed == matched
// terminals + abandoned entries, and dispatched == completed + evicted + live.
func TestTrackerConcurrentSafe(t *testing.T) {
	testCases := []struct {
		name        string
		maxInFlight int
	}{
		{"unbounded", 0},
		{"eviction pressure", 4},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, WithMaxInFlight(tc.maxInFlight))
			const workers, ops = 8, 1500
			type tally struct{ dispatched, finished, abandoned, retried int64 }
			tallies := make([]tally, workers)

			done := make(chan struct{})
			collected := make(chan error, 1)
			go func() {
				var firstErr error
				for {
					select {
					case <-done:
						collected <- firstErr
						return
					default:
					}
					sm, err := collectScope(h.reader)
					if err != nil && firstErr == nil {
						firstErr = err
					}
					for k, v := range readSnapshot(sm).inflight {
						if v < 0 && firstErr == nil {
							firstErr = fmt.Errorf("gauge %v = %d mid-run", k, v)
						}
					}
				}
			}()

			var wg sync.WaitGroup
			for w := range workers {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(w), 42))
					tl := &tallies[w]
					for i := range ops {
						k := key([]string{"a", "b"}[rng.IntN(2)], byte(rng.IntN(2)), byte(rng.IntN(2)), uint64(rng.IntN(4)))
						at := ts(i)
						switch r := rng.IntN(10); {
						case r < 4:
							if h.tr.Dispatched(bg, k, []string{"x", "y"}[rng.IntN(2)], at) {
								tl.dispatched++
							}
						case r < 7:
							if h.tr.Finished(bg, k, propOutcomes[rng.IntN(len(propOutcomes))], at) {
								tl.finished++
							}
						case r < 9:
							if h.tr.Retried(bg, k, at) {
								tl.retried++
							}
						default:
							tl.abandoned += int64(h.tr.AbandonRun(bg, k.Namespace, k.WorkflowID, k.RunID, at))
						}
					}
				})
			}
			wg.Wait()
			close(done)
			if err := <-collected; err != nil {
				t.Error(err)
			}

			var sum tally
			for _, tl := range tallies {
				sum.dispatched += tl.dispatched
				sum.finished += tl.finished
				sum.abandoned += tl.abandoned
				sum.retried += tl.retried
			}
			s := readSnapshot(h.scope())
			total := func(m map[nt]int64) (n int64) {
				for _, v := range m {
					n += v
				}
				return n
			}
			var completed, evicted int64
			for _, v := range s.completed {
				completed += v
			}
			for _, v := range s.evicted {
				evicted += v
			}
			var durations uint64
			for _, d := range s.duration {
				durations += d.count
			}
			live := int64(h.tr.InFlight())
			if g := total(s.inflight); g != live {
				t.Errorf("gauge = %d, InFlight = %d", g, live)
			}
			if d := total(s.dispatched); d != sum.dispatched {
				t.Errorf("dispatched = %d, new dispatches reported %d", d, sum.dispatched)
			}
			// A terminal or a retry that arrives before its dispatch is
			// recorded when the dispatch arrives, so the calls' results
			// are lower bounds.
			if completed < sum.finished+sum.abandoned || durations != uint64(completed) {
				t.Errorf("completed = %d, durations = %d, want at least %d matched + %d abandoned", completed, durations, sum.finished, sum.abandoned)
			}
			if r := total(s.retried); r < sum.retried {
				t.Errorf("retried = %d, retries reported %d", r, sum.retried)
			}
			if sum.dispatched != completed+evicted+live {
				t.Errorf("dispatched %d != completed %d + evicted %d + live %d", sum.dispatched, completed, evicted, live)
			}
			if tc.maxInFlight == 0 && evicted != 0 {
				t.Errorf("evicted %d without a bound", evicted)
			}
			if tc.maxInFlight > 0 && (evicted == 0 || live > int64(tc.maxInFlight)) {
				t.Errorf("evicted %d with live %d under bound %d: eviction not exercised or bound broken", evicted, live, tc.maxInFlight)
			}
			if err := h.tr.join.check(); err != nil {
				t.Error(err)
			}

			// Drain every run: nothing may stay in flight.
			for _, ns := range []string{"a", "b"} {
				for wf := range byte(2) {
					for run := range byte(2) {
						h.tr.AbandonRun(bg, ns, wfID(wf), runID(run), ts(ops))
					}
				}
			}
			if got := h.tr.InFlight(); got != 0 {
				t.Errorf("InFlight after draining = %d", got)
			}
			for k, v := range readSnapshot(h.scope()).inflight {
				if v != 0 {
					t.Errorf("gauge %v = %d after draining, want 0", k, v)
				}
			}
		})
	}
}

// In steady state a dispatch and its terminal allocate nothing, on the SDK
// as well as with eviction, with many activities per run or one (each run
// then enters and leaves the table on every step): options are precomputed
// and entries, runs and the eviction queue are reused.
func TestDispatchFinishDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations are not counted under the race detector (sync.Pool drops at random); run without -race")
	}
	// Fresh keys, as positions in a run: each activity ID is new. The
	// tracker remembers the settled ones, so the steady state is reached
	// once the remembered bound recycles them.
	few := func(i int) Key { return key("n", 1, byte(i%3), uint64(i)) }
	runPerActivity := func(i int) Key {
		k := key("n", 1, 0, 0)
		binary.LittleEndian.PutUint64(k.RunID[1:], uint64(i))
		return k
	}
	const remembered = 4096
	for _, tc := range []struct {
		name string
		h    *harness
		key  func(int) Key
	}{
		{"sdk", newHarness(t, WithTimelineSpans(false), WithMaxRemembered(remembered)), few},
		{"eviction", newHarness(t, WithTimelineSpans(false), WithMaxInFlight(8), WithMaxRemembered(remembered)), few},
		{"run per activity", newHarness(t, WithTimelineSpans(false), WithMaxRemembered(remembered)), runPerActivity},
		{"run per activity, eviction", newHarness(t, WithTimelineSpans(false), WithMaxInFlight(8), WithMaxRemembered(remembered)), runPerActivity},
		{"noop tracer", newHarness(t, WithTracerProvider(tracenoop.NewTracerProvider()), WithMaxRemembered(remembered)), few},
		{"default bounds", newHarness(t, WithTimelineSpans(false)), few},
	} {
		t.Run(tc.name, func(t *testing.T) {
			i := 0
			step := func() {
				tc.h.tr.Dispatched(bg, tc.key(i), "t", ts(0))
				if i >= 16 {
					tc.h.tr.Finished(bg, tc.key(i-16), OutcomeSucceeded, ts(3))
				}
				i++
			}
			for range 2 * tc.h.tr.join.remembered.max { // reach the steady state
				step()
			}
			if n := testing.AllocsPerRun(1000, step); n != 0 {
				t.Errorf("allocations per dispatch+terminal = %v, want 0", n)
			}
			if got := tc.h.tr.InFlight(); got != min(16, tc.h.tr.join.live.max) {
				t.Errorf("InFlight = %d, want 16 or the bound: the steps did not pair", got)
			}
		})
	}
}

// Past WithNamespaceCardinalityLimit distinct namespaces, new ones are
// recorded as "_other" on every metric, while their keys stay apart: a
// terminal in one overflow namespace never settles another's entry.
// "default" does not use up the limit.
func TestNamespaceCardinalityLimit(t *testing.T) {
	h := newHarness(t, WithNamespaceCardinalityLimit(2), WithMaxInFlight(5))
	for i, ns := range []string{"a", "", "b", "c", "d"} {
		h.tr.Dispatched(bg, key(ns, 1, 1, 0), "t", ts(i))
	}
	if !h.tr.Finished(bg, key("c", 1, 1, 0), OutcomeSucceeded, ts(10)) {
		t.Fatal("terminal in an overflow namespace did not pair")
	}
	if h.tr.Finished(bg, key("c", 1, 1, 0), OutcomeSucceeded, ts(11)) {
		t.Error("a second terminal in namespace c paired: d's entry was taken for c's")
	}
	if got := h.tr.AbandonRun(bg, "d", wfID(1), runID(1), ts(12)); got != 1 {
		t.Errorf("AbandonRun(d) settled %d entries, want 1", got)
	}
	h.tr.Dispatched(bg, key("e", 1, 1, 0), "t", ts(13))
	h.tr.Dispatched(bg, key("f", 1, 1, 0), "t", ts(14)) // 5 live: a, default, b, e, f
	h.tr.Dispatched(bg, key("g", 1, 1, 0), "t", ts(15)) // evicts a's entry
	h.tr.Dispatched(bg, key("h", 1, 1, 0), "t", ts(16)) // evicts default's entry
	h.tr.Dispatched(bg, key("i", 1, 1, 0), "t", ts(17)) // evicts b's entry
	h.tr.Dispatched(bg, key("j", 1, 1, 0), "t", ts(18)) // evicts e's entry
	h.assertMetric(wantDispatched(
		point(attrs("a", "t"), 1),
		point(attrs("default", "t"), 1),
		point(attrs("b", "t"), 1),
		point(attrs(catalog.OtherType, "t"), 8),
	))
	h.assertMetric(wantInflight(
		point(attrs("a", "t"), 0),
		point(attrs("default", "t"), 0),
		point(attrs("b", "t"), 0),
		point(attrs(catalog.OtherType, "t"), 5),
	))
	h.assertMetric(wantCompleted(
		point(attrs(catalog.OtherType, "t", OutcomeSucceeded), 1),
		point(attrs(catalog.OtherType, "t", OutcomeAbandoned), 1),
	))
	ns := func(v string) attribute.Set { return attribute.NewSet(catalog.Namespace.String(v)) }
	h.assertMetric(wantEvicted(point(ns("a"), 1), point(ns("default"), 1), point(ns("b"), 1), point(ns(catalog.OtherType), 1)))
}

// Issue 12.5: namespaces were unbounded, and each new one copied the whole
// attribute cache (20,000 took 70 s). Now 20,000 distinct namespaces on one
// tracker build a bounded number of attribute sets, every metric carries at
// most the limit of namespaces plus "_other", and the overflow namespaces
// are all counted under "_other". (BenchmarkNewNamespaces shows the cost of
// a new namespace staying flat.)
func TestManyNamespacesBounded(t *testing.T) {
	const n = 20_000
	h := newHarness(t)
	for i := range n {
		k := key(fmt.Sprintf("tenant-%d", i), 1, 1, 0)
		if !h.tr.Dispatched(bg, k, "t", ts(0)) || !h.tr.Finished(bg, k, OutcomeSucceeded, ts(1)) {
			t.Fatalf("namespace %d did not pair", i)
		}
	}
	if got, limit := h.tr.attrs.built.Load(), int64(DefaultNamespaceCardinalityLimit+1); got > limit {
		t.Errorf("built %d attribute option sets for %d namespaces of one type, want <= %d", got, n, limit)
	}
	s := readSnapshot(h.scope())
	if got := len(s.dispatched); got != DefaultNamespaceCardinalityLimit+1 {
		t.Errorf("dispatched has %d series, want %d namespaces + _other", got, DefaultNamespaceCardinalityLimit)
	}
	if got, want := s.dispatched[nt{catalog.OtherType, "t"}], int64(n-DefaultNamespaceCardinalityLimit); got != want {
		t.Errorf(`dispatched under "_other" = %d, want %d`, got, want)
	}
	if got := s.completed[nto{"tenant-0", "t", OutcomeSucceeded}]; got != 1 {
		t.Errorf("completed for the first namespace = %d, want 1", got)
	}
}

// Issue 12.1: a hostile activity type or namespace (invalid UTF-8, huge)
// reached the attribute values as it was, and one invalid string makes every
// later OTLP or Prometheus export fail. Every exported value must be valid
// UTF-8 of at most 256 bytes, and the series carry the cleaned values; the
// keys keep the raw namespace.
func TestHostileValuesCleaned(t *testing.T) {
	long := strings.Repeat("x", 1000)
	h := newHarness(t, WithMaxInFlight(2), WithAttributes(attribute.String("cell", "eu\xff"), attribute.StringSlice("zones", []string{"a\xfe", long})))
	bad := key("ns\xff", 1, 1, 0)
	h.tr.Dispatched(bg, bad, "bad\xff\xfe", ts(0))
	h.tr.Retried(bg, bad, ts(1))
	h.tr.Dispatched(bg, key(long, 1, 1, 1), long, ts(2))
	if h.tr.Finished(bg, key("ns\uFFFD", 1, 1, 0), OutcomeSucceeded, ts(3)) {
		t.Error(`a terminal under the cleaned namespace paired with the raw one's entry`)
	}
	if !h.tr.Finished(bg, bad, OutcomeFailed, ts(3)) {
		t.Error("the terminal under the raw namespace did not pair")
	}
	h.tr.Dispatched(bg, key("ns\xff", 1, 1, 2), "ok", ts(4))
	h.tr.Dispatched(bg, key("ns\xff", 1, 1, 3), "ok", ts(5)) // evicts long's entry

	sm := h.scope()
	if len(sm.Metrics) != 7 {
		t.Fatalf("exported %d pairing metrics, want the 7 of activities", len(sm.Metrics))
	}
	seen := map[string]bool{}
	for _, m := range sm.Metrics {
		sets, _ := pointSets(m)
		for _, set := range sets {
			for _, kv := range set.ToSlice() {
				vals := []string{kv.Value.String()}
				if kv.Value.Type() == attribute.STRINGSLICE {
					vals = kv.Value.AsStringSlice()
				}
				for _, v := range vals {
					if !utf8.ValidString(v) || len(v) > 256 {
						t.Errorf("%s: attribute %s has an unexportable value (%d bytes, valid %v)", m.Name, kv.Key, len(v), utf8.ValidString(v))
					}
					seen[string(kv.Key)+"="+v] = true
				}
			}
		}
	}
	for _, want := range []string{
		"aion.namespace=ns\uFFFD", "aion.activity.type=bad\uFFFD",
		"aion.namespace=" + long[:256], "aion.activity.type=" + long[:256],
		"cell=eu\uFFFD", "zones=a\uFFFD", "zones=" + long[:256],
	} {
		if !seen[want] {
			t.Errorf("no series carries %.40q", want)
		}
	}
}

// pointSets returns the attribute sets of m's points, for the data types the
// tracker exports (int64 sums, float64 histograms); ok is false for another.
func pointSets(m metricdata.Metrics) (sets []attribute.Set, ok bool) {
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			sets = append(sets, dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			sets = append(sets, dp.Attributes)
		}
	case metricdata.Gauge[float64]:
		for _, dp := range d.DataPoints {
			sets = append(sets, dp.Attributes)
		}
	default:
		return nil, false
	}
	return sets, true
}
