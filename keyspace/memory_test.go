package keyspace_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
)

func TestMemoryAssignsContiguousSeqsFromZero(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(3, 0)
	if head := headOf(t, m, key); head != 0 {
		t.Fatalf("head of an unwritten stream = %d, want 0", head)
	}
	for i := uint64(0); i < 3; i++ {
		seq, err := keyspace.AppendEvent(ctx, m, i, eventIn(key, "agent", i+1))
		if err != nil || seq != i {
			t.Fatalf("append %d: got %d, %v", i, seq, err)
		}
	}
	if head := headOf(t, m, key); head != 3 {
		t.Fatalf("head = %d, want 3", head)
	}
	recs := readAll(t, m, key)
	if len(recs) != 3 {
		t.Fatalf("read %d records, want 3", len(recs))
	}
	checkContiguous(t, recs)
}

func TestMemoryStaleSeqConflictsAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(3, 0)
	if _, err := keyspace.AppendEvent(ctx, m, 0, eventIn(key, "agent", 1)); err != nil {
		t.Fatal(err)
	}
	testCases := []struct {
		name     string
		expected uint64
	}{
		{name: "behind the head", expected: 0},
		{name: "ahead of the head", expected: 5},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			head, err := keyspace.AppendEvent(ctx, m, tc.expected, eventIn(key, "agent", 2))
			var conflict *eventstore.SequenceConflictError
			if !errors.As(err, &conflict) || !errors.Is(err, eventstore.ErrSequenceConflict) {
				t.Fatalf("append at %d = %d, %v; want a *SequenceConflictError", tc.expected, head, err)
			}
			if conflict.Expected != tc.expected || conflict.Found != 1 {
				t.Fatalf("conflict = %+v, want Expected %d Found 1", conflict, tc.expected)
			}
			if recs := readAll(t, m, key); len(recs) != 1 || recs[0].Event.WorkerSeq != 1 {
				t.Fatalf("stream after the conflict = %v, want only the first event", agentSeqs(recs))
			}
		})
	}
}

func TestMemoryConflictOnUnwrittenStreamLeavesNoStream(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(1, 0)
	_, err := m.AppendEvents(ctx, 4, eventsIn(key, "agent", 1, 2))
	var conflict *eventstore.SequenceConflictError
	if !errors.As(err, &conflict) || conflict.Expected != 4 || conflict.Found != 0 {
		t.Fatalf("append at 4 to an unwritten stream = %v, want conflict expected 4 found 0", err)
	}
	list, err := m.ListStreams(ctx, testWorkflow, generation1)
	if err != nil || len(list) != 0 {
		t.Fatalf("ListStreams after a refused append = %v, %v; want no stream", list, err)
	}
}

func TestMemoryAttemptsAreDisjointStreams(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	first, retry := keyOf(3, 0), keyOf(3, 1)
	if _, err := keyspace.AppendEvent(ctx, m, 0, eventIn(first, "agent", 1)); err != nil {
		t.Fatal(err)
	}
	// The retry is a new stream: its first event goes at 0, not after attempt 0.
	if _, err := keyspace.AppendEvent(ctx, m, 0, eventIn(retry, "agent", 1)); err != nil {
		t.Fatalf("first append of attempt 1 at 0: %v", err)
	}
	if h0, h1 := headOf(t, m, first), headOf(t, m, retry); h0 != 1 || h1 != 1 {
		t.Fatalf("heads = %d, %d; want 1, 1", h0, h1)
	}
	if recs := readAll(t, m, retry); len(recs) != 1 || recs[0].Event.Attempt != 1 {
		t.Fatalf("attempt 1 holds %+v, want its own event only", recs)
	}
}

