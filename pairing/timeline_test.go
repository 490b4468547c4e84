package pairing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/timeline"
)

// callCtx returns a context carrying the span context of a store call n,
// standing in for the decorator's span around an append.
func callCtx(n byte) (context.Context, trace.SpanContext) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0: 0xca, 15: n},
		SpanID:     trace.SpanID{0: 0xca, 7: n},
		TraceFlags: trace.FlagsSampled,
	})
	return trace.ContextWithSpanContext(context.Background(), sc), sc
}

// ended returns the ended spans by name; a name ended twice fails the test.
func (h *harness) ended() map[string]sdktrace.ReadOnlySpan {
	h.t.Helper()
	out := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range h.spans.Ended() {
		if _, dup := out[s.Name()]; dup {
			h.t.Fatalf("span %q ended twice", s.Name())
		}
		out[s.Name()] = s
	}
	return out
}

// linkRoles maps each link's aion.timeline.link role to its span context.
func linkRoles(t *testing.T, s sdktrace.ReadOnlySpan) map[string]trace.SpanContext {
	t.Helper()
	out := map[string]trace.SpanContext{}
	for _, l := range s.Links() {
		role := ""
		for _, kv := range l.Attributes {
			if kv.Key == catalog.TimelineLink {
				role = kv.Value.AsString()
			}
		}
		if _, dup := out[role]; dup || role == "" {
			t.Fatalf("%s: link roles %v", s.Name(), s.Links())
		}
		out[role] = l.SpanContext
	}
	return out
}

