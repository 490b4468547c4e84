package otelstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/genaitest"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// at is t0 plus d seconds.
func at(d float64) time.Time { return t0.Add(time.Duration(d * float64(time.Second))) }

// scriptedAttempt is genaitest.ScriptedAttempt from t0.
func scriptedAttempt(wf eventstore.WorkflowID, run eventstore.RunID) []keyspace.ActivityEvent {
	return genaitest.ScriptedAttempt(wf, run, t0)
}

// TestGenAIScriptedAttempt is the attempt a user of agent telemetry looks
// at, through NewKeyspace with default options behind a Sequencer, with the
// timeline's tracker shared: exactly the expected token, duration and tool
// points, and one invoke_agent span under the activity span with two
// inference spans and three execute_tool spans at the transcript's times
// and with its statuses. Re-delivering the whole attempt through the
// Sequencer adds nothing.
func TestGenAIScriptedAttempt(t *testing.T) {
	h := newHarness(t)
	tracker, err := pairing.New(pairing.WithMeterProvider(h.mp), pairing.WithTracerProvider(h.tp))
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, h.wrap(t, eventstore.NewMemory(), otelstore.WithPairing(tracker)))
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory(), otelstore.WithActivitySpans(tracker))
	seq := keyspace.NewSequencer(ks)
	ctx := context.Background()

	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "trip", Input: payload}, w.scheduled(2, "agent", time.Second))
	events := scriptedAttempt(w.wf, w.run)
	if _, err := seq.Append(ctx, events[:5]); err != nil {
		t.Fatal(err)
	}
	if _, err := seq.Append(ctx, events[5:]); err != nil {
		t.Fatal(err)
	}
	if _, err := seq.Append(ctx, events); err != nil { // a re-delivery of all of it
		t.Fatal(err)
	}
	w.append(w.completed(2, 9*time.Second))

	model := []attribute.KeyValue{ns, genaitest.OpName.String("chat"), genaitest.ProviderName.String("anthropic"),
		genaitest.RequestModel.String("claude-sonnet-4"), genaitest.ResponseModel.String("claude-sonnet-4-20250514")}
	with := func(kvs ...attribute.KeyValue) attribute.Distinct {
		return distinct(append(slices.Clone(model), kvs...)...)
	}
	assertPoints(t, genaitest.TokenUsage, histogram(t, h, genaitest.TokenUsage, advisedTokenBounds), points{
		with(genaitest.TokenType.String("input")):  {Count: 2, Sum: 1300},
		with(genaitest.TokenType.String("output")): {Count: 2, Sum: 250},
	})
	m := h.metrics(t)
	for name, want := range map[string]int64{genaitest.CacheReadTokens: 600, genaitest.CacheWriteTokens: 100, genaitest.ReasoningTokens: 120} {
		got := sumPoints(t, m[name])
		if len(got) != 1 || got[attribute.NewSet(append(slices.Clone(model), genaitest.Modality)...)] != want {
			t.Errorf("%s = %v, want %d for the model", name, got, want)
		}
	}
	assertPoints(t, genaitest.CallDuration, histogram(t, h, genaitest.CallDuration, nil), points{with(): {Count: 2, Sum: 2}})
	assertPoints(t, genaitest.FirstChunk, histogram(t, h, genaitest.FirstChunk, nil), points{with(): {Count: 1, Sum: 0.5}})
	search := distinct(ns, genaitest.ToolName.String("search"))
	fetch := distinct(ns, genaitest.ToolName.String("fetch"), genaitest.ErrType.String("_OTHER"))
	assertPoints(t, genaitest.ExecDuration, histogram(t, h, genaitest.ExecDuration, nil), points{search: {Count: 2, Sum: 2}, fetch: {Count: 1, Sum: 1}})
	exec := genaitest.OpName.String("execute_tool")
	calls := sumPoints(t, m[genaitest.ToolCalls])
	if len(calls) != 2 || calls[attribute.NewSet(ns, exec, genaitest.ToolName.String("search"))] != 2 ||
		calls[attribute.NewSet(ns, exec, genaitest.ToolName.String("fetch"), genaitest.ErrType.String("_OTHER"))] != 1 {
		t.Errorf("tool calls %v, want search 2 and fetch 1 failed", calls)
	}
	assertPoints(t, genaitest.AgentDuration, histogram(t, h, genaitest.AgentDuration, nil), points{distinct(ns): {Count: 1, Sum: 6}})
	if _, ok := m["aion.gen_ai.usage.refused"]; ok {
		t.Error("plausible counts were refused")
	}

	acts := h.spansNamed("activity agent")
	agents := h.spansNamed("invoke_agent")
	models := h.spansNamed("chat claude-sonnet-4")
	tools := append(h.spansNamed("execute_tool search"), h.spansNamed("execute_tool fetch")...)
	if len(acts) != 1 || len(agents) != 1 || len(models) != 2 || len(tools) != 3 {
		t.Fatalf("%d activity, %d invoke_agent, %d inference and %d execute_tool spans; want 1, 1, 2, 3",
			len(acts), len(agents), len(models), len(tools))
	}
	act, agent := acts[0], agents[0]
	assertChild(t, agent, act)
	assertTimes(t, agent, at(2), at(8))
	if agent.SpanKind() != trace.SpanKindInternal || agent.Status().Code == codes.Error {
		t.Errorf("invoke_agent kind %v status %v, want internal and not Error", agent.SpanKind(), agent.Status())
	}
	for _, kv := range []attribute.KeyValue{
		genaitest.OpName.String("invoke_agent"), genaitest.ProviderName.String("anthropic"), genaitest.RequestModel.String("claude-sonnet-4"),
		attribute.String("gen_ai.agent.id", "planner-7"), attribute.String("aion.agent.role", "planner"),
		otelstore.AttrWorkflowID.String(w.wf.String()), otelstore.AttrActivityID.Int64(2), otelstore.AttrAttempt.Int64(1),
		attribute.Int64("aion.gen_ai.usage.total.input_tokens", 1300), attribute.Int64("aion.gen_ai.usage.total.output_tokens", 250),
		attribute.Int64("aion.gen_ai.usage.total.cache_read.input_tokens", 600),
		attribute.Int64("aion.gen_ai.usage.total.cache_write.input_tokens", 100),
		attribute.Int64("aion.gen_ai.usage.total.reasoning.output_tokens", 120),
		attribute.Int64("aion.gen_ai.invocation.model_calls", 2), attribute.Int64("aion.gen_ai.invocation.tool_calls", 3),
		attribute.String("aion.gen_ai.invocation.end", "status"),
	} {
		assertSpanAttr(t, agent, kv)
	}
	// The totals are marked as totals: a backend summing the conventions'
	// usage attributes over spans counts each model call once.
	var summed int64
	for _, sp := range h.spans.Ended() {
		for _, kv := range sp.Attributes() {
			if kv.Key == "gen_ai.usage.input_tokens" {
				summed += kv.Value.AsInt64()
			}
		}
	}
	if summed != 1300 {
		t.Errorf("gen_ai.usage.input_tokens summed over every span = %d, want 1300", summed)
	}

	slices.SortFunc(models, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	for i, want := range []struct {
		start, end             time.Time
		input, output          int64
		cacheRead, cacheCreate int64
		reasoning              int64
	}{
		{at(2), at(3), 1000, 200, 600, 100, 120},
		{at(6), at(7), 300, 50, 0, 0, 0},
	} {
		sp := models[i]
		assertChild(t, sp, agent)
		assertTimes(t, sp, want.start, want.end)
		if sp.SpanKind() != trace.SpanKindClient {
			t.Errorf("inference span kind %v, want client", sp.SpanKind())
		}
		for _, kv := range model[1:] {
			assertSpanAttr(t, sp, kv)
		}
		assertSpanAttr(t, sp, attribute.Int64("gen_ai.usage.input_tokens", want.input))
		assertSpanAttr(t, sp, attribute.Int64("gen_ai.usage.output_tokens", want.output))
		for key, v := range map[string]int64{"gen_ai.usage.cache_read.input_tokens": want.cacheRead,
			"gen_ai.usage.cache_write.input_tokens": want.cacheCreate, "gen_ai.usage.reasoning.output_tokens": want.reasoning} {
			if v > 0 {
				assertSpanAttr(t, sp, attribute.Int64(key, v))
			} else if _, ok := attrOf(sp.Attributes(), attribute.Key(key)); ok {
				t.Errorf("inference span %d has %s without such tokens", i, key)
			}
		}
	}
	assertSpanAttr(t, models[0], attribute.Float64("gen_ai.response.time_to_first_chunk", 0.5))

	slices.SortFunc(tools, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	for i, want := range []struct {
		name, id   string
		start, end time.Time
		failed     bool
	}{
		{"execute_tool search", "a", at(3), at(4), false},
		{"execute_tool fetch", "b", at(3.5), at(4.5), true},
		{"execute_tool search", "c", at(5), at(6), false},
	} {
		sp := tools[i]
		if sp.Name() != want.name {
			t.Errorf("tool span %d is %q, want %q", i, sp.Name(), want.name)
		}
		assertChild(t, sp, agent)
		assertTimes(t, sp, want.start, want.end)
		assertSpanAttr(t, sp, attribute.String("gen_ai.tool.call.id", want.id))
		assertSpanAttr(t, sp, exec)
		if failed := sp.Status().Code == codes.Error; failed != want.failed {
			t.Errorf("tool span %s status %v, want Error %v", want.id, sp.Status(), want.failed)
		}
		if want.failed {
			assertSpanAttr(t, sp, genaitest.ErrType.String("_OTHER"))
		}
		if _, ok := attrOf(sp.Attributes(), "gen_ai.tool.call.arguments"); ok {
			t.Errorf("tool span %s carries arguments with content capture off", want.id)
		}
	}
}

// assertChild fails unless child's parent is parent, in parent's trace.
func assertChild(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("span %s has parent %s in trace %s, want %s (%s)", child.Name(), child.Parent().SpanID(),
			child.SpanContext().TraceID(), parent.Name(), parent.SpanContext().SpanID())
	}
}