func TestMemoryGenerationsNeverShareAStream(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	// Both generations start their first activity at ordinal 0, attempt 1.
	gen1 := keyspace.NewStreamKey(testWorkflow, generation1, 0, 1)
	gen2 := keyspace.NewStreamKey(testWorkflow, generation2, 0, 1)
	if _, err := keyspace.AppendEvent(ctx, m, 0, eventIn(gen1, "agent", 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := keyspace.AppendEvent(ctx, m, 0, eventIn(gen2, "agent", 1)); err != nil {
		t.Fatalf("generation two's first event at 0: %v", err)
	}
	for _, tc := range []struct {
		key keyspace.StreamKey
		run eventstore.RunID
	}{{gen1, generation1}, {gen2, generation2}} {
		recs := readAll(t, m, tc.key)
		if len(recs) != 1 || recs[0].Event.RunID != tc.run {
			t.Fatalf("stream %s holds %+v, want exactly its own run's event", tc.key, recs)
		}
	}
}

func TestMemoryListStreamsOrderAndRunScope(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	appendAt := func(key keyspace.StreamKey, n int) {
		t.Helper()
		if _, err := m.AppendEvents(ctx, 0, eventsIn(key, "agent", 1, uint64(n))); err != nil {
			t.Fatal(err)
		}
	}
	// Created out of order on purpose; same workflow, other run, other workflow.
	appendAt(keyOf(5, 0), 1)
	appendAt(keyOf(3, 1), 1)
	appendAt(keyOf(10, 0), 4)
	appendAt(keyOf(3, 0), 2)
	appendAt(keyspace.NewStreamKey(testWorkflow, generation2, 3, 0), 7)
	appendAt(keyspace.NewStreamKey(otherFlow, generation1, 4, 0), 7)

	got, err := m.ListStreams(ctx, testWorkflow, generation1)
	if err != nil {
		t.Fatal(err)
	}
	want := []keyspace.StreamSummary{
		{Key: keyOf(3, 0), Head: 2},
		{Key: keyOf(3, 1), Head: 1},
		{Key: keyOf(5, 0), Head: 1},
		{Key: keyOf(10, 0), Head: 4},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("ListStreams = %+v\nwant %+v", got, want)
	}
	// Heads are current: an append shows in the next listing.
	if _, err := m.AppendEvents(ctx, 1, eventsIn(keyOf(5, 0), "agent", 2, 3)); err != nil {
		t.Fatal(err)
	}
	got, err = m.ListStreams(ctx, testWorkflow, generation1)
	if err != nil || len(got) != 4 || got[2].Head != 3 {
		t.Fatalf("ListStreams after an append = %+v, %v; want activity 5 at head 3", got, err)
	}
}

func TestMemoryListStreamsEmpty(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	if _, err := keyspace.AppendEvent(ctx, m, 0, eventIn(keyOf(0, 0), "agent", 1)); err != nil {
		t.Fatal(err)
	}
	testCases := []struct {
		name string
		wf   eventstore.WorkflowID
		run  eventstore.RunID
	}{
		{name: "unknown workflow", wf: otherFlow, run: generation1},
		{name: "unwritten run of a known workflow", wf: testWorkflow, run: generation2},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.ListStreams(ctx, tc.wf, tc.run)
			if err != nil || len(got) != 0 {
				t.Fatalf("ListStreams = %+v, %v; want empty, nil", got, err)
			}
		})
	}
}

func TestMemoryBatchContract(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(0, 0)
	head, err := m.AppendEvents(ctx, 0, eventsIn(key, "agent", 0, 3))
	if err != nil || head != 4 {
		t.Fatalf("first batch: head %d, %v; want 4, nil", head, err)
	}
	head, err = m.AppendEvents(ctx, head, eventsIn(key, "agent", 4, 5))
	if err != nil || head != 6 {
		t.Fatalf("second batch: head %d, %v; want 6, nil", head, err)
	}
	recs := readAll(t, m, key)
	checkContiguous(t, recs)
	for i, r := range recs {
		if r.Event.WorkerSeq != uint64(i) {
			t.Fatalf("record %d holds WorkerSeq %d: order not kept", i, r.Event.WorkerSeq)
		}
	}
	if h := headOf(t, m, key); h != 6 {
		t.Fatalf("Head = %d, want 6", h)
	}
}

