package pairing

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/historytest"
	"github.com/aionotel/aionotel/internal/timeline"
)

// newIDTracker is a tracker on a provider with the ID generator installed,
// recording into rec.
func newIDTracker(t *testing.T, rec *tracetest.SpanRecorder) *Tracker {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(NewIDGenerator(nil)))
	mp := sdkmetric.NewMeterProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	tr, err := New(WithTracerProvider(tp), WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// With the ID generator, a closed run's trace is a tree without a missing
// parent: the run span is a root whose IDs are derived from the run, and
// every activity span (also one settled by the close, or whose facts came
// before the run's start) is its child with an ID derived from the activity.
// The non-timeline spans of the provider keep random IDs.
func TestIDGeneratorMakesWholeTrees(t *testing.T) {
	for seed := range uint64(100) {
		rng := rand.New(rand.NewPCG(seed, 7))
		rec := tracetest.NewSpanRecorder()
		tr := newIDTracker(t, rec)
		batches := historytest.Cut(rng, historytest.Generate(rng))
		for _, b := range historytest.Shuffle(rng, batches, false) {
			tr.Observe(trace.ContextWithSpanContext(bg, b.Call), b.Namespace, b.WorkflowID, b.FirstSeq, b.Events)
		}
		checkTrees(t, seed, rec.Ended())
	}
}

// checkTrees checks that every span whose trace has an exported root is
// in a tree: a root, or a child of a span exported in its trace.
func checkTrees(t *testing.T, seed uint64, ended []sdktrace.ReadOnlySpan) {
	t.Helper()
	exported := map[trace.SpanID]trace.TraceID{}
	roots := map[trace.TraceID]bool{}
	for _, s := range ended {
		exported[s.SpanContext().SpanID()] = s.SpanContext().TraceID()
		if !s.Parent().IsValid() {
			roots[s.SpanContext().TraceID()] = true
		}
	}
	for _, s := range ended {
		sc := s.SpanContext()
		switch {
		case strings.HasPrefix(s.Name(), "workflow ") && s.Parent().IsValid():
			t.Errorf("seed %d: run span %s has parent %v, want a root", seed, s.Name(), s.Parent())
		case !s.Parent().IsValid():
			root := timeline.Root(namespaceOf(attr(s, "aion.namespace")), wfOf(s), runOf(s))
			if sc.TraceID() != root.TraceID() || sc.SpanID() != root.SpanID() {
				t.Errorf("seed %d: root %s has IDs %v, want the run's derived %v", seed, s.Name(), sc, root)
			}
		case roots[sc.TraceID()] && exported[s.Parent().SpanID()] != sc.TraceID():
			t.Errorf("seed %d: %s has parent %v, which its trace does not hold", seed, s.Name(), s.Parent().SpanID())
		}
	}
}

func attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.AsString()
		}
	}
	return ""
}

func wfOf(s sdktrace.ReadOnlySpan) eventstore.WorkflowID {
	id, _ := eventstore.ParseWorkflowID(attr(s, "aion.workflow.id"))
	return id
}

func runOf(s sdktrace.ReadOnlySpan) eventstore.RunID {
	id, _ := eventstore.ParseRunID(attr(s, "aion.run.id"))
	return id
}

// Two trackers that each see part of a run, one its start, close and some
// activities, the other the rest of the activities, make one tree between
// them, in either order.
func TestIDGeneratorJoinsTrackers(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	a, b := newIDTracker(t, rec), newIDTracker(t, rec)
	wf, run := wfID(1), runID(1)
	k := func(n uint64) Key {
		return Key{Namespace: "n", WorkflowID: wf, RunID: run, ActivityID: eventstore.ActivityID(n)}
	}
	b.Dispatched(bg, k(1), "other", ts(2)) // before the run span exists anywhere
	a.RunStarted(bg, "n", wf, run, "flow", ts(0))
	a.Dispatched(bg, k(0), "mine", ts(1))
	a.Finished(bg, k(0), OutcomeSucceeded, ts(3))
	b.Finished(bg, k(1), OutcomeFailed, ts(4))
	b.Dispatched(bg, k(2), "other", ts(5))
	a.RunClosed(bg, "n", wf, run, eventstore.StatusCompleted, ts(6))
	b.Finished(bg, k(2), OutcomeSucceeded, ts(7)) // after the run span ended

	ended := rec.Ended()
	if len(ended) != 4 {
		t.Fatalf("%d spans, want the run and three activities", len(ended))
	}
	root := timeline.Root("n", wf, run)
	for _, s := range ended {
		if s.SpanContext().TraceID() != root.TraceID() {
			t.Errorf("%s is in trace %v, want the run's", s.Name(), s.SpanContext().TraceID())
		}
		if s.Name() == "workflow flow" {
			if s.Parent().IsValid() || s.SpanContext().SpanID() != root.SpanID() {
				t.Errorf("run span parent %v, ID %v; want a root with the derived ID", s.Parent(), s.SpanContext().SpanID())
			}
			continue
		}
		if s.Parent().SpanID() != root.SpanID() {
			t.Errorf("%s has parent %v, want the run span %v", s.Name(), s.Parent().SpanID(), root.SpanID())
		}
	}
	checkTrees(t, 0, ended)
}

