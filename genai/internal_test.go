package genai

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/pairing"
)

// probe is an SDK meter and tracer provider for the tests inside the
// package, which set the unexported bounds.
type probe struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	opts   []Option
}

func newProbe(t *testing.T, set func(*config)) *probe {
	t.Helper()
	p := &probe{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	p.opts = []Option{WithMeterProvider(mp), WithTracerProvider(tp), optionFunc(set)}
	return p
}

// values returns each counter's and histogram's points as "name/tool name"
// (or "name/reason") -> value or count.
func (p *probe) values(t *testing.T) map[string]any {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := p.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	label := func(s attribute.Set) string {
		v, _ := s.Value(attribute.Key("gen_ai.tool.name"))
		return v.String()
	}
	got := map[string]any{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					got[m.Name+"/"+label(dp.Attributes)] = dp.Value
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					got[m.Name+"/"+label(dp.Attributes)] = dp.Count
				}
			}
		}
	}
	return got
}

// named returns the ended spans called name.
func (p *probe) named(name string) []sdktrace.ReadOnlySpan {
	return slices.DeleteFunc(p.spans.Ended(), func(s sdktrace.ReadOnlySpan) bool { return s.Name() != name })
}

func endOf(s sdktrace.ReadOnlySpan) string {
	for _, kv := range s.Attributes() {
		if kv.Key == "aion.gen_ai.invocation.end" {
			return kv.Value.AsString()
		}
	}
	return ""
}

// stream builds events of one attempt, a second apart from start.
type stream struct {
	wf      eventstore.WorkflowID
	run     eventstore.RunID
	act     eventstore.ActivityID
	attempt uint32
	start   time.Time
}

