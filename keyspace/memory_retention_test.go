package keyspace

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
)

// retentionEvent returns a storable event of key with the given worker seq.
func retentionEvent(key StreamKey, workerSeq uint64) ActivityEvent {
	return ActivityEvent{
		WorkflowID: key.WorkflowID, RunID: key.RunID, ActivityID: key.ActivityID, Attempt: key.Attempt,
		AgentID: "agent", WorkerSeq: workerSeq,
		Content: Message{Role: "assistant", Text: fmt.Sprint(workerSeq)},
	}
}

// mapSizes reports how many streams and run indexes m holds.
func mapSizes(m *Memory) (streams, runs int) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.streams), len(m.runs)
}

func TestMemoryDeleteRun(t *testing.T) {
	wf := eventstore.WorkflowID{15: 1}
	otherWf := eventstore.WorkflowID{15: 9}
	run1, run2 := eventstore.RunID{15: 2}, eventstore.RunID{15: 3}
	testCases := []struct {
		name     string
		wf       eventstore.WorkflowID
		run      eventstore.RunID
		want     int
		wantLeft int // streams left in the store
	}{
		{name: "run with streams", wf: wf, run: run1, want: 3, wantLeft: 2},
		{name: "other run of the workflow", wf: wf, run: run2, want: 1, wantLeft: 4},
		{name: "unknown run", wf: wf, run: eventstore.RunID{15: 7}, want: 0, wantLeft: 5},
		{name: "zero workflow ID", wf: eventstore.WorkflowID{}, run: run1, want: 0, wantLeft: 5},
		{name: "zero run ID", wf: wf, run: eventstore.RunID{}, want: 0, wantLeft: 5},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m := NewMemory()
			keys := []StreamKey{
				NewStreamKey(wf, run1, 0, 0), NewStreamKey(wf, run1, 0, 1), NewStreamKey(wf, run1, 4, 0),
				NewStreamKey(wf, run2, 0, 0), NewStreamKey(otherWf, run1, 0, 0),
			}
			for _, k := range keys {
				if _, err := m.AppendEvents(ctx, 0, []ActivityEvent{retentionEvent(k, 1), retentionEvent(k, 2)}); err != nil {
					t.Fatal(err)
				}
			}
			if got := m.DeleteRun(tc.wf, tc.run); got != tc.want {
				t.Fatalf("DeleteRun = %d, want %d", got, tc.want)
			}
			left := 0
			for _, k := range keys {
				head, err := m.Head(ctx, k)
				if err != nil {
					t.Fatal(err)
				}
				recs, err := m.ReadFrom(ctx, k, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				deleted := k.WorkflowID == tc.wf && k.RunID == tc.run
				switch {
				case deleted && (head != 0 || len(recs) != 0):
					t.Errorf("%s: head %d, %d records after DeleteRun, want none", k, head, len(recs))
				case !deleted && (head != 2 || len(recs) != 2):
					t.Errorf("%s: head %d, %d records, want 2 and 2: another run was touched", k, head, len(recs))
				case !deleted:
					left++
				}
			}
			if left != tc.wantLeft {
				t.Errorf("%d streams left, want %d", left, tc.wantLeft)
			}
			if list, _ := m.ListStreams(ctx, wf, run1); tc.want > 0 && tc.run == run1 && len(list) != 0 {
				t.Errorf("ListStreams of the deleted run = %+v, want empty", list)
			}
			if streams, _ := mapSizes(m); streams != tc.wantLeft {
				t.Errorf("Memory holds %d streams, want %d", streams, tc.wantLeft)
			}
			// The run starts afresh.
			if tc.want > 0 {
				if _, err := m.AppendEvents(ctx, 0, []ActivityEvent{retentionEvent(NewStreamKey(tc.wf, tc.run, 0, 0), 1)}); err != nil {
					t.Errorf("append at 0 after DeleteRun: %v", err)
				}
			}
		})
	}
}

func TestMemoryDeleteRunZeroValue(t *testing.T) {
	var m Memory
	if got := m.DeleteRun(eventstore.WorkflowID{15: 1}, eventstore.RunID{15: 2}); got != 0 {
		t.Errorf("DeleteRun on an empty Memory = %d, want 0", got)
	}
}

// TestMemoryDeleteRunSequencerRecovers checks that a Sequencer that cached a
// deleted stream's head writes the run afresh from seq 0.
func TestMemoryDeleteRunSequencerRecovers(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	seq := NewSequencer(m)
	key := NewStreamKey(eventstore.WorkflowID{15: 1}, eventstore.RunID{15: 2}, 0, 0)
	if _, err := seq.Append(ctx, []ActivityEvent{retentionEvent(key, 1), retentionEvent(key, 2)}); err != nil {
		t.Fatal(err)
	}
	if got := m.DeleteRun(key.WorkflowID, key.RunID); got != 1 {
		t.Fatalf("DeleteRun = %d, want 1", got)
	}
	if _, err := seq.Append(ctx, []ActivityEvent{retentionEvent(key, 3)}); err != nil {
		t.Fatalf("Sequencer append after DeleteRun: %v", err)
	}
	recs, err := m.ReadFrom(ctx, key, 0, 0)
	if err != nil || len(recs) != 1 || recs[0].StoreSeq != 0 {
		t.Errorf("after DeleteRun and a new append: %+v, %v; want one record at seq 0", recs, err)
	}
}

// TestMemoryDeleteRunConcurrentSafe writes runs and deletes each one once
// written, while other goroutines read, under the race detector; at the end
// the store holds nothing.
func TestMemoryDeleteRunConcurrentSafe(t *testing.T) {
	const (
		writers   = 4
		runsEach  = 100
		streamsOf = 3
	)
	ctx := context.Background()
	m := NewMemory()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := range writers {
		wg.Go(func() {
			for i := range runsEach {
				wf := eventstore.WorkflowID{0: byte(g + 1), 15: 1}
				run := eventstore.RunID{0: byte(i), 1: byte(i >> 8), 15: 2}
				for a := range streamsOf {
					k := NewStreamKey(wf, run, eventstore.ActivityID(a), 0)
					if _, err := m.AppendEvents(ctx, 0, []ActivityEvent{retentionEvent(k, 1)}); err != nil {
						errs <- err
						return
					}
					if _, err := m.ListStreams(ctx, wf, run); err != nil {
						errs <- err
						return
					}
				}
				if n := m.DeleteRun(wf, run); n != streamsOf {
					errs <- fmt.Errorf("DeleteRun(%s, %s) = %d, want %d", wf, run, n, streamsOf)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if streams, runs := mapSizes(m); streams != 0 || runs != 0 {
		t.Errorf("after deleting every run: %d streams, %d run indexes; want 0 and 0", streams, runs)
	}
}
