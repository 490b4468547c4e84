package genai_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/genai"
	"github.com/aionotel/aionotel/internal/genaitest"
	"github.com/aionotel/aionotel/keyspace"
)

// The tests of the promises the package doc makes, one each.

// TestEverySignalCarriesNamespaceAndAttributes: every span of every kind
// (invoke_agent, the inference spans, execute_tool), every point of every
// instrument and every log record carries aion.namespace and the
// WithAttributes attributes, also for an orphan tool result, a refused
// count and an attempt ended by EndAgentSpans.
func TestEverySignalCarriesNamespaceAndAttributes(t *testing.T) {
	for _, optIn := range []string{"", "gen_ai_latest_experimental", "gen_ai/dup"} {
		t.Run(optIn, func(t *testing.T) {
			h := newHarness(t)
			lp, logs := newLogs(t)
			shop, blue := attribute.String("aion.namespace", "shop"), attribute.String("deployment", "blue")
			tracker := genai.New(genai.WithMeterProvider(h.mp), genai.WithTracerProvider(h.tp), genai.WithLoggerProvider(lp),
				genai.WithTranscriptLogs(true), genai.WithNamespace("shop"), genai.WithAttributes(blue),
				genai.WithSemConvStabilityOptIn(optIn))
			wf, run := ids()
			events := scriptedAttempt(wf, run)
			tracker.Observe(context.Background(), 0, events)
			other, otherRun := ids()
			tracker.Observe(context.Background(), 0, agentEvents(other, otherRun,
				keyspace.ToolResult{CallID: "never called"},
				keyspace.Usage{InputTokens: 1 << 40, OutputTokens: 1, RequestModel: "m"}))
			tracker.EndAgentSpans()

			kinds := map[string]int{}
			for _, sp := range h.spans.Ended() {
				op, _ := spanAttr(sp, genaitest.OpName)
				kinds[op.AsString()]++
				for _, want := range []attribute.KeyValue{shop, blue} {
					assertSpanAttr(t, sp, want)
				}
			}
			if kinds["invoke_agent"] != 2 || kinds["chat"] != 3 || kinds["execute_tool"] != 3 {
				t.Errorf("spans by gen_ai.operation.name %v, want 2 invoke_agent, 3 chat, 3 execute_tool", kinds)
			}
			metrics := h.metrics(t)
			for _, name := range []string{"aion.gen_ai.usage.refused", genaitest.ToolCalls, genaitest.ExecDuration, genaitest.AgentDuration} {
				if _, ok := metrics[name]; !ok {
					t.Errorf("%s not recorded; the test covers less than it says", name)
				}
			}
			for name, m := range metrics {
				sets := pointAttrs(m)
				if len(sets) == 0 {
					t.Errorf("%s: no points read", name)
				}
				for _, set := range sets {
					for _, want := range []attribute.KeyValue{shop, blue} {
						if got, ok := set.Value(want.Key); !ok || got != want.Value {
							t.Errorf("%s point %v lacks %s=%s", name, set.ToSlice(), want.Key, want.Value.String())
						}
					}
				}
			}
			recs := logs.Records()
			if len(recs) == 0 {
				t.Fatal("no log record")
			}
			for _, r := range recs {
				got := recordAttrs(r)
				if got["aion.namespace"] != "shop" || got["deployment"] != "blue" {
					t.Errorf("record %s: aion.namespace %q, deployment %q; want shop, blue", r.EventName(), got["aion.namespace"], got["deployment"])
				}
			}
		})
	}
}

