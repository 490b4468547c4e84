package keyspacetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// MeasureAppendEvents runs one sub-benchmark per batch size, 1, 16 and 64
// (named batch=N), each appending batches of that many message events to
// one stream of a fresh store from open, and reports ns/event besides
// ns/op: the cost a commit spreads over its batch.
func MeasureAppendEvents(b *testing.B, open func(b *testing.B) keyspace.Store) {
	for _, size := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			ctx := context.Background()
			s := open(b)
			key := NewKey(0, 0)
			batch := Messages(key, 0, size)
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

// Fill appends n message events (worker seqs 0 to n-1) to key, which must
// be unwritten, in batches of 1,000, and stops the test if an append fails.
func Fill(t testing.TB, s keyspace.Store, key keyspace.StreamKey, n int) {
	t.Helper()
	ctx := context.Background()
	for head := 0; head < n; {
		size := min(1000, n-head)
		h, err := s.AppendEvents(ctx, uint64(head), Messages(key, uint64(head), size))
		if err != nil {
			t.Fatal(err)
		}
		head = int(h)
	}
}

// MeasureReadFromTail measures ReadFrom of the last 10 records of key, whose
// head is head, and stops the benchmark if a read returns anything else.
func MeasureReadFromTail(b *testing.B, s keyspace.Store, key keyspace.StreamKey, head uint64) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		recs, err := s.ReadFrom(ctx, key, head-10, 10)
		if err != nil || len(recs) != 10 {
			b.Fatalf("ReadFrom = %d records, %v", len(recs), err)
		}
	}
}

// MeasureListStreams measures ListStreams of one run, which holds streams
// streams, and stops the benchmark if a listing has another number.
func MeasureListStreams(b *testing.B, s keyspace.Store, workflowID eventstore.WorkflowID, runID eventstore.RunID, streams int) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		list, err := s.ListStreams(ctx, workflowID, runID)
		if err != nil || len(list) != streams {
			b.Fatalf("ListStreams = %d streams, %v", len(list), err)
		}
	}
}
