// Command quickstart is the smallest useful aionotel program: it wraps the
// in-memory event store with otelstore, records a workflow that runs one
// activity, and prints the metrics that produced with the stdout exporter.
package main

import (
	"context"
	"fmt"
	"io"
	"os"

	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
)

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(w io.Writer) error {
	ctx := context.Background()
	exporter, err := stdoutmetric.New(stdoutmetric.WithWriter(w), stdoutmetric.WithPrettyPrint())
	if err != nil {
		return err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exporter)))

	// Wrap the store once; use the wrapper wherever the store was used.
	store, err := otelstore.New(eventstore.NewMemory(), otelstore.WithMeterProvider(mp))
	if err != nil {
		return err
	}

	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	env := eventstore.Envelope{RunID: run}
	history := []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: env, WorkflowType: "greeting"},
		eventstore.ActivityScheduled{Envelope: env, ActivityID: 0, ActivityType: "send_email"},
		eventstore.ActivityCompleted{Envelope: env, ActivityID: 0, Attempt: 1},
		eventstore.WorkflowCompleted{Envelope: env},
	}
	for seq, ev := range history { // one append per step, at the expected head
		if err := store.Append(ctx, eventstore.RecorderToken(), wf, []eventstore.Event{ev}, uint64(seq)); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "recorded %d events of workflow %s\n", len(history), wf)

	// Shutdown flushes: the exporter prints every metric once.
	return mp.Shutdown(ctx)
}