// assertTimes fails unless sp ran from start to end.
func assertTimes(t *testing.T, sp sdktrace.ReadOnlySpan, start, end time.Time) {
	t.Helper()
	if !sp.StartTime().Equal(start) || !sp.EndTime().Equal(end) {
		t.Errorf("span %s from %v to %v, want %v to %v", sp.Name(), sp.StartTime(), sp.EndTime(), start, end)
	}
}

// An attempt whose transcript arrives after its activity settled (the
// activity timed out while its agent worked on) still gets its
// invoke_agent span under the activity's span when the timeline's IDs are
// derived (pairing.NewIDGenerator): not under the run's anchor, which no
// backend holds.
func TestGenAIAttemptAfterItsActivitySettled(t *testing.T) {
	h := newHarness(t)
	h.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(h.spans), sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)))
	tracker, err := pairing.New(pairing.WithMeterProvider(h.mp), pairing.WithTracerProvider(h.tp))
	if err != nil {
		t.Fatal(err)
	}
	w := newWriter(t, h.wrap(t, eventstore.NewMemory(), otelstore.WithPairing(tracker)))
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory(), otelstore.WithActivitySpans(tracker))
	w.append(eventstore.WorkflowStarted{Envelope: w.env(0), WorkflowType: "trip", Input: payload}, w.scheduled(2, "agent", time.Second))
	w.append(w.completed(2, 1500*time.Millisecond))
	if _, err := keyspace.NewSequencer(ks).Append(context.Background(), scriptedAttempt(w.wf, w.run)); err != nil {
		t.Fatal(err)
	}
	acts, agents := h.spansNamed("activity agent"), h.spansNamed("invoke_agent")
	if len(acts) != 1 || len(agents) != 1 {
		t.Fatalf("%d activity and %d invoke_agent spans, want 1 and 1", len(acts), len(agents))
	}
	if got, want := agents[0].Parent(), acts[0].SpanContext(); got.SpanID() != want.SpanID() || got.TraceID() != want.TraceID() {
		t.Errorf("invoke_agent's parent %v, want the settled activity's span %v", got, want)
	}
}
