// Command quickstart wraps an event store with otelstore, records a workflow
// that runs one activity, and prints the metrics and spans as JSON.
package main

import (
	"context"

	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

func main() {
	ctx := context.Background()
	metrics, err := stdoutmetric.New() // in a server: your SDK's providers
	if err != nil {
		panic(err)
	}
	spans, err := stdouttrace.New()
	if err != nil {
		panic(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(metrics)))
	defer mp.Shutdown(ctx) // flushes: prints every metric once
	// The ID generator makes each run's trace one tree rooted at its run span.
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(spans), sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)))
	defer tp.Shutdown(ctx)

	// The one call: wrap the store, then use it wherever the store was used.
	store, err := otelstore.New(eventstore.NewMemory(), otelstore.WithMeterProvider(mp), otelstore.WithTracerProvider(tp))
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
