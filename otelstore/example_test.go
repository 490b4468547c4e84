package otelstore_test

import (
	"context"
	"fmt"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
)

// Wrap the in-memory store, append a started workflow with one activity, and
// read the metrics back.
func Example() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(ctx)

	store, err := otelstore.New(eventstore.NewMemory(), otelstore.WithMeterProvider(mp), otelstore.WithNamespace("payments"))
	if err != nil {
		panic(err)
	}
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	envelope := eventstore.Envelope{RunID: run}
	err = store.Append(ctx, eventstore.RecorderToken(), wf, []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: envelope, WorkflowType: "checkout"},
		eventstore.ActivityScheduled{Envelope: envelope, ActivityID: 0, ActivityType: "charge"},
	}, 0)
	if err != nil {
		panic(err)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range sum.DataPoints {
					fmt.Println(m.Name, dp.Value)
				}
			}
		}
	}
	// Unordered output:
	// aion.workflows.started 1
	// aion.activities.dispatched 1
	// aion.inflight_activities 1
}
