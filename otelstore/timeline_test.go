package otelstore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// spansNamed returns the ended spans called name, in end order.
func (h *harness) spansNamed(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range h.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// links maps a timeline span's links by their aion.timeline.link role.
func links(s sdktrace.ReadOnlySpan) map[string]trace.SpanContext {
	out := map[string]trace.SpanContext{}
	for _, l := range s.Links() {
		for _, kv := range l.Attributes {
			if kv.Key == otelstore.AttrTimelineLink {
				out[kv.Value.AsString()] = l.SpanContext
			}
		}
	}
	return out
}

// The decorator with default options turns a history with explicit times
// into a run span and an activity span with exactly those times, the
// activity under the run, both linked to the append spans that wrote their
// events; the retry is an event at its time and the duration lands in an
// hour-scale bucket.
func TestTimelineFromHistory(t *testing.T) {
	h := newHarness(t)
	w := newWriter(t, h.wrap(t, eventstore.NewMemory()))
	w.append(
		eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "order", Input: payload},
		w.scheduled(3, "charge", time.Second),
	)
	w.append(w.failed(3, eventstore.Retryable, 2*time.Minute))
	w.append(w.completed(3, 90*time.Minute), eventstore.WorkflowCompleted{Envelope: w.env(2 * time.Hour), Result: payload})

	appends := h.spansNamed("append")
	runs, acts := h.spansNamed("workflow order"), h.spansNamed("activity charge")
	if len(appends) != 3 || len(runs) != 1 || len(acts) != 1 {
		t.Fatalf("%d append, %d run and %d activity spans; want 3, 1, 1", len(appends), len(runs), len(acts))
	}
	runSpan, act := runs[0], acts[0]
	if !act.StartTime().Equal(t0.Add(time.Second)) || !act.EndTime().Equal(t0.Add(90*time.Minute)) {
		t.Errorf("activity span %v to %v, want the history's %v to %v", act.StartTime(), act.EndTime(), t0.Add(time.Second), t0.Add(90*time.Minute))
	}
	if !runSpan.StartTime().Equal(t0) || !runSpan.EndTime().Equal(t0.Add(2*time.Hour)) {
		t.Errorf("run span %v to %v, want %v to %v", runSpan.StartTime(), runSpan.EndTime(), t0, t0.Add(2*time.Hour))
	}
	if act.Parent().SpanID() != runSpan.SpanContext().SpanID() || act.SpanContext().TraceID() != runSpan.SpanContext().TraceID() {
		t.Errorf("activity parent %v, want the run span %v", act.Parent(), runSpan.SpanContext())
	}
	if got := links(act); !got["scheduled"].Equal(appends[0].SpanContext()) || !got["settled"].Equal(appends[2].SpanContext()) {
		t.Errorf("activity links %v, want scheduled by the first append and settled by the third", got)
	}
	if got := links(runSpan); !got["started"].Equal(appends[0].SpanContext()) || !got["closed"].Equal(appends[2].SpanContext()) {
		t.Errorf("run links %v, want started by the first append and closed by the third", got)
	}
	if ev := act.Events(); len(ev) != 1 || !ev[0].Time.Equal(t0.Add(2*time.Minute)) {
		t.Errorf("activity events %v, want the retry at +2m", ev)
	}
	want := map[attribute.Key]attribute.Value{
		otelstore.AttrActivityOutcome: attribute.StringValue("succeeded"),
		otelstore.AttrRetryCount:      attribute.Int64Value(1),
		otelstore.AttrActivityID:      attribute.Int64Value(3),
		otelstore.AttrRunID:           attribute.StringValue(w.run.String()),
		otelstore.AttrWorkflowID:      attribute.StringValue(w.wf.String()),
		otelstore.AttrNamespace:       attribute.StringValue("default"),
	}
	for _, kv := range act.Attributes() {
		if v, ok := want[kv.Key]; ok {
			if v != kv.Value {
				t.Errorf("activity %s = %v, want %v", kv.Key, kv.Value.String(), v.String())
			}
			delete(want, kv.Key)
		}
	}
	if len(want) > 0 {
		t.Errorf("activity span lacks %v", want)
	}
	if act.Status().Code != codes.Unset || runSpan.Status().Code != codes.Unset {
		t.Errorf("statuses %v, %v; want Unset for a success", act.Status(), runSpan.Status())
	}

	m := h.metrics(t)
	for name, secs := range map[string]float64{"aion.activity.duration": 5399, "aion.workflow.duration": 7200} {
		dp := m[name].Data.(metricdata.Histogram[float64]).DataPoints
		if len(dp) != 1 || dp[0].Sum != secs || dp[0].Bounds[len(dp[0].Bounds)-1] < 3600 {
			t.Fatalf("%s = %+v, want one point of %vs with buckets past an hour", name, dp, secs)
		}
		for i, b := range dp[0].Bounds {
			if dp[0].BucketCounts[i] == 1 && (b < secs || b > 2*secs) {
				t.Errorf("%s: %vs counted in the bucket up to %v", name, secs, b)
			}
		}
	}
}

