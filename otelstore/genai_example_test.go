package otelstore_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
)

// The token usage of a committed transcript, by token type, with the
// decorator's default options.
func ExampleNewKeyspace_tokenUsage() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ks, err := otelstore.NewKeyspace(keyspace.NewMemory(), otelstore.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	ev := keyspace.ActivityEvent{WorkflowID: wf, RunID: run, AgentID: "agent",
		Content: keyspace.Usage{InputTokens: 812, OutputTokens: 95, Provider: "openai", RequestModel: "gpt-4o"}}
	if _, err := ks.AppendEvents(context.Background(), 0, []keyspace.ActivityEvent{ev}); err != nil {
		panic(err)
	}

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
