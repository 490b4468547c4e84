// Command quickstart wraps an event store with otelstore, records a workflow
// that runs one activity, and prints the metrics as JSON.
package main

import (
	"context"

	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
)

func main() {
	ctx := context.Background()
	exporter, err := stdoutmetric.New() // in a server: your SDK's providers, or the global ones
	if err != nil {
		panic(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exporter)))
	defer mp.Shutdown(ctx) // flushes: prints every metric once

	// The one call: wrap the store, then use it wherever the store was used.
	store, err := otelstore.New(eventstore.NewMemory(), otelstore.WithMeterProvider(mp))
	if err != nil {
		panic(err)
	}
	wf, run := eventstore.NewWorkflowID(), eventstore.Envelope{RunID: eventstore.NewRunID()}
	for seq, ev := range []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: run, WorkflowType: "greeting"},
		eventstore.ActivityScheduled{Envelope: run, ActivityID: 0, ActivityType: "send_email"},
		eventstore.ActivityCompleted{Envelope: run, ActivityID: 0, Attempt: 1},
		eventstore.WorkflowCompleted{Envelope: run},
	} {
		if err := store.Append(ctx, eventstore.RecorderToken(), wf, []eventstore.Event{ev}, uint64(seq)); err != nil {
			panic(err)
		}
	}
}