// TestInvokeAgentProviderAndModelOnlyWhenAgreed: invoke_agent carries
// gen_ai.provider.name and gen_ai.request.model only when every model call
// of the attempt named the same one, and neither at its start (when the
// calls are not known yet), so that no attempt is labelled with one
// provider of two.
func TestInvokeAgentProviderAndModelOnlyWhenAgreed(t *testing.T) {
	call := func(provider, model string) keyspace.Content {
		return keyspace.Usage{InputTokens: 10, OutputTokens: 1, Provider: provider, RequestModel: model}
	}
	testCases := []struct {
		name                string
		calls               []keyspace.Content
		provider, model     string // "": the attribute is absent
		startProviderAbsent bool
	}{
		{"one provider, one model", []keyspace.Content{call("openai", "gpt-4o"), call("openai", "gpt-4o")}, "openai", "gpt-4o", true},
		{"two providers", []keyspace.Content{call("anthropic", "m"), call("openai", "m")}, "", "m", true},
		{"two models", []keyspace.Content{call("openai", "gpt-4o"), call("openai", "o3")}, "openai", "", true},
		{"both differ", []keyspace.Content{call("anthropic", "claude"), call("openai", "gpt-4o")}, "", "", true},
		{"no provider named", []keyspace.Content{call("", "m"), call("", "m")}, "_unknown", "m", true},
		{"one named, one not", []keyspace.Content{call("openai", "m"), call("", "m")}, "", "m", true},
		{"no model call", []keyspace.Content{keyspace.Message{Role: "user", Text: "hi"}}, "", "", true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			var started []startedSpan
			h.tp.RegisterSpanProcessor(startRecorder{&started})
			tracker := genai.New(genai.WithMeterProvider(h.mp), genai.WithTracerProvider(h.tp))
			wf, run := ids()
			events := agentEvents(wf, run, append(tc.calls, keyspace.Status{State: "completed"})...)
			// One call per batch: the first batch must not decide.
			for i := range events {
				tracker.Observe(context.Background(), uint64(i), events[i:i+1])
			}
			agents := h.spansNamed("invoke_agent")
			if len(agents) != 1 {
				t.Fatalf("%d invoke_agent spans, want 1", len(agents))
			}
			for key, want := range map[attribute.Key]string{genaitest.ProviderName: tc.provider, genaitest.RequestModel: tc.model} {
				got, ok := spanAttr(agents[0], key)
				switch {
				case want == "" && ok:
					t.Errorf("%s = %q, want it absent", key, got.AsString())
				case want != "" && got.AsString() != want:
					t.Errorf("%s = %q (set: %v), want %q", key, got.AsString(), ok, want)
				}
			}
			for _, sp := range started {
				if sp.name != "invoke_agent" {
					continue
				}
				for _, kv := range sp.attrs {
					if kv.Key == genaitest.ProviderName || kv.Key == genaitest.RequestModel {
						t.Errorf("invoke_agent started with %s = %s, before the calls were known", kv.Key, kv.Value.String())
					}
				}
			}
		})
	}
}

// startedSpan is a span's name and attributes as they were at its start.
type startedSpan struct {
	name  string
	attrs []attribute.KeyValue
}

// startRecorder keeps each span as it was at its start.
type startRecorder struct{ started *[]startedSpan }

func (r startRecorder) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	*r.started = append(*r.started, startedSpan{s.Name(), s.Attributes()})
}
func (startRecorder) OnEnd(sdktrace.ReadOnlySpan)      {}
func (startRecorder) Shutdown(context.Context) error   { return nil }
func (startRecorder) ForceFlush(context.Context) error { return nil }

