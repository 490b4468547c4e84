package genai_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/genai"
	"github.com/aionotel/aionotel/internal/genaitest"
	"github.com/aionotel/aionotel/internal/timeline"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/pairing"
)

func newLogs(t *testing.T) (*sdklog.LoggerProvider, *genaitest.Logs) { return genaitest.NewLogs(t) }

var advisedTokenBounds = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}

// TestGenAITokenUsageWithDefaultOptions is what a user gets without asking:
// one gen_ai.client.token.usage point per token type for every committed
// Usage, with exact sums per model, the advised boundaries and the unit.
func TestGenAITokenUsageWithDefaultOptions(t *testing.T) {
	h := newHarness(t)
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory())
	ctx := context.Background()
	wf, run := ids()
	events := agentEvents(wf, run,
		keyspace.Message{Role: "user", Text: "hi"},
		keyspace.Usage{InputTokens: 100, OutputTokens: 20, Provider: "openai", RequestModel: "gpt-4o", ResponseModel: "gpt-4o-2024-08-06"},
		&keyspace.Usage{InputTokens: 50, OutputTokens: 5, Provider: "openai", RequestModel: "gpt-4o", ResponseModel: "gpt-4o-2024-08-06"},
		keyspace.Usage{InputTokens: 7, OutputTokens: 3, Provider: "anthropic", RequestModel: "claude-sonnet", Operation: "text_completion"},
		keyspace.Usage{InputTokens: 1},
	)
	if _, err := ks.AppendEvents(ctx, 0, events); err != nil {
		t.Fatal(err)
	}
	m := h.metrics(t)[genaitest.TokenUsage]
	if m.Unit != "{token}" || m.Description == "" {
		t.Errorf("unit %q description %q, want {token} and a description", m.Unit, m.Description)
	}
	gpt := []attribute.KeyValue{ns, genaitest.OpName.String("chat"), genaitest.ProviderName.String("openai"),
		genaitest.RequestModel.String("gpt-4o"), genaitest.ResponseModel.String("gpt-4o-2024-08-06")}
	claude := []attribute.KeyValue{ns, genaitest.OpName.String("text_completion"), genaitest.ProviderName.String("anthropic"), genaitest.RequestModel.String("claude-sonnet")}
	unknown := []attribute.KeyValue{ns, genaitest.OpName.String("chat"), genaitest.ProviderName.String("_unknown")}
	with := func(base []attribute.KeyValue, typ string) attribute.Distinct {
		return distinct(append(slices.Clone(base), genaitest.TokenType.String(typ))...)
	}
	genaitest.AssertPoints(t, genaitest.TokenUsage, histogram(t, h, genaitest.TokenUsage, advisedTokenBounds), points{
		with(gpt, "input"):      {Count: 2, Sum: 150},
		with(gpt, "output"):     {Count: 2, Sum: 25},
		with(claude, "input"):   {Count: 1, Sum: 7},
		with(claude, "output"):  {Count: 1, Sum: 3},
		with(unknown, "input"):  {Count: 1, Sum: 1},
		with(unknown, "output"): {Count: 1, Sum: 0},
	})
}

