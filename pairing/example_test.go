package pairing_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/pairing"
)

// A tracker pairs each dispatch with its first terminal. Here one activity
// completes after a retry, a duplicate terminal is ignored, and the run's
// other activity is settled as abandoned when the run ends.
func Example() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())

	tr, err := pairing.New(pairing.WithMeterProvider(mp))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	charge := pairing.Key{Namespace: "shop", WorkflowID: wf, RunID: run, ActivityID: 0}
	email := pairing.Key{Namespace: "shop", WorkflowID: wf, RunID: run, ActivityID: 1}
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	tr.Dispatched(ctx, charge, "charge", start)
	tr.Dispatched(ctx, email, "email", start)
	tr.Retried(ctx, charge, start.Add(time.Second))
	fmt.Println("in flight:", tr.InFlight())

	fmt.Println("first terminal pairs:", tr.Finished(ctx, charge, pairing.OutcomeSucceeded, start.Add(1500*time.Millisecond)))
	fmt.Println("duplicate terminal pairs:", tr.Finished(ctx, charge, pairing.OutcomeSucceeded, start.Add(2*time.Second)))
	fmt.Println("abandoned:", tr.AbandonRun(ctx, "shop", wf, run, start.Add(3*time.Second)))
	fmt.Println("in flight:", tr.InFlight())

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(ctx, &rm); err != nil {
		fmt.Println(err)
		return
	}
	var lines []string // data points come in no set order
	for _, m := range rm.ScopeMetrics[0].Metrics {
		if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
			for _, dp := range h.DataPoints {
				typ, _ := dp.Attributes.Value("aion.activity.type")
				outcome, _ := dp.Attributes.Value("aion.activity.outcome")
				lines = append(lines, fmt.Sprintf("%s %s/%s: %gs", m.Name, typ.AsString(), outcome.AsString(), dp.Sum))
			}
		}
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// in flight: 2
	// first terminal pairs: true
	// duplicate terminal pairs: false
	// abandoned: 1
	// in flight: 0
	// aion.activity.duration charge/succeeded: 1.5s
	// aion.activity.duration email/abandoned: 3s
}

// The timeline: a run and its activity become spans whose times are those
// of the history, not of the clock, one trace per run.
func Example_timeline() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	defer tp.Shutdown(context.Background())

	tr, err := pairing.New(pairing.WithTracerProvider(tp))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	charge := pairing.Key{Namespace: "shop", WorkflowID: wf, RunID: run, ActivityID: 0}
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

	tr.RunStarted(ctx, "shop", wf, run, "checkout", start)
	tr.Dispatched(ctx, charge, "charge", start.Add(time.Second))
	tr.Retried(ctx, charge, start.Add(time.Minute))
	tr.Finished(ctx, charge, pairing.OutcomeSucceeded, start.Add(40*time.Minute))
	tr.RunClosed(ctx, "shop", wf, run, eventstore.StatusCompleted, start.Add(time.Hour))

	ended := spans.Ended()
	runSpan := ended[len(ended)-1]
	for _, s := range ended {
		fmt.Printf("%s: +%v for %v, events %d, child of the run span: %v\n", s.Name(),
			s.StartTime().Sub(start), s.EndTime().Sub(s.StartTime()), len(s.Events()),
			s.Parent().SpanID() == runSpan.SpanContext().SpanID())
	}
	// Output:
	// activity charge: +1s for 39m59s, events 1, child of the run span: true
	// workflow checkout: +0s for 1h0m0s, events 0, child of the run span: false
}
