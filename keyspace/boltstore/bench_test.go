package boltstore_test

import (
	"fmt"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/boltstore"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
)

// BenchmarkAppendEvents appends batches of 1, 16 and 64 events to one stream
// with fsync on (the default: each AppendEvents is one fsynced bbolt commit)
// and reports the cost per event. A commit is paid per call, not per event,
// so the per-event cost must fall as the batch grows: the write
// amplification a one-event-per-commit writer would pay.
func BenchmarkAppendEvents(b *testing.B) {
	keyspacetest.MeasureAppendEvents(b, func(b *testing.B) keyspace.Store {
		s, _ := openStore(b)
		return s
	})
}

// BenchmarkReadFromTail reads the last 10 records of streams of 1,000 and
// 100,000 events: one seek and ten steps either way, so the two must cost
// about the same.
func BenchmarkReadFromTail(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("len=%d", n), func(b *testing.B) {
			s, _ := openStore(b, boltstore.WithNoSync())
			key := keyspacetest.NewKey(0, 0)
			keyspacetest.Fill(b, s, key, n)
			keyspacetest.MeasureReadFromTail(b, s, key, uint64(n))
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
			s, _ := openStore(b, boltstore.WithNoSync())
			run := keyspacetest.NewKey(0, 0)
			for a := range 10 {
				keyspacetest.Fill(b, s, keyspace.NewStreamKey(run.WorkflowID, run.RunID, eventstore.ActivityID(a), 0), n)
			}
			if rest := 100_010 - 10*n; rest > 0 {
				keyspacetest.Fill(b, s, keyspacetest.NewKey(0, 0), rest)
			}
			keyspacetest.MeasureListStreams(b, s, run.WorkflowID, run.RunID, 10)
		})
	}
}

// BenchmarkOpen opens and closes a file of 10,000 and 100,000 records.
// Open checks every page of the file before bbolt maps it, so its cost
// grows with the file; this is that cost.
func BenchmarkOpen(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("records=%d", n), func(b *testing.B) {
			s, path := openStore(b, boltstore.WithNoSync())
			keyspacetest.Fill(b, s, keyspacetest.NewKey(0, 0), n)
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				s, err := boltstore.Open(path, boltstore.WithNoSync())
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