func attrOf(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func wantAttr(t *testing.T, s sdktrace.ReadOnlySpan, kv attribute.KeyValue) {
	t.Helper()
	if v, ok := attrOf(s, kv.Key); !ok || v != kv.Value {
		t.Errorf("%s: %s = %v (set %v), want %v", s.Name(), kv.Key, v.String(), ok, kv.Value.String())
	}
}

// A run and its activity become spans with the times history gave: the
// activity span is the run span's child, retries are events at their
// times, and each span links to the store calls that started and ended it.
func TestTimelineSpansHaveHistoryTimes(t *testing.T) {
	h := newHarness(t)
	startCtx, startSC := callCtx(1)
	schedCtx, schedSC := callCtx(2)
	failCtx, failSC := callCtx(3)
	closeCtx, closeSC := callCtx(4)
	k := key("tenant", 1, 1, 7)

	h.tr.RunStarted(startCtx, "tenant", k.WorkflowID, k.RunID, "order", ts(0))
	h.tr.Dispatched(schedCtx, k, "charge", ts(10))
	h.tr.Retried(schedCtx, k, ts(20))
	h.tr.Retried(schedCtx, k, ts(35))
	h.tr.Finished(failCtx, k, OutcomeFailed, ts(50))
	h.tr.RunClosed(closeCtx, "tenant", k.WorkflowID, k.RunID, eventstore.StatusFailed, ts(100))

	spans := h.ended()
	if len(spans) != 2 {
		t.Fatalf("ended spans %v, want the run's and the activity's", spans)
	}
	runSpan, act := spans["workflow order"], spans["activity charge"]
	if runSpan == nil || act == nil {
		t.Fatalf("span names %v, want %q and %q", spans, "workflow order", "activity charge")
	}
	anchor := timeline.Anchor("tenant", k.WorkflowID, k.RunID)
	if !runSpan.Parent().Equal(anchor) || runSpan.SpanContext().TraceID() != anchor.TraceID() {
		t.Errorf("run span parent %v, want the run's anchor %v", runSpan.Parent(), anchor)
	}
	if act.Parent().SpanID() != runSpan.SpanContext().SpanID() || act.SpanContext().TraceID() != anchor.TraceID() {
		t.Errorf("activity span parent %v, want the run span %v", act.Parent(), runSpan.SpanContext())
	}
	for _, c := range []struct {
		s          sdktrace.ReadOnlySpan
		start, end time.Time
	}{{runSpan, ts(0), ts(100)}, {act, ts(10), ts(50)}} {
		if !c.s.StartTime().Equal(c.start) || !c.s.EndTime().Equal(c.end) {
			t.Errorf("%s: %v to %v, want %v to %v", c.s.Name(), c.s.StartTime(), c.s.EndTime(), c.start, c.end)
		}
		if c.s.SpanKind() != trace.SpanKindInternal || c.s.Status().Code != codes.Error {
			t.Errorf("%s: kind %v status %v, want internal and Error", c.s.Name(), c.s.SpanKind(), c.s.Status())
		}
	}
	wantAttr(t, act, catalog.ActivityOutcome.String("failed"))
	wantAttr(t, act, catalog.RetryCount.Int64(2))
	wantAttr(t, act, catalog.ActivityType.String("charge"))
	wantAttr(t, act, catalog.ActivityID.Int64(7))
	wantAttr(t, act, catalog.RunID.String(k.RunID.String()))
	wantAttr(t, act, catalog.WorkflowID.String(k.WorkflowID.String()))
	wantAttr(t, act, catalog.Namespace.String("tenant"))
	wantAttr(t, runSpan, catalog.WorkflowStatus.String("failed"))
	wantAttr(t, runSpan, catalog.WorkflowType.String("order"))

	ev := act.Events()
	if len(ev) != 2 || ev[0].Name != catalog.RetryEvent || !ev[0].Time.Equal(ts(20)) || !ev[1].Time.Equal(ts(35)) {
		t.Errorf("activity events %v, want two retries at %v and %v", ev, ts(20), ts(35))
	}
	if got := linkRoles(t, act); len(got) != 2 || !got[catalog.LinkScheduled].Equal(schedSC) || !got[catalog.LinkSettled].Equal(failSC) {
		t.Errorf("activity links %v, want scheduled %v and settled %v", got, schedSC, failSC)
	}
	if got := linkRoles(t, runSpan); len(got) != 2 || !got[catalog.LinkStarted].Equal(startSC) || !got[catalog.LinkClosed].Equal(closeSC) {
		t.Errorf("run links %v, want started %v and closed %v", got, startSC, closeSC)
	}
}

// Outcomes: only failed and timed_out are errors; an activity still in
// flight when its run closes ends at the close as abandoned, linked to the
// closing call.
func TestTimelineOutcomes(t *testing.T) {
	testCases := []struct {
		outcome Outcome // "" for none: the run's close abandons it
		status  codes.Code
	}{
		{OutcomeSucceeded, codes.Unset},
		{OutcomeFailed, codes.Error},
		{OutcomeCancelled, codes.Unset},
		{OutcomeTimedOut, codes.Error},
		{"", codes.Unset},
	}
	for _, tc := range testCases {
		t.Run(string(tc.outcome), func(t *testing.T) {
			h := newHarness(t)
			k := key("n", 1, 1, 0)
			closeCtx, closeSC := callCtx(9)
			h.tr.RunStarted(bg, "n", k.WorkflowID, k.RunID, "w", ts(0))
			h.tr.Dispatched(bg, k, "a", ts(5))
			end, want := ts(60), OutcomeAbandoned
			if tc.outcome != "" {
				end, want = ts(30), tc.outcome
				h.tr.Finished(bg, k, tc.outcome, end)
			}
			h.tr.RunClosed(closeCtx, "n", k.WorkflowID, k.RunID, eventstore.StatusCompleted, ts(60))
			act := h.ended()["activity a"]
			if act == nil {
				t.Fatal("no activity span")
			}
			wantAttr(t, act, catalog.ActivityOutcome.String(string(want)))
			if act.Status().Code != tc.status || !act.EndTime().Equal(end) {
				t.Errorf("status %v end %v, want %v and %v", act.Status().Code, act.EndTime(), tc.status, end)
			}
			if tc.outcome == "" && !linkRoles(t, act)[catalog.LinkSettled].Equal(closeSC) {
				t.Errorf("abandoned activity links %v, want settled by the closing call", act.Links())
			}
		})
	}
}

// A continue-as-new chain is one trace per run, linked in order both ways.
func TestTimelineContinueAsNewLinksTraces(t *testing.T) {
	h := newHarness(t)
	wf, first, second := wfID(1), runID(1), runID(2)
	h.tr.RunStarted(bg, "n", wf, first, "loop", ts(0))
	h.tr.RunContinued(bg, "n", wf, first, second, ts(40))
	h.tr.RunStarted(bg, "n", wf, second, "loop", ts(40))
	k := Key{Namespace: "n", WorkflowID: wf, RunID: second, ActivityID: 0}
	h.tr.Dispatched(bg, k, "step", ts(41))
	h.tr.Finished(bg, k, OutcomeSucceeded, ts(42))
	h.tr.RunClosed(bg, "n", wf, second, eventstore.StatusCompleted, ts(90))

	var runs []sdktrace.ReadOnlySpan
	var act sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		switch s.Name() {
		case "workflow loop":
			runs = append(runs, s)
		case "activity step":
			act = s
		}
	}
	if len(runs) != 2 || act == nil {
		t.Fatalf("ended %d run spans (activity %v), want 2 and one activity", len(runs), act != nil)
	}
	a, b := runs[0], runs[1] // ended in order: the first run first
	if a.SpanContext().TraceID() == b.SpanContext().TraceID() {
		t.Fatal("both runs of the chain are in one trace")
	}
	wantAttr(t, a, catalog.WorkflowStatus.String("continued_as_new"))
	if next := linkRoles(t, a)[catalog.LinkNextRun]; next.TraceID() != b.SpanContext().TraceID() {
		t.Errorf("first run's next_run link %v, want the second run's trace %v", next, b.SpanContext().TraceID())
	}
	// No previous_run link: whether the tracker saw the first run's close
	// before the second run's span ended depends on arrival order.
	if prev, ok := linkRoles(t, b)["previous_run"]; ok {
		t.Errorf("second run has a previous_run link %v", prev)
	}
	if act.Parent().SpanID() != b.SpanContext().SpanID() {
		t.Errorf("the second run's activity has parent %v, want its run span", act.Parent())
	}
	if !a.EndTime().Equal(ts(40)) || !b.StartTime().Equal(ts(40)) {
		t.Errorf("first run ends %v, second starts %v, want both %v", a.EndTime(), b.StartTime(), ts(40))
	}
	if h.tr.InFlight() != 0 || h.tr.join.live.n != 0 {
		t.Errorf("the closed chain left %d activities, %d live entries", h.tr.InFlight(), h.tr.join.live.n)
	}
}

