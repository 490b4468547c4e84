package pairing

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
)

// BenchmarkCollectOldestWaitingAge: one collection of the tracker's
// metrics, both age gauges' callback included, with four activity types
// and ever more activities waiting for a worker (staged, unclaimed). Its
// cost follows the types, not the activities waiting.
func BenchmarkCollectOldestWaitingAge(b *testing.B) {
	for _, waiting := range []int{10, 1_000, 100_000} {
		b.Run(fmt.Sprintf("waiting=%d", waiting), func(b *testing.B) {
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			tr, err := New(WithMeterProvider(mp), WithTimelineSpans(false))
			if err != nil {
				b.Fatal(err)
			}
			types := []string{"charge", "ship", "email", "plan"}
			for i := range waiting {
				k := Key{Namespace: "bench", WorkflowID: wfID(byte(i)), RunID: runID(byte(i >> 8)), ActivityID: eventstore.ActivityID(i)}
				tr.Dispatched(context.Background(), k, types[i%len(types)], dispatchedAt.Add(time.Duration(i%977)*time.Second))
				tr.Staged(context.Background(), k.Namespace, k.WorkflowID, []eventstore.OutboxRow{row(k)})
			}
			var rm metricdata.ResourceMetrics
			b.ReportAllocs()
			for b.Loop() {
				if err := reader.Collect(context.Background(), &rm); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDispatchStageClaimFinish: BenchmarkDispatchFinish with an
// outbox: each activity's row staged after its dispatch and claimed
// (recording its wait) before its terminal, with lag activities in flight
// and lag/2 of them waiting.
func BenchmarkDispatchStageClaimFinish(b *testing.B) {
	ctx := context.Background()
	tr := benchTracker(b)
	wf := wfID(1)
	rows := make([]eventstore.OutboxRow, 1)
	step := func(i int) {
		dispatchFinish(ctx, tr, wf, i)
		rows[0] = row(benchKey(wf, i))
		tr.Staged(ctx, "bench", wf, rows)
		if i >= lag/2 {
			rows[0] = row(benchKey(wf, i-lag/2))
			if tr.Claimed(ctx, "bench", rows, finishedAt) != 1 {
				panic("a claim recorded no wait in the benchmark")
			}
		}
	}
	warmThenTime(b, step)
}
