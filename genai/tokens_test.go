package genai_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/genai"
	"github.com/aionotel/aionotel/internal/genaitest"
	"github.com/aionotel/aionotel/internal/version"
	"github.com/aionotel/aionotel/keyspace"
)

// TestGenAIImplausibleCountsAreRefused: a count above MaxTokenCount (an
// agent writing -1 for "unknown" stores math.MaxUint64) is recorded nowhere
// and counted on aion.gen_ai.usage.refused; the call's other counts are
// recorded, and every sum stays exact and non-negative through later
// points, in both semconv modes.
func TestGenAIImplausibleCountsAreRefused(t *testing.T) {
	for _, optIn := range []string{"", "gen_ai_latest_experimental"} {
		t.Run(optIn, func(t *testing.T) {
			h := newHarness(t)
			ks := newGenAIKeyspace(t, h, keyspace.NewMemory(), genai.WithSemConvStabilityOptIn(optIn))
			wf, run := ids()
			minusOne := uint64(math.MaxUint64) // -1 cast
			events := agentEvents(wf, run,
				keyspace.Usage{InputTokens: minusOne, OutputTokens: 7, ReasoningOutputTokens: minusOne, RequestModel: "m"},
				keyspace.Usage{InputTokens: genai.MaxTokenCount + 1, OutputTokens: genai.MaxTokenCount, CacheReadInputTokens: 1 << 63, RequestModel: "m"},
				keyspace.Usage{InputTokens: 10, OutputTokens: 3, CacheReadInputTokens: 4, CacheCreationInputTokens: minusOne, RequestModel: "m"},
			)
			for i := range 3 { // the same three again: sums must keep growing exactly
				if _, err := ks.AppendEvents(context.Background(), uint64(3*i), events); err != nil {
					t.Fatal(err)
				}
				for j := range events {
					events[j].WorkerSeq += 10
				}
			}
			m := h.metrics(t)
			wantIn, wantOut := int64(3*10), int64(3*(7+genai.MaxTokenCount+3))
			var gotIn, gotOut int64
			if optIn == "" {
				for _, dp := range m[genaitest.TokenUsage].Data.(metricdata.Histogram[int64]).DataPoints {
					typ, _ := dp.Attributes.Value(genaitest.TokenType)
					if lowest, ok := dp.Min.Value(); dp.Sum < 0 || ok && lowest < 0 {
						t.Errorf("negative histogram point %+v", dp)
					}
					switch typ.AsString() {
					case "input":
						gotIn = dp.Sum
						if dp.Count != 3 {
							t.Errorf("%d input points, want 3 (one per plausible count)", dp.Count)
						}
					case "output":
						gotOut = dp.Sum
					}
				}
			} else {
				gotIn = sumOne(t, m["gen_ai.client.inference.usage.input_tokens"])
				gotOut = sumOne(t, m["gen_ai.client.inference.usage.output_tokens"])
			}
			if gotIn != wantIn || gotOut != wantOut {
				t.Errorf("input sum %d, output sum %d; want %d and %d", gotIn, gotOut, wantIn, wantOut)
			}
			if got := sumOne(t, m[genaitest.CacheReadTokens]); got != 3*4 {
				t.Errorf("cache read sum %d, want 12", got)
			}
			refused := sums(t, m["aion.gen_ai.usage.refused"])
			// Each by its own attribute: gen_ai.token.type's enum has only
			// input and output.
			for field, n := range map[string]int64{"input_tokens": 6, "reasoning.output_tokens": 3,
				"cache_read.input_tokens": 3, "cache_write.input_tokens": 3} {
				if got := refused[attribute.NewSet(ns, attribute.String("aion.gen_ai.usage.field", field))]; got != n {
					t.Errorf("refused %s = %d, want %d (all: %v)", field, got, n, refused)
				}
			}
			for _, sp := range h.spans.Ended() {
				for _, kv := range sp.Attributes() {
					if kv.Value.Type() == attribute.INT64 && kv.Value.AsInt64() < 0 {
						t.Errorf("span %s: %s = %d", sp.Name(), kv.Key, kv.Value.AsInt64())
					}
					if kv.Key == "gen_ai.usage.input_tokens" && kv.Value.AsInt64() > genai.MaxTokenCount {
						t.Errorf("span %s carries an implausible count %d", sp.Name(), kv.Value.AsInt64())
					}
				}
			}
		})
	}
}

// sumOne returns the value of a counter with one point.
func sumOne(t *testing.T, m metricdata.Metrics) int64 {
	t.Helper()
	points := sums(t, m)
	if len(points) != 1 {
		t.Fatalf("%s has %d points, want 1", m.Name, len(points))
	}
	for _, v := range points {
		return v
	}
	return 0
}