// Two processes that see different parts of a run put their spans in the
// same trace: the trace is derived from the run, not shared state.
func TestTimelineTraceDerivedFromRun(t *testing.T) {
	a, b := newHarness(t), newHarness(t)
	k := key("n", 3, 4, 0)
	a.tr.RunStarted(bg, "n", k.WorkflowID, k.RunID, "w", ts(0))
	a.tr.RunClosed(bg, "n", k.WorkflowID, k.RunID, eventstore.StatusCompleted, ts(9))
	b.tr.Dispatched(bg, k, "a", ts(1))
	b.tr.Finished(bg, k, OutcomeSucceeded, ts(2))
	runSpan, act := a.ended()["workflow w"], b.ended()["activity a"]
	if runSpan == nil || act == nil {
		t.Fatal("missing spans")
	}
	if runSpan.SpanContext().TraceID() != act.SpanContext().TraceID() {
		t.Errorf("trace %v (run) and %v (activity), want one", runSpan.SpanContext().TraceID(), act.SpanContext().TraceID())
	}
	if !act.Parent().Equal(timeline.Anchor("n", k.WorkflowID, k.RunID)) {
		t.Errorf("activity without a run span here has parent %v, want the run's anchor", act.Parent())
	}
	other := timeline.Anchor("other", k.WorkflowID, k.RunID)
	if other.TraceID() == act.SpanContext().TraceID() {
		t.Error("the same IDs in two namespaces share a trace")
	}
}