func TestMemoryConflictedBatchWritesNone(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(0, 0)
	if _, err := keyspace.AppendEvent(ctx, m, 0, eventIn(key, "agent", 1)); err != nil {
		t.Fatal(err)
	}
	_, err := m.AppendEvents(ctx, 0, eventsIn(key, "agent", 2, 5))
	var conflict *eventstore.SequenceConflictError
	if !errors.As(err, &conflict) || conflict.Expected != 0 || conflict.Found != 1 {
		t.Fatalf("stale batch = %v, want conflict expected 0 found 1", err)
	}
	if recs := readAll(t, m, key); len(recs) != 1 {
		t.Fatalf("stream holds %v after a conflicted batch, want the first event only", agentSeqs(recs))
	}
}

func TestMemoryRefusesBadBatches(t *testing.T) {
	a, b := keyOf(0, 0), keyOf(0, 1)
	ephemeral := func(ev keyspace.ActivityEvent) keyspace.ActivityEvent { ev.Ephemeral = true; return ev }
	zeroRun := keyspace.NewStreamKey(testWorkflow, eventstore.RunID{}, 0, 0)
	zeroWorkflow := keyspace.NewStreamKey(eventstore.WorkflowID{}, generation1, 0, 0)
	testCases := []struct {
		name     string
		expected uint64
		batch    []keyspace.ActivityEvent
		want     error  // matched with errors.Is
		wantText string // in the message
		notWant  error  // must not match: proves the check order
	}{
		{
			name:     "mixed streams",
			batch:    []keyspace.ActivityEvent{eventIn(a, "x", 1), eventIn(a, "x", 2), eventIn(b, "x", 3)},
			want:     keyspace.ErrMixedStreams,
			wantText: "event 2",
		},
		{
			name:     "mixed runs",
			batch:    []keyspace.ActivityEvent{eventIn(a, "x", 1), eventIn(keyspace.NewStreamKey(testWorkflow, generation2, 0, 0), "x", 2)},
			want:     keyspace.ErrMixedStreams,
			wantText: "event 1",
		},
		{
			name:     "ephemeral event",
			batch:    []keyspace.ActivityEvent{eventIn(a, "x", 1), ephemeral(eventIn(a, "x", 2))},
			want:     keyspace.ErrEphemeral,
			wantText: "event 1",
		},
		{
			name:  "zero run id",
			batch: []keyspace.ActivityEvent{eventIn(zeroRun, "x", 1)},
			want:  eventstore.ErrInvalidArgument,
		},
		{
			name:  "zero workflow id",
			batch: []keyspace.ActivityEvent{eventIn(zeroWorkflow, "x", 1)},
			want:  eventstore.ErrInvalidArgument,
		},
		{
			name:    "zero key checked before mixing",
			batch:   []keyspace.ActivityEvent{eventIn(zeroRun, "x", 1), eventIn(a, "x", 2)},
			want:    eventstore.ErrInvalidArgument,
			notWant: keyspace.ErrMixedStreams,
		},
		{
			name:    "mixing checked before ephemeral",
			batch:   []keyspace.ActivityEvent{ephemeral(eventIn(a, "x", 1)), eventIn(b, "x", 2)},
			want:    keyspace.ErrMixedStreams,
			notWant: keyspace.ErrEphemeral,
		},
		{
			name:     "ephemeral checked before the expected seq",
			expected: 9,
			batch:    []keyspace.ActivityEvent{ephemeral(eventIn(a, "x", 1))},
			want:     keyspace.ErrEphemeral,
			notWant:  eventstore.ErrSequenceConflict,
		},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m := keyspace.NewMemory()
			head, err := m.AppendEvents(ctx, tc.expected, tc.batch)
			if !errors.Is(err, tc.want) || !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Fatalf("AppendEvents = %d, %v; want an error matching %v and ErrInvalidArgument", head, err, tc.want)
			}
			if tc.notWant != nil && errors.Is(err, tc.notWant) {
				t.Fatalf("AppendEvents = %v, must not match %v", err, tc.notWant)
			}
			if !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("error %q does not name %q", err, tc.wantText)
			}
			for _, key := range []keyspace.StreamKey{a, b} {
				if h := headOf(t, m, key); h != 0 {
					t.Fatalf("stream %s has head %d after a refused batch, want 0", key, h)
				}
			}
			for _, run := range []eventstore.RunID{generation1, generation2} {
				if got, _ := m.ListStreams(ctx, testWorkflow, run); len(got) != 0 {
					t.Fatalf("ListStreams after a refused batch = %+v, want empty", got)
				}
			}
		})
	}
}

