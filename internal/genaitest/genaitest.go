// Package genaitest holds what the tests of the GenAI telemetry share,
// in the genai package and in the otelstore keyspace decorator: an
// in-memory log exporter, transcript builders and histogram assertions.
// Only tests import it.
package genaitest

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// Logs is an in-memory log exporter: every record the SDK exports. It is
// safe for concurrent use.
type Logs struct {
	mu   sync.Mutex
	recs []sdklog.Record
}

// Export keeps a copy of each record.
func (l *Logs) Export(_ context.Context, recs []sdklog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		l.recs = append(l.recs, r.Clone())
	}
	return nil
}

// Shutdown does nothing.
func (l *Logs) Shutdown(context.Context) error { return nil }

// ForceFlush does nothing.
func (l *Logs) ForceFlush(context.Context) error { return nil }

// Records returns the records exported so far.
func (l *Logs) Records() []sdklog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

// NewLogs returns a logger provider exporting synchronously into a Logs,
// shut down when the test ends.
func NewLogs(t testing.TB) (*sdklog.LoggerProvider, *Logs) {
	t.Helper()
	exp := &Logs{}
	lp := sdklog.NewLoggerProvider(sdklog.WithProcessor(sdklog.NewSimpleProcessor(exp)))
	t.Cleanup(func() { _ = lp.Shutdown(context.Background()) })
	return lp, exp
}

// Events turns contents into events of one stream (activity 2, attempt 1,
// agent "agent-1" of role "planner"), emitted a second apart from start.
func Events(wf eventstore.WorkflowID, run eventstore.RunID, start time.Time, contents ...keyspace.Content) []keyspace.ActivityEvent {
	out := make([]keyspace.ActivityEvent, len(contents))
	for i, c := range contents {
		out[i] = keyspace.ActivityEvent{WorkflowID: wf, RunID: run, ActivityID: 2, Attempt: 1, AgentID: "agent-1",
			AgentRole: "planner", WorkerSeq: uint64(i + 1), EmittedAt: start.Add(time.Duration(i) * time.Second), Content: c}
	}
	return out
}

// ScriptedAttempt is one attempt of an agent activity: two model calls, the
// first with cached input and reasoning and streamed, three tool calls, the
// second failing, then a terminal status. The activity (2) is scheduled at
// t0+1s; the transcript runs from t0+2s to t0+8s.
func ScriptedAttempt(wf eventstore.WorkflowID, run eventstore.RunID, t0 time.Time) []keyspace.ActivityEvent {
	at := func(d float64) time.Time { return t0.Add(time.Duration(d * float64(time.Second))) }
	type step struct {
		at float64
		c  keyspace.Content
	}
	steps := []step{
		{2, keyspace.Message{Role: "user", Text: "plan my trip"}},
		{3, keyspace.Usage{InputTokens: 1000, OutputTokens: 200, CacheReadInputTokens: 600, CacheCreationInputTokens: 100,
			ReasoningOutputTokens: 120, Provider: "anthropic", RequestModel: "claude-sonnet-4", ResponseModel: "claude-sonnet-4-20250514",
			StartedAt: at(2), FirstChunkAt: at(2.5)}},
		{3, keyspace.ToolCall{CallID: "a", Name: "search", Arguments: `{"q":"flights"}`}},
		{3.5, keyspace.ToolCall{CallID: "b", Name: "fetch", Arguments: `{"url":"x"}`}},
		{4, keyspace.ToolResult{CallID: "a", Output: "3 flights"}},
		{4.5, keyspace.ToolResult{CallID: "b", Output: "timeout", IsError: true}},
		{5, keyspace.ToolCall{CallID: "c", Name: "search", Arguments: `{"q":"hotels"}`}},
		{6, keyspace.ToolResult{CallID: "c", Output: "2 hotels"}},
		{7, keyspace.Usage{InputTokens: 300, OutputTokens: 50, Provider: "anthropic", RequestModel: "claude-sonnet-4",
			ResponseModel: "claude-sonnet-4-20250514", StartedAt: at(6)}},
		{7, keyspace.Message{Role: "assistant", Text: "booked"}},
		{8, keyspace.Status{State: "completed"}},
	}
	out := make([]keyspace.ActivityEvent, len(steps))
	for i, s := range steps {
		out[i] = keyspace.ActivityEvent{WorkflowID: wf, RunID: run, ActivityID: 2, Attempt: 1, AgentID: "planner-7",
			AgentRole: "planner", WorkerSeq: uint64(i + 1), EmittedAt: at(s.at), Content: s.c}
	}
	return out
}

// The instruments and attribute keys the tests read, spelled as the
// conventions spell them (not taken from the catalog, so that a rename
// there fails the tests).
const (
	TokenUsage       = "gen_ai.client.token.usage"
	ToolCalls        = "aion.gen_ai.tool.calls"
	CacheReadTokens  = "gen_ai.client.inference.usage.cache_read.input_tokens"
	CacheWriteTokens = "gen_ai.client.inference.usage.cache_write.input_tokens"
	ReasoningTokens  = "gen_ai.client.inference.usage.reasoning.output_tokens"
	ExecDuration     = "gen_ai.execute_tool.duration"
	AgentDuration    = "gen_ai.invoke_agent.duration"
	CallDuration     = "gen_ai.client.operation.duration"
	FirstChunk       = "gen_ai.client.operation.time_to_first_chunk"

	TokenType     attribute.Key = "gen_ai.token.type"
	OpName        attribute.Key = "gen_ai.operation.name"
	ProviderName  attribute.Key = "gen_ai.provider.name"
	RequestModel  attribute.Key = "gen_ai.request.model"
	ResponseModel attribute.Key = "gen_ai.response.model"
	ToolName      attribute.Key = "gen_ai.tool.name"
	ErrType       attribute.Key = "error.type"
)

// Modality is the gen_ai.token.modality of every count: a Usage does not
// break its tokens down.
var Modality = attribute.String("gen_ai.token.modality", "unknown")

// HistPoint is what a test asserts of one histogram point.
type HistPoint struct {
	Count uint64
	Sum   float64
}

// Points are a histogram's points by attribute set.
type Points = map[attribute.Distinct]HistPoint

// HistogramPoints returns the points of m, an int64 or float64 histogram,
// checking their bounds unless bounds is nil. A zero m (a metric not
// recorded) has none.
func HistogramPoints(t testing.TB, m metricdata.Metrics, bounds []float64) Points {
	t.Helper()
	out := Points{}
	add := func(set attribute.Set, got []float64, count uint64, sum float64) {
		if bounds != nil && !slices.Equal(got, bounds) {
			t.Errorf("%s bounds %v, want %v", m.Name, got, bounds)
		}
		out[set.Equivalent()] = HistPoint{count, sum}
	}
	switch d := m.Data.(type) {
	case nil:
	case metricdata.Histogram[int64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes, dp.Bounds, dp.Count, float64(dp.Sum))
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			add(dp.Attributes, dp.Bounds, dp.Count, dp.Sum)
		}
	default:
		t.Fatalf("metric %s is %T, want a histogram", m.Name, m.Data)
	}
	return out
}

// AssertPoints checks that got has exactly the points of want.
func AssertPoints(t testing.TB, name string, got, want Points) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s has %d attribute sets, want %d: %v", name, len(got), len(want), got)
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || g != w {
			t.Errorf("%s point %v = %+v (present %v), want %+v", name, k, g, ok, w)
		}
	}
}