// No span for an activity whose dispatch this tracker never saw or evicted,
// nor for an evicted run; a duplicate dispatch or start makes no second span.
func TestTimelineNoSpanWithoutDispatch(t *testing.T) {
	h := newHarness(t, WithMaxInFlight(2))
	h.tr.Finished(bg, key("n", 1, 1, 0), OutcomeSucceeded, ts(1)) // never dispatched
	h.tr.RunStarted(bg, "n", wfID(2), runID(2), "w", ts(0))
	if h.tr.RunStarted(bg, "n", wfID(2), runID(2), "w", ts(1)) {
		t.Error("a second RunStarted of an open run = true")
	}
	h.tr.Dispatched(bg, key("n", 3, 3, 0), "a", ts(2))
	if h.tr.Dispatched(bg, key("n", 3, 3, 0), "a", ts(3)) {
		t.Error("a duplicate dispatch = true")
	}
	h.tr.Dispatched(bg, key("n", 4, 4, 0), "b", ts(4)) // evicts the run
	h.tr.Dispatched(bg, key("n", 5, 5, 0), "c", ts(5)) // evicts activity a
	h.tr.RunClosed(bg, "n", wfID(2), runID(2), eventstore.StatusCompleted, ts(6))
	h.tr.Finished(bg, key("n", 3, 3, 0), OutcomeSucceeded, ts(7))
	if n := len(h.spans.Ended()); n != 0 {
		t.Errorf("%d spans ended, want none: %v", n, h.spans.Ended())
	}
	if got := h.sums(catalog.WorkflowPairingEvicted); len(got) != 1 || got[attribute.NewSet(catalog.Namespace.String("n"))] != 1 {
		t.Errorf("%s = %v, want 1 in namespace n", catalog.WorkflowPairingEvicted, got)
	}
	h.tr.Finished(bg, key("n", 5, 5, 0), OutcomeSucceeded, ts(8))
	if n := len(h.spans.Ended()); n != 1 {
		t.Errorf("%d spans ended, want the live activity's", n)
	}
}

// With the timeline off the tracker makes no span and the metrics stay.
func TestTimelineOff(t *testing.T) {
	h := newHarness(t, WithTimelineSpans(false))
	k := key("n", 1, 1, 0)
	h.tr.RunStarted(bg, "n", k.WorkflowID, k.RunID, "w", ts(0))
	h.tr.Dispatched(bg, k, "a", ts(1))
	if sc := h.tr.ActivitySpanContext(k); sc.IsValid() {
		t.Errorf("ActivitySpanContext = %v with the timeline off", sc)
	}
	h.tr.Finished(bg, k, OutcomeSucceeded, ts(2))
	h.tr.RunClosed(bg, "n", k.WorkflowID, k.RunID, eventstore.StatusCompleted, ts(3))
	if n := len(h.spans.Started()); n != 0 {
		t.Errorf("%d spans started with the timeline off", n)
	}
	if got := h.sums(catalog.ActivitiesCompleted); got[attrs("n", "a", OutcomeSucceeded)] != 1 {
		t.Errorf("%s = %v, want the completion", catalog.ActivitiesCompleted, got)
	}
}

// ActivitySpanContext is the live activity span's, for work done elsewhere
// to join the activity's trace.
func TestActivitySpanContext(t *testing.T) {
	h := newHarness(t)
	k := key("", 1, 1, 0)
	if h.tr.ActivitySpanContext(k).IsValid() {
		t.Error("valid span context before the dispatch")
	}
	h.tr.Dispatched(bg, k, "a", ts(0))
	sc := h.tr.ActivitySpanContext(Key{Namespace: "default", WorkflowID: k.WorkflowID, RunID: k.RunID})
	h.tr.Finished(bg, k, OutcomeSucceeded, ts(1))
	act := h.ended()["activity a"]
	if act == nil || !sc.Equal(act.SpanContext()) {
		t.Errorf("ActivitySpanContext = %v, want the activity span's", sc)
	}
	if h.tr.ActivitySpanContext(k).IsValid() {
		t.Error("valid span context after the terminal")
	}
}