// The ID generator gives other spans its inner generator's IDs (random by
// default), and ActivitySpanContext is the derived context while the
// activity is in flight and after it settled (work for an activity, such
// as an agent's transcript, may go on after it timed out).
func TestIDGeneratorLeavesOtherSpans(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(NewIDGenerator(nil)))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tr, err := New(WithTracerProvider(tp), WithMeterProvider(sdkmetric.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, call := tp.Tracer("test").Start(bg, "call")
	k := key("n", 1, 1, 7)
	tr.Dispatched(ctx, k, "a", ts(0))
	call.End()
	want := trace.NewSpanContext(trace.SpanContextConfig{TraceID: timeline.Root("n", k.WorkflowID, k.RunID).TraceID(),
		SpanID: timeline.ActivitySpanID("n", k.WorkflowID, k.RunID, k.ActivityID), TraceFlags: trace.FlagsSampled})
	if got := tr.ActivitySpanContext(k); !got.Equal(want) {
		t.Errorf("ActivitySpanContext = %v, want the derived %v", got, want)
	}
	tr.Finished(bg, k, OutcomeTimedOut, ts(1))
	if got := tr.ActivitySpanContext(k); !got.Equal(want) {
		t.Errorf("ActivitySpanContext after the terminal = %v, want the derived %v", got, want)
	}
	var act sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "activity a" {
			act = s
		}
	}
	if act == nil || !act.SpanContext().Equal(want) {
		t.Errorf("the activity span is %v, want the derived %v", act, want)
	}
	sc := call.SpanContext()
	root := timeline.Root("n", k.WorkflowID, k.RunID)
	if !sc.IsValid() || sc.TraceID() == root.TraceID() || sc.SpanID() == want.SpanID() {
		t.Errorf("an ordinary span got %v: the generator must derive only the timeline's", sc)
	}
}

// Without the ID generator, the timeline is what it was: a run span under
// the run's anchor (same trace ID), activity spans under the run span, and
// no span tried as a root is exported.
func TestWithoutIDGeneratorRunSpansHangUnderTheAnchor(t *testing.T) {
	h := newHarness(t)
	k := key("n", 1, 1, 0)
	h.tr.RunStarted(bg, "n", k.WorkflowID, k.RunID, "flow", ts(0))
	h.tr.Dispatched(bg, k, "a", ts(1))
	h.tr.Finished(bg, k, OutcomeSucceeded, ts(2))
	h.tr.RunClosed(bg, "n", k.WorkflowID, k.RunID, eventstore.StatusCompleted, ts(3))
	ended := h.spans.Ended()
	if len(ended) != 2 {
		t.Fatalf("%d spans ended, want 2", len(ended))
	}
	root := timeline.Root("n", k.WorkflowID, k.RunID)
	run, act := ended[1], ended[0]
	if run.Parent().SpanID() != root.SpanID() || run.SpanContext().TraceID() != root.TraceID() {
		t.Errorf("run span parent %v in trace %v, want the anchor", run.Parent(), run.SpanContext().TraceID())
	}
	if act.Parent().SpanID() != run.SpanContext().SpanID() {
		t.Errorf("activity parent %v, want the run span %v", act.Parent(), run.SpanContext())
	}
}

// Hostile times: an activity dispatched now and finished in year 9999, or
// dispatched in year 1, never ends before it starts, and its times are ones
// OTLP can carry (Unix nanoseconds in an int64); the age gauge never exceeds
// the time since 1970.
func TestHostileTimesClamped(t *testing.T) {
	h := newHarness(t)
	now := time.Now()
	future := time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
	ancient := time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	h.tr.RunStarted(bg, "n", wfID(1), runID(1), "w", ancient)
	h.tr.Dispatched(bg, key("n", 1, 1, 0), "a", now)
	h.tr.Finished(bg, key("n", 1, 1, 0), OutcomeSucceeded, future)
	h.tr.Dispatched(bg, key("n", 1, 1, 1), "b", ancient)
	age := h.gauge("b")
	if max := time.Since(time.Unix(0, 0)).Seconds() + 60; age <= 0 || age > max {
		t.Errorf("age of a year-1 dispatch = %vs, want at most the time since 1970 (%vs)", age, max)
	}
	h.tr.RunClosed(bg, "n", wfID(1), runID(1), eventstore.StatusCompleted, future)
	for _, s := range h.spans.Ended() {
		start, end := s.StartTime().UnixNano(), s.EndTime().UnixNano()
		if start < 0 || end < start || end == math.MinInt64 {
			t.Errorf("%s: %v (%d) to %v (%d)", s.Name(), s.StartTime(), start, s.EndTime(), end)
		}
		if !s.EndTime().Equal(maxTime) {
			t.Errorf("%s ends %v, want the latest time OTLP carries, %v", s.Name(), s.EndTime(), maxTime)
		}
	}
	if d := h.sums("aion.activities.completed"); len(d) != 2 {
		t.Errorf("completions %v", d)
	}
}

