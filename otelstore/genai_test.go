package otelstore_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/genaitest"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
)

// The GenAI telemetry itself is tested in the genai package; these tests
// are of the keyspace decorator's part: what it hands the tracker (only
// committed batches), the options it passes on, its Keyspace type.

var advisedTokenBounds = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}

// points are a histogram's points, as genaitest asserts them.
type points = genaitest.Points

func newLogs(t *testing.T) (*sdklog.LoggerProvider, *genaitest.Logs) { return genaitest.NewLogs(t) }

func newGenAIKeyspace(t *testing.T, h *harness, inner keyspace.Store, extra ...otelstore.KeyspaceOption) otelstore.Keyspace {
	t.Helper()
	ks, err := otelstore.NewKeyspace(inner, h.keyspaceOptions(extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// agentEvents turns contents into events of one stream, emitted a second
// apart from t0.
func agentEvents(wf eventstore.WorkflowID, run eventstore.RunID, contents ...keyspace.Content) []keyspace.ActivityEvent {
	return genaitest.Events(wf, run, t0, contents...)
}

// histogram returns the named histogram's points, checking its bounds
// unless bounds is nil.
func histogram(t *testing.T, h *harness, name string, bounds []float64) points {
	t.Helper()
	return genaitest.HistogramPoints(t, h.metrics(t)[name], bounds)
}

func assertPoints(t *testing.T, name string, got, want points) {
	t.Helper()
	genaitest.AssertPoints(t, name, got, want)
}

// brokenKeyspace commits nothing and fails every append.
type brokenKeyspace struct{ keyspace.Store }

func (brokenKeyspace) AppendEvents(context.Context, uint64, []keyspace.ActivityEvent) (uint64, error) {
	return 0, errors.New("disk full")
}

// TestGenAIRecordsOnlyCommittedEvents: a batch the store refuses, one that
// conflicts, one that fails and an empty one record no GenAI metric and no
// log record.
func TestGenAIRecordsOnlyCommittedEvents(t *testing.T) {
	wf, run := ids()
	usage := keyspace.Usage{InputTokens: 10, OutputTokens: 1, RequestModel: "m"}
	good := agentEvents(wf, run, usage, keyspace.ToolCall{CallID: "x", Name: "t"}, keyspace.ToolResult{CallID: "x"})
	otherWF, otherRun := ids()
	mixed := append(slices.Clone(good), agentEvents(otherWF, otherRun, usage)...)
	ephemeral := slices.Clone(good)
	ephemeral[0].Ephemeral = true
	testCases := []struct {
		name        string
		inner       func() keyspace.Store
		expectedSeq uint64
		events      []keyspace.ActivityEvent
	}{
		{"mixed-streams", func() keyspace.Store { return keyspace.NewMemory() }, 0, mixed},
		{"ephemeral", func() keyspace.Store { return keyspace.NewMemory() }, 0, ephemeral},
		{"zero-ids", func() keyspace.Store { return keyspace.NewMemory() }, 0, agentEvents(eventstore.WorkflowID{}, run, usage)},
		{"conflict", func() keyspace.Store { return keyspace.NewMemory() }, 5, good},
		{"failing-store", func() keyspace.Store { return brokenKeyspace{keyspace.NewMemory()} }, 0, good},
		{"empty", func() keyspace.Store { return keyspace.NewMemory() }, 0, nil},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			lp, logs := newLogs(t)
			ks := newGenAIKeyspace(t, h, tc.inner(), otelstore.WithLoggerProvider(lp), otelstore.WithTranscriptLogs(true))
			if _, err := ks.AppendEvents(context.Background(), tc.expectedSeq, tc.events); err == nil && len(tc.events) > 0 {
				t.Fatal("the append succeeded; the case tests nothing")
			}
			m := h.metrics(t)
			for _, name := range []string{genaitest.TokenUsage, genaitest.ToolCalls, genaitest.ExecDuration, genaitest.CacheReadTokens, genaitest.CallDuration} {
				if _, ok := m[name]; ok {
					t.Errorf("%s recorded for a batch that did not commit", name)
				}
			}
			for _, sp := range h.spans.Ended() {
				if sp.Name() != "append_events" {
					t.Errorf("span %q for a batch that did not commit", sp.Name())
				}
			}
			if n := len(logs.Records()); n != 0 {
				t.Errorf("%d log records for a batch that did not commit", n)
			}
		})
	}
}

// TestGenAIRedeliveryThroughSequencer follows the README's wiring (the
// Sequencer in front of the decorated keyspace): a re-delivered batch the
// Sequencer drops records nothing, a conflict it retries is recorded once,
// and an ephemeral usage is not a transcript entry.
func TestGenAIRedeliveryThroughSequencer(t *testing.T) {
	h := newHarness(t)
	mem := keyspace.NewMemory()
	ks := newGenAIKeyspace(t, h, mem)
	seq := keyspace.NewSequencer(ks)
	ctx := context.Background()
	wf, run := ids()
	batch := agentEvents(wf, run, keyspace.Usage{InputTokens: 10, OutputTokens: 2, RequestModel: "m"},
		keyspace.ToolCall{CallID: "1", Name: "t"}, keyspace.ToolResult{CallID: "1"})
	for range 3 { // the first commits, the next two are re-deliveries
		if _, err := seq.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	// Another writer appends behind the Sequencer's back: its next append
	// conflicts and is retried; the retry commits once.
	more := agentEvents(wf, run, keyspace.Usage{InputTokens: 5, OutputTokens: 1, RequestModel: "m"}, keyspace.Usage{InputTokens: 1000, OutputTokens: 1000, RequestModel: "m"})
	for i := range more {
		more[i].WorkerSeq = uint64(10 + i)
	}
	if _, err := ks.AppendEvents(ctx, 3, more[:1]); err != nil {
		t.Fatal(err)
	}
	ephemeral := more[1]
	ephemeral.Ephemeral = true
	last := agentEvents(wf, run, keyspace.Usage{InputTokens: 3, OutputTokens: 3, RequestModel: "m"})
	last[0].WorkerSeq = 20
	if _, err := seq.Append(ctx, []keyspace.ActivityEvent{ephemeral, last[0]}); err != nil {
		t.Fatal(err)
	}
	base := []attribute.KeyValue{ns, genaitest.OpName.String("chat"), genaitest.ProviderName.String("_unknown"), genaitest.RequestModel.String("m")}
	assertPoints(t, genaitest.TokenUsage, histogram(t, h, genaitest.TokenUsage, advisedTokenBounds), points{
		distinct(append(slices.Clone(base), genaitest.TokenType.String("input"))...):  {Count: 3, Sum: 18},
		distinct(append(slices.Clone(base), genaitest.TokenType.String("output"))...): {Count: 3, Sum: 6},
	})
	got := sumPoints(t, h.metrics(t)[genaitest.ToolCalls])
	if len(got) != 1 || got[attribute.NewSet(ns, genaitest.OpName.String("execute_tool"), genaitest.ToolName.String("t"))] != 1 {
		t.Errorf("tool calls %v, want one call of t", got)
	}
}

// TestGenAIKeysAreReserved: WithAttributes may not set a key the GenAI
// telemetry sets: it is dropped and reported, and the keyspace starts.
func TestGenAIKeysAreReserved(t *testing.T) {
	for _, key := range []string{"gen_ai.token.type", "gen_ai.request.model", "gen_ai_provider_name", "gen_ai.tool.name",
		"aion.agent.role", "aion.keyspace.store_seq", "gen_ai.agent.id", "gen_ai.tool.call.id", "gen_ai.usage.input_tokens"} {
		t.Run(key, func(t *testing.T) {
			var reported []error
			_, err := otelstore.NewKeyspace(keyspace.NewMemory(),
				otelstore.WithHandler(func(err error) { reported = append(reported, err) }), otelstore.WithAttributes(attribute.String(key, "x")))
			if err != nil {
				t.Fatalf("NewKeyspace with WithAttributes(%s) = %v, want the key dropped", key, err)
			}
			if len(reported) != 1 || !errors.Is(reported[0], otelstore.ErrInvalidOption) {
				t.Fatalf("NewKeyspace with WithAttributes(%s) reported %v, want one ErrInvalidOption", key, reported)
			}
		})
	}
}

// TestKeyspaceNamespaceReachesEveryInstrument: WithNamespace, given to
// NewKeyspace, is the aion.namespace of the keyspace's call metrics and of
// every GenAI point and span (before, the GenAI ones stayed "default"); the
// deprecated WithKeyspaceNamespace still says the same.
func TestKeyspaceNamespaceReachesEveryInstrument(t *testing.T) {
	for _, opt := range []otelstore.KeyspaceOption{otelstore.WithNamespace("shop"), otelstore.WithKeyspaceNamespace("shop")} {
		h := newHarness(t)
		ks := newGenAIKeyspace(t, h, keyspace.NewMemory(), opt)
		wf, run := ids()
		if _, err := ks.AppendEvents(context.Background(), 0, genaitest.ScriptedAttempt(wf, run, t0)); err != nil {
			t.Fatal(err)
		}
		ks.EndAgentSpans()
		shop := otelstore.AttrNamespace.String("shop")
		metrics := h.metrics(t)
		for _, name := range []string{genaitest.TokenUsage, genaitest.ToolCalls, genaitest.AgentDuration, "aion.keyspace.operation.duration"} {
			if _, ok := metrics[name]; !ok {
				t.Errorf("%s not recorded", name)
			}
		}
		for name, m := range metrics {
			for _, set := range pointAttrs(m) {
				if v, _ := set.Value(shop.Key); v != shop.Value {
					t.Errorf("%s point %v: aion.namespace %q, want shop", name, set.ToSlice(), v.AsString())
				}
			}
		}
		for _, sp := range h.spans.Ended() {
			assertSpanAttr(t, sp, shop)
		}
	}
}

// TestKeyspaceShutdownOnTheDocumentedType: the value NewKeyspace returns is
// an otelstore.Keyspace, whose EndAgentSpans (no type assertion) ends the
// open invoke_agent spans, and whose Unwrap returns the inner store.
func TestKeyspaceShutdownOnTheDocumentedType(t *testing.T) {
	h := newHarness(t)
	inner := keyspace.NewMemory()
	var ks otelstore.Keyspace = newGenAIKeyspace(t, h, inner)
	wf, run := ids()
	if _, err := ks.AppendEvents(context.Background(), 0, agentEvents(wf, run, keyspace.Usage{InputTokens: 1})); err != nil {
		t.Fatal(err)
	}
	if n := len(h.spansNamed("invoke_agent")); n != 0 {
		t.Fatalf("%d invoke_agent spans ended before EndAgentSpans", n)
	}
	ks.EndAgentSpans()
	ks.EndAgentSpans()
	if n := len(h.spansNamed("invoke_agent")); n != 1 {
		t.Errorf("%d invoke_agent spans ended, want 1", n)
	}
	if ks.Unwrap() != keyspace.Store(inner) {
		t.Error("Unwrap does not return the inner keyspace")
	}
}
