package pipeline

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// agentFixture is one run's trace with an agent attempt as
// otelstore.NewKeyspace makes it (namespace "default"): an activity span, its invoke_agent span,
// two model calls (the first with cached input and reasoning) and two tool
// executions (the second failed).
func agentFixture(mutate func(agent *span, kids []*span)) runTrace {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	trace := pcommon.TraceID{7}
	mk := func(id byte, parent pcommon.SpanID, name string, kind ptrace.SpanKind, start, end float64, attrs map[string]string) span {
		return span{TraceID: trace, SpanID: pcommon.SpanID{id}, ParentID: parent, Name: name, Kind: kind,
			Start: at(start), End: at(end), Attrs: attrs, hasParent: true}
	}
	run := mk(1, pcommon.SpanID{}, "workflow trip", ptrace.SpanKindInternal, 0, 20, map[string]string{"aion.namespace": "default"})
	run.hasParent = false // the trace's root (pairing.NewIDGenerator)
	act := mk(2, run.SpanID, "activity agent", ptrace.SpanKindInternal, 1, 12, map[string]string{})
	agent := mk(3, act.SpanID, "invoke_agent", ptrace.SpanKindInternal, 2, 10, map[string]string{
		"gen_ai.operation.name": "invoke_agent", "gen_ai.provider.name": "anthropic", "gen_ai.agent.id": "planner", "aion.namespace": "default",
		"aion.gen_ai.invocation.end": "status", "aion.activity.id": "2", "aion.activity.attempt": "1",
		"aion.gen_ai.usage.total.input_tokens": "1300", "aion.gen_ai.usage.total.output_tokens": "250",
		"aion.gen_ai.usage.total.cache_read.input_tokens": "600", "aion.gen_ai.usage.total.cache_write.input_tokens": "0",
		"aion.gen_ai.usage.total.reasoning.output_tokens": "120",
		"aion.gen_ai.invocation.model_calls":              "2", "aion.gen_ai.invocation.tool_calls": "2",
	})
	call := func(id byte, start, end float64, extra map[string]string) span {
		attrs := map[string]string{"gen_ai.operation.name": "chat", "gen_ai.provider.name": "anthropic", "gen_ai.request.model": "claude",
			"aion.namespace": "default"}
		for k, v := range extra {
			attrs[k] = v
		}
		return mk(id, agent.SpanID, "chat claude", ptrace.SpanKindClient, start, end, attrs)
	}
	tool := func(id byte, name string, start, end float64, failed bool) span {
		s := mk(id, agent.SpanID, "execute_tool "+name, ptrace.SpanKindInternal, start, end, map[string]string{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": "c" + string('0'+id),
			"aion.namespace": "default"})
		if failed {
			s.StatusCode = ptrace.StatusCodeError
			s.Attrs["error.type"] = "_OTHER"
		}
		return s
	}
	kids := []span{
		call(4, 2, 3, map[string]string{"gen_ai.usage.input_tokens": "1000", "gen_ai.usage.output_tokens": "200",
			"gen_ai.usage.cache_read.input_tokens": "600", "gen_ai.usage.reasoning.output_tokens": "120"}),
		tool(5, "search", 3, 4, false),
		tool(6, "fetch", 4, 5, true),
		call(7, 6, 7, map[string]string{"gen_ai.usage.input_tokens": "300", "gen_ai.usage.output_tokens": "50"}),
	}
	if mutate != nil {
		ptrs := make([]*span, len(kids))
		for i := range kids {
			ptrs[i] = &kids[i]
		}
		mutate(&agent, ptrs)
	}
	return runTrace{Run: run, Activities: []span{act}, Agents: append([]span{agent}, kids...)}
}

func TestCheckAgentSpansAcceptsTheFixture(t *testing.T) {
	problems, n := checkAgentSpans(agentFixture(nil))
	if len(problems) > 0 {
		t.Fatalf("problems with a correct attempt:\n%s", strings.Join(problems, "\n"))
	}
	if n != (agentCounts{Invocations: 1, ModelCalls: 2, ToolCalls: 2, FailedTools: 1, Complete: 1}) {
		t.Errorf("counted %+v", n)
	}
}