func TestMemoryEmptyBatchIsANoOp(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	for _, expected := range []uint64{0, 7} {
		head, err := m.AppendEvents(ctx, expected, nil)
		if err != nil || head != expected {
			t.Fatalf("empty batch at %d = %d, %v; want %d, nil", expected, head, err, expected)
		}
	}
	if _, err := m.AppendEvents(ctx, 0, []keyspace.ActivityEvent{}); err != nil {
		t.Fatal(err)
	}
	if h := headOf(t, m, keyOf(0, 0)); h != 0 {
		t.Fatalf("head after empty batches = %d, want 0", h)
	}
}

func TestMemoryReadFromResumes(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(0, 0)
	if _, err := m.AppendEvents(ctx, 0, eventsIn(key, "agent", 0, 4)); err != nil {
		t.Fatal(err)
	}
	testCases := []struct {
		name  string
		from  uint64
		limit int
		want  []uint64 // store seqs
	}{
		{name: "from zero, all", from: 0, want: []uint64{0, 1, 2, 3, 4}},
		{name: "resume from 3", from: 3, want: []uint64{3, 4}},
		{name: "from the last", from: 4, want: []uint64{4}},
		{name: "at the head", from: 5},
		{name: "past the head", from: 99},
		{name: "limit", from: 1, limit: 2, want: []uint64{1, 2}},
		{name: "limit past the end", from: 3, limit: 10, want: []uint64{3, 4}},
		{name: "negative limit means all", from: 2, limit: -1, want: []uint64{2, 3, 4}},
		{name: "huge from", from: ^uint64(0), limit: 3},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := m.ReadFrom(ctx, key, tc.from, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var got []uint64
			for _, r := range recs {
				if r.Event.StoreSeq != r.StoreSeq || r.Event.WorkerSeq != r.StoreSeq {
					t.Fatalf("record %d is not the event written at that seq: %+v", r.StoreSeq, r)
				}
				got = append(got, r.StoreSeq)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("ReadFrom(%d, %d) seqs = %v, want %v", tc.from, tc.limit, got, tc.want)
			}
		})
	}
	if recs, err := m.ReadFrom(ctx, keyOf(8, 8), 0, 0); err != nil || len(recs) != 0 {
		t.Fatalf("ReadFrom of an unwritten stream = %v, %v; want none", recs, err)
	}
}

func TestMemoryRecordsAreCopies(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(0, 0)
	batch := eventsIn(key, "agent", 1, 2)
	if _, err := m.AppendEvents(ctx, 0, batch); err != nil {
		t.Fatal(err)
	}
	// The caller's events are not stamped by the store.
	if batch[0].Persisted || batch[1].StoreSeq != 0 {
		t.Fatalf("AppendEvents modified the caller's slice: %+v", batch)
	}
	// Changing the caller's slice after the call changes nothing stored.
	batch[0].AgentID = "changed"
	batch[0].Content = keyspace.Message{Text: "changed"}

	recs := readAll(t, m, key)
	recs[1].Event.AgentID = "changed too"
	recs[1].StoreSeq = 42

	again := readAll(t, m, key)
	want := []string{"agent#1", "agent#2"}
	if got := agentSeqs(again); !slices.Equal(got, want) {
		t.Fatalf("stored events = %v, want %v", got, want)
	}
	if again[1].StoreSeq != 1 {
		t.Fatalf("stored StoreSeq = %d, want 1", again[1].StoreSeq)
	}
	if msg, ok := again[0].Event.Content.(keyspace.Message); !ok || msg.Text != "agent#1" {
		t.Fatalf("stored content = %#v, want the original message", again[0].Event.Content)
	}
}

