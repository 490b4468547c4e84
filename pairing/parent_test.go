package pairing

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/eventstore"
)

// parentRun is one run's history: a start, an activity that completes, one
// that is retried and then completes, one that the close abandons, and the
// close. Its facts are split into batches every way there is.
func parentRun() []eventstore.Event {
	var run eventstore.RunID
	run[0] = 7
	at := func(s int) eventstore.Envelope {
		return eventstore.Envelope{RunID: run, RecordedAt: time.Unix(1_700_000_000+int64(s), 0)}
	}
	return []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: at(0), WorkflowType: "flow"},
		eventstore.ActivityScheduled{Envelope: at(1), ActivityID: 0, ActivityType: "charge"},
		eventstore.ActivityScheduled{Envelope: at(2), ActivityID: 1, ActivityType: "ship"},
		eventstore.ActivityCompleted{Envelope: at(3), ActivityID: 0},
		eventstore.ActivityFailed{Envelope: at(4), ActivityID: 1, Error: eventstore.ActivityError{Kind: eventstore.Retryable}},
		eventstore.ActivityScheduled{Envelope: at(5), ActivityID: 2, ActivityType: "llm"},
		eventstore.ActivityCompleted{Envelope: at(6), ActivityID: 1},
		eventstore.WorkflowCompleted{Envelope: at(7)},
	}
}

// The parent rule: an activity span is a child of its run span whenever
// this tracker holds that span, however the run's facts are batched: over
// every way of cutting the history into consecutive batches (2^7 = 128 for
// 8 events), observed in history order, with and without the ID generator.
// Without it the run span's ID is random, so a parent that is the run's
// never-exported anchor instead shows here. One Append holding the whole
// run was the regression: the activity spans were made before the run span
// that the same call made whole.
func TestActivityParentIsRunSpanEveryBatching(t *testing.T) {
	events := parentRun()
	cuts := len(events) - 1
	for _, derived := range []bool{false, true} {
		for mask := range 1 << cuts {
			t.Run(fmt.Sprintf("derived=%v/cuts=%0*b", derived, cuts, mask), func(t *testing.T) {
				rec := tracetest.NewSpanRecorder()
				opts := []sdktrace.TracerProviderOption{sdktrace.WithSpanProcessor(rec)}
				if derived {
					opts = append(opts, sdktrace.WithIDGenerator(NewIDGenerator(nil)))
				}
				tp := sdktrace.NewTracerProvider(opts...)
				mp := sdkmetric.NewMeterProvider()
				defer func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) }()
				tr, err := New(WithTracerProvider(tp), WithMeterProvider(mp))
				if err != nil {
					t.Fatal(err)
				}
				var wf eventstore.WorkflowID
				wf[0] = 9
				lo := 0
				for i := range events {
					if i == cuts || mask&(1<<i) != 0 {
						tr.Observe(bg, "default", wf, uint64(lo)+1, events[lo:i+1])
						lo = i + 1
					}
				}
				checkParents(t, rec.Ended(), 3)
			})
		}
	}
}

// checkParents checks that the ended spans are one run span and its
// activities activity spans, each a child of the run span.
func checkParents(t *testing.T, ended []sdktrace.ReadOnlySpan, activities int) {
	t.Helper()
	var runs, acts []sdktrace.ReadOnlySpan
	for _, s := range ended {
		switch s.Name() {
		case "workflow flow":
			runs = append(runs, s)
		default:
			acts = append(acts, s)
		}
	}
	if len(runs) != 1 || len(acts) != activities {
		t.Fatalf("%d run spans and %d activity spans, want 1 and %d", len(runs), len(acts), activities)
	}
	run := runs[0].SpanContext()
	for _, a := range acts {
		if p := a.Parent(); p.TraceID() != run.TraceID() || p.SpanID() != run.SpanID() {
			t.Errorf("%s: parent %v/%v, want the run span %v/%v", a.Name(), p.TraceID(), p.SpanID(), run.TraceID(), run.SpanID())
		}
	}
}
