package otelworkflows

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/workflow"
)

// TestKnownSetBound: past its bound the oldest execution is forgotten.
func TestKnownSetBound(t *testing.T) {
	k := newKnownSet(2)
	a, b, c := executionKey("a", "1"), executionKey("b", "1"), executionKey("c", "1")
	if !k.add(a) || !k.add(b) || k.add(a) {
		t.Fatal("add does not report what is new")
	}
	k.add(c)
	if k.has(a) || !k.has(b) || !k.has(c) {
		t.Fatalf("after a third: a %v b %v c %v, want the oldest (a) forgotten", k.has(a), k.has(b), k.has(c))
	}
}

// readCounter counts history reads; each read waits for release.
type readCounter struct {
	nopBackend
	reads   atomic.Int64
	release chan struct{}
	task    *backend.ActivityTask
}

func (r *readCounter) GetWorkflowInstanceHistory(ctx context.Context, _ *workflow.Instance, _ *int64) ([]*history.Event, error) {
	r.reads.Add(1)
	select {
	case <-r.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return nil, nil
}

func (r *readCounter) GetActivityTask(context.Context, []workflow.Queue) (*backend.ActivityTask, error) {
	return r.task, nil
}

// TestHistoryReadOnce: an execution first seen part-way through is read
// once, however many calls name it, concurrently or not; Flush waits for
// the read.
func TestHistoryReadOnce(t *testing.T) {
	inner := &readCounter{release: make(chan struct{}), task: &backend.ActivityTask{
		WorkflowInstance: core.NewWorkflowInstance("i", "e"),
		Event:            history.NewPendingEvent(time.Unix(1_700_000_000, 0), history.EventType_ActivityScheduled, &history.ActivityScheduledAttributes{Name: "a"}, history.ScheduleEventID(2)),
	}}
	b := New(inner)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := b.GetActivityTask(context.Background(), nil); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	close(inner.release)
	if err := Flush(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if n := inner.reads.Load(); n != 1 {
		t.Fatalf("%d history reads, want 1", n)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestHistoryReadQueueFull: past the queue's bound a read is dropped, not
// waited for, and happens when the execution is next seen.
func TestHistoryReadQueueFull(t *testing.T) {
	inner := &readCounter{release: make(chan struct{})}
	d := New(inner, WithHistoryReadConcurrency(1)).(*decorated)
	d.reads = newReader(d, 1, 1) // one reading, one waiting
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		wi := core.NewWorkflowInstance(id, "e")
		d.reads.request(wi, keyOf(wi))
	}
	// The reader blocks in its first read and the queue holds one: of the
	// three, at least one is dropped (forgotten, so read when next seen).
	dropped := 0
	for _, id := range ids {
		if !d.known.has(executionKey(id, "e")) {
			dropped++
		}
	}
	if dropped == 0 {
		t.Fatal("three requests with one reader busy and one place in the queue: none dropped")
	}
	close(inner.release)
	if err := Flush(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	if got := inner.reads.Load(); got != int64(len(ids)-dropped) {
		t.Fatalf("%d reads, want %d (%d dropped)", got, len(ids)-dropped, dropped)
	}
	before := inner.reads.Load()
	cDropped := !d.known.has(executionKey("c", "e"))
	wi := core.NewWorkflowInstance("c", "e")
	d.reads.request(wi, keyOf(wi)) // seen again
	if err := Flush(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	want := before
	if cDropped {
		want++ // read now
	}
	if got := inner.reads.Load(); got != want {
		t.Fatalf("seen again (dropped before: %v): %d reads, want %d", cDropped, got, want)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}