func TestMemoryRefusesZeroIDs(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	zeroKeys := []keyspace.StreamKey{
		keyspace.NewStreamKey(eventstore.WorkflowID{}, generation1, 0, 0),
		keyspace.NewStreamKey(testWorkflow, eventstore.RunID{}, 0, 0),
	}
	for _, key := range zeroKeys {
		t.Run(key.String(), func(t *testing.T) {
			if _, err := m.Head(ctx, key); !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Errorf("Head = %v, want ErrInvalidArgument", err)
			}
			if _, err := m.ReadFrom(ctx, key, 0, 0); !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Errorf("ReadFrom = %v, want ErrInvalidArgument", err)
			}
			if _, err := m.ListStreams(ctx, key.WorkflowID, key.RunID); !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Errorf("ListStreams = %v, want ErrInvalidArgument", err)
			}
			if _, err := keyspace.AppendEvent(ctx, m, 0, eventIn(key, "agent", 1)); !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Errorf("AppendEvent = %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func TestMemoryHonoursCanceledContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	m := keyspace.NewMemory()
	key := keyOf(0, 0)
	if _, err := m.AppendEvents(ctx, 0, eventsIn(key, "agent", 1, 2)); !errors.Is(err, context.Canceled) {
		t.Errorf("AppendEvents = %v, want context.Canceled", err)
	}
	if _, err := m.AppendEvents(ctx, 0, nil); !errors.Is(err, context.Canceled) {
		t.Errorf("AppendEvents(empty) = %v, want context.Canceled", err)
	}
	if _, err := m.Head(ctx, key); !errors.Is(err, context.Canceled) {
		t.Errorf("Head = %v, want context.Canceled", err)
	}
	if _, err := m.ReadFrom(ctx, key, 0, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("ReadFrom = %v, want context.Canceled", err)
	}
	if _, err := m.ListStreams(ctx, testWorkflow, generation1); !errors.Is(err, context.Canceled) {
		t.Errorf("ListStreams = %v, want context.Canceled", err)
	}
	if h := headOf(t, m, key); h != 0 {
		t.Fatalf("head after a canceled append = %d, want 0", h)
	}
}

func TestMemoryZeroValueIsReady(t *testing.T) {
	var m keyspace.Memory
	key := keyOf(0, 0)
	if _, err := m.AppendEvents(context.Background(), 0, eventsIn(key, "agent", 1, 3)); err != nil {
		t.Fatal(err)
	}
	if got := agentSeqs(readAll(t, &m, key)); !slices.Equal(got, []string{"agent#1", "agent#2", "agent#3"}) {
		t.Fatalf("zero Memory holds %v", got)
	}
}

// Regression: every method of a nil *Memory panicked, where a nil
// *eventstore.Memory returns ErrInvalidArgument. Now they fail the same way.
func TestNilMemoryFailsWithoutPanic(t *testing.T) {
	var m *keyspace.Memory
	ctx, key := context.Background(), keyOf(0, 0)
	testCases := []struct {
		name string
		call func() error
	}{
		{"AppendEvents", func() error { _, err := m.AppendEvents(ctx, 0, eventsIn(key, "a", 1, 1)); return err }},
		{"Head", func() error { _, err := m.Head(ctx, key); return err }},
		{"ReadFrom", func() error { _, err := m.ReadFrom(ctx, key, 0, 1); return err }},
		{"ListStreams", func() error { _, err := m.ListStreams(ctx, key.WorkflowID, key.RunID); return err }},
		{"DeleteRun", func() error {
			if n := m.DeleteRun(key.WorkflowID, key.RunID); n != 0 {
				return fmt.Errorf("DeleteRun removed %d", n)
			}
			return eventstore.ErrInvalidArgument
		}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				err = tc.call()
			}()
			if !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Errorf("err = %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func TestMemoryConcurrentSafe(t *testing.T) {
	const (
		goroutines = 8
		perG       = 1000
	)
	t.Run("one stream through one sequencer", func(t *testing.T) {
		ctx := context.Background()
		m := keyspace.NewMemory()
		seq := keyspace.NewSequencer(m)
		key := keyOf(0, 0)
		var wg sync.WaitGroup
		errs := make(chan error, goroutines+1)
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				agent := fmt.Sprintf("agent-%d", g)
				// Batches of 1..5 events, sized differently per goroutine.
				for next := uint64(1); next <= perG; {
					n := min(uint64(1+(g+int(next))%5), perG-next+1)
					if _, err := seq.Append(ctx, eventsIn(key, agent, next, next+n-1)); err != nil {
						errs <- err
						return
					}
					next += n
				}
			}()
		}
		// Readers run alongside the writers.
		stop := make(chan struct{})
		var readers sync.WaitGroup
		readers.Add(1)
		go func() {
			defer readers.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				head, _ := m.Head(ctx, key)
				if head > 0 {
					recs, err := m.ReadFrom(ctx, key, head-1, 1)
					if err != nil || len(recs) != 1 || recs[0].StoreSeq != head-1 {
						errs <- fmt.Errorf("tail read at head %d = %+v, %v", head, recs, err)
						return
					}
				}
				if _, err := m.ListStreams(ctx, testWorkflow, generation1); err != nil {
					errs <- err
					return
				}
			}
		}()
		wg.Wait()
		close(stop)
		readers.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}

		recs := readAll(t, m, key)
		if len(recs) != goroutines*perG {
			t.Fatalf("stream holds %d records, want %d", len(recs), goroutines*perG)
		}
		checkContiguous(t, recs)
		// Every (agent, WorkerSeq) exactly once, each agent's in order.
		next := map[string]uint64{}
		for _, r := range recs {
			want := next[r.Event.AgentID] + 1
			if r.Event.WorkerSeq != want {
				t.Fatalf("record %d is %s#%d, want WorkerSeq %d", r.StoreSeq, r.Event.AgentID, r.Event.WorkerSeq, want)
			}
			next[r.Event.AgentID] = want
		}
		if len(next) != goroutines {
			t.Fatalf("%d agents landed, want %d", len(next), goroutines)
		}
	})

	t.Run("distinct streams in parallel", func(t *testing.T) {
		ctx := context.Background()
		m := keyspace.NewMemory()
		var wg sync.WaitGroup
		errs := make(chan error, goroutines)
		for g := range goroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Half the goroutines share generation1 (one run index), the
				// others use runs of their own.
				run := generation1
				if g%2 == 1 {
					run = eventstore.RunID{0: byte(g), 15: 0x33}
				}
				key := keyspace.NewStreamKey(testWorkflow, run, eventstore.ActivityID(g), 0)
				var head uint64
				for i := uint64(1); i <= perG; i += 4 {
					h, err := m.AppendEvents(ctx, head, eventsIn(key, "agent", i, i+3))
					if err != nil {
						errs <- err
						return
					}
					head = h
					if _, err := m.ListStreams(ctx, testWorkflow, run); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for g := range goroutines {
			run := generation1
			if g%2 == 1 {
				run = eventstore.RunID{0: byte(g), 15: 0x33}
			}
			key := keyspace.NewStreamKey(testWorkflow, run, eventstore.ActivityID(g), 0)
			recs := readAll(t, m, key)
			if len(recs) != perG {
				t.Fatalf("stream %d holds %d records, want %d", g, len(recs), perG)
			}
			checkContiguous(t, recs)
		}
		list, err := m.ListStreams(ctx, testWorkflow, generation1)
		if err != nil || len(list) != goroutines/2 {
			t.Fatalf("generation1 lists %d streams, %v; want %d", len(list), err, goroutines/2)
		}
		for i, s := range list {
			if s.Key.ActivityID != eventstore.ActivityID(2*i) || s.Head != perG {
				t.Fatalf("listing %d = %+v, want activity %d at head %d", i, s, 2*i, perG)
			}
		}
	})
}