// gauge returns the oldest-in-flight age of activity type typ (namespace
// "n"), in seconds.
func (h *harness) gauge(typ string) float64 {
	h.t.Helper()
	m, ok := h.metric(catalog.ActivityOldestInflightAge)
	if !ok {
		h.t.Fatal("no age gauge")
	}
	for _, dp := range m.Data.(metricdata.Gauge[float64]).DataPoints {
		if v, _ := dp.Attributes.Value(catalog.ActivityType); v.AsString() == typ {
			return dp.Value
		}
	}
	h.t.Fatalf("no age point for %q", typ)
	return 0
}

// With the ID generator, once the tracker has learned that the provider
// derives its IDs, an activity in flight and an open run hold no SDK span:
// the span starts (at its history time) when the activity settles or the
// run closes, and is what the span held open would have been: the derived
// IDs, the run span its parent, the dispatch's time, both links.
func TestDerivedIDsHoldNoSpanInFlight(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tr := newIDTracker(t, rec)
	// The first span teaches the tracker that IDs are derived.
	learn := key("n", 9, 9, 0)
	tr.Dispatched(bg, learn, "a", ts(0))
	tr.Finished(bg, learn, OutcomeSucceeded, ts(1))
	started := len(rec.Started())

	const n = 10
	wf, run := wfID(1), runID(1)
	schedCtx, _ := callCtx(1)
	settleCtx, _ := callCtx(2)
	tr.Observe(schedCtx, "n", wf, 1, []eventstore.Event{eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "flow"}})
	for i := range n {
		tr.Observe(schedCtx, "n", wf, uint64(2+i), []eventstore.Event{
			eventstore.ActivityScheduled{Envelope: env(run, 10+i), ActivityID: eventstore.ActivityID(i), ActivityType: "charge"}})
	}
	if tr.InFlight() != n {
		t.Fatalf("InFlight = %d, want %d", tr.InFlight(), n)
	}
	if got := len(rec.Started()) - started; got != 0 {
		t.Fatalf("%d spans started for an open run and %d activities in flight, want none", got, n)
	}
	for i := range n {
		tr.Observe(settleCtx, "n", wf, uint64(2+n+i), []eventstore.Event{
			eventstore.ActivityCompleted{Envelope: env(run, 50+i), ActivityID: eventstore.ActivityID(i)}})
	}
	tr.Observe(settleCtx, "n", wf, uint64(2+2*n), []eventstore.Event{eventstore.WorkflowCompleted{Envelope: env(run, 100)}})
	root := timeline.Root("n", wf, run)
	var acts int
	for _, s := range rec.Ended()[1:] {
		links := linkRoles(t, s)
		switch s.Name() {
		case "workflow flow":
			if s.SpanContext().SpanID() != root.SpanID() || s.Parent().IsValid() || !s.StartTime().Equal(ts(0)) || len(links) != 2 {
				t.Errorf("run span %v parent %v from %v, links %v; want the root from 0 s, both links", s.SpanContext(), s.Parent(), s.StartTime(), links)
			}
		case "activity charge":
			acts++
			id := activityID(t, s)
			want := timeline.ActivitySpanID("n", wf, run, eventstore.ActivityID(id))
			if s.SpanContext().SpanID() != want || s.Parent().SpanID() != root.SpanID() || !s.StartTime().Equal(ts(10+int(id))) || len(links) != 2 {
				t.Errorf("activity %d span %v parent %v from %v, links %v; want the derived ID under the run span from its dispatch, both links",
					id, s.SpanContext(), s.Parent(), s.StartTime(), links)
			}
		}
	}
	if acts != n {
		t.Errorf("%d activity spans, want %d", acts, n)
	}
}

// activityID is the aion.activity.id of an activity span.
func activityID(t *testing.T, s sdktrace.ReadOnlySpan) int64 {
	t.Helper()
	v, ok := attrOf(s, catalog.ActivityID)
	if !ok {
		t.Fatalf("%s has no %s", s.Name(), catalog.ActivityID)
	}
	return v.AsInt64()
}
