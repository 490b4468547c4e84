package otelworkflows_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/core"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/instrumentation/github.com/cschleiden/go-workflows/otelworkflows"
)

// startTask completes the first workflow task of the instance (i, e) of
// type W through b: a WorkflowExecutionStarted at sequence 1, an
// ActivityScheduled of type A at 2.
func startTask(t *testing.T, b backend.Backend) {
	t.Helper()
	ev := history.NewPendingEvent(timeZero, history.EventType_WorkflowExecutionStarted, &history.ExecutionStartedAttributes{Name: "W"})
	ev.SequenceID = 1
	act := history.NewPendingEvent(timeZero, history.EventType_ActivityScheduled, &history.ActivityScheduledAttributes{Name: "A"}, history.ScheduleEventID(2))
	act.SequenceID = 2
	task := &backend.WorkflowTask{WorkflowInstance: core.NewWorkflowInstance("i", "e")}
	if err := b.CompleteWorkflowTask(context.Background(), task, core.WorkflowInstanceStateActive, []*history.Event{ev, act}, []*history.Event{act}, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// TestNilPointerOptionsAndBackend: a nil pointer in a provider option is
// "given nil" (the global provider), and a nil pointer as the backend is a
// nil backend (ErrNilBackend): neither panics, in New or at a call.
func TestNilPointerOptionsAndBackend(t *testing.T) {
	b := otelworkflows.New(&spy{},
		otelworkflows.WithMeterProvider((*sdkmetric.MeterProvider)(nil)),
		otelworkflows.WithTracerProvider((*sdktrace.TracerProvider)(nil)))
	startTask(t, b)

	var none *spy
	nb := otelworkflows.New(none)
	if _, err := nb.GetStats(context.Background()); !errors.Is(err, otelworkflows.ErrNilBackend) {
		t.Errorf("GetStats of a nil *spy backend: %v, want ErrNilBackend", err)
	}
	if err := nb.Close(); !errors.Is(err, otelworkflows.ErrNilBackend) {
		t.Errorf("Close of a nil *spy backend: %v, want ErrNilBackend", err)
	}
}