func newStream(act eventstore.ActivityID, attempt uint32) stream {
	return stream{wf: eventstore.NewWorkflowID(), run: eventstore.NewRunID(), act: act, attempt: attempt,
		start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (s stream) events(contents ...keyspace.Content) []keyspace.ActivityEvent {
	out := make([]keyspace.ActivityEvent, len(contents))
	for i, c := range contents {
		out[i] = keyspace.ActivityEvent{WorkflowID: s.wf, RunID: s.run, ActivityID: s.act, Attempt: s.attempt,
			EmittedAt: s.start.Add(time.Duration(i) * time.Second), Content: c}
	}
	return out
}

// fed is a keyspace that feeds a Tracker each batch it commits: an
// engine's own use of the package, without the otelstore decorator.
type fed struct {
	keyspace.Store
	tracker *Tracker
}

func newFed(opts ...Option) *fed {
	return &fed{Store: keyspace.NewMemory(), tracker: New(opts...)}
}

func (f *fed) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	head, err := f.Store.AppendEvents(ctx, expectedSeq, events)
	if err == nil {
		f.tracker.Observe(ctx, expectedSeq, events)
	}
	return head, err
}

func mustAppend(t *testing.T, ks keyspace.Store, events []keyspace.ActivityEvent) {
	t.Helper()
	key := keyspace.KeyOf(events[0])
	head, err := ks.Head(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.AppendEvents(context.Background(), head, events); err != nil {
		t.Fatal(err)
	}
}

// TestPendingToolCallsBounded: past the bound the oldest pending call or
// result is forgotten and counted; a result whose call was forgotten waits,
// and is counted as an unknown tool without duration when its attempt
// ends; memory stays at the bound however many calls never end.
func TestPendingToolCallsBounded(t *testing.T) {
	p := newProbe(t, func(c *config) { c.maxPendingCalls = 4 })
	ks := newFed(p.opts...)
	var contents []keyspace.Content
	for i := range 10 {
		contents = append(contents, keyspace.ToolCall{CallID: fmt.Sprint(i), Name: "t"})
	}
	contents = append(contents,
		keyspace.ToolResult{CallID: "0"}, // its call was forgotten: waits, and pushes call 6 out
		keyspace.ToolResult{CallID: "9"}, // still pending: paired
		keyspace.Status{State: "completed"},
	)
	mustAppend(t, ks, newStream(0, 1).events(contents...))
	if n := ks.tracker.agents.tools.Len(); n != 2 {
		t.Errorf("%d calls pending, want 2 (7 and 8: the bound 4, less 9 that ended and the result counted at the end)", n)
	}
	got := p.values(t)
	want := map[string]any{
		"aion.gen_ai.tool.pairing.evicted/": int64(7),
		"aion.gen_ai.tool.calls/t":          int64(1),
		"aion.gen_ai.tool.calls/_unknown":   int64(1),
		"gen_ai.execute_tool.duration/t":    uint64(1),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

// TestAgentInvocationsBounded: past the bound the attempt committed to least
// recently has its span ended (reason evicted, counted), and at most the
// bound of ended attempts is remembered.
func TestAgentInvocationsBounded(t *testing.T) {
	p := newProbe(t, func(c *config) { c.maxAttempts = 2 })
	ks := newFed(p.opts...)
	streams := make([]stream, 6)
	for i := range streams {
		streams[i] = newStream(eventstore.ActivityID(i), 1)
		mustAppend(t, ks, streams[i].events(keyspace.Message{Role: "user", Text: "x"}, keyspace.Usage{InputTokens: 1}))
	}
	g := ks.tracker
	if live, ended, known := g.agents.live.Len(), g.agents.ended.Len(), len(g.agents.byKey); live != 2 || ended != 2 || known != 4 {
		t.Errorf("%d live, %d ended, %d known attempts; want 2, 2, 4", live, ended, known)
	}
	agents := p.named("invoke_agent")
	if len(agents) != 4 {
		t.Fatalf("%d invoke_agent spans ended, want the 4 evicted", len(agents))
	}
	for _, s := range agents {
		if endOf(s) != "evicted" {
			t.Errorf("span ended by %q, want evicted", endOf(s))
		}
	}
	if got := p.values(t)["aion.gen_ai.agent.pairing.evicted/"]; got != int64(4) {
		t.Errorf("evicted = %v, want 4", got)
	}
}

// TestAgentIdle: an attempt nothing commits to for the idle timeout is ended
// by the next committed batch of any stream, at its own last event.
func TestAgentIdle(t *testing.T) {
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	p := newProbe(t, func(c *config) { c.now = clock })
	ks := newFed(append(p.opts, WithAgentIdleTimeout(time.Minute))...)
	a, b := newStream(1, 1), newStream(2, 1)
	mustAppend(t, ks, a.events(keyspace.Usage{InputTokens: 1}, keyspace.Usage{InputTokens: 2}))
	mu.Lock()
	now = now.Add(59 * time.Second)
	mu.Unlock()
	mustAppend(t, ks, b.events(keyspace.Usage{InputTokens: 1}))
	if n := len(p.named("invoke_agent")); n != 0 {
		t.Fatalf("%d spans ended before the idle timeout", n)
	}
	mu.Lock()
	now = now.Add(2 * time.Second) // a: 61 s idle, b: 2 s
	mu.Unlock()
	mustAppend(t, ks, b.events(keyspace.Usage{InputTokens: 1}))
	ended := p.named("invoke_agent")
	if len(ended) != 1 || endOf(ended[0]) != "idle" || !ended[0].EndTime().Equal(a.start.Add(time.Second)) {
		t.Fatalf("ended %v, want a's span, ended idle at its last event %v", ended, a.start.Add(time.Second))
	}
}

// TestNextAttemptEndsThePrevious: a retry of the activity committing means
// its previous attempt is over.
func TestNextAttemptEndsThePrevious(t *testing.T) {
	p := newProbe(t, func(*config) {})
	ks := newFed(p.opts...)
	first := newStream(3, 1)
	second := first
	second.attempt = 2
	second.start = first.start.Add(time.Hour)
	mustAppend(t, ks, first.events(keyspace.Usage{InputTokens: 1}, keyspace.Status{State: "thinking"}))
	mustAppend(t, ks, second.events(keyspace.Usage{InputTokens: 1}))
	ended := p.named("invoke_agent")
	if len(ended) != 1 || endOf(ended[0]) != "next_attempt" || !ended[0].EndTime().Equal(first.start.Add(time.Second)) {
		t.Fatalf("ended %v, want attempt 1 ended by the next, at its last event", ended)
	}
	ks.tracker.EndAgentSpans()
	if ended = p.named("invoke_agent"); len(ended) != 2 || endOf(ended[1]) != "flushed" {
		t.Fatalf("after EndAgentSpans: %d spans, the second ended by %q; want 2, flushed", len(ended), endOf(ended[1]))
	}
}

// TestLateEventsJoinTheEndedSpan: events committed after an attempt's
// terminal status are parented to its (ended) span, and open no second one.
func TestLateEventsJoinTheEndedSpan(t *testing.T) {
	p := newProbe(t, func(*config) {})
	ks := newFed(p.opts...)
	s := newStream(1, 1)
	evs := s.events(keyspace.ToolCall{CallID: "1", Name: "t"}, keyspace.Status{State: "failed"},
		keyspace.ToolResult{CallID: "1"}, keyspace.Usage{InputTokens: 1, RequestModel: "m"})
	mustAppend(t, ks, evs[:2])
	mustAppend(t, ks, evs[2:])
	ks.tracker.EndAgentSpans()
	agents := p.named("invoke_agent")
	if len(agents) != 1 || endOf(agents[0]) != "status" || agents[0].Status().Code.String() != "Error" {
		t.Fatalf("invoke_agent spans %v, want one, ended by its failed status, status Error", agents)
	}
	for _, name := range []string{"execute_tool t", "chat m"} {
		late := p.named(name)
		if len(late) != 1 || late[0].Parent().SpanID() != agents[0].SpanContext().SpanID() {
			t.Errorf("%s spans %v, want one child of the ended invoke_agent span", name, late)
		}
	}
	if got := p.values(t)["gen_ai.invoke_agent.duration/"]; got != uint64(1) {
		t.Errorf("invoke_agent durations %v, want 1", got)
	}
}

type panickingSpans struct{}

func (panickingSpans) ActivitySpanContext(pairing.Key) trace.SpanContext { panic("boom") }

// TestGenAIPanicAfterCommitIsHandled: a panic inside the GenAI telemetry of
// a committed batch (here a panicking ActivitySpanSource) goes to the error
// handler; the caller gets the inner result, and later batches still work.
func TestGenAIPanicAfterCommitIsHandled(t *testing.T) {
	var handled []error
	ks := newFed(WithLoggerProvider(noop.NewLoggerProvider()), WithTranscriptLogs(true),
		WithActivitySpans(panickingSpans{}), optionFunc(func(c *config) { c.handle = func(err error) { handled = append(handled, err) } }))
	ev := keyspace.ActivityEvent{WorkflowID: eventstore.NewWorkflowID(), RunID: eventstore.NewRunID(), Content: keyspace.Usage{InputTokens: 1}}
	head, err := ks.AppendEvents(context.Background(), 0, []keyspace.ActivityEvent{ev})
	if head != 1 || err != nil {
		t.Fatalf("AppendEvents = %d, %v; want 1, nil", head, err)
	}
	if len(handled) != 1 || !strings.Contains(handled[0].Error(), "boom") {
		t.Fatalf("handled %v, want the panic", handled)
	}
	if _, err := ks.AppendEvents(context.Background(), 1, []keyspace.ActivityEvent{ev}); err != nil {
		t.Fatal(err)
	}
	ks.tracker.EndAgentSpans()
}

// TestBadAttributesAreDroppedAndReported: an attribute the Tracker cannot
// record (a key it sets itself, also under another spelling of its label
// name, or an invalid key) is dropped and reported to the error handler;
// the others are recorded, and New never fails.
func TestBadAttributesAreDroppedAndReported(t *testing.T) {
	var reported []error
	p := newProbe(t, func(c *config) { c.handle = func(err error) { reported = append(reported, err) } })
	tracker := New(append(p.opts, WithAttributes(attribute.String("gen_ai.request.model", "spoof"),
		attribute.String("aion_namespace", "x"), attribute.String("\xff", "bad"), attribute.String("deployment", "blue")))...)
	ev := keyspace.ActivityEvent{WorkflowID: eventstore.NewWorkflowID(), RunID: eventstore.NewRunID(),
		Content: keyspace.Usage{InputTokens: 1, RequestModel: "real"}}
	tracker.Observe(context.Background(), 0, []keyspace.ActivityEvent{ev})
	if len(reported) != 3 {
		t.Errorf("%d reports, want 3 (one per dropped attribute): %v", len(reported), reported)
	}
	var rm metricdata.ResourceMetrics
	if err := p.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	points := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[int64]); ok {
				for _, dp := range h.DataPoints {
					points++
					model, _ := dp.Attributes.Value("gen_ai.request.model")
					dep, _ := dp.Attributes.Value("deployment")
					ns, _ := dp.Attributes.Value("aion.namespace")
					if model.AsString() != "real" || dep.AsString() != "blue" || ns.AsString() != "default" {
						t.Errorf("%s point %v, want the real model, deployment blue, the default namespace", m.Name, dp.Attributes.ToSlice())
					}
				}
			}
		}
	}
	if points == 0 {
		t.Error("no token point read")
	}
}