// Each broken promise is reported.
func TestCheckAgentSpansFindsEachProblem(t *testing.T) {
	testCases := []struct {
		name   string
		mutate func(agent *span, kids []*span)
		want   string
	}{
		{"agent under the run, not the activity", func(a *span, _ []*span) { a.ParentID = pcommon.SpanID{1} }, "not an activity span"},
		{"agent of client kind", func(a *span, _ []*span) { a.Kind = ptrace.SpanKindClient }, "want invoke_agent, internal"},
		{"agent without its end", func(a *span, _ []*span) { delete(a.Attrs, "aion.gen_ai.invocation.end") }, "lacks aion.gen_ai.invocation.end"},
		{"totals counting a call twice", func(a *span, _ []*span) { a.Attrs["aion.gen_ai.usage.total.input_tokens"] = "2300" }, "sum to 1300"},
		{"a missing reasoning total", func(a *span, _ []*span) { delete(a.Attrs, "aion.gen_ai.usage.total.reasoning.output_tokens") }, "reasoning"},
		{"model-call count", func(a *span, _ []*span) { a.Attrs["aion.gen_ai.invocation.model_calls"] = "3" }, "model-call children"},
		{"tool count", func(a *span, _ []*span) { a.Attrs["aion.gen_ai.invocation.tool_calls"] = "1" }, "tool children"},
		{"model call named wrong", func(_ *span, k []*span) { k[0].Name = "chat" }, `named "chat claude"`},
		{"model call internal", func(_ *span, k []*span) { k[0].Kind = ptrace.SpanKindInternal }, "want client"},
		{"model call without tokens", func(_ *span, k []*span) { delete(k[3].Attrs, "gen_ai.usage.input_tokens") }, "lacks gen_ai.usage.input_tokens"},
		{"tool named wrong", func(_ *span, k []*span) { k[1].Name = "execute_tool" }, "named after the tool"},
		{"tool without call id", func(_ *span, k []*span) { delete(k[1].Attrs, "gen_ai.tool.call.id") }, "lacks gen_ai.tool.call.id"},
		{"failed tool without error.type", func(_ *span, k []*span) { delete(k[2].Attrs, "error.type") }, "a failed tool has both"},
		{"error.type on a good tool", func(_ *span, k []*span) { k[1].Attrs["error.type"] = "_OTHER" }, "a failed tool has both"},
		{"tool under the activity", func(_ *span, k []*span) { k[1].ParentID = pcommon.SpanID{2} }, "not an invoke_agent span"},
		{"call outside the agent's time", func(_ *span, k []*span) { k[3].End = k[3].End.Add(time.Hour) }, "outside its invoke_agent span"},
		{"agent span without the namespace", func(a *span, _ []*span) { delete(a.Attrs, "aion.namespace") }, `invoke_agent span "invoke_agent" (0300000000000000): aion.namespace ""`},
		{"model call of another namespace", func(_ *span, k []*span) { k[0].Attrs["aion.namespace"] = "other" }, `aion.namespace "other", the run span's is "default"`},
		{"tool span without the namespace", func(_ *span, k []*span) { delete(k[1].Attrs, "aion.namespace") }, `execute_tool span "execute_tool search"`},
		{"span ending before its start", func(_ *span, k []*span) { k[1].End = k[1].Start.Add(-time.Second) }, "ends before it starts"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			problems, _ := checkAgentSpans(agentFixture(tc.mutate))
			found := false
			for _, p := range problems {
				found = found || strings.Contains(p, tc.want)
			}
			if !found {
				t.Errorf("problems %q do not say %q", problems, tc.want)
			}
		})
	}
}

// splitRunTraces sets the agents' spans aside instead of calling them
// strangers in the run's trace.
func TestSplitRunTracesKeepsAgentSpans(t *testing.T) {
	rt := agentFixture(nil)
	run := rt.Run
	run.Attrs = map[string]string{"aion.namespace": "default", "aion.workflow.id": "w", "aion.run.id": "r",
		"aion.workflow.type": "trip", "aion.workflow.status": "completed"}
	run.Name = "workflow trip"
	act := rt.Activities[0]
	act.Attrs = map[string]string{"aion.namespace": "default", "aion.workflow.id": "w", "aion.run.id": "r",
		"aion.activity.id": "2", "aion.activity.type": "agent", "aion.activity.outcome": "succeeded", "aion.activity.retry_count": "0"}
	spans := append([]span{run, act}, rt.Agents...)
	traces, problems := splitRunTraces(spans)
	if len(problems) > 0 || len(traces) != 1 || len(traces[0].Agents) != 5 || len(traces[0].Activities) != 1 {
		t.Fatalf("traces %+v, problems %v; want one run with one activity and 5 agent spans", traces, problems)
	}
}
