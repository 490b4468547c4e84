package genai_test

import (
	"context"
	"fmt"
	"time"

	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/genai"
	"github.com/aionotel/aionotel/keyspace"
)

// The token usage of an observed transcript, by token type, with the
// default options.
func ExampleTracker_Observe() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tracker := genai.New(genai.WithMeterProvider(mp), genai.WithNamespace("travel"))
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	ev := keyspace.ActivityEvent{WorkflowID: wf, RunID: run, AgentID: "agent",
		Content: keyspace.Usage{InputTokens: 812, OutputTokens: 95, Provider: "openai", RequestModel: "gpt-4o"}}
	// After the engine committed ev at position 0 of its stream:
	tracker.Observe(context.Background(), 0, []keyspace.ActivityEvent{ev})

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(context.Background(), &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "gen_ai.client.token.usage" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Histogram[int64]).DataPoints {
				typ, _ := dp.Attributes.Value("gen_ai.token.type")
				model, _ := dp.Attributes.Value("gen_ai.request.model")
				fmt.Printf("%s %s: %d\n", model.AsString(), typ.AsString(), dp.Sum)
			}
		}
	}
	// Unordered output:
	// gpt-4o input: 812
	// gpt-4o output: 95
}

// An agent attempt becomes an invoke_agent span with its model calls and
// tool executions as children, at the transcript's times; the attempt's
// "completed" status ends it.
func ExampleNew_agentSpans() {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tracker := genai.New(genai.WithTracerProvider(tp), genai.WithMeterProvider(metricnoop.NewMeterProvider()))
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	t0 := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	var events []keyspace.ActivityEvent
	add := func(seconds int, c keyspace.Content) {
		events = append(events, keyspace.ActivityEvent{WorkflowID: wf, RunID: run, ActivityID: 1, Attempt: 1,
			AgentID: "planner", WorkerSeq: uint64(len(events)), EmittedAt: t0.Add(time.Duration(seconds) * time.Second), Content: c})
	}
	add(0, keyspace.Message{Role: "user", Text: "book a table"})
	add(2, keyspace.Usage{InputTokens: 900, OutputTokens: 120, CacheReadInputTokens: 600, ReasoningOutputTokens: 80,
		Provider: "anthropic", RequestModel: "claude-sonnet-4", StartedAt: t0.Add(time.Second)})
	add(3, keyspace.ToolCall{CallID: "c1", Name: "reserve"})
	add(5, keyspace.ToolResult{CallID: "c1", Output: "no table", IsError: true})
	add(6, keyspace.Status{State: "completed"})
	tracker.Observe(context.Background(), 0, events)
	for _, s := range rec.Ended() {
		fmt.Printf("%-22s %s to %s, status %s\n", s.Name(), s.StartTime().Sub(t0), s.EndTime().Sub(t0), s.Status().Code)
	}
	// Output:
	// chat claude-sonnet-4   1s to 2s, status Unset
	// execute_tool reserve   3s to 5s, status Error
	// invoke_agent           0s to 6s, status Unset
}