// A status that does not close a run is refused and changes nothing.
func TestRunClosedInvalidStatus(t *testing.T) {
	h := newHarness(t)
	k := key("n", 1, 1, 0)
	h.tr.RunStarted(bg, "n", k.WorkflowID, k.RunID, "w", ts(0))
	h.tr.Dispatched(bg, k, "a", ts(1))
	for _, s := range []eventstore.WorkflowStatus{eventstore.StatusRunning, eventstore.StatusPaused, "done"} {
		if n := h.tr.RunClosed(bg, "n", k.WorkflowID, k.RunID, s, ts(2)); n != 0 {
			t.Errorf("RunClosed(%q) settled %d", s, n)
		}
	}
	if len(h.errs) != 3 || !errors.Is(h.errs[0], ErrInvalidStatus) {
		t.Errorf("reported %v, want 3 ErrInvalidStatus", h.errs)
	}
	if h.tr.InFlight() != 1 || len(h.spans.Ended()) != 0 {
		t.Errorf("an invalid close changed the run: %d in flight, %d spans", h.tr.InFlight(), len(h.spans.Ended()))
	}
}

// Durations on workflow timescales: an activity of 90 minutes and a run of
// 5 hours land in buckets of their own, below the last boundary.
func TestDurationsCoverHours(t *testing.T) {
	h := newHarness(t)
	k := key("n", 1, 1, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	h.tr.RunStarted(bg, "n", k.WorkflowID, k.RunID, "w", at(0))
	h.tr.Dispatched(bg, k, "a", at(time.Minute))
	h.tr.Finished(bg, k, OutcomeSucceeded, at(91*time.Minute))
	h.tr.RunClosed(bg, "n", k.WorkflowID, k.RunID, eventstore.StatusCompleted, at(5*time.Hour))

	bounds := catalog.WorkflowDurationBoundaries
	if bounds[0] > 0.01 || bounds[len(bounds)-1] < 3600 {
		t.Fatalf("boundaries %v do not cover 10ms to an hour", bounds)
	}
	for name, want := range map[string]float64{catalog.ActivityDuration: 5400, catalog.WorkflowDuration: 18000} {
		var found bool
		for _, m := range h.scope().Metrics {
			if m.Name != name {
				continue
			}
			dp := m.Data.(metricdata.Histogram[float64]).DataPoints[0]
			found = true
			i := 0
			for i < len(dp.Bounds) && dp.Bounds[i] < want {
				i++
			}
			if dp.Sum != want || dp.BucketCounts[i] != 1 || i == 0 || i == len(dp.Bounds) || dp.Bounds[i]/dp.Bounds[i-1] > 2.5 {
				t.Errorf("%s: sum %v, counts %v over %v: want %v in a bucket of its own scale", name, dp.Sum, dp.BucketCounts, dp.Bounds, want)
			}
		}
		if !found {
			t.Errorf("%s not exported", name)
		}
	}
}

// The age gauge: per (namespace, type), the age of the oldest activity
// still in flight, as the clock moves; 0 once none is.
func TestOldestInflightAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		now := time.Now()
		charge, ship := attribute.NewSet(catalog.Namespace.String("n"), catalog.ActivityType.String("charge")),
			attribute.NewSet(catalog.Namespace.String("n"), catalog.ActivityType.String("ship"))
		ages := func() map[attribute.Set]float64 {
			out := map[attribute.Set]float64{}
			for _, m := range h.scope().Metrics {
				if m.Name == catalog.ActivityOldestInflightAge {
					for _, dp := range m.Data.(metricdata.Gauge[float64]).DataPoints {
						out[dp.Attributes] = dp.Value
					}
				}
			}
			return out
		}
		want := func(step string, c, s float64) {
			t.Helper()
			got := ages()
			if len(got) != 2 || got[charge] != c || got[ship] != s {
				t.Errorf("%s: ages %v, want charge %v and ship %v", step, got, c, s)
			}
		}
		h.tr.Dispatched(bg, key("n", 1, 1, 1), "charge", now.Add(-10*time.Minute))
		h.tr.Dispatched(bg, key("n", 1, 1, 0), "charge", now.Add(-30*time.Minute)) // arrives later, is older
		h.tr.Dispatched(bg, key("n", 1, 1, 2), "ship", now)
		want("dispatched", 1800, 0)
		time.Sleep(time.Minute)
		want("a minute later", 1860, 60)
		h.tr.Finished(bg, key("n", 1, 1, 0), OutcomeSucceeded, time.Now())
		want("oldest charge done", 660, 60)
		h.tr.Dispatched(bg, key("n", 1, 1, 3), "ship", time.Now().Add(time.Hour)) // a future time: age 0, not negative
		h.tr.AbandonRun(bg, "n", wfID(1), runID(1), time.Now())
		want("run abandoned", 0, 0)
	})
}