// TestGenAIToolCalls counts a tool execution when both its call and its
// result have committed, in either order and over several commits, and
// records its gen_ai.execute_tool.duration; a result whose call never
// commits is counted as a call of "_unknown" when its attempt ends.
func TestGenAIToolCalls(t *testing.T) {
	h := newHarness(t)
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory())
	ctx := context.Background()
	wf, run := ids()
	events := agentEvents(wf, run,
		keyspace.ToolCall{CallID: "a", Name: "search", Arguments: "{}"}, // t0
		keyspace.ToolCall{CallID: "b", Name: "search"},                  // t0+1s
		keyspace.ToolResult{CallID: "a", Output: "ok"},                  // t0+2s: 2s
		keyspace.ToolResult{CallID: "c", IsError: true},                 // t0+3s, before its call
		keyspace.ToolCall{CallID: "c", Name: "charge"},                  // t0+4s: result first, 0s, failed
		keyspace.ToolResult{CallID: "nobody", IsError: true},            // no call
		keyspace.ToolCall{CallID: "d", Name: "charge"},                  // t0+6s
		keyspace.ToolResult{CallID: "d", IsError: true},                 // t0+7s: 1s, failed
		keyspace.Status{State: "completed"},                             // the attempt ends
	)
	// Over three commits: pairing spans batches.
	for _, part := range [][2]int{{0, 3}, {3, 6}, {6, len(events)}} {
		if _, err := ks.AppendEvents(ctx, uint64(part[0]), events[part[0]:part[1]]); err != nil {
			t.Fatal(err)
		}
	}
	exec := genaitest.OpName.String("execute_tool")
	got := sums(t, h.metrics(t)[genaitest.ToolCalls])
	want := map[attribute.Distinct]int64{
		distinct(ns, exec, genaitest.ToolName.String("search")):                                       1,
		distinct(ns, exec, genaitest.ToolName.String("charge"), genaitest.ErrType.String("_OTHER")):   2,
		distinct(ns, exec, genaitest.ToolName.String("_unknown"), genaitest.ErrType.String("_OTHER")): 1,
	}
	if len(got) != len(want) {
		t.Errorf("tool call points %v, want %v", got, want)
	}
	for set, v := range got {
		if want[set.Equivalent()] != v {
			t.Errorf("tool calls %v = %d, want %d", set.ToSlice(), v, want[set.Equivalent()])
		}
	}
	genaitest.AssertPoints(t, genaitest.ExecDuration, histogram(t, h, genaitest.ExecDuration, nil), points{
		distinct(ns, genaitest.ToolName.String("search")):                                     {Count: 1, Sum: 2},
		distinct(ns, genaitest.ToolName.String("charge"), genaitest.ErrType.String("_OTHER")): {Count: 2, Sum: 1},
	})
	if _, ok := h.metrics(t)[genaitest.CallDuration]; ok {
		t.Errorf("tool executions recorded on %s, which is for model calls", genaitest.CallDuration)
	}
	if n := len(h.spansNamed("execute_tool search")) + len(h.spansNamed("execute_tool charge")); n != 3 {
		t.Errorf("%d execute_tool spans, want 3 (b never got its result)", n)
	}
}

// TestGenAIHostileNames: model, provider, operation and tool names are made
// valid UTF-8 and cut to 256 bytes, and past 512 distinct values of one key
// further ones are recorded as _other; every exported string stays valid.
func TestGenAIHostileNames(t *testing.T) {
	h := newHarness(t)
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory())
	ctx := context.Background()
	wf, run := ids()
	hostile := "m\xff\xfe" + strings.Repeat("é", 300)
	contents := []keyspace.Content{
		keyspace.Usage{InputTokens: 1, Provider: hostile, RequestModel: hostile, ResponseModel: hostile, Operation: hostile},
		keyspace.ToolCall{CallID: hostile, Name: hostile},
		keyspace.ToolResult{CallID: hostile},
	}
	for i := range 600 {
		contents = append(contents, keyspace.Usage{InputTokens: 1, RequestModel: fmt.Sprintf("model-%d", i)})
	}
	if _, err := ks.AppendEvents(ctx, 0, agentEvents(wf, run, contents...)); err != nil {
		t.Fatal(err)
	}
	models := map[string]bool{}
	for name, m := range h.metrics(t) {
		for _, set := range pointAttrs(m) {
			for _, kv := range set.ToSlice() {
				s := kv.Value.String()
				if !utf8.ValidString(s) || len(s) > 256 {
					t.Fatalf("%s: %s = %q is not valid UTF-8 of at most 256 bytes", name, kv.Key, s)
				}
				if name == genaitest.TokenUsage && kv.Key == genaitest.RequestModel {
					models[s] = true
				}
			}
		}
	}
	if !models["_other"] || len(models) != 512+1 {
		t.Errorf("%d distinct request models recorded (_other among them: %v), want 512 and _other", len(models), models["_other"])
	}
}