// TestGenAILatestExperimental: OTEL_SEMCONV_STABILITY_OPT_IN
// gen_ai_latest_experimental records the current text's input and output
// counters (by gen_ai.token.modality) instead of gen_ai.client.token.usage;
// the breakdown counters are recorded either way.
func TestGenAILatestExperimental(t *testing.T) {
	t.Setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
	h := newHarness(t)
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory())
	wf, run := ids()
	if _, err := ks.AppendEvents(context.Background(), 0, agentEvents(wf, run,
		keyspace.Usage{InputTokens: 100, OutputTokens: 30, CacheReadInputTokens: 60, ReasoningOutputTokens: 10, Provider: "openai", RequestModel: "o3"},
		keyspace.Usage{InputTokens: 50, OutputTokens: 5, CacheCreationInputTokens: 50, Provider: "openai", RequestModel: "o3"},
	)); err != nil {
		t.Fatal(err)
	}
	m := h.metrics(t)
	if _, ok := m[genaitest.TokenUsage]; ok {
		t.Errorf("%s recorded behind gen_ai_latest_experimental", genaitest.TokenUsage)
	}
	set := attribute.NewSet(ns, genaitest.OpName.String("chat"), genaitest.ProviderName.String("openai"), genaitest.RequestModel.String("o3"), genaitest.Modality)
	for name, want := range map[string]int64{
		"gen_ai.client.inference.usage.input_tokens": 150, "gen_ai.client.inference.usage.output_tokens": 35,
		genaitest.CacheReadTokens: 60, genaitest.CacheWriteTokens: 50, genaitest.ReasoningTokens: 10,
	} {
		if got := sums(t, m[name]); len(got) != 1 || got[set] != want {
			t.Errorf("%s = %v, want %d", name, got, want)
		}
		if unit := m[name].Unit; unit != "{token}" {
			t.Errorf("%s unit %q", name, unit)
		}
	}
}

// TestGenAISchemaURLs: the instruments v1.41.0 defines carry its schema URL,
// those only the current GenAI text defines carry that registry's, and the
// GenAI spans carry v1.41.0's.
func TestGenAISchemaURLs(t *testing.T) {
	h := newHarness(t)
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory())
	wf, run := ids()
	events := scriptedAttempt(wf, run)
	if _, err := ks.AppendEvents(context.Background(), 0, events); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	const released, dev = "https://opentelemetry.io/schemas/1.41.0", "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev"
	want := map[string]string{genaitest.TokenUsage: released, genaitest.CallDuration: released, genaitest.FirstChunk: released,
		genaitest.ExecDuration: dev, genaitest.AgentDuration: dev, genaitest.CacheReadTokens: dev, genaitest.CacheWriteTokens: dev, genaitest.ReasoningTokens: dev}
	seen := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if w, ok := want[m.Name]; ok {
				seen++
				if sm.Scope.SchemaURL != w || sm.Scope.Name != genai.ScopeName || sm.Scope.Version != version.Version {
					t.Errorf("%s in scope %+v, want %s schema %s", m.Name, sm.Scope, genai.ScopeName, w)
				}
			}
		}
	}
	if seen != len(want) {
		t.Errorf("saw %d of the %d GenAI instruments", seen, len(want))
	}
	for _, sp := range h.spans.Ended() {
		if sp.Name() != "append_events" && sp.InstrumentationScope().SchemaURL != released {
			t.Errorf("span %s has schema URL %q, want %q", sp.Name(), sp.InstrumentationScope().SchemaURL, released)
		}
	}
}

// spanShape is what the order of arrival must not change about a span.
type spanShape struct {
	name       string
	start, end int64
	status     string
	parent     string
}

