package genai_test

import (
	"context"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/genai"
	"github.com/aionotel/aionotel/keyspace"
)

// benchTurn observes an agent's turn (two messages, a tool call and its
// result, a usage with cached input and reasoning) per iteration with a
// Tracker's default options on an SDK meter provider and tp: the cost the
// GenAI telemetry adds to a committed batch.
func benchTurn(b *testing.B, tp trace.TracerProvider) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	tracker := genai.New(genai.WithMeterProvider(mp), genai.WithTracerProvider(tp))
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	turn := []keyspace.Content{
		keyspace.Message{Role: "user", Text: "step"},
		keyspace.ToolCall{CallID: "c", Name: "lookup", Arguments: "{}"},
		keyspace.ToolResult{CallID: "c", Output: "found"},
		keyspace.Message{Role: "assistant", Text: "done"},
		keyspace.Usage{InputTokens: 120, OutputTokens: 40, CacheReadInputTokens: 80, ReasoningOutputTokens: 10, Provider: "openai",
			RequestModel: "gpt-4o", ResponseModel: "gpt-4o-2024-08-06", StartedAt: at},
	}
	events := make([]keyspace.ActivityEvent, len(turn))
	for i, c := range turn {
		events[i] = keyspace.ActivityEvent{WorkflowID: wf, RunID: run, Attempt: 1, AgentID: "a", EmittedAt: at.Add(time.Second), Content: c}
	}
	ctx := context.Background()
	var seq uint64
	b.ReportAllocs()
	for b.Loop() {
		tracker.Observe(ctx, seq, events)
		seq += uint64(len(events))
	}
}

// BenchmarkObserveTurn: metrics only (a no-op tracer).
func BenchmarkObserveTurn(b *testing.B) { benchTurn(b, noop.NewTracerProvider()) }

// BenchmarkObserveTurnSpans: metrics and sampled spans (an SDK
// tracer provider without exporter): an inference and an execute_tool
// span per turn.
func BenchmarkObserveTurnSpans(b *testing.B) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	benchTurn(b, tp)
}