// TestGenAILogsOffByDefault: a logger provider alone emits nothing.
func TestGenAILogsOffByDefault(t *testing.T) {
	h := newHarness(t)
	lp, logs := newLogs(t)
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory(), genai.WithLoggerProvider(lp))
	wf, run := ids()
	if _, err := ks.AppendEvents(context.Background(), 0, agentEvents(wf, run, keyspace.Message{Role: "user", Text: "x"})); err != nil {
		t.Fatal(err)
	}
	if n := len(logs.Records()); n != 0 {
		t.Fatalf("%d log records without WithTranscriptLogs, want 0", n)
	}
}

// spanSource is an ActivitySpanSource knowing one activity.
type spanSource struct {
	key pairing.Key
	sc  trace.SpanContext
}

func (s spanSource) ActivitySpanContext(key pairing.Key) trace.SpanContext {
	if key == s.key {
		return s.sc
	}
	return trace.SpanContext{}
}

// TestGenAILogRecords: one gen_ai.client.inference.operation.details
// record per committed model call, at its time, in the context of its
// inference span, in the activity's trace (its span's when the source
// knows it, else the run's anchor's), with the call's names and counts and
// the stream's coordinates; no record for the other events.
func TestGenAILogRecords(t *testing.T) {
	wf, run := ids()
	live := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	anchor := timeline.Anchor("payments", wf, run)
	testCases := []struct {
		name   string
		source genai.ActivitySpanSource
		want   trace.SpanContext
	}{
		{"no-source", nil, anchor},
		{"source-without-span", spanSource{}, anchor},
		{"live-span", spanSource{key: pairing.Key{Namespace: "payments", WorkflowID: wf, RunID: run, ActivityID: 2}, sc: live}, live},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			lp, logs := newLogs(t)
			ks := newGenAIKeyspace(t, h, keyspace.NewMemory(), genai.WithLoggerProvider(lp), genai.WithTranscriptLogs(true),
				genai.WithNamespace("payments"), genai.WithActivitySpans(tc.source))
			events := agentEvents(wf, run,
				keyspace.Message{Role: "user", Text: "a"},
				keyspace.ToolCall{CallID: "1", Name: "search", Arguments: "{}"},
				keyspace.ToolResult{CallID: "1", Output: "r", IsError: true},
				keyspace.Status{State: "s"},
				keyspace.Usage{InputTokens: 4, OutputTokens: 2, CacheReadInputTokens: 3, Provider: "openai", RequestModel: "gpt"},
				nil,
				keyspace.Usage{InputTokens: 5, OutputTokens: 1, Provider: "openai", RequestModel: "gpt"},
			)
			if _, err := ks.AppendEvents(context.Background(), 0, events); err != nil {
				t.Fatal(err)
			}
			recs := logs.Records()
			inference := h.spansNamed("chat gpt")
			if len(recs) != 2 || len(inference) != 2 {
				t.Fatalf("%d records and %d inference spans, want 2 and 2 (one per model call)", len(recs), len(inference))
			}
			for i, r := range recs {
				ev := events[4+2*i]
				if r.EventName() != "gen_ai.client.inference.operation.details" {
					t.Errorf("record %d is %q", i, r.EventName())
				}
				sp := inference[i].SpanContext()
				if r.TraceID() != tc.want.TraceID() || r.SpanID() != sp.SpanID() {
					t.Errorf("record %d in trace %s span %s, want trace %s, the inference span %s", i, r.TraceID(), r.SpanID(), tc.want.TraceID(), sp.SpanID())
				}
				if !r.Timestamp().Equal(ev.EmittedAt) {
					t.Errorf("record %d timestamp %v, want the usage's %v", i, r.Timestamp(), ev.EmittedAt)
				}
				attrs := recordAttrs(r)
				for k, v := range map[string]string{"aion.namespace": "payments", "aion.workflow.id": wf.String(),
					"aion.run.id": run.String(), "aion.activity.id": "2", "aion.activity.attempt": "1",
					"aion.keyspace.store_seq": fmt.Sprint(4 + 2*i), "gen_ai.agent.id": "agent-1", "aion.agent.role": "planner",
					"gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt", "gen_ai.operation.name": "chat"} {
					if attrs[k] != v {
						t.Errorf("record %d: %s = %q, want %q", i, k, attrs[k], v)
					}
				}
				for _, k := range []string{"gen_ai.input.messages", "gen_ai.output.messages"} {
					if _, ok := attrs[k]; ok {
						t.Errorf("record %d has %s with content capture off", i, k)
					}
				}
			}
			first, second := recordAttrs(recs[0]), recordAttrs(recs[1])
			if first["gen_ai.usage.input_tokens"] != "4" || first["gen_ai.usage.output_tokens"] != "2" || first["gen_ai.usage.cache_read.input_tokens"] != "3" {
				t.Errorf("first record's usage %v", first)
			}
			if second["gen_ai.usage.input_tokens"] != "5" || second["gen_ai.usage.cache_read.input_tokens"] != "" {
				t.Errorf("second record's usage %v", second)
			}
		})
	}
}

