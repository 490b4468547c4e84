package otelstore_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
)

// BenchmarkKeyspaceAppendTurn appends an agent's turn (two messages, a tool
// call and its result, a usage) per iteration through NewKeyspace with its
// default options, on an SDK meter provider and a no-op tracer: the cost
// the GenAI metrics add to a committed batch.
func BenchmarkKeyspaceAppendTurn(b *testing.B) {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	ks, err := otelstore.NewKeyspace(keyspace.NewMemory(), otelstore.WithMeterProvider(mp),
		otelstore.WithTracerProvider(noop.NewTracerProvider()))
	if err != nil {
		b.Fatal(err)
	}
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	turn := []keyspace.Content{
		keyspace.Message{Role: "user", Text: "step"},
		keyspace.ToolCall{CallID: "c", Name: "lookup", Arguments: "{}"},
		keyspace.ToolResult{CallID: "c", Output: "found"},
		keyspace.Message{Role: "assistant", Text: "done"},
		keyspace.Usage{InputTokens: 120, OutputTokens: 40, Provider: "openai", RequestModel: "gpt-4o", ResponseModel: "gpt-4o-2024-08-06"},
	}
	events := make([]keyspace.ActivityEvent, len(turn))
	for i, c := range turn {
		events[i] = keyspace.ActivityEvent{WorkflowID: wf, RunID: run, Attempt: 1, AgentID: "a", Content: c}
	}
	ctx := context.Background()
	var seq uint64
	b.ReportAllocs()
	for b.Loop() {
		head, err := ks.AppendEvents(ctx, seq, events)
		if err != nil {
			b.Fatal(err)
		}
		seq = head
	}
}