// A continue-as-new chain appended through the decorator is two traces,
// linked in order.
func TestTimelineContinueAsNew(t *testing.T) {
	h := newHarness(t)
	w := newWriter(t, h.wrap(t, eventstore.NewMemory()))
	first, second := w.run, eventstore.NewRunID()
	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "loop", Input: payload})
	w.append(eventstore.WorkflowContinuedAsNew{Envelope: w.env(time.Minute), NewRunID: second, Input: payload})
	w.run = second
	w.append(eventstore.WorkflowStarted{Envelope: w.env(time.Minute), WorkflowType: "loop", Input: payload},
		w.scheduled(0, "step", time.Minute+time.Second))
	w.append(w.completed(0, 2*time.Minute), eventstore.WorkflowCompleted{Envelope: w.env(3 * time.Minute), Result: payload})

	runs := h.spansNamed("workflow loop")
	if len(runs) != 2 {
		t.Fatalf("%d run spans, want 2", len(runs))
	}
	a, b := runs[0], runs[1]
	if a.SpanContext().TraceID() == b.SpanContext().TraceID() {
		t.Fatal("the two runs share a trace")
	}
	if v, _ := attrValue(a, otelstore.AttrRunID); v.AsString() != first.String() {
		t.Errorf("first run span is of run %v, want %v", v.String(), first)
	}
	if links(a)["next_run"].TraceID() != b.SpanContext().TraceID() {
		t.Errorf("links %v do not lead to the next run", links(a))
	}
	if prev, ok := links(b)["previous_run"]; ok {
		t.Errorf("the second run links back to %v: whether that span is known depends on arrival order", prev)
	}
	acts := h.spansNamed("activity step")
	if len(acts) != 1 || acts[0].SpanContext().TraceID() != b.SpanContext().TraceID() {
		t.Errorf("the second run's activity is not in its trace")
	}
}

func attrValue(s sdktrace.ReadOnlySpan, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// WithTimelineSpans(false) leaves only the store-call spans.
func TestTimelineSpansOff(t *testing.T) {
	h := newHarness(t)
	w := newWriter(t, h.wrap(t, eventstore.NewMemory(), otelstore.WithTimelineSpans(false)))
	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "order", Input: payload}, w.scheduled(0, "charge", 0))
	w.append(w.completed(0, time.Second), eventstore.WorkflowCompleted{Envelope: w.env(time.Second), Result: payload})
	for _, s := range h.spans.Ended() {
		if s.Name() != "append" {
			t.Errorf("span %q with the timeline off", s.Name())
		}
	}
}

