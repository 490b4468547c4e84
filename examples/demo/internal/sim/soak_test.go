package sim

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/metrics"
	"slices"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace/noop"
)

// soak is how long TestSoakHeapFlat runs the server: 0 skips it. CI runs
// it for six minutes (.ci/run: go test -run TestSoakHeapFlat
// ./examples/demo/internal/sim -soak 6m), past the five or so the demo's
// bounded caches take to fill at the default rate on a loaded machine.
var soak = flag.Duration("soak", 0, "run TestSoakHeapFlat for this long (0: skip it)")

// heapSample is the live heap (bytes marked by the last GC, which the
// sampler forces) at a moment of the run.
type heapSample struct {
	at   time.Duration
	live uint64
}

// liveHeap forces a collection and returns the heap it found live: the
// level that a leak raises, without the garbage that comes and goes.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// heapRising judges the samples of a run after its warm-up: the median
// live heap of the last third against that of the first third. A median
// ignores the odd sample taken in a burst, and thirds compare levels, not
// a slope that noise can tilt: on a loaded machine the server falls behind
// and catches up, which moves single samples, not the level of a third of
// the run. It reports whether the level rose by more than a quarter plus
// 2 MiB (the pairing tracker's bounded caches and the runtime's own
// spans settle in that much), with the two levels.
func heapRising(samples []heapSample) (rising bool, first, last uint64) {
	third := len(samples) / 3
	if third == 0 {
		return false, 0, 0
	}
	median := func(s []heapSample) uint64 {
		v := make([]uint64, len(s))
		for i, x := range s {
			v[i] = x.live
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	first, last = median(samples[:third]), median(samples[len(samples)-third:])
	return float64(last) > 1.25*float64(first)+2<<20, first, last
}

func TestHeapRisingJudgesLevels(t *testing.T) {
	const mib = 1 << 20
	series := func(f func(i int) float64) []heapSample {
		s := make([]heapSample, 30)
		for i := range s {
			s[i] = heapSample{at: time.Duration(i) * 5 * time.Second, live: uint64(f(i) * mib)}
		}
		return s
	}
	testCases := []struct {
		name   string
		series []heapSample
		rising bool
	}{
		{"flat", series(func(int) float64 { return 12 }), false},
		{"flat with spikes", series(func(i int) float64 { return 12 + float64(i%4*i%3) }), false},
		{"flat with the last sample high", series(func(i int) float64 {
			if i == 29 {
				return 60
			}
			return 12
		}), false},
		// The demo before its pool was sized: 6 MiB a minute from 8 MiB.
		{"a leak of 6 MiB a minute", series(func(i int) float64 { return 8 + 0.5*float64(i) }), true},
		{"a step up in the last third", series(func(i int) float64 {
			if i >= 20 {
				return 30
			}
			return 12
		}), true},
		{"too few samples", series(func(int) float64 { return 12 })[:2], false},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if got, first, last := heapRising(tc.series); got != tc.rising {
				t.Errorf("heapRising = %v (first third %d MiB, last %d MiB), want %v", got, first/mib, last/mib, tc.rising)
			}
		})
	}
}

// TestSoakHeapFlat runs the server at its defaults for -soak and fails if
// its live heap keeps rising: closed workflows are pruned after the
// retention, rows of closed runs are never worked on, and the default pool
// keeps up, so after the warm-up (a retention's worth of closed workflows
// and the caches filling) the level stays where it is. It also fails if
// the server stops completing workflows, which is how a backlog shows
// before it shows in the heap. It is not a performance test: nothing is
// timed, and the thresholds are levels with room for a loaded machine.
func TestSoakHeapFlat(t *testing.T) {
	if *soak == 0 {
		t.Skip("run with -soak DURATION (CI: -soak 3m)")
	}
	if *soak < time.Minute {
		t.Fatalf("-soak %s: want at least a minute (the warm-up is a third of it, at least 20 s)", *soak)
	}
	// The demo's default: a Prometheus exporter's reader collected now and
	// then, no spans.
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	srv, err := New(Config{MeterProvider: mp, TracerProvider: noop.NewTracerProvider(), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), *soak)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); srv.Run(ctx) }()

	const every = 5 * time.Second
	// The warm-up: a retention's worth of closed workflows, the pairing
	// tracker's remembered runs (about 50 s) and most of the keyspace
	// decorator's ended attempts (4,096, some minutes) fill in.
	warmup := max(20*time.Second, *soak/3)
	start := time.Now()
	var samples []heapSample
	var completedAtWarmup, completedAtEnd int64
	tick := time.NewTicker(every)
	defer tick.Stop()
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
			continue
		case <-tick.C:
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(context.Background(), &rm); err != nil {
			t.Errorf("collect: %v", err)
		}
		at, live := time.Since(start), liveHeap()
		stats := srv.Stats()
		t.Logf("%6s  live heap %5.1f MiB  workflows %d started, %d completed, %d timed out  activities %d shed, %d stopped",
			at.Round(time.Second), float64(live)/(1<<20), stats["workflows.started"], stats["workflows.completed"],
			stats["workflows.timed_out"], stats["activities.shed"], stats["activities.stopped"])
		if at < warmup {
			completedAtWarmup = stats["workflows.completed"]
			continue
		}
		samples = append(samples, heapSample{at, live})
		completedAtEnd = stats["workflows.completed"]
	}
	<-done

	if rising, first, last := heapRising(samples); rising {
		t.Errorf("the live heap kept rising: median %.1f MiB over the first third of the run after the warm-up, %.1f MiB over the last",
			float64(first)/(1<<20), float64(last)/(1<<20))
	} else {
		t.Logf("live heap level: %.1f MiB over the first third after the warm-up, %.1f MiB over the last",
			float64(first)/(1<<20), float64(last)/(1<<20))
	}
	if completedAtEnd <= completedAtWarmup {
		t.Errorf("no workflow completed after the warm-up (%d completed by then, %d at the end)", completedAtWarmup, completedAtEnd)
	}
	if len(samples) < 6 {
		t.Errorf("only %d samples after the warm-up: %s", len(samples), fmt.Sprint(samples))
	}
}