// TestGenAILegacyLogRecords: behind OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai/dup
// every committed event with a content also gets the record earlier builds
// emitted (the v1.36 per-message events), and tool durations also go on
// gen_ai.client.operation.duration with gen_ai.operation.name execute_tool;
// the option and the variable set it alike, and without it neither comes.
func TestGenAILegacyLogRecords(t *testing.T) {
	testCases := []struct {
		name string
		env  string
		opts []genai.Option
		dup  bool
	}{
		{"default", "", nil, false},
		{"environment", "http, gen_ai/dup", nil, true},
		{"option", "", []genai.Option{genai.WithSemConvStabilityOptIn("gen_ai/dup")}, true},
		{"option overrides the environment", "gen_ai/dup", []genai.Option{genai.WithSemConvStabilityOptIn("")}, false},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_SEMCONV_STABILITY_OPT_IN", tc.env)
			h := newHarness(t)
			lp, logs := newLogs(t)
			ks := newGenAIKeyspace(t, h, keyspace.NewMemory(), append([]genai.Option{genai.WithLoggerProvider(lp),
				genai.WithTranscriptLogs(true)}, tc.opts...)...)
			wf, run := ids()
			events := agentEvents(wf, run,
				keyspace.Message{Role: "user", Text: "a"},
				keyspace.Message{Role: "system", Text: "b"},
				keyspace.Message{Role: "assistant", Text: "c"},
				keyspace.ToolCall{CallID: "1", Name: "search", Arguments: "{}"},
				keyspace.ToolResult{CallID: "1", Output: "r", IsError: true},
				keyspace.Status{State: "s"},
				keyspace.Usage{InputTokens: 4, OutputTokens: 2, Provider: "openai", RequestModel: "gpt"},
				nil,
			)
			if _, err := ks.AppendEvents(context.Background(), 0, events); err != nil {
				t.Fatal(err)
			}
			var names []string
			var legacy []sdklog.Record
			for _, r := range logs.Records() {
				names = append(names, r.EventName())
				if r.EventName() != "gen_ai.client.inference.operation.details" {
					legacy = append(legacy, r)
				}
			}
			want := []string{"gen_ai.client.inference.operation.details"}
			if tc.dup {
				want = []string{"gen_ai.user.message", "gen_ai.system.message", "gen_ai.assistant.message",
					"gen_ai.assistant.message", "gen_ai.tool.message", "aion.gen_ai.status", "gen_ai.client.inference.operation.details", "aion.gen_ai.usage"}
			}
			if !slices.Equal(names, want) {
				t.Fatalf("records %v, want %v", names, want)
			}
			old := sums(t, h.metrics(t)[genaitest.ToolCalls])
			durations := histogram(t, h, genaitest.CallDuration, nil)
			oldDuration := distinct(ns, genaitest.OpName.String("execute_tool"), genaitest.ToolName.String("search"), genaitest.ErrType.String("_OTHER"))
			if _, ok := durations[oldDuration]; ok != tc.dup {
				t.Errorf("tool duration on %s: %v, want %v", genaitest.CallDuration, ok, tc.dup)
			}
			if len(old) != 1 {
				t.Errorf("tool calls %v", old)
			}
			if !tc.dup {
				return
			}
			for k, v := range map[string]string{"gen_ai.tool.name": "search", "gen_ai.tool.call.id": "1", "error.type": "_OTHER"} {
				if got := recordAttrs(legacy[4])[k]; got != v {
					t.Errorf("tool result record: %s = %q, want %q", k, got, v)
				}
			}
			for k, v := range map[string]string{"gen_ai.usage.input_tokens": "4", "gen_ai.usage.output_tokens": "2",
				"gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt", "gen_ai.operation.name": "chat"} {
				if got := recordAttrs(legacy[6])[k]; got != v {
					t.Errorf("usage record: %s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func recordAttrs(r sdklog.Record) map[string]string {
	out := map[string]string{}
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		out[string(kv.Key)] = kv.Value.String()
		return true
	})
	return out
}

// recordStrings returns every string in a record: event name, body (walked
// through maps and slices) and attributes.
func recordStrings(r sdklog.Record) []string {
	out := []string{r.EventName(), r.SeverityText()}
	var walk func(v attribute.Value)
	walk = func(v attribute.Value) {
		switch v.Type() {
		case attribute.MAP:
			for _, kv := range v.AsMap() {
				out = append(out, string(kv.Key))
				walk(kv.Value)
			}
		case attribute.SLICE:
			for _, e := range v.AsSlice() {
				walk(e)
			}
		default:
			out = append(out, v.String())
		}
	}
	walk(r.Body())
	r.WalkAttributes(func(kv attribute.KeyValue) bool {
		out = append(out, string(kv.Key))
		walk(kv.Value)
		return true
	})
	return out
}

// TestGenAIContentCapture puts a secret in every content field, in both
// semconv modes (and the old records behind gen_ai/dup): with capture off
// it is in no log record, span or metric point; with capture on the message
// texts, tool arguments and outputs are in the inference-details record's
// messages (and the old records), and the arguments and outputs of a paired
// tool call on its execute_tool span. A status's text leaves only in the
// old records, and only with capture on.
func TestGenAIContentCapture(t *testing.T) {
	for _, capture := range []bool{false, true} {
		for _, optIn := range []string{"", "gen_ai/dup"} {
			t.Run(fmt.Sprintf("capture=%v/optin=%q", capture, optIn), func(t *testing.T) {
				h := newHarness(t)
				lp, logs := newLogs(t)
				ks := newGenAIKeyspace(t, h, keyspace.NewMemory(), genai.WithLoggerProvider(lp),
					genai.WithTranscriptLogs(true), genai.WithContentCapture(capture), genai.WithSemConvStabilityOptIn(optIn))
				wf, run := ids()
				fields := []string{"user text", "assistant text", "arguments", "output", "error output", "state", "detail"}
				secretOf := func(field string) string { return "s3cr3t-card-4242/" + field }
				events := agentEvents(wf, run,
					keyspace.Message{Role: "user", Text: secretOf("user text")},
					keyspace.Message{Role: "assistant", Text: secretOf("assistant text")},
					keyspace.ToolCall{CallID: "1", Name: "search", Arguments: secretOf("arguments")},
					keyspace.ToolResult{CallID: "1", Output: secretOf("output")},
					keyspace.ToolResult{CallID: "2", Output: secretOf("error output"), IsError: true},
					keyspace.Status{State: secretOf("state"), Detail: secretOf("detail")},
					keyspace.Usage{InputTokens: 1, OutputTokens: 1, RequestModel: "m"},
					keyspace.Status{State: "completed"},
				)
				ctx := context.Background()
				if _, err := ks.AppendEvents(ctx, 0, events); err != nil {
					t.Fatal(err)
				}
				if _, err := ks.ReadFrom(ctx, keyspace.KeyOf(events[0]), 0, 0); err != nil {
					t.Fatal(err)
				}
				found := map[string][]string{}
				scanned := 0
				scan := func(where string, strs ...string) {
					for _, s := range strs {
						scanned++
						for _, f := range fields {
							if strings.Contains(s, secretOf(f)) {
								found[f] = append(found[f], where)
								if !capture {
									t.Errorf("%s carries the %s with content capture off", where, f)
								}
							}
						}
					}
				}
				recs := logs.Records()
				if len(recs) == 0 {
					t.Fatal("no records")
				}
				for _, r := range recs {
					scan("record "+r.EventName(), recordStrings(r)...)
				}
				for _, sp := range h.spans.Ended() {
					scan("span "+sp.Name(), sp.Name(), sp.Status().Description)
					for _, kv := range sp.Attributes() {
						scan("span "+sp.Name(), kv.Value.String())
					}
					for _, ev := range sp.Events() {
						for _, kv := range ev.Attributes {
							scan("span event", kv.Value.String())
						}
					}
				}
				for name, m := range h.metrics(t) {
					for _, set := range pointAttrs(m) {
						for _, kv := range set.ToSlice() {
							scan("metric "+name, kv.Value.String())
						}
					}
				}
				if scanned < 60 {
					t.Fatalf("scanned only %d strings; the scan is not looking at the telemetry", scanned)
				}
				if !capture {
					return
				}
				details := "record gen_ai.client.inference.operation.details"
				for _, f := range []string{"user text", "assistant text", "arguments", "output", "error output"} {
					if !slices.Contains(found[f], details) {
						t.Errorf("the %s is not in the inference-details record with content capture on (found in %v)", f, found[f])
					}
				}
				for _, f := range []string{"arguments", "output"} {
					if !slices.Contains(found[f], "span execute_tool search") {
						t.Errorf("the %s is not on the execute_tool span with content capture on (found in %v)", f, found[f])
					}
				}
				for _, f := range []string{"state", "detail"} {
					if (len(found[f]) > 0) != (optIn != "") {
						t.Errorf("the status %s is in %v; want it only in the old records", f, found[f])
					}
				}
			})
		}
	}
}

// TestGenAIConcurrentSafe appends transcripts to many streams at once: the
// sums are exact and every tool call pairs with its result.
func TestGenAIConcurrentSafe(t *testing.T) {
	h := newHarness(t)
	lp, logs := newLogs(t)
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory(), genai.WithLoggerProvider(lp), genai.WithTranscriptLogs(true))
	const workers, turns = 8, 20
	var wg sync.WaitGroup
	for range workers {
		wf, run := ids()
		wg.Go(func() {
			var seq uint64
			for i := range turns {
				id := fmt.Sprint(i)
				events := agentEvents(wf, run, keyspace.Usage{InputTokens: 3, OutputTokens: 1, RequestModel: "m"},
					keyspace.ToolCall{CallID: id, Name: "t"}, keyspace.ToolResult{CallID: id})
				if _, err := ks.AppendEvents(context.Background(), seq, events); err != nil {
					t.Error(err)
					return
				}
				seq += uint64(len(events))
			}
		})
	}
	wg.Wait()
	base := []attribute.KeyValue{ns, genaitest.OpName.String("chat"), genaitest.ProviderName.String("_unknown"), genaitest.RequestModel.String("m")}
	genaitest.AssertPoints(t, genaitest.TokenUsage, histogram(t, h, genaitest.TokenUsage, advisedTokenBounds), points{
		distinct(append(slices.Clone(base), genaitest.TokenType.String("input"))...):  {Count: workers * turns, Sum: 3 * workers * turns},
		distinct(append(slices.Clone(base), genaitest.TokenType.String("output"))...): {Count: workers * turns, Sum: workers * turns},
	})
	paired := distinct(ns, genaitest.ToolName.String("t"))
	genaitest.AssertPoints(t, genaitest.ExecDuration, histogram(t, h, genaitest.ExecDuration, nil), points{paired: {Count: workers * turns, Sum: workers * turns}})
	if n := len(logs.Records()); n != workers*turns {
		t.Errorf("%d log records, want %d (one per model call)", n, workers*turns)
	}
	if n := len(h.spansNamed("execute_tool t")); n != workers*turns {
		t.Errorf("%d execute_tool spans, want %d", n, workers*turns)
	}
}

// TestGenAILogValuesExportable puts hostile strings (invalid UTF-8, NUL,
// huge) in every field with content capture on and the old records too:
// every string of every record and span is valid UTF-8, content is cut to
// MaxContentLen and every other value to 256 bytes.
func TestGenAILogValuesExportable(t *testing.T) {
	h := newHarness(t)
	lp, logs := newLogs(t)
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory(), genai.WithLoggerProvider(lp),
		genai.WithTranscriptLogs(true), genai.WithContentCapture(true), genai.WithSemConvStabilityOptIn("gen_ai/dup"))
	wf, run := ids()
	bad := "x\xff\x00\xc3" + strings.Repeat("ü", genai.MaxContentLen)
	events := agentEvents(wf, run,
		keyspace.Message{Role: bad, Text: bad},
		keyspace.ToolCall{CallID: bad, Name: bad, Arguments: bad},
		keyspace.ToolResult{CallID: bad, Output: bad, IsError: true},
		keyspace.Status{State: bad, Detail: bad},
		keyspace.Usage{Provider: bad, RequestModel: bad, ResponseModel: bad, Operation: bad},
	)
	for i := range events {
		events[i].AgentID, events[i].AgentRole = bad, bad
	}
	if _, err := ks.AppendEvents(context.Background(), 0, events); err != nil {
		t.Fatal(err)
	}
	ks.EndAgentSpans()
	recs := logs.Records()
	if len(recs) != len(events)+1 {
		t.Fatalf("%d records, want %d", len(recs), len(events)+1)
	}
	long := 0
	check := func(where, s string) {
		if !utf8.ValidString(s) || len(s) > genai.MaxContentLen {
			t.Fatalf("%s: a string of %d bytes, valid UTF-8 %v", where, len(s), utf8.ValidString(s))
		}
		if len(s) > 256 {
			long++
		}
	}
	for _, r := range recs {
		for _, s := range recordStrings(r) {
			check(r.EventName(), s)
		}
	}
	// The content: the old records' message text, arguments, output, state
	// and detail; the details record's user text, arguments and output.
	if long != 8 {
		t.Errorf("%d record strings longer than 256 bytes, want the 8 content texts only", long)
	}
	long = 0
	spans := h.spans.Ended()
	if len(spans) != 3 { // invoke_agent, the tool and the model call
		t.Fatalf("%d spans, want 3", len(spans))
	}
	for _, sp := range spans {
		if !utf8.ValidString(sp.Name()) || len(sp.Name()) > 2*256+len("execute_tool ") {
			t.Errorf("span name of %d bytes, valid UTF-8 %v", len(sp.Name()), utf8.ValidString(sp.Name()))
		}
		for _, kv := range sp.Attributes() {
			check("span "+sp.Name(), kv.Value.String())
		}
	}
	if long != 2 { // the tool's arguments and result
		t.Errorf("%d span strings longer than 256 bytes, want the tool's arguments and result only", long)
	}
}

// A result stamped before its call (two workers' clocks apart) is a call of
// no measurable time, not a call without duration: every paired call has
// its point.
func TestGenAIToolDurationSkewedClocks(t *testing.T) {
	h := newHarness(t)
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory())
	wf, run := ids()
	events := agentEvents(wf, run, keyspace.ToolCall{CallID: "a", Name: "search"}, keyspace.ToolResult{CallID: "a"})
	events[1].EmittedAt = events[0].EmittedAt.Add(-time.Second)
	if _, err := ks.AppendEvents(context.Background(), 0, events); err != nil {
		t.Fatal(err)
	}
	genaitest.AssertPoints(t, genaitest.ExecDuration, histogram(t, h, genaitest.ExecDuration, nil), points{
		distinct(ns, genaitest.ToolName.String("search")): {Count: 1, Sum: 0},
	})
	if sp := h.spansNamed("execute_tool search"); len(sp) != 1 || !sp[0].EndTime().Equal(sp[0].StartTime()) {
		t.Errorf("execute_tool spans %v, want one of no length", sp)
	}
}