// TestMemoryLongStreamReads writes a stream long enough to span several of
// Memory's internal chunks, in batches that straddle their boundaries, and
// reads ranges across them.
func TestMemoryLongStreamReads(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(0, 0)
	var head uint64
	for _, n := range []uint64{1, 1000, 30, 1500, 1, 2000, 700} { // 5,232 events
		h, err := m.AppendEvents(ctx, head, eventsIn(key, "agent", head, head+n-1))
		if err != nil || h != head+n {
			t.Fatalf("batch of %d at %d: head %d, %v", n, head, h, err)
		}
		head = h
	}
	testCases := []struct {
		from  uint64
		limit int
		want  int
	}{
		{from: 0, limit: 0, want: 5232},
		{from: 1020, limit: 10, want: 10},
		{from: 1023, limit: 2, want: 2},
		{from: 1024, limit: 1, want: 1},
		{from: 2040, limit: 2100, want: 2100},
		{from: 4095, limit: 0, want: 5232 - 4095},
		{from: 5231, limit: 5, want: 1},
	}
	for _, tc := range testCases {
		t.Run(fmt.Sprintf("from=%d,limit=%d", tc.from, tc.limit), func(t *testing.T) {
			recs, err := m.ReadFrom(ctx, key, tc.from, tc.limit)
			if err != nil || len(recs) != tc.want {
				t.Fatalf("ReadFrom = %d records, %v; want %d", len(recs), err, tc.want)
			}
			for i, r := range recs {
				seq := tc.from + uint64(i)
				if r.StoreSeq != seq || r.Event.StoreSeq != seq || r.Event.WorkerSeq != seq || !r.Event.Persisted {
					t.Fatalf("record %d: %+v, want the event written at seq %d", i, r, seq)
				}
			}
		})
	}
	if h := headOf(t, m, key); h != 5232 {
		t.Fatalf("head = %d, want 5232", h)
	}
}

