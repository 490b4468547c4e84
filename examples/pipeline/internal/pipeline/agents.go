package pipeline

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// isGenAISpan reports whether s is a span of an agent transcript: one with
// the GenAI conventions' gen_ai.operation.name (invoke_agent, execute_tool,
// or a model call's operation).
func isGenAISpan(s span) bool { return s.Attrs["gen_ai.operation.name"] != "" }

// agentTotals are the attempt totals an invoke_agent span carries, by the
// usage attribute of its model calls that they sum.
var agentTotals = map[string]string{
	"aion.gen_ai.usage.total.input_tokens":             "gen_ai.usage.input_tokens",
	"aion.gen_ai.usage.total.output_tokens":            "gen_ai.usage.output_tokens",
	"aion.gen_ai.usage.total.cache_read.input_tokens":  "gen_ai.usage.cache_read.input_tokens",
	"aion.gen_ai.usage.total.cache_write.input_tokens": "gen_ai.usage.cache_write.input_tokens",
	"aion.gen_ai.usage.total.reasoning.output_tokens":  "gen_ai.usage.reasoning.output_tokens",
}

// agentCounts are what checkAgentSpans saw.
type agentCounts struct {
	Invocations, ModelCalls, ToolCalls, FailedTools int
	// Complete counts the invocations with at least one model call and
	// one tool execution among their children.
	Complete int
}

// checkAgentSpans checks the GenAI spans of a run's trace against what
// the genai package (through otelstore.NewKeyspace) promises: every GenAI
// span carries the run span's aion.namespace; each invoke_agent span (internal, with
// gen_ai.agent.id and what ended it) is the child of one of the trace's
// activity spans, its model calls ("{gen_ai.operation.name}
// {gen_ai.request.model}", client, with their token counts) and tool
// executions ("execute_tool {gen_ai.tool.name}", internal, with
// gen_ai.tool.call.id; status Error exactly when error.type is set) are its
// children within its time, and its totals (aion.gen_ai.usage.total.*, the
// model-call and tool-call counts) are those of its children. It returns
// the problems and what it counted.
func checkAgentSpans(rt runTrace) (problems []string, n agentCounts) {
	tid := hex.EncodeToString(rt.Run.TraceID[:])
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("trace %s: ", tid)+fmt.Sprintf(format, args...))
	}
	activities := map[pcommon.SpanID]bool{}
	for _, a := range rt.Activities {
		activities[a.SpanID] = true
	}
	agents := map[pcommon.SpanID]span{}
	for _, s := range rt.Agents {
		if s.Name == "invoke_agent" {
			agents[s.SpanID] = s
		}
	}
	children := map[pcommon.SpanID][]span{}
	for _, s := range rt.Agents {
		op := s.Attrs["gen_ai.operation.name"]
		if ns := rt.Run.Attrs["aion.namespace"]; s.Attrs["aion.namespace"] != ns {
			bad("%s span %q (%s): aion.namespace %q, the run span's is %q", op, s.Name, s.SpanID, s.Attrs["aion.namespace"], ns)
		}
		switch {
		case s.Name == "invoke_agent":
			n.Invocations++
			where := fmt.Sprintf("invoke_agent span %s", s.SpanID)
			if op != "invoke_agent" || s.Kind != ptrace.SpanKindInternal {
				bad("%s: gen_ai.operation.name %q, kind %s; want invoke_agent, internal", where, op, s.Kind)
			}
			if !activities[s.ParentID] {
				bad("%s: parent %s is not an activity span of the trace", where, s.ParentID)
			}
			for _, k := range []string{"gen_ai.agent.id", "gen_ai.provider.name", "aion.gen_ai.invocation.end", "aion.activity.id", "aion.activity.attempt"} {
				if s.Attrs[k] == "" {
					bad("%s lacks %s", where, k)
				}
			}
		case op == "execute_tool":
			n.ToolCalls++
			where := fmt.Sprintf("tool span %q (%s)", s.Name, s.SpanID)
			if s.Name != "execute_tool "+s.Attrs["gen_ai.tool.name"] || s.Kind != ptrace.SpanKindInternal {
				bad("%s: kind %s, gen_ai.tool.name %q; want internal, named after the tool", where, s.Kind, s.Attrs["gen_ai.tool.name"])
			}
			if s.Attrs["gen_ai.tool.call.id"] == "" {
				bad("%s lacks gen_ai.tool.call.id", where)
			}
			failed := s.StatusCode == ptrace.StatusCodeError
			if failed {
				n.FailedTools++
			}
			if failed != (s.Attrs["error.type"] != "") {
				bad("%s: status %s with error.type %q; a failed tool has both", where, s.StatusCode, s.Attrs["error.type"])
			}
			children[s.ParentID] = append(children[s.ParentID], s)
		default:
			n.ModelCalls++
			where := fmt.Sprintf("model call span %q (%s)", s.Name, s.SpanID)
			name := op
			if m := s.Attrs["gen_ai.request.model"]; m != "" {
				name += " " + m
			}
			if s.Name != name || s.Kind != ptrace.SpanKindClient {
				bad("%s: kind %s; want client, named %q", where, s.Kind, name)
			}
			for _, k := range []string{"gen_ai.provider.name", "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} {
				if s.Attrs[k] == "" {
					bad("%s lacks %s", where, k)
				}
			}
			children[s.ParentID] = append(children[s.ParentID], s)
		}
		if s.End.Before(s.Start) {
			bad("span %q (%s) ends before it starts", s.Name, s.SpanID)
		}
	}
	for parent, kids := range children {
		agent, ok := agents[parent]
		if !ok {
			bad("%d GenAI spans (%q...) have the parent %s, not an invoke_agent span of the trace", len(kids), kids[0].Name, parent)
			continue
		}
		var calls, tools int
		sums := map[string]int64{}
		for _, k := range kids {
			if k.Start.Before(agent.Start) || k.End.After(agent.End) {
				bad("span %q (%s) runs %s to %s, outside its invoke_agent span's %s to %s", k.Name, k.SpanID,
					k.Start.Format(time.RFC3339Nano), k.End.Format(time.RFC3339Nano), agent.Start.Format(time.RFC3339Nano), agent.End.Format(time.RFC3339Nano))
			}
			if k.Attrs["gen_ai.operation.name"] == "execute_tool" {
				tools++
				continue
			}
			calls++
			for _, key := range agentTotals {
				v, _ := strconv.ParseInt(k.Attrs[key], 10, 64) // an absent breakdown is 0
				sums[key] += v
			}
		}
		if calls > 0 && tools > 0 {
			n.Complete++
		}
		where := fmt.Sprintf("invoke_agent span %s", agent.SpanID)
		for total, key := range agentTotals {
			if got := agent.Attrs[total]; got != strconv.FormatInt(sums[key], 10) {
				bad("%s: %s = %q, its model calls' %s sum to %d", where, total, got, key, sums[key])
			}
		}
		if got := agent.Attrs["aion.gen_ai.invocation.model_calls"]; got != strconv.Itoa(calls) {
			bad("%s: aion.gen_ai.invocation.model_calls = %q, it has %d model-call children", where, got, calls)
		}
		if got := agent.Attrs["aion.gen_ai.invocation.tool_calls"]; got != strconv.Itoa(tools) {
			bad("%s: aion.gen_ai.invocation.tool_calls = %q, it has %d tool children", where, got, tools)
		}
	}
	return problems, n
}