// TestSemConvOptInSwitching: what OTEL_SEMCONV_STABILITY_OPT_IN (the
// variable, or WithSemConvStabilityOptIn over it) switches, name by name,
// as the package doc's table says.
func TestSemConvOptInSwitching(t *testing.T) {
	const (
		inferenceDuration = "gen_ai.client.inference.duration"
		inferenceFirst    = "gen_ai.client.inference.time_to_first_chunk"
		inputTokens       = "gen_ai.client.inference.usage.input_tokens"
		outputTokens      = "gen_ai.client.inference.usage.output_tokens"
		cacheWriteKey     = "gen_ai.usage.cache_write.input_tokens"
		cacheCreationKey  = "gen_ai.usage.cache_creation.input_tokens"
	)
	testCases := []struct {
		name, env string
		opts      []genai.Option
		latest    bool // the opt-in's names instead of the default ones
		dup       bool // the earlier names beside
	}{
		{"default", "", nil, false, false},
		{"variable latest", "gen_ai_latest_experimental", nil, true, false},
		{"variable dup", " gen_ai/dup ", nil, false, true},
		{"variable both, other domains ignored", "http,gen_ai_latest_experimental,gen_ai/dup,database", nil, true, true},
		{"option over the variable", "gen_ai_latest_experimental", []genai.Option{genai.WithSemConvStabilityOptIn("")}, false, false},
		{"option latest", "", []genai.Option{genai.WithSemConvStabilityOptIn("gen_ai_latest_experimental")}, true, false},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_SEMCONV_STABILITY_OPT_IN", tc.env)
			h := newHarness(t)
			ks := newGenAIKeyspace(t, h, keyspace.NewMemory(), tc.opts...)
			wf, run := ids()
			if _, err := ks.AppendEvents(context.Background(), 0, scriptedAttempt(wf, run)); err != nil {
				t.Fatal(err)
			}
			m := h.metrics(t)
			present := func(name string, want bool) {
				t.Helper()
				if _, ok := m[name]; ok != want {
					t.Errorf("%s recorded: %v, want %v", name, ok, want)
				}
			}
			present(genaitest.TokenUsage, !tc.latest)
			present(inputTokens, tc.latest)
			present(outputTokens, tc.latest)
			present(inferenceDuration, tc.latest)
			present(inferenceFirst, tc.latest)
			present(genaitest.FirstChunk, !tc.latest)
			// Model calls on gen_ai.client.operation.duration by default;
			// behind gen_ai/dup, tool executions there too.
			present(genaitest.CallDuration, !tc.latest || tc.dup)
			present(genaitest.CacheWriteTokens, true)
			if got := histogram(t, h, inferenceDuration, nil); tc.latest && len(got) != 1 {
				t.Errorf("%s points %v, want the model's", inferenceDuration, got)
			}
			tools := 0
			for _, set := range pointAttrs(m[genaitest.CallDuration]) {
				if setHas(set, genaitest.OpName, "execute_tool") {
					tools++
				}
			}
			if (tools > 0) != tc.dup {
				t.Errorf("tool executions on %s: %d sets, want some: %v", genaitest.CallDuration, tools, tc.dup)
			}
			chat := h.spansNamed("chat claude-sonnet-4")[0]
			if v, ok := spanAttr(chat, cacheWriteKey); !ok || v.AsInt64() != 100 {
				t.Errorf("inference span %s = %v (set: %v), want 100: the name its counter has", cacheWriteKey, v.String(), ok)
			}
			if _, ok := spanAttr(chat, cacheCreationKey); ok != tc.dup {
				t.Errorf("inference span has %s: %v, want %v", cacheCreationKey, ok, tc.dup)
			}
			agent := h.spansNamed("invoke_agent")[0]
			assertSpanAttr(t, agent, attribute.Int64("aion.gen_ai.usage.total.cache_write.input_tokens", 100))
		})
	}
}

func setHas(set attribute.Set, key attribute.Key, value string) bool {
	v, ok := set.Value(key)
	return ok && v.AsString() == value
}

// TestRefusedCountsStayWithinEnums: aion.gen_ai.usage.refused says which
// count was refused by its own attribute, never by gen_ai.token.type (whose
// enum has only input and output).
func TestRefusedCountsStayWithinEnums(t *testing.T) {
	h := newHarness(t)
	tracker := genai.New(genai.WithMeterProvider(h.mp), genai.WithTracerProvider(h.tp))
	wf, run := ids()
	const huge = genai.MaxTokenCount + 1
	tracker.Observe(context.Background(), 0, agentEvents(wf, run, keyspace.Usage{InputTokens: huge, OutputTokens: huge,
		CacheReadInputTokens: huge, CacheCreationInputTokens: huge, ReasoningOutputTokens: huge}))
	got := map[string]int64{}
	for set, n := range sums(t, h.metrics(t)["aion.gen_ai.usage.refused"]) {
		if _, ok := set.Value(genaitest.TokenType); ok {
			t.Errorf("refused point %v carries gen_ai.token.type", set.ToSlice())
		}
		field, _ := set.Value("aion.gen_ai.usage.field")
		got[field.AsString()] += n
	}
	want := map[string]int64{"input_tokens": 1, "output_tokens": 1, "cache_read.input_tokens": 1,
		"cache_write.input_tokens": 1, "reasoning.output_tokens": 1}
	if len(got) != len(want) {
		t.Errorf("refused by field %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("refused %s = %d, want %d", k, got[k], n)
		}
	}
}