// customContent is a Content kind outside the closed set.
type customContent struct{ Text string }

func (customContent) ContentKind() string { return "custom" }

// panickyContent panics in ContentKind: validation must not call it.
type panickyContent struct{}

func (*panickyContent) ContentKind() string { panic("ContentKind called") }

// TestMemoryRefusesContentTheBackendsRefuse: Memory refuses every Content the
// durable backends cannot store (a nil pointer to a kind, a type outside the
// five kinds) with eventstore.ErrInvalidArgument, naming the event, and
// stores nothing of the batch.
func TestMemoryRefusesContentTheBackendsRefuse(t *testing.T) {
	testCases := []struct {
		name    string
		content keyspace.Content
	}{
		{"nil *Message", (*keyspace.Message)(nil)},
		{"nil *ToolCall", (*keyspace.ToolCall)(nil)},
		{"nil *ToolResult", (*keyspace.ToolResult)(nil)},
		{"nil *Status", (*keyspace.Status)(nil)},
		{"nil *Usage", (*keyspace.Usage)(nil)},
		{"custom kind", customContent{Text: "x"}},
		{"custom kind pointer", &customContent{Text: "x"}},
		{"custom kind whose ContentKind panics", &panickyContent{}},
		{"nil custom pointer", (*panickyContent)(nil)},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m := keyspace.NewMemory()
			key := keyOf(0, 0)
			if _, err := m.AppendEvents(ctx, 0, eventsIn(key, "x", 1, 1)); err != nil {
				t.Fatal(err)
			}
			batch := eventsIn(key, "x", 2, 3)
			batch[1].Content = tc.content
			head, err := m.AppendEvents(ctx, 1, batch)
			if !errors.Is(err, eventstore.ErrInvalidArgument) || head != 0 {
				t.Fatalf("AppendEvents = %d, %v; want 0 and an error matching ErrInvalidArgument", head, err)
			}
			if !strings.Contains(err.Error(), "event 1") {
				t.Fatalf("error %q does not name event 1", err)
			}
			if h := headOf(t, m, key); h != 1 {
				t.Fatalf("head after a refused batch = %d, want 1 (unchanged)", h)
			}
			if got := agentSeqs(readAll(t, m, key)); !slices.Equal(got, []string{"x#1"}) {
				t.Fatalf("stream after a refused batch = %v, want [x#1]", got)
			}
		})
	}
}

