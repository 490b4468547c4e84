package otelstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/aionotel/aionotel/eventstore"
)

// A fill's wait returns at once for a workflow with no append in
// progress, only after the last of several overlapping appends to its
// workflow ended (not an append to another workflow), and with ctx's error
// when ctx ends first; the gate keeps no entry once its appends ended.
func TestAppendingGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newAppending()
		wf, other := eventstore.NewWorkflowID(), eventstore.NewWorkflowID()
		if err := a.wait(context.Background(), wf); err != nil {
			t.Fatalf("wait with nothing in progress: %v", err)
		}
		a.begin(wf)
		a.begin(wf)
		a.begin(other)
		var returned atomic.Bool
		done := make(chan error)
		go func() {
			err := a.wait(context.Background(), wf)
			returned.Store(true)
			done <- err
		}()
		a.end(other)
		a.end(wf)
		synctest.Wait() // the waiter has run as far as it can
		if returned.Load() {
			t.Fatal("wait returned while an append to its workflow was in progress")
		}
		a.end(wf)
		if err := <-done; err != nil {
			t.Fatalf("wait after the last append ended: %v", err)
		}

		a.begin(wf)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := a.wait(ctx, wf); !errors.Is(err, context.Canceled) {
			t.Fatalf("wait with an ended context: %v, want context.Canceled", err)
		}
		a.end(wf)
		if len(a.n) != 0 || len(a.idle) != 0 {
			t.Errorf("after every append ended the gate holds %d counts and %d waits, want none", len(a.n), len(a.idle))
		}
	})
}

// BenchmarkAppendingGate is the gate's cost on the append path (a begin
// and an end per append), appends to distinct workflows from every
// processor at once: its one mutex is shared by the decorator's appends.
// A gate of 32 stripes, each its own mutex and maps, measured no faster
// on 2 cores (408 vs 450 ns/op, p=0.57, n=8): the one mutex stays.
func BenchmarkAppendingGate(b *testing.B) {
	a := newAppending()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		wf := eventstore.NewWorkflowID()
		for pb.Next() {
			a.begin(wf)
			a.end(wf)
		}
	})
}