// Concurrent runs, dispatches, retries, terminals and closes leave every
// span ended exactly once and the table consistent.
func TestTimelineConcurrentSafe(t *testing.T) {
	h := newHarness(t, WithMaxInFlight(64))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				wf, run := wfID(byte(g)), runID(byte(i%7))
				h.tr.RunStarted(bg, "n", wf, run, "w", ts(i))
				for a := range 3 {
					k := Key{Namespace: "n", WorkflowID: wf, RunID: run, ActivityID: eventstore.ActivityID(a)}
					h.tr.Dispatched(bg, k, "a", ts(i))
					h.tr.Retried(bg, k, ts(i+1))
					if a != 2 {
						h.tr.Finished(bg, k, OutcomeSucceeded, ts(i+2))
					}
				}
				if i%7 == 6 {
					h.tr.RunContinued(bg, "n", wf, run, runID(0), ts(i+3))
				} else {
					h.tr.RunClosed(bg, "n", wf, run, eventstore.StatusCompleted, ts(i+3))
				}
			}
		})
	}
	wg.Wait()
	if err := h.tr.join.check(); err != nil {
		t.Fatal(err)
	}
	seen := map[trace.SpanID]bool{}
	for _, s := range h.spans.Ended() {
		if seen[s.SpanContext().SpanID()] {
			t.Fatalf("span %s ended twice", s.Name())
		}
		seen[s.SpanContext().SpanID()] = true
	}
}

// sums returns the points of the named int64 sum by attribute set.
func (h *harness) sums(name string) map[attribute.Set]int64 {
	h.t.Helper()
	out := map[attribute.Set]int64{}
	if m, ok := h.metric(name); ok {
		for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
			out[dp.Attributes] = dp.Value
		}
	}
	return out
}

// panicking is a span processor that panics on every span it sees.
type panicking struct{ sdktrace.SpanProcessor }

func (panicking) OnStart(context.Context, sdktrace.ReadWriteSpan) { panic("OnStart") }
func (panicking) OnEnd(sdktrace.ReadOnlySpan)                     { panic("OnEnd") }

// A tracer whose span pipeline panics never fails a call nor leaves the
// tracker half updated: the panics are reported, the metrics stay exact.
func TestTimelineSpanPanicsAreReported(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(panicking{tracetest.NewSpanRecorder()}))
	h := newHarness(t, WithTracerProvider(tp))
	k := key("n", 1, 1, 0)
	h.tr.RunStarted(bg, "n", k.WorkflowID, k.RunID, "w", ts(0))
	h.tr.Dispatched(bg, k, "a", ts(1))
	h.tr.Retried(bg, k, ts(2))
	h.tr.Finished(bg, k, OutcomeSucceeded, ts(3))
	h.tr.Dispatched(bg, key("n", 1, 1, 1), "a", ts(4))
	h.tr.RunClosed(bg, "n", k.WorkflowID, k.RunID, eventstore.StatusCompleted, ts(5))
	if len(h.errs) == 0 {
		t.Fatal("no panic reported")
	}
	for _, err := range h.errs {
		if !strings.Contains(err.Error(), "panic") {
			t.Errorf("reported %v, want the span panics", err)
		}
	}
	if h.tr.InFlight() != 0 || h.tr.join.live.n != 0 {
		t.Errorf("after the panics: %d in flight, %d live entries", h.tr.InFlight(), h.tr.join.live.n)
	}
	if err := h.tr.join.check(); err != nil {
		t.Error(err)
	}
	if got := h.sums(catalog.ActivitiesCompleted); got[attrs("n", "a", OutcomeSucceeded)] != 1 || got[attrs("n", "a", OutcomeAbandoned)] != 1 {
		t.Errorf("completions %v, want one succeeded and one abandoned", got)
	}
}

