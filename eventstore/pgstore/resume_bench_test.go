package pgstore_test

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/pairing"
)

// resumeOpen is the number of open workflows BenchmarkResume resumes: small
// by default, so that CI runs it (-benchtime 1x); by hand at the issue's
// size with -resume-open 100000 (seeding takes a minute or two).
var resumeOpen = flag.Int("resume-open", 2000, "open workflows BenchmarkResume resumes")

// resumeRounds runs each of BenchmarkResume's cases that many times over
// the one seeded store (the second named "...#01"): at 100,000, seeding
// takes minutes, which -count would pay again per round.
var resumeRounds = flag.Int("resume-rounds", 1, "rounds of BenchmarkResume's cases over one seeded store")

// singleReads is a store without ReadHistories: a resume from it reads
// one history per workflow, as before the capability.
type singleReads struct{ eventstore.Store }

// BenchmarkResume: a restarted tracker resumes -resume-open open workflows
// (each a run with one activity settled and one in flight) from PostgreSQL
// on loopback: reads=pages through ReadHistories (one statement per 1,000
// workflows), reads=single one ReadHistory per workflow, each with the
// timeline off and on (sampled, the ID generator installed, no exporter).
// ns/op is one whole resume; heap-MiB the heap the tracker holds
// afterwards; client-cpu-ms the CPU time this process (not the database)
// spent on it, steadier than ns/op on a shared machine; peak-rss-MiB the
// largest resident set of the process so far (seeding included: run one
// case alone, -bench with its name, for its own peak).
func BenchmarkResume(b *testing.B) {
	s, _, _ := newStore(b)
	seedOpen(b, s, *resumeOpen)
	for range max(*resumeRounds, 1) {
		benchmarkResume(b, s)
	}
}

func benchmarkResume(b *testing.B, s eventstore.Store) {
	for _, reads := range []string{"pages", "single"} {
		var store eventstore.Store = s
		if reads == "single" {
			store = singleReads{s}
		}
		for _, timeline := range []bool{false, true} {
			b.Run(fmt.Sprintf("open=%d/reads=%s/timeline=%v", *resumeOpen, reads, timeline), func(b *testing.B) {
				var heap uint64
				var cpu int64
				for b.Loop() {
					b.StopTimer()
					opts := []pairing.Option{pairing.WithTimelineSpans(timeline)}
					if timeline {
						// As the docs ask: the ID generator, so that no span is
						// held for a run open or an activity in flight.
						opts = append(opts, pairing.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()),
							sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)))))
					}
					tr, err := pairing.New(opts...)
					if err != nil {
						b.Fatal(err)
					}
					runtime.GC()
					var before, after runtime.MemStats
					runtime.ReadMemStats(&before)
					b.StartTimer()
					cpu0 := processCPU()
					report, err := tr.Resume(context.Background(), "bench", store)
					cpu += processCPU() - cpu0
					b.StopTimer()
					if err != nil || report.Workflows != *resumeOpen || report.Activities != *resumeOpen {
						b.Fatalf("Resume = %+v, %v", report, err)
					}
					runtime.GC()
					runtime.ReadMemStats(&after)
					heap = after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)
					runtime.KeepAlive(tr)
					b.StartTimer()
				}
				b.ReportMetric(float64(heap)/(1<<20), "heap-MiB")
				b.ReportMetric(float64(cpu)/1e6/float64(b.N), "client-cpu-ms")
				b.ReportMetric(float64(processPeakRSS())/(1<<20), "peak-rss-MiB")
			})
		}
	}
}

// seedOpen appends n open workflows, 16 appends at a time.
func seedOpen(b testing.TB, s eventstore.Store, n int) {
	b.Helper()
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	next := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range next {
				var wf eventstore.WorkflowID
				binary.BigEndian.PutUint64(wf[8:], uint64(i+1))
				wf[0] = 0xbe
				run := eventstore.NewRunID()
				at := func(d time.Duration) eventstore.Envelope {
					return eventstore.Envelope{RunID: run, RecordedAt: t0.Add(d)}
				}
				if err := s.Append(context.Background(), eventstore.RecorderToken(), wf, []eventstore.Event{
					eventstore.WorkflowStarted{Envelope: at(0), WorkflowType: "flow"},
					eventstore.ActivityScheduled{Envelope: at(time.Second), ActivityID: 0, ActivityType: "charge"},
					eventstore.ActivityCompleted{Envelope: at(2 * time.Second), ActivityID: 0},
					eventstore.ActivityScheduled{Envelope: at(3 * time.Second), ActivityID: 1, ActivityType: "ship"},
				}, 0); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(err)
	default:
	}
}
