package keyspace

import (
	"context"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// TestMemoryStreamsDoNotShareALock holds one stream's lock, as a long append
// to it would, and checks that another stream can still be appended to, read
// and listed. With one store-wide lock held across appends this would block.
func TestMemoryStreamsDoNotShareALock(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	wf := eventstore.WorkflowID{15: 1}
	run := eventstore.RunID{15: 2}
	busy := NewStreamKey(wf, run, 0, 0)
	other := NewStreamKey(wf, run, 1, 0)
	ev := func(k StreamKey) ActivityEvent {
		return ActivityEvent{WorkflowID: k.WorkflowID, RunID: k.RunID, ActivityID: k.ActivityID, Attempt: k.Attempt}
	}
	if _, err := m.AppendEvents(ctx, 0, []ActivityEvent{ev(busy)}); err != nil {
		t.Fatal(err)
	}

	s := m.lookup(busy)
	s.mu.Lock()
	done := make(chan error, 1)
	go func() {
		if _, err := m.AppendEvents(ctx, 0, []ActivityEvent{ev(other)}); err != nil {
			done <- err
			return
		}
		if _, err := m.ReadFrom(ctx, other, 0, 0); err != nil {
			done <- err
			return
		}
		_, err := m.Head(ctx, other)
		done <- err
	}()
	// A watchdog, not a sleep: the goroutine normally finishes at once.
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("append to another stream blocked while one stream was locked")
	}
	s.mu.Unlock()

	list, err := m.ListStreams(ctx, wf, run)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListStreams = %+v, %v; want both streams", list, err)
	}
}

// TestMemoryRefusedAppendsCreateNoStream checks that refused appends leave no
// trace, not even an empty stream in the maps (which ListStreams would hide
// but which would still cost memory per bad request).
func TestMemoryRefusedAppendsCreateNoStream(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	wf := eventstore.WorkflowID{15: 1}
	key := NewStreamKey(wf, eventstore.RunID{15: 2}, 0, 0)
	ev := ActivityEvent{WorkflowID: key.WorkflowID, RunID: key.RunID}
	eph := ev
	eph.Ephemeral = true
	other := ev
	other.Attempt = 1
	for _, call := range []struct {
		expected uint64
		batch    []ActivityEvent
	}{
		{3, []ActivityEvent{ev}},        // conflict on an unwritten stream
		{0, []ActivityEvent{ev, eph}},   // ephemeral
		{0, []ActivityEvent{ev, other}}, // mixed
		{0, []ActivityEvent{{WorkflowID: wf}}},
	} {
		if _, err := m.AppendEvents(ctx, call.expected, call.batch); err == nil {
			t.Fatalf("AppendEvents(%d, %+v) succeeded, want a refusal", call.expected, call.batch)
		}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if len(m.streams) != 0 || len(m.runs) != 0 {
		t.Fatalf("refused appends created %d streams and %d run indexes", len(m.streams), len(m.runs))
	}
}
