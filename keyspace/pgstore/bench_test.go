package pgstore_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// BenchmarkAppendEvents appends batches of 1, 16 and 64 events to one stream
// and reports the cost per event. Each call is one statement and one commit,
// which waits for the WAL flush (the server's defaults: fsync on,
// synchronous_commit on), so the per-event cost must fall as the batch
// grows.
func BenchmarkAppendEvents(b *testing.B) {
	for _, size := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx := context.Background()
			s, _, _ := newStore(b)
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

// BenchmarkReadFromTail reads the last 10 records of streams of 1,000 and
// 100,000 events, both in one table filled before either is measured: one
// index descent and ten entries either way.
func BenchmarkReadFromTail(b *testing.B) {
	s, pool, schema := newStore(b)
	lens := []int{1_000, 100_000}
	keys := make([]keyspace.StreamKey, len(lens))
	for i, n := range lens {
		keys[i] = newKey(0, 0)
		fillSQL(b, pool, schema, keys[i], n)
	}
	for i, n := range lens {
		b.Run(fmt.Sprintf("len=%d", n), func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				recs, err := s.ReadFrom(ctx, keys[i], uint64(n-10), 10)
				if err != nil || len(recs) != 10 {
					b.Fatalf("ReadFrom = %d records, %v", len(recs), err)
				}
			}
		})
	}
}

// BenchmarkListStreams lists a run of 10 streams of 1 and one of 10 streams
// of 10,000 records, both in one table filled before either is measured:
// the loose index scan's cost follows the streams, not their lengths.
func BenchmarkListStreams(b *testing.B) {
	s, pool, schema := newStore(b)
	lens := []int{1, 10_000}
	runs := make([]keyspace.StreamKey, len(lens))
	for i, n := range lens {
		runs[i] = newKey(0, 0)
		for a := range 10 {
			fillSQL(b, pool, schema, keyspace.NewStreamKey(runs[i].WorkflowID, runs[i].RunID, eventstore.ActivityID(a), 0), n)
		}
	}
	for i, n := range lens {
		b.Run(fmt.Sprintf("streams=10/len=%d", n), func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				list, err := s.ListStreams(ctx, runs[i].WorkflowID, runs[i].RunID)
				if err != nil || len(list) != 10 {
					b.Fatalf("ListStreams = %d streams, %v", len(list), err)
				}
			}
		})
	}
}
