package keyspacetest_test

import (
	"context"
	"flag"
	"slices"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
)

// fewIterations makes testing.Benchmark run its function a few times, not
// for a second, until the test ends.
func fewIterations(t *testing.T) {
	t.Helper()
	f := flag.Lookup("test.benchtime")
	old := f.Value.String()
	if err := f.Value.Set("3x"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(old) })
}

func TestFillWritesTheStream(t *testing.T) {
	m := keyspace.NewMemory()
	key := keyspacetest.NewKey(0, 0)
	keyspacetest.Fill(t, m, key, 2_500)
	recs, err := m.ReadFrom(t.Context(), key, 0, 0)
	if err != nil || len(recs) != 2_500 {
		t.Fatalf("after Fill(2500) the stream holds %d records (%v)", len(recs), err)
	}
	for i, r := range recs {
		if r.Event.WorkerSeq != uint64(i) {
			t.Fatalf("record %d has worker seq %d", i, r.Event.WorkerSeq)
		}
	}
	keyspacetest.ExpectFailure(t, func(t testing.TB) { keyspacetest.Fill(t, m, key, 10) }) // written already
}

// counting counts the events appended through it, and remembers the sizes
// of the batches.
type counting struct {
	keyspace.Store
	events int
	sizes  map[int]bool
}

func (c *counting) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	c.events += len(events)
	c.sizes[len(events)] = true
	return c.Store.AppendEvents(ctx, expectedSeq, events)
}

func TestMeasureAppendEvents(t *testing.T) {
	fewIterations(t)
	var stores []*counting
	var subs []*testing.B
	testing.Benchmark(func(b *testing.B) {
		keyspacetest.MeasureAppendEvents(b, func(b *testing.B) keyspace.Store {
			subs = append(subs, b)
			stores = append(stores, &counting{Store: keyspace.NewMemory(), sizes: map[int]bool{}})
			return stores[len(stores)-1]
		})
	})
	// One sub-benchmark per batch size, each opening one store per run (a
	// first with b.N = 1, then the measured one).
	var sizes []int
	for i, b := range subs {
		if b.Failed() {
			t.Errorf("sub-benchmark %d failed", i)
		}
		if stores[i].events == 0 || len(stores[i].sizes) != 1 {
			t.Errorf("sub-benchmark %d appended %d events in batches of sizes %v, want batches of one size", i, stores[i].events, stores[i].sizes)
		}
		for size := range stores[i].sizes {
			if len(sizes) == 0 || sizes[len(sizes)-1] != size {
				sizes = append(sizes, size)
			}
		}
	}
	if want := []int{1, 16, 64}; !slices.Equal(sizes, want) {
		t.Errorf("the sub-benchmarks appended batches of %v events, want %v", sizes, want)
	}
}

func TestMeasureReadFromTail(t *testing.T) {
	fewIterations(t)
	m := keyspace.NewMemory()
	key := keyspacetest.NewKey(0, 0)
	keyspacetest.Fill(t, m, key, 100)
	if r := testing.Benchmark(func(b *testing.B) { keyspacetest.MeasureReadFromTail(b, m, key, 100) }); r.N == 0 {
		t.Error("the benchmark of a stream of 100 records failed")
	}
	if r := testing.Benchmark(func(b *testing.B) { keyspacetest.MeasureReadFromTail(b, m, key, 105) }); r.N != 0 {
		t.Errorf("the benchmark with a head past the stream's ran %d iterations, want it to fail", r.N)
	}
}

func TestMeasureListStreams(t *testing.T) {
	fewIterations(t)
	m := keyspace.NewMemory()
	run := keyspacetest.NewKey(0, 0)
	for a := range eventstore.ActivityID(4) {
		keyspacetest.Fill(t, m, keyspace.NewStreamKey(run.WorkflowID, run.RunID, a, 0), 1)
	}
	if r := testing.Benchmark(func(b *testing.B) { keyspacetest.MeasureListStreams(b, m, run.WorkflowID, run.RunID, 4) }); r.N == 0 {
		t.Error("the benchmark of a run of 4 streams failed")
	}
	if r := testing.Benchmark(func(b *testing.B) { keyspacetest.MeasureListStreams(b, m, run.WorkflowID, run.RunID, 5) }); r.N != 0 {
		t.Errorf("the benchmark expecting 5 streams of 4 ran %d iterations, want it to fail", r.N)
	}
}
