package keyspace_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
)

// fillStream appends n events to key in batches of up to 10,000.
func fillStream(b *testing.B, m *keyspace.Memory, key keyspace.StreamKey, n int) {
	b.Helper()
	ctx := context.Background()
	const batchSize = 10_000
	batch := make([]keyspace.ActivityEvent, 0, batchSize)
	var head uint64
	for head < uint64(n) {
		batch = batch[:0]
		for i := head; i < uint64(n) && len(batch) < batchSize; i++ {
			batch = append(batch, eventIn(key, "agent", i))
		}
		h, err := m.AppendEvents(ctx, head, batch)
		if err != nil {
			b.Fatal(err)
		}
		head = h
	}
}

// BenchmarkReadFromTail reads the last 10 records of streams of growing
// length: the cost must follow what is returned, not the stream's length.
func BenchmarkReadFromTail(b *testing.B) {
	for _, tc := range []struct {
		name string
		n    int
	}{{"len=1k", 1_000}, {"len=100k", 100_000}, {"len=1M", 1_000_000}} {
		b.Run(tc.name, func(b *testing.B) {
			m := keyspace.NewMemory()
			key := keyOf(0, 0)
			fillStream(b, m, key, tc.n)
			keyspacetest.MeasureReadFromTail(b, m, key, uint64(tc.n))
		})
	}
}

// BenchmarkListStreams lists a run of 10 streams in a keyspace holding 10 or
// 100,000 other runs: the cost must follow the run, not the keyspace.
func BenchmarkListStreams(b *testing.B) {
	for _, others := range []int{10, 100_000} {
		b.Run(fmt.Sprintf("others=%d", others), func(b *testing.B) {
			ctx := context.Background()
			m := keyspace.NewMemory()
			for i := range others {
				run := eventstore.RunID{0: byte(i >> 16), 1: byte(i >> 8), 2: byte(i), 15: 0xee}
				key := keyspace.NewStreamKey(testWorkflow, run, 0, 0)
				if _, err := m.AppendEvents(ctx, 0, []keyspace.ActivityEvent{eventIn(key, "agent", 1)}); err != nil {
					b.Fatal(err)
				}
			}
			for a := range eventstore.ActivityID(10) {
				if _, err := m.AppendEvents(ctx, 0, eventsIn(keyOf(a, 0), "agent", 1, 3)); err != nil {
					b.Fatal(err)
				}
			}
			keyspacetest.MeasureListStreams(b, m, testWorkflow, generation1, 10)
		})
	}
}

// BenchmarkAppendEvents appends batches of 1, 16 and 64 events to one stream.
// ns/event is the time per event. The store is replaced (untimed) once the
// stream reaches 65,536 events, so memory stays bounded and every batch size
// works on streams of the same lengths.
func BenchmarkAppendEvents(b *testing.B) {
	for _, size := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx := context.Background()
			key := keyOf(0, 0)
			batch := eventsIn(key, "agent", 1, uint64(size))
			m := keyspace.NewMemory()
			var head uint64
			calls := 0
			b.ReportAllocs()
			for b.Loop() {
				if head >= 1<<16 {
					b.StopTimer()
					m, head = keyspace.NewMemory(), 0
					b.StartTimer()
				}
				h, err := m.AppendEvents(ctx, head, batch)
				if err != nil {
					b.Fatal(err)
				}
				head = h
				calls++
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(calls*size), "ns/event")
		})
	}
}

// BenchmarkAppendEventsParallel appends batches of 16 from parallel goroutines,
// each to a stream of its own: the per-stream locking at work.
func BenchmarkAppendEventsParallel(b *testing.B) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	var next atomic.Uint64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		var head uint64
		key := keyOf(eventstore.ActivityID(next.Add(1)), 0)
		batch := eventsIn(key, "agent", 1, 16)
		for pb.Next() {
			if head >= 1<<16 { // a fresh stream keeps memory bounded
				key = keyOf(eventstore.ActivityID(next.Add(1)), 0)
				batch, head = eventsIn(key, "agent", 1, 16), 0
			}
			h, err := m.AppendEvents(ctx, head, batch)
			if err != nil {
				b.Error(err)
				return
			}
			head = h
		}
	})
}

// BenchmarkSequencerAppend appends batches of 16 new events spread over two
// streams through a Sequencer (grouping, deduplication and one AppendEvents
// per stream). The store is replaced (untimed) every 4,096 batches (65,536
// events).
func BenchmarkSequencerAppend(b *testing.B) {
	ctx := context.Background()
	keys := []keyspace.StreamKey{keyOf(0, 0), keyOf(1, 0)}
	batch := make([]keyspace.ActivityEvent, 16)
	for i := range batch {
		batch[i] = eventIn(keys[i%2], "agent", 0)
	}
	m := keyspace.NewMemory()
	seq := keyspace.NewSequencer(m)
	var workerSeq uint64
	calls := 0
	b.ReportAllocs()
	for b.Loop() {
		if calls%4096 == 4095 {
			b.StopTimer()
			m = keyspace.NewMemory()
			seq = keyspace.NewSequencer(m)
			b.StartTimer()
		}
		for i := range batch {
			workerSeq++
			batch[i].WorkerSeq = workerSeq
		}
		res, err := seq.Append(ctx, batch)
		if err != nil || len(res.Streams) != 2 || res.Streams[0].Written != 8 {
			b.Fatalf("Append = %+v, %v", res, err)
		}
		calls++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(calls*len(batch)), "ns/event")
}

// BenchmarkSequencerAppendContended appends batches of 4 events to one
// stream from parallel goroutines sharing a Sequencer (each goroutine its own
// agent): the Sequencer's per-stream lock under contention. Every 16,384
// batches a fresh store and Sequencer take over (timed: a Memory is cheap to
// make), so memory stays bounded.
func BenchmarkSequencerAppendContended(b *testing.B) {
	ctx := context.Background()
	key := keyOf(0, 0)
	var (
		seq   atomic.Pointer[keyspace.Sequencer]
		calls atomic.Int64
		agent atomic.Int64
	)
	seq.Store(keyspace.NewSequencer(keyspace.NewMemory()))
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		name := fmt.Sprintf("agent-%d", agent.Add(1))
		var workerSeq uint64
		for pb.Next() {
			if calls.Add(1)%(1<<14) == 0 {
				seq.Store(keyspace.NewSequencer(keyspace.NewMemory()))
			}
			batch := eventsIn(key, name, workerSeq+1, workerSeq+4)
			workerSeq += 4
			if _, err := seq.Load().Append(ctx, batch); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