// TestToolArgumentsAreStructured: with content capture, tool arguments and
// output that are a JSON object are recorded as a map value (nested maps,
// slices, numbers, booleans; null members left out), on the execute_tool
// span and in the details record's messages; any other text stays a
// string.
func TestToolArgumentsAreStructured(t *testing.T) {
	h := newHarness(t)
	lp, logs := newLogs(t)
	tracker := genai.New(genai.WithMeterProvider(h.mp), genai.WithTracerProvider(h.tp), genai.WithLoggerProvider(lp),
		genai.WithTranscriptLogs(true), genai.WithContentCapture(true))
	wf, run := ids()
	tracker.Observe(context.Background(), 0, agentEvents(wf, run,
		keyspace.ToolCall{CallID: "1", Name: "search", Arguments: `{"q":"flights","max":3,"ratio":0.5,"strict":true,"tags":["a","b"],"where":{"from":"CDG"},"none":null}`},
		keyspace.ToolResult{CallID: "1", Output: `{"count":2}`},
		keyspace.ToolCall{CallID: "2", Name: "echo", Arguments: "plain text, not JSON"},
		keyspace.ToolResult{CallID: "2", Output: `["a JSON array"]`},
		keyspace.Usage{InputTokens: 1, OutputTokens: 1},
	))
	search := h.spansNamed("execute_tool search")[0]
	args, _ := spanAttr(search, "gen_ai.tool.call.arguments")
	if args.Type() != attribute.MAP {
		t.Fatalf("arguments are %s %s, want a map", args.Type(), args.String())
	}
	want := map[string]attribute.Value{"q": attribute.StringValue("flights"), "max": attribute.Int64Value(3),
		"ratio": attribute.Float64Value(0.5), "strict": attribute.BoolValue(true),
		"tags":  attribute.SliceValue(attribute.StringValue("a"), attribute.StringValue("b")),
		"where": attribute.MapValue(attribute.String("from", "CDG"))}
	members := map[string]attribute.Value{}
	for _, kv := range args.AsMap() {
		members[string(kv.Key)] = kv.Value
	}
	if len(members) != len(want) {
		t.Errorf("arguments %s, want the members %v (null left out)", args.String(), want)
	}
	for k, w := range want {
		if got := members[k]; got.String() != w.String() || got.Type() != w.Type() {
			t.Errorf("argument %s = %s %s, want %s %s", k, got.Type(), got.String(), w.Type(), w.String())
		}
	}
	if res, _ := spanAttr(search, "gen_ai.tool.call.result"); res.Type() != attribute.MAP {
		t.Errorf("result %s %s, want a map", res.Type(), res.String())
	}
	echo := h.spansNamed("execute_tool echo")[0]
	for key, text := range map[attribute.Key]string{"gen_ai.tool.call.arguments": "plain text, not JSON", "gen_ai.tool.call.result": `["a JSON array"]`} {
		if v, _ := spanAttr(echo, key); v.Type() != attribute.STRING || v.AsString() != text {
			t.Errorf("%s = %s %s, want the string %q", key, v.Type(), v.String(), text)
		}
	}
	var out attribute.Value
	for _, r := range logs.Records() {
		r.WalkAttributes(func(kv attribute.KeyValue) bool {
			if kv.Key == "gen_ai.output.messages" {
				out = kv.Value
			}
			return true
		})
	}
	found := false
	walkValues(out, func(v attribute.Value) {
		for _, kv := range mapOf(v) {
			if kv.Key == "arguments" && kv.Value.Type() == attribute.MAP {
				found = true
			}
		}
	})
	if !found {
		t.Errorf("gen_ai.output.messages %s: no tool_call part with structured arguments", out.String())
	}
}

