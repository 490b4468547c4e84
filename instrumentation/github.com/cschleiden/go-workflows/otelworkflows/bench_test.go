package otelworkflows

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/workflow"
	"github.com/google/uuid"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/pairing"
)

// BenchmarkExecutionKey is the per-call cost of the key mapping: one
// version-5 UUID from an instance and execution ID (UUID strings, as
// go-workflows' client makes them).
func BenchmarkExecutionKey(b *testing.B) {
	instance, execution := uuid.NewString(), uuid.NewString()
	b.ReportAllocs()
	for b.Loop() {
		_ = executionKey(instance, execution)
	}
}

// benchBackends are the three setups the hot-call benchmarks compare: the
// bare SQLite backend (in memory), decorated with metrics only (an SDK
// meter provider, no tracer provider that records), and decorated with
// every span sampled (SDK tracer provider, always on, no exporter).
func benchBackends() []struct {
	name string
	make func() backend.Backend
} {
	inner := func() backend.Backend {
		return sqlite.NewInMemoryBackend(sqlite.WithBackendOptions(backend.WithStickyTimeout(0), backend.WithLogger(slog.New(slog.DiscardHandler))))
	}
	return []struct {
		name string
		make func() backend.Backend
	}{
		{"bare", inner},
		{"metrics", func() backend.Backend {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			return New(inner(), WithMeterProvider(mp), WithTracerProvider(noop.NewTracerProvider()))
		}},
		{"spans", func() backend.Backend {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)))
			return New(inner(), WithMeterProvider(mp), WithTracerProvider(tp))
		}},
	}
}

var queues = []workflow.Queue{workflow.QueueDefault}

// cycle drives one workflow through the backend as a worker would: create,
// a workflow task that schedules an activity, the activity task, a
// workflow task that finishes the run. timed says which of the hot calls
// the benchmark's clock covers ("" for all).
func cycle(b *testing.B, ctx context.Context, be backend.Backend, timed Operation) {
	on := func(op Operation) {
		if timed != "" {
			if op == timed {
				b.StartTimer()
			} else {
				b.StopTimer()
			}
		}
	}
	on("")
	wi := core.NewWorkflowInstance(uuid.NewString(), uuid.NewString())
	now := time.Now()
	start := history.NewPendingEvent(now, history.EventType_WorkflowExecutionStarted, &history.ExecutionStartedAttributes{Name: "bench", Queue: workflow.QueueDefault})
	must(b, be.CreateWorkflowInstance(ctx, wi, start))
	task, err := be.GetWorkflowTask(ctx, queues)
	must(b, err)
	sched := history.NewPendingEvent(now, history.EventType_ActivityScheduled, &history.ActivityScheduledAttributes{Name: "act", Queue: workflow.QueueDefault}, history.ScheduleEventID(1))
	executed := []*history.Event{history.NewPendingEvent(now, history.EventType_WorkflowTaskStarted, &history.WorkflowTaskStartedAttributes{})}
	executed = append(executed, task.NewEvents...)
	executed = append(executed, sched)
	for i, e := range executed {
		e.SequenceID = int64(i + 1)
	}
	on(OpCompleteWorkflowTask)
	must(b, be.CompleteWorkflowTask(ctx, task, core.WorkflowInstanceStateActive, executed, []*history.Event{sched}, nil, nil))
	on(OpGetActivityTask)
	at, err := be.GetActivityTask(ctx, queues)
	must(b, err)
	on("")
	if at == nil {
		b.Fatal("no activity task")
	}
	done := history.NewPendingEvent(time.Now(), history.EventType_ActivityCompleted, &history.ActivityCompletedAttributes{}, history.ScheduleEventID(1))
	on(OpCompleteActivityTask)
	must(b, be.CompleteActivityTask(ctx, at, done))
	on("")
	task, err = be.GetWorkflowTask(ctx, queues)
	must(b, err)
	last := []*history.Event{history.NewPendingEvent(time.Now(), history.EventType_WorkflowTaskStarted, &history.WorkflowTaskStartedAttributes{})}
	last = append(last, task.NewEvents...)
	last = append(last, history.NewPendingEvent(time.Now(), history.EventType_WorkflowExecutionFinished, &history.ExecutionCompletedAttributes{}))
	for i, e := range last {
		e.SequenceID = int64(len(executed) + i + 1)
	}
	must(b, be.CompleteWorkflowTask(ctx, task, core.WorkflowInstanceStateFinished, last, nil, nil, nil))
	on("")
	if timed != "" {
		b.StartTimer()
	}
}

func must(b *testing.B, err error) {
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHotCalls compares the decorated and bare SQLite backend on the
// calls a worker makes for every activity: the whole cycle of one
// single-activity workflow (seven calls), and each hot call alone.
// Compare with benchstat: bare against metrics and spans.
func BenchmarkHotCalls(b *testing.B) {
	ctx := context.Background()
	for _, op := range []Operation{"", OpCompleteWorkflowTask, OpGetActivityTask, OpCompleteActivityTask} {
		name := string(op)
		if name == "" {
			name = "cycle"
		}
		for _, setup := range benchBackends() {
			b.Run(fmt.Sprintf("%s/%s", name, setup.name), func(b *testing.B) {
				be := setup.make()
				defer be.Close()
				b.ReportAllocs()
				start := processCPU()
				for b.Loop() {
					cycle(b, ctx, be, op)
				}
				// The whole cycle's CPU time (all threads: SQLite's, the
				// tracker's): on a shared machine it compares far more
				// steadily than wall time, which counts other processes.
				if end := processCPU(); op == "" && start >= 0 && end >= 0 && b.N > 0 {
					b.ReportMetric(float64(end-start)/float64(b.N), "cpu-ns/op")
				}
			})
		}
	}
}