// A nil context is a background one, with the timeline on too.
func TestTimelineNilContext(t *testing.T) {
	h := newHarness(t)
	k := key("n", 1, 1, 0)
	var nilCtx context.Context
	h.tr.RunStarted(nilCtx, "n", k.WorkflowID, k.RunID, "w", ts(0))
	h.tr.Dispatched(nilCtx, k, "a", ts(1))
	h.tr.Retried(nilCtx, k, ts(2))
	h.tr.Finished(nilCtx, k, OutcomeSucceeded, ts(3))
	h.tr.Dispatched(nilCtx, key("n", 1, 1, 1), "a", ts(4))
	h.tr.AbandonRun(nilCtx, "n", k.WorkflowID, k.RunID, ts(5))
	h.tr.RunContinued(nilCtx, "n", k.WorkflowID, k.RunID, runID(9), ts(5))
	if n := len(h.spans.Ended()); n != 3 {
		t.Errorf("%d spans ended, want 3", n)
	}
}

// Two dispatches of one key racing its terminal: whichever arrives first,
// the activity completes once, with one span, from the dispatch that won.
func TestRedispatchRaceKeepsSpanConcurrentSafe(t *testing.T) {
	h := newHarness(t)
	for round := range 2000 {
		k := key("n", 1, 1, uint64(round))
		var wg sync.WaitGroup
		start := make(chan struct{})
		wg.Go(func() { <-start; h.tr.Dispatched(bg, k, "a", ts(0)) })
		wg.Go(func() { <-start; h.tr.Dispatched(bg, k, "a", ts(10)) })
		wg.Go(func() { <-start; h.tr.Finished(bg, k, OutcomeSucceeded, ts(5)) })
		close(start)
		wg.Wait()
		h.tr.Finished(bg, k, OutcomeSucceeded, ts(20)) // a repeat: no-op
		completed := h.sums(catalog.ActivitiesCompleted)[attrs("n", "a", OutcomeSucceeded)]
		if spans := len(h.spans.Ended()); completed != int64(round+1) || spans != round+1 {
			t.Fatalf("round %d: %d completions, %d spans, want %d of each", round, completed, spans, round+1)
		}
	}
	if h.tr.InFlight() != 0 {
		t.Errorf("%d left in flight", h.tr.InFlight())
	}
}

// dropType samples every span but the activity spans of one type.
type dropType string

func (d dropType) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	for _, kv := range p.Attributes {
		if kv.Key == catalog.ActivityType && kv.Value.AsString() == string(d) {
			return sdktrace.SamplingResult{Decision: sdktrace.Drop}
		}
	}
	return sdktrace.AlwaysSample().ShouldSample(p)
}

func (d dropType) Description() string { return "dropType" }

// endCounter wraps a provider's spans to count their End calls.
type endCounter struct {
	trace.TracerProvider
	ends *atomic.Int32
}

func (p endCounter) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return endCountingTracer{p.TracerProvider.Tracer(name, opts...), p.ends}
}

type endCountingTracer struct {
	trace.Tracer
	ends *atomic.Int32
}

func (t endCountingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, span := t.Tracer.Start(ctx, name, opts...)
	return ctx, endCountingSpan{span, t.ends}
}

type endCountingSpan struct {
	trace.Span
	ends *atomic.Int32
}

func (s endCountingSpan) End(opts ...trace.SpanEndOption) {
	s.ends.Add(1)
	s.Span.End(opts...)
}

