package pgstore_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
)

// The decorator's overhead on real store calls: PostgreSQL on loopback. Each
// benchmark runs the bare store and the decorated one side by side:
//
//	bare:    the *pgstore.Store itself
//	metrics: otelstore.New with an SDK MeterProvider on a ManualReader and a
//	         span filter that returns false (no span, the duration
//	         histogram and the lifecycle metrics only)
//	spans:   the same meter, and an SDK TracerProvider sampling every span
//	         (AlwaysSample, no exporter: each span is built and ended, then
//	         dropped)
//
// Besides ns/op, each reports client-cpu-ns/op: the CPU time of the client
// process per operation (the decorator runs there; the database server's
// time is not in it). On a shared machine, and with a commit waiting for
// the disk, wall-clock ns/op varies by tens of percent between runs, far
// more than the decorator costs; the client's CPU time shows that cost.
//
// Run them interleaved, so that a drift of the shared machine or of the
// database hits every variant alike, and compare with benchstat:
//
//	for i in $(seq 10); do go test -run '^$' -bench . -benchmem -count 1; done > pg.txt
//	benchstat -col /variant pg.txt

// variants returns the store under each name: bare, metrics, spans.
func variants(b *testing.B, s eventstore.Store) map[string]eventstore.Store {
	b.Helper()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	b.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	noSpans := otelstore.WithSpanFilter(func(context.Context, otelstore.Operation) bool { return false })
	metrics, err := otelstore.New(s, otelstore.WithMeterProvider(mp), otelstore.WithTracerProvider(tp), noSpans)
	if err != nil {
		b.Fatal(err)
	}
	spans, err := otelstore.New(s, otelstore.WithMeterProvider(mp), otelstore.WithTracerProvider(tp))
	if err != nil {
		b.Fatal(err)
	}
	return map[string]eventstore.Store{"bare": s, "metrics": metrics, "spans": spans}
}

var variantOrder = []string{"bare", "metrics", "spans"}

// timed resets the timer, runs the loop and reports client-cpu-ns/op.
func timed(b *testing.B, loop func()) {
	b.ReportAllocs()
	b.ResetTimer()
	start := processCPU()
	loop()
	if end := processCPU(); start >= 0 && end >= 0 && b.N > 0 {
		b.ReportMetric(float64(end-start)/float64(b.N), "client-cpu-ns/op")
	}
}

// BenchmarkAppend appends one activity's dispatch and completion (two
// events, one transaction) per operation, to one workflow: the decorator
// observes both (its pairing tracker pairs them).
func BenchmarkAppend(b *testing.B) {
	s, _, _ := newStore(b)
	for _, name := range variantOrder {
		b.Run("variant="+name, func(b *testing.B) {
			store := variants(b, s)[name]
			ctx := context.Background()
			wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
			if err := store.Append(ctx, token, wf, []eventstore.Event{started(wf, run)}, 0); err != nil {
				b.Fatal(err)
			}
			env := eventstore.Envelope{RunID: run}
			head := uint64(1)
			timed(b, func() {
				for i := 0; i < b.N; i++ {
					id := eventstore.ActivityID(i)
					err := store.Append(ctx, token, wf, []eventstore.Event{
						eventstore.ActivityScheduled{Envelope: env, ActivityID: id, ActivityType: "charge"},
						eventstore.ActivityCompleted{Envelope: env, ActivityID: id, Attempt: 1},
					}, head)
					if err != nil {
						b.Fatal(err)
					}
					head += 2
				}
			})
		})
	}
}

// BenchmarkReadHistory reads a ten-event history.
func BenchmarkReadHistory(b *testing.B) {
	s, _, _ := newStore(b)
	ctx := context.Background()
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	evs := []eventstore.Event{started(wf, run)}
	for i := range 9 {
		evs = append(evs, eventstore.ActivityScheduled{Envelope: eventstore.Envelope{RunID: run}, ActivityID: eventstore.ActivityID(i),
			ActivityType: "charge", Input: eventstore.Payload{ContentType: "application/json", Data: []byte(`{"amount":42}`)}})
	}
	if err := s.Append(ctx, token, wf, evs, 0); err != nil {
		b.Fatal(err)
	}
	for _, name := range variantOrder {
		b.Run("variant="+name, func(b *testing.B) {
			store := variants(b, s)[name]
			timed(b, func() {
				for i := 0; i < b.N; i++ {
					if h, err := store.ReadHistory(ctx, wf); err != nil || len(h) != 10 {
						b.Fatal(len(h), err)
					}
				}
			})
		})
	}
}

// BenchmarkClaimOutboxRows claims one pending row per operation, from an
// outbox staged beforehand with a row per operation.
func BenchmarkClaimOutboxRows(b *testing.B) {
	for _, name := range variantOrder {
		b.Run("variant="+name, func(b *testing.B) {
			s, _, _ := newStore(b)
			store := variants(b, s)[name]
			ctx := context.Background()
			for staged := 0; staged < b.N; {
				wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
				var rows []eventstore.OutboxRow
				for i := 0; i < 500 && staged < b.N; i++ {
					rows = append(rows, eventstore.OutboxRow{RunID: run, Ordinal: eventstore.ActivityID(i), ActivityType: "charge"})
					staged++
				}
				if err := s.AppendWithOutbox(ctx, token, wf, nil, 0, rows); err != nil {
					b.Fatal(err)
				}
			}
			claimer := store.(eventstore.Outbox)
			timed(b, func() {
				for i := 0; i < b.N; i++ {
					if rows, err := claimer.ClaimOutboxRows(ctx, 1); err != nil || len(rows) != 1 {
						b.Fatal(len(rows), err)
					}
				}
			})
		})
	}
}