func mapOf(v attribute.Value) []attribute.KeyValue {
	if v.Type() == attribute.MAP {
		return v.AsMap()
	}
	return nil
}

// walkValues calls f on v and every value inside it.
func walkValues(v attribute.Value, f func(attribute.Value)) {
	f(v)
	switch v.Type() {
	case attribute.SLICE:
		for _, e := range v.AsSlice() {
			walkValues(e, f)
		}
	case attribute.MAP:
		for _, kv := range v.AsMap() {
			walkValues(kv.Value, f)
		}
	}
}

// TestObserveWithoutAKeyspace: an engine that keeps transcripts elsewhere
// feeds a Tracker directly, in batches of several streams, and a nil
// Tracker records nothing and does not panic.
func TestObserveWithoutAKeyspace(t *testing.T) {
	h := newHarness(t)
	tracker := genai.New(genai.WithMeterProvider(h.mp), genai.WithTracerProvider(h.tp), genai.WithAgentIdleTimeout(time.Hour))
	wf, run := ids()
	a := agentEvents(wf, run, keyspace.Usage{InputTokens: 5, OutputTokens: 1, RequestModel: "m"})
	b := agentEvents(wf, run, keyspace.Usage{InputTokens: 7, OutputTokens: 1, RequestModel: "m"})
	for i := range b {
		b[i].Attempt = 2
	}
	tracker.Observe(context.Background(), 0, append(a, b...))
	tracker.EndAgentSpans()
	tracker.EndAgentSpans() // idempotent
	agents := h.spansNamed("invoke_agent")
	if len(agents) != 2 {
		t.Fatalf("%d invoke_agent spans, want one per attempt (2)", len(agents))
	}
	ends := map[string]int{}
	for _, sp := range agents {
		v, _ := spanAttr(sp, "aion.gen_ai.invocation.end")
		ends[v.AsString()]++
	}
	if ends["next_attempt"] != 1 || ends["flushed"] != 1 {
		t.Errorf("invoke_agent ends %v, want next_attempt and flushed", ends)
	}
	genaitest.AssertPoints(t, genaitest.TokenUsage, histogram(t, h, genaitest.TokenUsage, nil), points{
		distinct(ns, genaitest.OpName.String("chat"), genaitest.ProviderName.String("_unknown"), genaitest.RequestModel.String("m"), genaitest.TokenType.String("input")):  {Count: 2, Sum: 12},
		distinct(ns, genaitest.OpName.String("chat"), genaitest.ProviderName.String("_unknown"), genaitest.RequestModel.String("m"), genaitest.TokenType.String("output")): {Count: 2, Sum: 2},
	})
	var none *genai.Tracker
	none.Observe(context.Background(), 0, a)
	none.EndAgentSpans()
}

var _ sdklog.Exporter = (*genaitest.Logs)(nil)

// TestNilAndZeroTrackersRecordNothing: Observe and EndAgentSpans of a nil
// Tracker and of a zero one (not made by New) record nothing and never
// panic.
func TestNilAndZeroTrackersRecordNothing(t *testing.T) {
	wf, run := ids()
	events := agentEvents(wf, run, keyspace.Usage{InputTokens: 1, RequestModel: "m"},
		keyspace.ToolCall{CallID: "c", Name: "tool"}, keyspace.ToolResult{CallID: "c"}, keyspace.Status{State: "completed"})
	var zero genai.Tracker
	for _, g := range []*genai.Tracker{nil, &zero} {
		g.Observe(context.Background(), 0, events)
		g.EndAgentSpans()
	}
}
