package pgstore_test

import (
	"fmt"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
)

// BenchmarkAppendEvents appends batches of 1, 16 and 64 events to one stream
// and reports the cost per event. Each call is one statement and one commit,
// which waits for the WAL flush (the server's defaults: fsync on,
// synchronous_commit on), so the per-event cost must fall as the batch
// grows.
func BenchmarkAppendEvents(b *testing.B) {
	keyspacetest.MeasureAppendEvents(b, func(b *testing.B) keyspace.Store {
		s, _, _ := newStore(b)
		return s
	})
}

// BenchmarkReadFromTail reads the last 10 records of streams of 1,000 and
// 100,000 events, both in one table filled before either is measured: one
// index descent and ten entries either way.
func BenchmarkReadFromTail(b *testing.B) {
	s, pool, schema := newStore(b)
	lens := []int{1_000, 100_000}
	keys := make([]keyspace.StreamKey, len(lens))
	for i, n := range lens {
		keys[i] = keyspacetest.NewKey(0, 0)
		fillSQL(b, pool, schema, keys[i], n)
	}
	for i, n := range lens {
		b.Run(fmt.Sprintf("len=%d", n), func(b *testing.B) {
			keyspacetest.MeasureReadFromTail(b, s, keys[i], uint64(n))
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
		runs[i] = keyspacetest.NewKey(0, 0)
		for a := range 10 {
			fillSQL(b, pool, schema, keyspace.NewStreamKey(runs[i].WorkflowID, runs[i].RunID, eventstore.ActivityID(a), 0), n)
		}
	}
	for i, n := range lens {
		b.Run(fmt.Sprintf("streams=10/len=%d", n), func(b *testing.B) {
			keyspacetest.MeasureListStreams(b, s, runs[i].WorkflowID, runs[i].RunID, 10)
		})
	}
}