// TestMemoryKeepsNoCallerMemory: what AppendEvents stores shares nothing
// with the caller's events, and what ReadFrom returns shares nothing with the
// store. A pointer content (accepted, as by the durable backends) is stored
// as its value kind, as the durable backends read it back.
func TestMemoryKeepsNoCallerMemory(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(0, 0)
	msg := &keyspace.Message{Role: "user", Text: "original"}
	usage := &keyspace.Usage{InputTokens: 1, OutputTokens: 2}
	batch := eventsIn(key, "x", 1, 2)
	batch[0].Content, batch[1].Content = msg, usage
	if _, err := m.AppendEvents(ctx, 0, batch); err != nil {
		t.Fatal(err)
	}
	// The caller reuses what it passed.
	msg.Text = "changed by the caller"
	usage.InputTokens = 99
	batch[0].AgentID = "reused"

	want := []keyspace.Content{keyspace.Message{Role: "user", Text: "original"}, keyspace.Usage{InputTokens: 1, OutputTokens: 2}}
	recs := readAll(t, m, key)
	for i, r := range recs {
		if r.Event.Content != want[i] {
			t.Fatalf("record %d content = %#v after the caller changed its own, want %#v", i, r.Event.Content, want[i])
		}
	}
	// The reader changes what it got, through any pointer it may hold.
	for i := range recs {
		switch c := recs[i].Event.Content.(type) {
		case *keyspace.Message:
			c.Text = "changed by the reader"
		case *keyspace.Usage:
			c.InputTokens = 42
		}
		recs[i].Event.Content = keyspace.Status{State: "changed by the reader"}
		recs[i].Event.AgentID = "changed by the reader"
	}
	again := readAll(t, m, key)
	for i, r := range again {
		if r.Event.Content != want[i] || r.Event.AgentID != "x" {
			t.Fatalf("record %d = %+v after a reader changed its copy, want content %#v from agent x", i, r.Event, want[i])
		}
	}
}

// TestMemoryPassesTheBackendChecks runs on Memory the checks that the durable
// backends (boltstore, pgstore) run on themselves, so that the three refuse
// and return the same things.
func TestMemoryPassesTheBackendChecks(t *testing.T) {
	checks := []struct {
		name  string
		check func(testing.TB, keyspace.Store)
	}{
		{"append-refusals-write-nothing", keyspacetest.CheckAppendRefusalsWriteNothing},
		{"list-order-is-unsigned", keyspacetest.CheckListOrderIsUnsigned},
		{"read-from-bounds", keyspacetest.CheckReadFromBounds},
		{"read-methods-refuse-zero-ids", keyspacetest.CheckReadMethodsRefuseZeroIDs},
		{"concurrent-safe", keyspacetest.CheckConcurrentSafe},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) { c.check(t, keyspace.NewMemory()) })
	}
}