// An activity span the sampler dropped is still ended at its settlement,
// and sparing it the span work leaves the recorded spans settled in the
// same call whole: the retry events of each at its own times.
func TestTimelineDroppedSpansEnded(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	sdk := sdktrace.NewTracerProvider(sdktrace.WithSampler(dropType("quiet")), sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	var ends atomic.Int32
	tr, err := New(WithMeterProvider(noop.NewMeterProvider()), WithTracerProvider(endCounter{sdk, &ends}))
	if err != nil {
		t.Fatal(err)
	}
	bg := context.Background()
	quiet, charge := key("tenant", 1, 1, 1), key("tenant", 1, 1, 2)
	tr.RunStarted(bg, "tenant", quiet.WorkflowID, quiet.RunID, "order", ts(0))
	tr.Dispatched(bg, quiet, "quiet", ts(10))
	tr.Dispatched(bg, charge, "charge", ts(11))
	tr.Retried(bg, quiet, ts(20))
	tr.Retried(bg, charge, ts(30))
	tr.Retried(bg, quiet, ts(40))
	tr.Retried(bg, charge, ts(50))
	if n := tr.RunClosed(bg, "tenant", quiet.WorkflowID, quiet.RunID, eventstore.StatusCompleted, ts(60)); n != 2 {
		t.Fatalf("RunClosed settled %d activities, want 2", n)
	}
	if got := ends.Load(); got != 3 {
		t.Errorf("%d spans ended, want both activities' and the run's", got)
	}
	names := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		names[s.Name()] = s
	}
	act := names["activity charge"]
	if len(names) != 2 || act == nil || names["workflow order"] == nil {
		t.Fatalf("ended spans %v, want the charge activity's and the run's", names)
	}
	wantAttr(t, act, catalog.RetryCount.Int64(2))
	ev := act.Events()
	if len(ev) != 2 || !ev[0].Time.Equal(ts(30)) || !ev[1].Time.Equal(ts(50)) {
		t.Errorf("activity events %v, want two retries at %v and %v", ev, ts(30), ts(50))
	}
}

// A run's start and an activity's dispatch read back (a fill or a resume)
// before the append that wrote them returns here open their spans without
// a link; the append, observed next, names the call, and the spans link to
// it when they end, whether the span was open meanwhile or not.
func TestLinksOfFactsReadBackFirst(t *testing.T) {
	k := key("n", 1, 1, 0)
	env := func(seq uint64, ms int) eventstore.Envelope {
		return eventstore.Envelope{WorkflowID: k.WorkflowID, RunID: k.RunID, Seq: seq, RecordedAt: ts(ms)}
	}
	written := []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: env(1, 0), WorkflowType: "flow"},
		eventstore.ActivityScheduled{Envelope: env(2, 5), ActivityID: 0, ActivityType: "charge"},
	}
	settled := []eventstore.Event{
		eventstore.ActivityCompleted{Envelope: env(3, 30), ActivityID: 0},
		eventstore.WorkflowCompleted{Envelope: env(4, 40)},
	}
	for _, readBackFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("read back first %v", readBackFirst), func(t *testing.T) {
			h := newHarness(t)
			writeCtx, writeSC := callCtx(1)
			endCtx, endSC := callCtx(2)
			if readBackFirst {
				readBack(h.tr, "n", k.WorkflowID, written)
				if h.tr.InFlight() != 1 {
					t.Fatalf("%d in flight after the read, want 1", h.tr.InFlight())
				}
			}
			h.tr.Observe(writeCtx, "n", k.WorkflowID, 1, written)
			h.tr.Observe(endCtx, "n", k.WorkflowID, 3, settled)
			spans := h.ended()
			runSpan, act := spans["workflow flow"], spans["activity charge"]
			if runSpan == nil || act == nil {
				t.Fatalf("ended spans %v, want the run's and the activity's", spans)
			}
			for _, c := range []struct {
				s          sdktrace.ReadOnlySpan
				first, end string
			}{{runSpan, "started", "closed"}, {act, "scheduled", "settled"}} {
				links := linkRoles(t, c.s)
				if len(links) != 2 || !links[c.first].Equal(writeSC) || !links[c.end].Equal(endSC) {
					t.Errorf("%s: links %v, want %s to the writing call %v and %s to %v", c.s.Name(), links, c.first, writeSC, c.end, endSC)
				}
			}
		})
	}
}
