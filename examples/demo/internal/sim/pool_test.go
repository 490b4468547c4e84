package sim

import (
	"context"
	"sort"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace/noop"
)

// At the default rate, the default worker pool is small enough that work
// waits for a worker now and then, and large enough that the wait stays
// short: most rows are claimed at once, some wait tens to hundreds of
// milliseconds, none for seconds, and the oldest waiting age is above 0 at
// some collections.
func TestDefaultPoolMakesWorkWaitSometimes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		srv, err := New(Config{MeterProvider: mp, TracerProvider: noop.NewTracerProvider(), Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		metric := func(name string) (metricdata.Aggregation, bool) {
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Error(err)
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Name == name {
						return m.Data, true
					}
				}
			}
			return nil, false
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		// Collections that saw an activity waiting, every 25 ms: sampled
		// every 100 ms, a run whose work seldom waited (24 waits over 5 ms
		// of 2,187) saw none.
		sampled := make(chan int)
		go func() {
			n := 0
			for ctx.Err() == nil {
				time.Sleep(25 * time.Millisecond)
				if g, ok := metric("aion.activity.oldest_waiting_age"); ok {
					for _, dp := range g.(metricdata.Gauge[float64]).DataPoints {
						if dp.Value > 0 {
							n++
							break
						}
					}
				}
			}
			sampled <- n
		}()
		srv.Run(ctx)
		waiting := <-sampled

		h, ok := metric("aion.activity.wait.duration")
		if !ok {
			t.Fatal("no aion.activity.wait.duration")
		}
		var bounds []float64
		var counts []uint64
		var total uint64
		for _, dp := range h.(metricdata.Histogram[float64]).DataPoints { // one per activity type
			bounds, total = dp.Bounds, total+dp.Count
			if counts == nil {
				counts = make([]uint64, len(dp.BucketCounts))
			}
			for i, c := range dp.BucketCounts {
				counts[i] += c
			}
		}
		above := func(s float64) uint64 { // samples above s, a bound
			var n uint64
			for i := sort.SearchFloat64s(bounds, s) + 1; i < len(counts); i++ {
				n += counts[i]
			}
			return n
		}
		t.Logf("%d waits: %d over 5ms, %d over 25ms, %d over 250ms; %d collections saw work waiting; buckets %v",
			total, above(0.005), above(0.025), above(0.25), waiting, counts)
		switch {
		case total < 1000:
			t.Errorf("%d waits in 30s at the default rate, want thousands", total)
		case above(0.005) < total/100 || above(0.025) == 0:
			// Runs vary with the goroutines' interleaving: from 4 % to 26 %
			// of the waits over 5 ms, and from 1 % to 19 % over 25 ms.
			t.Errorf("%d of %d waits over 5ms, %d over 25ms: the default pool is too large for work to wait", above(0.005), total, above(0.025))
		case above(0.005) > total/2:
			t.Errorf("%d of %d waits over 5ms: the default pool is too small, work nearly always waits", above(0.005), total)
		case above(2.5) > 0:
			t.Errorf("%d waits over 2.5s: the queue does not drain", above(2.5))
		case waiting == 0:
			t.Error("no collection saw an activity waiting")
		}
	})
}
