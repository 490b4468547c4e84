package boltstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/boltstore"
)

// BenchmarkAppendEvents appends batches of 1, 16 and 64 events to one stream
// with fsync on (the default: each AppendEvents is one fsynced bbolt commit)
// and reports the cost per event. A commit is paid per call, not per event,
// so the per-event cost must fall as the batch grows: the write
// amplification a one-event-per-commit writer would pay.
func BenchmarkAppendEvents(b *testing.B) {
	for _, size := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx := context.Background()
			s, _ := openStore(b)
			key := newKey(0, 0)
			batch := messages(key, 0, size)
			var head uint64
			b.ReportAllocs()
			for b.Loop() {
				h, err := s.AppendEvents(ctx, head, batch)
				if err != nil {
					b.Fatal(err)
				}
				head = h
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(head), "ns/event")
		})
	}
}

// fill appends n events to key in batches of 1,000.
func fill(b *testing.B, s keyspace.Store, key keyspace.StreamKey, n int) {
	b.Helper()
	ctx := context.Background()
	for head := 0; head < n; {
		size := min(1000, n-head)
		h, err := s.AppendEvents(ctx, uint64(head), messages(key, uint64(head), size))
		if err != nil {
			b.Fatal(err)
		}
		head = int(h)
	}
}

// BenchmarkReadFromTail reads the last 10 records of streams of 1,000 and
// 100,000 events: one seek and ten steps either way, so the two must cost
// about the same.
func BenchmarkReadFromTail(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("len=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s, _ := openStore(b, boltstore.WithNoSync())
			key := newKey(0, 0)
			fill(b, s, key, n)
			b.ReportAllocs()
			for b.Loop() {
				recs, err := s.ReadFrom(ctx, key, uint64(n-10), 10)
				if err != nil || len(recs) != 10 {
					b.Fatalf("ReadFrom = %d records, %v", len(recs), err)
				}
			}
		})
	}
}

// BenchmarkListStreams lists a run of 10 streams of 1 and of 10,000 records,
// in a file of 100,010 records either way (the short-stream run has a
// neighbouring run holding the rest): the walk jumps from stream to stream,
// so the streams' length does not matter, only the run's stream count and
// the B+tree's depth.
func BenchmarkListStreams(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		b.Run(fmt.Sprintf("streams=10/len=%d", n), func(b *testing.B) {
			ctx := context.Background()
			s, _ := openStore(b, boltstore.WithNoSync())
			run := newKey(0, 0)
			for a := range 10 {
				fill(b, s, keyspace.NewStreamKey(run.WorkflowID, run.RunID, eventstore.ActivityID(a), 0), n)
			}
			if rest := 100_010 - 10*n; rest > 0 {
				fill(b, s, newKey(0, 0), rest)
			}
			b.ReportAllocs()
			for b.Loop() {
				list, err := s.ListStreams(ctx, run.WorkflowID, run.RunID)
				if err != nil || len(list) != 10 {
					b.Fatalf("ListStreams = %d streams, %v", len(list), err)
				}
			}
		})
	}
}