// TestGenAIOrderDoesNotMatter commits the scripted attempt's events in
// many orders, one event per commit (its terminal status last, the end of
// its span): the metric points and the model-call and tool spans are the
// same whatever the order, because tool calls pair with results that came
// first and every span takes its times from the transcript.
func TestGenAIOrderDoesNotMatter(t *testing.T) {
	run := func(order []int) (map[string]string, []spanShape) {
		h := newHarness(t)
		ks := newGenAIKeyspace(t, h, keyspace.NewMemory())
		wf, runID := ids()
		events := scriptedAttempt(wf, runID)
		for i, j := range order {
			ev := events[j]
			if _, err := ks.AppendEvents(context.Background(), uint64(i), []keyspace.ActivityEvent{ev}); err != nil {
				t.Fatal(err)
			}
		}
		points := map[string]string{}
		for name, m := range h.metrics(t) {
			if name == "aion.keyspace.operation.duration" || name == genaitest.AgentDuration {
				continue // call timings; the agent's start is its first commit's
			}
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					points[name+dp.Attributes.Encoded(attribute.DefaultEncoder())] = fmt.Sprint(dp.Value)
				}
			case metricdata.Histogram[int64]:
				for _, dp := range d.DataPoints {
					points[name+dp.Attributes.Encoded(attribute.DefaultEncoder())] = fmt.Sprint(dp.Count, dp.Sum)
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					points[name+dp.Attributes.Encoded(attribute.DefaultEncoder())] = fmt.Sprint(dp.Count, dp.Sum)
				}
			}
		}
		var shapes []spanShape
		for _, sp := range h.spans.Ended() {
			if sp.Name() == "append_events" || sp.Name() == "invoke_agent" {
				continue
			}
			shapes = append(shapes, spanShape{sp.Name(), sp.StartTime().UnixNano(), sp.EndTime().UnixNano(),
				sp.Status().Code.String(), parentName(h.spans.Ended(), sp)})
		}
		slices.SortFunc(shapes, func(a, b spanShape) int {
			if a.start != b.start {
				return int(a.start - b.start)
			}
			return int(a.end - b.end)
		})
		return points, shapes
	}
	n := len(scriptedAttempt(ids()))
	inOrder := make([]int, n)
	for i := range inOrder {
		inOrder[i] = i
	}
	wantPoints, wantSpans := run(inOrder)
	if len(wantSpans) != 5 || len(wantPoints) < 8 {
		t.Fatalf("the in-order run has %d spans and %d points; the test sees too little", len(wantSpans), len(wantPoints))
	}
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	for range 30 {
		order := slices.Clone(inOrder[:n-1]) // the terminal status stays last
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		order = append(order, n-1)
		points, spans := run(order)
		if !mapsEqual(points, wantPoints) {
			t.Fatalf("seed %d, order %v: points\n%v\nwant\n%v", seed, order, points, wantPoints)
		}
		if !slices.Equal(spans, wantSpans) {
			t.Fatalf("seed %d, order %v: spans\n%v\nwant\n%v", seed, order, spans, wantSpans)
		}
	}
}

func parentName(all []sdktrace.ReadOnlySpan, sp sdktrace.ReadOnlySpan) string {
	for _, p := range all {
		if p.SpanContext().SpanID() == sp.Parent().SpanID() {
			return p.Name()
		}
	}
	return "?"
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestGenAIOneAttemptConcurrentSafe: writers racing on one stream (each
// retrying its conflicts) commit their turns in some order and the
// decorator observes them concurrently: one invoke_agent span, every model
// call and tool its child, the totals exact.
func TestGenAIOneAttemptConcurrentSafe(t *testing.T) {
	h := newHarness(t)
	ks := newGenAIKeyspace(t, h, keyspace.NewMemory())
	wf, run := ids()
	const writers, turns = 6, 10
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range turns {
				id := fmt.Sprintf("%d-%d", w, i)
				events := agentEvents(wf, run, keyspace.ToolCall{CallID: id, Name: "t"}, keyspace.ToolResult{CallID: id},
					keyspace.Usage{InputTokens: 2, OutputTokens: 1, RequestModel: "m"})
				for {
					head, err := ks.Head(context.Background(), keyspace.KeyOf(events[0]))
					if err != nil {
						t.Error(err)
						return
					}
					if _, err := ks.AppendEvents(context.Background(), head, events); err == nil {
						break
					} else if !errors.Is(err, eventstore.ErrSequenceConflict) {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	ks.EndAgentSpans()
	agents := h.spansNamed("invoke_agent")
	if len(agents) != 1 {
		t.Fatalf("%d invoke_agent spans for one attempt, want 1", len(agents))
	}
	children := append(h.spansNamed("execute_tool t"), h.spansNamed("chat m")...)
	if len(children) != 2*writers*turns {
		t.Fatalf("%d child spans, want %d", len(children), 2*writers*turns)
	}
	for _, c := range children {
		if c.Parent().SpanID() != agents[0].SpanContext().SpanID() {
			t.Fatalf("span %s is not the child of the attempt's invoke_agent span", c.Name())
		}
	}
	assertSpanAttr(t, agents[0], attribute.Int64("aion.gen_ai.usage.total.input_tokens", 2*writers*turns))
	assertSpanAttr(t, agents[0], attribute.Int64("aion.gen_ai.invocation.tool_calls", writers*turns))
}