// The oldest-in-flight age gauge, through the decorator: an activity
// dispatched 30 minutes ago (by its RecordedAt) is 30 minutes old now and
// ages with the clock, even though nothing else happens.
func TestOldestInflightAgeThroughDecorator(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		w := newWriter(t, h.wrap(t, eventstore.NewMemory(), otelstore.WithNamespace("shop")))
		start := time.Now().Add(-30 * time.Minute)
		at := func() time.Duration { return start.Sub(t0) } // envelopes are t0-relative
		w.append(w.scheduled(0, "charge", at()))
		age := func() float64 {
			t.Helper()
			m, ok := h.metrics(t)["aion.activity.oldest_inflight_age"]
			if !ok {
				t.Fatal("no aion.activity.oldest_inflight_age")
			}
			dp := m.Data.(metricdata.Gauge[float64]).DataPoints
			want := attribute.NewSet(otelstore.AttrActivityType.String("charge"), otelstore.AttrNamespace.String("shop"))
			if len(dp) != 1 || !dp[0].Attributes.Equals(&want) {
				t.Fatalf("age points %+v, want one for shop/charge", dp)
			}
			return dp[0].Value
		}
		if got := age(); got != 1800 {
			t.Errorf("age = %v, want 1800", got)
		}
		time.Sleep(15 * time.Minute)
		if got := age(); got != 2700 {
			t.Errorf("age after 15 minutes = %v, want 2700", got)
		}
		w.append(w.completed(0, at()+45*time.Minute))
		if got := age(); got != 0 {
			t.Errorf("age with nothing in flight = %v, want 0", got)
		}
	})
}

// A pairing tracker is an ActivitySpanSource: shared by the store and the
// keyspace decorators, it puts an agent's invoke_agent span, and with it
// the transcript's model-call spans and their log records, under the span
// of the activity they were written in.
var _ otelstore.ActivitySpanSource = (*pairing.Tracker)(nil)

func TestTranscriptLogsJoinActivitySpan(t *testing.T) {
	h := newHarness(t)
	tracker, err := pairing.New(pairing.WithMeterProvider(h.mp), pairing.WithTracerProvider(h.tp))
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, h.wrap(t, eventstore.NewMemory(), otelstore.WithPairing(tracker), otelstore.WithNamespace("shop")))
	lp, logs := newLogs(t)
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory(), otelstore.WithLoggerProvider(lp), otelstore.WithTranscriptLogs(true),
		otelstore.WithKeyspaceNamespace("shop"), otelstore.WithActivitySpans(tracker))

	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "agent", Input: payload}, w.scheduled(2, "plan", time.Second))
	if _, err := ks.AppendEvents(context.Background(), 0, agentEvents(w.wf, w.run,
		keyspace.Message{Role: "user", Text: "hi"}, keyspace.Usage{InputTokens: 3, OutputTokens: 1})); err != nil {
		t.Fatal(err)
	}
	w.append(w.completed(2, time.Minute))
	if _, err := ks.AppendEvents(context.Background(), 2, agentEvents(w.wf, w.run, keyspace.Usage{InputTokens: 1})); err != nil {
		t.Fatal(err)
	}
	ks.(interface{ EndAgentSpans() }).EndAgentSpans()

	acts, agents, calls := h.spansNamed("activity plan"), h.spansNamed("invoke_agent"), h.spansNamed("chat")
	recs := logs.Records()
	if len(acts) != 1 || len(agents) != 1 || len(calls) != 2 || len(recs) != 2 {
		t.Fatalf("%d activity, %d invoke_agent and %d inference spans, %d records; want 1, 1, 2, 2", len(acts), len(agents), len(calls), len(recs))
	}
	act := acts[0].SpanContext()
	if agents[0].Parent().SpanID() != act.SpanID() || agents[0].SpanContext().TraceID() != act.TraceID() {
		t.Errorf("invoke_agent parent %s, want the activity span %s", agents[0].Parent().SpanID(), act.SpanID())
	}
	for i, r := range recs {
		if r.TraceID() != act.TraceID() || r.SpanID() != calls[i].SpanContext().SpanID() ||
			calls[i].Parent().SpanID() != agents[0].SpanContext().SpanID() {
			t.Errorf("record %d in %s/%s, want the activity's trace and the model call's span under invoke_agent", i, r.TraceID(), r.SpanID())
		}
	}
}
