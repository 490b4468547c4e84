package keyspace_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// spyStore wraps a Store, counting and recording calls. intercept, when set,
// runs before each AppendEvents reaches the inner store; a non-nil error from
// it is returned instead (the inner store is not called).
type spyStore struct {
	keyspace.Store

	mu        sync.Mutex
	appends   []recordedAppend
	reads     int
	readErr   error // returned by ReadFrom when set
	intercept func(key keyspace.StreamKey, expectedSeq uint64) error
}

func (s *spyStore) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	s.mu.Lock()
	s.appends = append(s.appends, recordedAppend{expectedSeq: expectedSeq, events: slices.Clone(events)})
	intercept := s.intercept
	s.mu.Unlock()
	if intercept != nil && len(events) > 0 {
		if err := intercept(keyspace.KeyOf(events[0]), expectedSeq); err != nil {
			return 0, err
		}
	}
	return s.Store.AppendEvents(ctx, expectedSeq, events)
}

func (s *spyStore) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	s.mu.Lock()
	s.reads++
	readErr := s.readErr
	s.mu.Unlock()
	if readErr != nil {
		return nil, readErr
	}
	return s.Store.ReadFrom(ctx, key, fromSeq, limit)
}

// appendCalls returns the number of AppendEvents calls so far and resets it.
func (s *spyStore) takeAppends() []recordedAppend {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.appends
	s.appends = nil
	return out
}

func (s *spyStore) takeReads() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.reads
	s.reads = 0
	return n
}

func newSpy() (*keyspace.Memory, *spyStore) {
	m := keyspace.NewMemory()
	return m, &spyStore{Store: m}
}

func ephemeralIn(key keyspace.StreamKey, agent string, workerSeq uint64) keyspace.ActivityEvent {
	ev := eventIn(key, agent, workerSeq)
	ev.Ephemeral = true
	ev.Content = keyspace.Status{State: "thinking"}
	return ev
}

func TestSequencerSplitsByStreamKeepingOrder(t *testing.T) {
	ctx := context.Background()
	m, spy := newSpy()
	seq := keyspace.NewSequencer(spy)
	a, b, c := keyOf(2, 0), keyOf(0, 0), keyspace.NewStreamKey(testWorkflow, generation2, 2, 0)
	batch := []keyspace.ActivityEvent{
		eventIn(a, "x", 1), eventIn(b, "x", 1), ephemeralIn(a, "x", 2),
		eventIn(a, "y", 1), eventIn(c, "x", 1), eventIn(b, "x", 2),
		eventIn(a, "x", 3), ephemeralIn(c, "z", 1), eventIn(c, "x", 2),
	}
	res, err := seq.Append(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := []keyspace.StreamResult{
		{Key: a, FirstSeq: 0, Head: 3, Written: 3},
		{Key: b, FirstSeq: 0, Head: 2, Written: 2},
		{Key: c, FirstSeq: 0, Head: 2, Written: 2},
	}
	if !slices.Equal(res.Streams, want) {
		t.Fatalf("Streams = %+v\nwant %+v", res.Streams, want)
	}
	if got := agentSeqs(readAll(t, m, a)); !slices.Equal(got, []string{"x#1", "y#1", "x#3"}) {
		t.Fatalf("stream a = %v", got)
	}
	if got := agentSeqs(readAll(t, m, b)); !slices.Equal(got, []string{"x#1", "x#2"}) {
		t.Fatalf("stream b = %v", got)
	}
	if got := agentSeqs(readAll(t, m, c)); !slices.Equal(got, []string{"x#1", "x#2"}) {
		t.Fatalf("stream c = %v", got)
	}
	if len(res.Ephemeral) != 2 || res.Ephemeral[0] != batch[2] || res.Ephemeral[1] != batch[7] {
		t.Fatalf("Ephemeral = %+v, want the two ephemeral events in arrival order", res.Ephemeral)
	}
}

func TestSequencerMakesOneAppendPerStream(t *testing.T) {
	ctx := context.Background()
	_, spy := newSpy()
	seq := keyspace.NewSequencer(spy)
	keys := []keyspace.StreamKey{keyOf(0, 0), keyOf(1, 0), keyOf(2, 0)}
	for round := range uint64(3) {
		var batch []keyspace.ActivityEvent
		for i := range uint64(10) {
			for _, k := range keys {
				batch = append(batch, eventIn(k, "agent", round*10+i))
			}
		}
		if _, err := seq.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
		calls := spy.takeAppends()
		if len(calls) != len(keys) {
			t.Fatalf("round %d: %d AppendEvents calls, want %d (one per stream)", round, len(calls), len(keys))
		}
		for i, c := range calls {
			if keyspace.KeyOf(c.events[0]) != keys[i] || len(c.events) != 10 || c.expectedSeq != round*10 {
				t.Fatalf("round %d call %d: %d events of %s at %d; want 10 of %s at %d",
					round, i, len(c.events), keyspace.KeyOf(c.events[0]), c.expectedSeq, keys[i], round*10)
			}
		}
	}
}

func TestSequencerBoundedRetry(t *testing.T) {
	healthy, doomed, later := keyOf(0, 0), keyOf(1, 0), keyOf(2, 0)
	testCases := []struct {
		name      string
		opts      []keyspace.SequencerOption
		wantCalls int
	}{
		{name: "default", wantCalls: 9},
		{name: "no retry", opts: []keyspace.SequencerOption{keyspace.WithMaxRetries(0)}, wantCalls: 1},
		{name: "three retries", opts: []keyspace.SequencerOption{keyspace.WithMaxRetries(3)}, wantCalls: 4},
		{name: "negative ignored", opts: []keyspace.SequencerOption{keyspace.WithMaxRetries(-1)}, wantCalls: 9},
		{name: "nil option ignored", opts: []keyspace.SequencerOption{nil, keyspace.WithMaxRetries(2)}, wantCalls: 3},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			m, spy := newSpy()
			// The doomed stream always conflicts, its head always one ahead.
			spy.intercept = func(key keyspace.StreamKey, expected uint64) error {
				if key == doomed {
					return &eventstore.SequenceConflictError{Expected: expected, Found: expected + 1}
				}
				return nil
			}
			seq := keyspace.NewSequencer(spy, tc.opts...)
			batch := []keyspace.ActivityEvent{
				eventIn(healthy, "x", 1), eventIn(doomed, "x", 1), eventIn(doomed, "x", 2), eventIn(later, "x", 1),
			}
			res, err := seq.Append(ctx, batch)

			var exhausted *keyspace.RetryExhaustedError
			if !errors.As(err, &exhausted) {
				t.Fatalf("Append = %v, want a *RetryExhaustedError", err)
			}
			if !errors.Is(err, eventstore.ErrSequenceConflict) {
				t.Fatalf("%v does not match ErrSequenceConflict", err)
			}
			var conflict *eventstore.SequenceConflictError
			if !errors.As(err, &conflict) {
				t.Fatalf("%v does not unwrap to a *SequenceConflictError", err)
			}
			calls := spy.takeAppends()
			var doomedCalls int
			for _, c := range calls {
				if keyspace.KeyOf(c.events[0]) == doomed {
					doomedCalls++
				}
				if keyspace.KeyOf(c.events[0]) == later {
					t.Fatal("a stream after the failed one was attempted")
				}
			}
			if doomedCalls != tc.wantCalls || exhausted.Attempts != tc.wantCalls {
				t.Fatalf("doomed stream: %d calls, Attempts %d; want %d", doomedCalls, exhausted.Attempts, tc.wantCalls)
			}
			if exhausted.Key != doomed || exhausted.Unwritten != 2 || exhausted.Head != uint64(tc.wantCalls) {
				t.Fatalf("error fields = %+v; want Key %s, Unwritten 2, Head %d", exhausted, doomed, tc.wantCalls)
			}
			wantText := fmt.Sprintf("stream %s: 2 events unwritten after %d conflicting attempts", doomed, tc.wantCalls)
			if !strings.Contains(err.Error(), wantText) {
				t.Fatalf("error text %q does not say %q", err, wantText)
			}
			wantDone := []keyspace.StreamResult{{Key: healthy, FirstSeq: 0, Head: 1, Written: 1}}
			if !slices.Equal(res.Streams, wantDone) || !slices.Equal(exhausted.Committed, wantDone) {
				t.Fatalf("partial result %+v, Committed %+v; want %+v", res.Streams, exhausted.Committed, wantDone)
			}
			if h := headOf(t, m, doomed); h != 0 {
				t.Fatalf("doomed stream head = %d, want 0", h)
			}
		})
	}
}

func TestSequencerResolvesConflictWithAnotherWriter(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	spyB := &spyStore{Store: m}
	procA, procB := keyspace.NewSequencer(m), keyspace.NewSequencer(spyB)
	key := keyOf(0, 0)

	// B loads the stream (head 0) and writes one event.
	if _, err := procB.Append(ctx, eventsIn(key, "b", 1, 1)); err != nil {
		t.Fatal(err)
	}
	// A writes behind B's back: A's cache loads at head 1.
	if _, err := procA.Append(ctx, eventsIn(key, "a", 1, 3)); err != nil {
		t.Fatal(err)
	}
	spyB.takeAppends()
	// B still believes the head is 1: its append conflicts, then lands at 4.
	res, err := procB.Append(ctx, eventsIn(key, "b", 2, 3))
	if err != nil {
		t.Fatal(err)
	}
	want := keyspace.StreamResult{Key: key, FirstSeq: 4, Head: 6, Written: 2}
	if len(res.Streams) != 1 || res.Streams[0] != want {
		t.Fatalf("B's result = %+v, want %+v", res.Streams, want)
	}
	calls := spyB.takeAppends()
	if len(calls) != 2 || calls[0].expectedSeq != 1 || calls[1].expectedSeq != 4 {
		t.Fatalf("B's AppendEvents calls = %+v; want a conflict at 1 then a write at 4", calls)
	}
	recs := readAll(t, m, key)
	checkContiguous(t, recs)
	if got := agentSeqs(recs); !slices.Equal(got, []string{"b#1", "a#1", "a#2", "a#3", "b#2", "b#3"}) {
		t.Fatalf("stream = %v", got)
	}
}

func TestSequencerDropsWhatAnotherWriterPersisted(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	procA, procB := keyspace.NewSequencer(m), keyspace.NewSequencer(m)
	key := keyOf(0, 0)
	// B touches the stream first, so its cache is at head 0.
	if _, err := procB.Append(ctx, eventsIn(key, "other", 1, 1)); err != nil {
		t.Fatal(err)
	}
	// A persists x#1..3 (a failover: both processes receive x's events).
	if _, err := procA.Append(ctx, eventsIn(key, "x", 1, 3)); err != nil {
		t.Fatal(err)
	}
	// B gets x#2..5: the conflict teaches it x#2 and x#3 are already stored.
	res, err := procB.Append(ctx, eventsIn(key, "x", 2, 5))
	if err != nil {
		t.Fatal(err)
	}
	want := keyspace.StreamResult{Key: key, FirstSeq: 4, Head: 6, Written: 2, Duplicates: 2}
	if len(res.Streams) != 1 || res.Streams[0] != want {
		t.Fatalf("result = %+v, want %+v", res.Streams, want)
	}
	if got := agentSeqs(readAll(t, m, key)); !slices.Equal(got, []string{"other#1", "x#1", "x#2", "x#3", "x#4", "x#5"}) {
		t.Fatalf("stream = %v", got)
	}
}

func TestSequencerDropsRedelivery(t *testing.T) {
	ctx := context.Background()
	m, spy := newSpy()
	key := keyOf(0, 0)
	seq := keyspace.NewSequencer(spy)
	if _, err := seq.Append(ctx, eventsIn(key, "x", 1, 3)); err != nil {
		t.Fatal(err)
	}

	t.Run("same sequencer", func(t *testing.T) {
		res, err := seq.Append(ctx, eventsIn(key, "x", 2, 4))
		if err != nil {
			t.Fatal(err)
		}
		want := keyspace.StreamResult{Key: key, FirstSeq: 3, Head: 4, Written: 1, Duplicates: 2}
		if len(res.Streams) != 1 || res.Streams[0] != want {
			t.Fatalf("result = %+v, want %+v", res.Streams, want)
		}
	})

	t.Run("after a restart", func(t *testing.T) {
		spy.takeAppends()
		restarted := keyspace.NewSequencer(spy)
		res, err := restarted.Append(ctx, eventsIn(key, "x", 1, 4))
		if err != nil {
			t.Fatal(err)
		}
		want := keyspace.StreamResult{Key: key, FirstSeq: 4, Head: 4, Duplicates: 4}
		if len(res.Streams) != 1 || res.Streams[0] != want {
			t.Fatalf("result = %+v, want %+v", res.Streams, want)
		}
		if calls := spy.takeAppends(); len(calls) != 0 {
			t.Fatalf("%d AppendEvents calls for a batch of duplicates, want 0", len(calls))
		}
	})

	if got := agentSeqs(readAll(t, m, key)); !slices.Equal(got, []string{"x#1", "x#2", "x#3", "x#4"}) {
		t.Fatalf("stream = %v, want each event once", got)
	}
}

func TestSequencerDropsDuplicatesWithinABatch(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(0, 0)
	batch := []keyspace.ActivityEvent{
		eventIn(key, "x", 1), eventIn(key, "x", 1), eventIn(key, "y", 1),
		eventIn(key, "x", 2), eventIn(key, "y", 1), eventIn(key, "x", 2), eventIn(key, "x", 0),
	}
	res, err := keyspace.NewSequencer(m).Append(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want := keyspace.StreamResult{Key: key, FirstSeq: 0, Head: 3, Written: 3, Duplicates: 4}
	if len(res.Streams) != 1 || res.Streams[0] != want {
		t.Fatalf("result = %+v, want %+v", res.Streams, want)
	}
	if got := agentSeqs(readAll(t, m, key)); !slices.Equal(got, []string{"x#1", "y#1", "x#2"}) {
		t.Fatalf("stream = %v", got)
	}
}

func TestSequencerNeverDeduplicatesEmptyAgentID(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(0, 0)
	seq := keyspace.NewSequencer(m)
	for range 2 {
		res, err := seq.Append(ctx, []keyspace.ActivityEvent{eventIn(key, "", 1), eventIn(key, "", 1)})
		if err != nil {
			t.Fatal(err)
		}
		if res.Streams[0].Written != 2 || res.Streams[0].Duplicates != 0 {
			t.Fatalf("result = %+v, want both anonymous events written", res.Streams[0])
		}
	}
	if h := headOf(t, m, key); h != 4 {
		t.Fatalf("head = %d, want 4", h)
	}
}

func TestSequencerSetsEphemeralAside(t *testing.T) {
	ctx := context.Background()
	m, spy := newSpy()
	seq := keyspace.NewSequencer(spy)
	a, b := keyOf(0, 0), keyOf(1, 0)
	batch := []keyspace.ActivityEvent{ephemeralIn(a, "x", 1), ephemeralIn(b, "x", 1), ephemeralIn(a, "x", 2)}
	res, err := seq.Append(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Ephemeral, batch) || len(res.Streams) != 0 {
		t.Fatalf("result = %+v, want the three ephemeral events and no stream", res)
	}
	if calls := spy.takeAppends(); len(calls) != 0 {
		t.Fatalf("%d AppendEvents calls for ephemeral events, want 0", len(calls))
	}
	if h := headOf(t, m, a) + headOf(t, m, b); h != 0 {
		t.Fatal("an ephemeral event was stored")
	}
}

func TestSequencerRefusesZeroIDsWritingNothing(t *testing.T) {
	good := keyOf(0, 0)
	zeroRun := keyspace.NewStreamKey(testWorkflow, eventstore.RunID{}, 0, 0)
	zeroWorkflow := keyspace.NewStreamKey(eventstore.WorkflowID{}, generation1, 0, 0)
	testCases := []struct {
		name  string
		batch []keyspace.ActivityEvent
	}{
		{name: "zero run after a good stream", batch: []keyspace.ActivityEvent{eventIn(good, "x", 1), eventIn(zeroRun, "x", 1)}},
		{name: "zero workflow first", batch: []keyspace.ActivityEvent{eventIn(zeroWorkflow, "x", 1), eventIn(good, "x", 1)}},
		{name: "zero id on an ephemeral event", batch: []keyspace.ActivityEvent{eventIn(good, "x", 1), ephemeralIn(zeroRun, "x", 2)}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m, spy := newSpy()
			res, err := keyspace.NewSequencer(spy).Append(context.Background(), tc.batch)
			if !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Fatalf("Append = %v, want ErrInvalidArgument", err)
			}
			if len(res.Streams) != 0 || len(res.Ephemeral) != 0 {
				t.Fatalf("result = %+v, want empty", res)
			}
			if calls := spy.takeAppends(); len(calls) != 0 {
				t.Fatalf("%d AppendEvents calls, want 0", len(calls))
			}
			if h := headOf(t, m, good); h != 0 {
				t.Fatalf("good stream head = %d, want 0", h)
			}
		})
	}
}

func TestSequencerStopsAtAFailingStream(t *testing.T) {
	ctx := context.Background()
	m, spy := newSpy()
	a, b, c := keyOf(0, 0), keyOf(1, 0), keyOf(2, 0)
	errBackend := errors.New("backend unavailable")
	spy.intercept = func(key keyspace.StreamKey, _ uint64) error {
		if key == b {
			return errBackend
		}
		return nil
	}
	seq := keyspace.NewSequencer(spy)
	batch := []keyspace.ActivityEvent{eventIn(a, "x", 1), eventIn(b, "x", 1), ephemeralIn(a, "x", 2), eventIn(c, "x", 1)}
	res, err := seq.Append(ctx, batch)
	if !errors.Is(err, errBackend) {
		t.Fatalf("Append = %v, want the store's error", err)
	}
	want := []keyspace.StreamResult{{Key: a, FirstSeq: 0, Head: 1, Written: 1}}
	if !slices.Equal(res.Streams, want) || len(res.Ephemeral) != 1 {
		t.Fatalf("result = %+v, want stream a committed and the ephemeral event", res)
	}
	if headOf(t, m, b) != 0 || headOf(t, m, c) != 0 {
		t.Fatal("a stream at or after the failure was written")
	}

	// Retrying the batch once the backend is back writes only what is missing.
	spy.intercept = nil
	res, err = seq.Append(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	want = []keyspace.StreamResult{
		{Key: a, FirstSeq: 1, Head: 1, Duplicates: 1},
		{Key: b, FirstSeq: 0, Head: 1, Written: 1},
		{Key: c, FirstSeq: 0, Head: 1, Written: 1},
	}
	if !slices.Equal(res.Streams, want) {
		t.Fatalf("retry result = %+v\nwant %+v", res.Streams, want)
	}
}

// TestSequencerRecoversFromAFailedButCommittedAppend covers a backend that
// commits and then reports an error (a timeout after the commit, say). When
// the caller re-sends, the events that did land are found and dropped.
func TestSequencerRecoversFromAFailedButCommittedAppend(t *testing.T) {
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(0, 0)
	errTimeout := errors.New("timeout")
	failOnce := &ambiguousStore{Memory: m, err: errTimeout}
	seq := keyspace.NewSequencer(failOnce)
	if _, err := seq.Append(ctx, eventsIn(key, "x", 1, 2)); err != nil {
		t.Fatal(err)
	}
	failOnce.armed = true
	if _, err := seq.Append(ctx, eventsIn(key, "x", 3, 4)); !errors.Is(err, errTimeout) {
		t.Fatalf("Append = %v, want the timeout", err)
	}
	res, err := seq.Append(ctx, eventsIn(key, "x", 3, 5))
	if err != nil {
		t.Fatal(err)
	}
	want := keyspace.StreamResult{Key: key, FirstSeq: 4, Head: 5, Written: 1, Duplicates: 2}
	if len(res.Streams) != 1 || res.Streams[0] != want {
		t.Fatalf("result = %+v, want %+v", res.Streams, want)
	}
	if got := agentSeqs(readAll(t, m, key)); !slices.Equal(got, []string{"x#1", "x#2", "x#3", "x#4", "x#5"}) {
		t.Fatalf("stream = %v", got)
	}
}

// ambiguousStore commits an append and then, when armed, reports err once.
type ambiguousStore struct {
	*keyspace.Memory
	armed bool
	err   error
}

func (s *ambiguousStore) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	head, err := s.Memory.AppendEvents(ctx, expectedSeq, events)
	if err == nil && s.armed {
		s.armed = false
		return 0, s.err
	}
	return head, err
}

// TestSequencerReloadsWhenTheStoreIsBehindItsCache covers a conflict whose head
// is below the cached one (the store was restored from an older backup, say):
// the cache is rebuilt from the store and the append lands at the real head.
func TestSequencerReloadsWhenTheStoreIsBehindItsCache(t *testing.T) {
	ctx := context.Background()
	key := keyOf(0, 0)
	swap := &swappableStore{}
	swap.set(keyspace.NewMemory())
	seq := keyspace.NewSequencer(swap)
	if _, err := seq.Append(ctx, eventsIn(key, "x", 1, 3)); err != nil {
		t.Fatal(err)
	}
	older := keyspace.NewMemory()
	if _, err := older.AppendEvents(ctx, 0, eventsIn(key, "x", 1, 1)); err != nil {
		t.Fatal(err)
	}
	swap.set(older)
	res, err := seq.Append(ctx, eventsIn(key, "x", 1, 4))
	if err != nil {
		t.Fatal(err)
	}
	want := keyspace.StreamResult{Key: key, FirstSeq: 1, Head: 4, Written: 3, Duplicates: 1}
	if len(res.Streams) != 1 || res.Streams[0] != want {
		t.Fatalf("result = %+v, want %+v", res.Streams, want)
	}
	if got := agentSeqs(readAll(t, older, key)); !slices.Equal(got, []string{"x#1", "x#2", "x#3", "x#4"}) {
		t.Fatalf("stream = %v", got)
	}
}

type swappableStore struct {
	mu sync.Mutex
	keyspace.Store
}

func (s *swappableStore) set(inner keyspace.Store) { s.mu.Lock(); s.Store = inner; s.mu.Unlock() }
func (s *swappableStore) get() keyspace.Store      { s.mu.Lock(); defer s.mu.Unlock(); return s.Store }
func (s *swappableStore) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	return s.get().AppendEvents(ctx, expectedSeq, events)
}
func (s *swappableStore) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	return s.get().ReadFrom(ctx, key, fromSeq, limit)
}

func TestSequencerLoadsLongStreamsInPages(t *testing.T) {
	ctx := context.Background()
	m, spy := newSpy()
	key := keyOf(0, 0)
	// 2,500 records from agent x, written directly, then one from agent y.
	if _, err := m.AppendEvents(ctx, 0, eventsIn(key, "x", 1, 2500)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.AppendEvents(ctx, 2500, eventsIn(key, "y", 7, 7)); err != nil {
		t.Fatal(err)
	}
	res, err := keyspace.NewSequencer(spy).Append(ctx, append(eventsIn(key, "x", 2499, 2501), eventsIn(key, "y", 7, 8)...))
	if err != nil {
		t.Fatal(err)
	}
	want := keyspace.StreamResult{Key: key, FirstSeq: 2501, Head: 2503, Written: 2, Duplicates: 3}
	if len(res.Streams) != 1 || res.Streams[0] != want {
		t.Fatalf("result = %+v, want %+v", res.Streams, want)
	}
	if reads := spy.takeReads(); reads < 3 {
		t.Fatalf("loaded 2,501 records in %d reads, want paged reads", reads)
	}
}

func TestSequencerForgetsLeastRecentlyUsedStreams(t *testing.T) {
	ctx := context.Background()
	m, spy := newSpy()
	seq := keyspace.NewSequencer(spy, keyspace.WithMaxCachedStreams(2), keyspace.WithMaxCachedStreams(0))
	a, b, c := keyOf(0, 0), keyOf(1, 0), keyOf(2, 0)
	steps := []struct {
		key       keyspace.StreamKey
		workerSeq uint64
		wantReads int // loads from the store
	}{
		{a, 1, 1}, // first touch loads a
		{a, 2, 0}, // cached
		{b, 1, 1}, // loads b; two cached
		{a, 3, 0}, // still cached; a is now the most recent
		{c, 1, 1}, // loads c; b, the least recently used, is forgotten
		{a, 4, 0}, // a survived
		{b, 2, 1}, // b is reloaded
	}
	for i, st := range steps {
		if _, err := seq.Append(ctx, eventsIn(st.key, "x", st.workerSeq, st.workerSeq)); err != nil {
			t.Fatal(err)
		}
		if reads := spy.takeReads(); reads != st.wantReads {
			t.Fatalf("step %d (%s): %d reads, want %d", i, st.key, reads, st.wantReads)
		}
	}
	// A forgotten stream still recognises re-deliveries after its reload.
	if _, err := seq.Append(ctx, eventsIn(c, "x", 1, 1)); err != nil { // reloads c, evicts a
		t.Fatal(err)
	}
	res, err := seq.Append(ctx, eventsIn(a, "x", 1, 5))
	if err != nil {
		t.Fatal(err)
	}
	if r := res.Streams[0]; r.Written != 1 || r.Duplicates != 4 {
		t.Fatalf("after a reload: %+v, want 1 written, 4 duplicates", r)
	}
	if got := agentSeqs(readAll(t, m, a)); !slices.Equal(got, []string{"x#1", "x#2", "x#3", "x#4", "x#5"}) {
		t.Fatalf("stream a = %v", got)
	}
}

func TestSequencerWithoutStore(t *testing.T) {
	_, err := keyspace.NewSequencer(nil).Append(context.Background(), eventsIn(keyOf(0, 0), "x", 1, 1))
	if !errors.Is(err, eventstore.ErrInvalidArgument) {
		t.Fatalf("Append = %v, want ErrInvalidArgument", err)
	}
	// Regression: a typed nil store was taken for a store, and the first
	// Append panicked inside it.
	var nilMemory *keyspace.Memory
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Append over a nil *Memory panicked: %v", r)
			}
		}()
		_, err = keyspace.NewSequencer(nilMemory).Append(context.Background(), eventsIn(keyOf(0, 0), "x", 1, 1))
	}()
	if !errors.Is(err, eventstore.ErrInvalidArgument) || !strings.Contains(err.Error(), "sequencer has no store") {
		t.Fatalf("Append over a nil *Memory = %v, want the no-store error", err)
	}
	var nilSeq *keyspace.Sequencer
	if _, err := nilSeq.Append(context.Background(), nil); !errors.Is(err, eventstore.ErrInvalidArgument) {
		t.Fatalf("Append on a nil Sequencer = %v, want ErrInvalidArgument", err)
	}
}

func TestSequencerHonoursCanceledContext(t *testing.T) {
	m, spy := newSpy()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := keyspace.NewSequencer(spy).Append(ctx, eventsIn(keyOf(0, 0), "x", 1, 2))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Append = %v, want context.Canceled", err)
	}
	if len(spy.takeAppends()) != 0 || headOf(t, m, keyOf(0, 0)) != 0 {
		t.Fatal("a canceled Append wrote")
	}
}

// TestSequencerTwoProcessesInterleave runs two Sequencers on one Memory, as two
// server processes would be, appending concurrently to one stream. Agent a
// reaches only the first, b only the second, c both (a failover re-delivering
// everything). Each event must be stored exactly once, each agent's in order.
func TestSequencerTwoProcessesInterleave(t *testing.T) {
	const perAgent = 300
	ctx := context.Background()
	m := keyspace.NewMemory()
	key := keyOf(0, 0)
	procs := []*keyspace.Sequencer{keyspace.NewSequencer(m, keyspace.WithMaxRetries(1000)), keyspace.NewSequencer(m, keyspace.WithMaxRetries(1000))}
	own := []string{"a", "b"}

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for p, proc := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next := uint64(1); next <= perAgent; {
				n := min(uint64(1+(p+int(next))%4), perAgent-next+1)
				batch := append(eventsIn(key, own[p], next, next+n-1), eventsIn(key, "c", next, next+n-1)...)
				if _, err := proc.Append(ctx, batch); err != nil {
					errs <- err
					return
				}
				next += n
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	recs := readAll(t, m, key)
	checkContiguous(t, recs)
	if len(recs) != 3*perAgent {
		t.Fatalf("stream holds %d records, want %d", len(recs), 3*perAgent)
	}
	next := map[string]uint64{}
	for _, r := range recs {
		want := next[r.Event.AgentID] + 1
		if r.Event.WorkerSeq != want {
			t.Fatalf("record %d is %s#%d, want %s#%d", r.StoreSeq, r.Event.AgentID, r.Event.WorkerSeq, r.Event.AgentID, want)
		}
		next[r.Event.AgentID] = want
	}
}

func TestSequencerConcurrentSafe(t *testing.T) {
	const (
		goroutines = 8
		perG       = 200
	)
	ctx := context.Background()
	m := keyspace.NewMemory()
	// A cache smaller than the streams in use forces evictions under load.
	seq := keyspace.NewSequencer(m, keyspace.WithMaxCachedStreams(2))
	keys := []keyspace.StreamKey{keyOf(0, 0), keyOf(1, 0), keyOf(2, 0), keyOf(3, 0)}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			agent := fmt.Sprintf("agent-%d", g)
			for i := uint64(1); i <= perG; i++ {
				// Each event goes to two streams; the second copy is re-sent
				// to test deduplication under contention.
				k1, k2 := keys[(g+int(i))%len(keys)], keys[(g+int(i)+1)%len(keys)]
				batch := []keyspace.ActivityEvent{eventIn(k1, agent, i), eventIn(k2, agent, i), eventIn(k2, agent, i)}
				if _, err := seq.Append(ctx, batch); err != nil {
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
	total := 0
	for _, k := range keys {
		recs := readAll(t, m, k)
		checkContiguous(t, recs)
		seen := map[string]bool{}
		last := map[string]uint64{}
		for _, r := range recs {
			id := fmt.Sprintf("%s#%d", r.Event.AgentID, r.Event.WorkerSeq)
			if seen[id] {
				t.Fatalf("stream %s holds %s twice", k, id)
			}
			seen[id] = true
			if r.Event.WorkerSeq <= last[r.Event.AgentID] {
				t.Fatalf("stream %s: %s after WorkerSeq %d", k, id, last[r.Event.AgentID])
			}
			last[r.Event.AgentID] = r.Event.WorkerSeq
		}
		total += len(recs)
	}
	if total != goroutines*perG*2 {
		t.Fatalf("%d records stored, want %d", total, goroutines*perG*2)
	}
}

// TestSequencerManyStreamsAndAgents uses more streams per batch and more agents
// per stream than the Sequencer tracks by linear search, so the map-based
// paths of grouping and in-batch deduplication run too.
func TestSequencerManyStreamsAndAgents(t *testing.T) {
	const streams, agents = 12, 7
	ctx := context.Background()
	m, spy := newSpy()
	var batch []keyspace.ActivityEvent
	for round := range uint64(3) {
		for s := range streams {
			for a := range agents {
				ev := eventIn(keyOf(eventstore.ActivityID(s), 0), fmt.Sprintf("agent-%d", a), round)
				batch = append(batch, ev)
				if a%3 == 0 {
					batch = append(batch, ev) // an in-batch duplicate
				}
			}
		}
	}
	res, err := keyspace.NewSequencer(spy).Append(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if calls := spy.takeAppends(); len(calls) != streams {
		t.Fatalf("%d AppendEvents calls, want %d", len(calls), streams)
	}
	if len(res.Streams) != streams {
		t.Fatalf("%d stream results, want %d", len(res.Streams), streams)
	}
	for s, r := range res.Streams {
		key := keyOf(eventstore.ActivityID(s), 0)
		if r.Key != key || r.Written != 3*agents || r.Duplicates != 3*3 {
			t.Fatalf("stream %d: %+v, want %d written, 9 duplicates", s, r, 3*agents)
		}
		recs := readAll(t, m, key)
		for i, rec := range recs {
			want := fmt.Sprintf("agent-%d#%d", i%agents, i/agents)
			if got := fmt.Sprintf("%s#%d", rec.Event.AgentID, rec.Event.WorkerSeq); got != want {
				t.Fatalf("stream %d record %d = %s, want %s", s, i, got, want)
			}
		}
	}
}

func TestSequencerReturnsReadErrors(t *testing.T) {
	ctx := context.Background()
	key := keyOf(0, 0)
	errRead := errors.New("read failed")

	t.Run("loading a stream", func(t *testing.T) {
		m, spy := newSpy()
		spy.readErr = errRead
		seq := keyspace.NewSequencer(spy)
		if _, err := seq.Append(ctx, eventsIn(key, "x", 1, 2)); !errors.Is(err, errRead) {
			t.Fatalf("Append = %v, want the read error", err)
		}
		if calls := spy.takeAppends(); len(calls) != 0 || headOf(t, m, key) != 0 {
			t.Fatal("Append wrote without knowing the stream")
		}
		// Once reads work again, the stream is loaded and written.
		spy.readErr = nil
		res, err := seq.Append(ctx, eventsIn(key, "x", 1, 2))
		if err != nil || res.Streams[0].Written != 2 {
			t.Fatalf("Append after recovery = %+v, %v", res, err)
		}
	})

	t.Run("catching up after a conflict", func(t *testing.T) {
		m, spy := newSpy()
		seq := keyspace.NewSequencer(spy)
		if _, err := seq.Append(ctx, eventsIn(key, "x", 1, 1)); err != nil {
			t.Fatal(err)
		}
		if _, err := m.AppendEvents(ctx, 1, eventsIn(key, "other", 1, 1)); err != nil {
			t.Fatal(err)
		}
		spy.readErr = errRead
		_, err := seq.Append(ctx, eventsIn(key, "x", 2, 2))
		var exhausted *keyspace.RetryExhaustedError
		if !errors.Is(err, errRead) || errors.As(err, &exhausted) {
			t.Fatalf("Append = %v, want the read error itself", err)
		}
		spy.readErr = nil
		res, err := seq.Append(ctx, eventsIn(key, "x", 1, 2))
		if err != nil {
			t.Fatal(err)
		}
		want := keyspace.StreamResult{Key: key, FirstSeq: 2, Head: 3, Written: 1, Duplicates: 1}
		if res.Streams[0] != want {
			t.Fatalf("Append after recovery = %+v, want %+v", res.Streams[0], want)
		}
	})
}

// gateStore holds the first AppendEvents call after hold is armed: it sends
// on entered, then waits for release before reaching the inner store. Every
// AppendEvents call is counted per agent of its first event.
type gateStore struct {
	keyspace.Store
	entered, release chan struct{}

	mu      sync.Mutex
	hold    bool
	callers []string // AgentID of each AppendEvents call's first event
}

func newGate(inner keyspace.Store) *gateStore {
	return &gateStore{Store: inner, entered: make(chan struct{}), release: make(chan struct{}), hold: true}
}

func (g *gateStore) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	g.mu.Lock()
	hold := g.hold
	g.hold = false
	if len(events) > 0 {
		g.callers = append(g.callers, events[0].AgentID)
	}
	g.mu.Unlock()
	if hold {
		g.entered <- struct{}{}
		<-g.release
	}
	return g.Store.AppendEvents(ctx, expectedSeq, events)
}

func (g *gateStore) takeCallers() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.callers
	g.callers = nil
	return out
}

// TestSequencerWaitEndsWithContext: while one Append holds a stream inside
// the store, a second Append of the same stream gives up as soon as its
// context is cancelled or its deadline passes, without reaching the store;
// the holder then completes, and a later Append lands right after it. (On a
// Sequencer that ignores the context while waiting, the waiter never
// returns and go test's -timeout fails the test.)
func TestSequencerWaitEndsWithContext(t *testing.T) {
	testCases := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		end  func(cancel context.CancelFunc) // makes the context end
		want error
	}{
		{
			name: "cancel",
			ctx:  func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) },
			end:  func(cancel context.CancelFunc) { cancel() },
			want: context.Canceled,
		},
		{
			name: "deadline",
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 200*time.Millisecond)
			},
			end:  func(context.CancelFunc) {}, // the bubble's clock reaches the deadline
			want: context.DeadlineExceeded,
		},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				m := keyspace.NewMemory()
				gate := newGate(m)
				seq := keyspace.NewSequencer(gate)
				key := keyOf(0, 0)

				holder := make(chan error, 1)
				go func() {
					_, err := seq.Append(context.Background(), eventsIn(key, "a", 1, 2))
					holder <- err
				}()
				<-gate.entered // a holds the stream

				ctx, cancel := tc.ctx()
				defer cancel()
				start := time.Now()
				waiter := make(chan error, 1)
				go func() {
					_, err := seq.Append(ctx, eventsIn(key, "b", 1, 1))
					waiter <- err
				}()
				synctest.Wait() // b is waiting for the stream
				tc.end(cancel)
				err := <-waiter
				if !errors.Is(err, tc.want) || !errors.Is(err, ctx.Err()) {
					t.Fatalf("waiting Append = %v, want an error matching %v", err, tc.want)
				}
				if tc.want == context.DeadlineExceeded {
					if waited := time.Since(start); waited != 200*time.Millisecond {
						t.Fatalf("waiting Append gave up after %v, want at its 200ms deadline", waited)
					}
				}
				if got := gate.takeCallers(); !slices.Equal(got, []string{"a"}) {
					t.Fatalf("AppendEvents callers while a held the stream = %v, want [a]", got)
				}

				close(gate.release)
				if err := <-holder; err != nil {
					t.Fatalf("holding Append = %v", err)
				}
				res, err := seq.Append(context.Background(), eventsIn(key, "c", 1, 1))
				if err != nil || res.Streams[0].FirstSeq != 2 {
					t.Fatalf("later Append = %+v, %v; want it at store seq 2", res, err)
				}
				recs := readAll(t, m, key)
				checkContiguous(t, recs)
				if got, want := agentSeqs(recs), []string{"a#1", "a#2", "c#1"}; !slices.Equal(got, want) {
					t.Fatalf("stream = %v, want %v", got, want)
				}
			})
		})
	}
}

// yieldingStore gives other goroutines a chance inside every AppendEvents,
// so that concurrent Appends of one stream really wait for each other.
type yieldingStore struct{ keyspace.Store }

func (y yieldingStore) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	for range 3 {
		runtime.Gosched()
	}
	return y.Store.AppendEvents(ctx, expectedSeq, events)
}

// TestSequencerCancellationConcurrentSafe runs many Appends of one stream,
// some with contexts cancelled before the call, some cancelled while it runs
// or waits (at a random moment), some never. Every call either succeeds,
// with its events stored exactly once, contiguously and in order, or fails
// with context.Canceled having stored none of them; the stream ends with
// exactly the successful calls' events and accepts a further Append.
func TestSequencerCancellationConcurrentSafe(t *testing.T) {
	const (
		callers  = 64
		perCall  = 3
		attempts = 4 // Appends per caller
	)
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			checkCancellationStorm(t, seed, callers, perCall, attempts)
		})
	}
}

func checkCancellationStorm(t *testing.T, seed uint64, callers, perCall, attempts int) {
	rng := rand.New(rand.NewPCG(seed, 0))
	m := keyspace.NewMemory()
	seq := keyspace.NewSequencer(yieldingStore{m})
	key := keyOf(0, 0)

	type outcome struct {
		agent string
		err   error
	}
	type plan struct {
		mode   int // 0 never cancelled, 1 cancelled before the call, 2 cancelled during it
		yields int
	}
	plans := make([][]plan, callers)
	for c := range plans {
		for range attempts {
			plans[c] = append(plans[c], plan{mode: rng.IntN(3), yields: rng.IntN(20)})
		}
	}
	results := make(chan outcome, callers*attempts)
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			for a, p := range plans[c] {
				agent := fmt.Sprintf("agent-%d-%d", c, a)
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan struct{})
				switch p.mode {
				case 1:
					cancel()
				case 2:
					go func() {
						defer close(done)
						for range p.yields {
							runtime.Gosched()
						}
						cancel()
					}()
				}
				_, err := seq.Append(ctx, eventsIn(key, agent, 1, uint64(perCall)))
				if p.mode == 2 {
					<-done
				}
				cancel()
				results <- outcome{agent: agent, err: err}
			}
		})
	}
	wg.Wait()
	close(results)

	recs := readAll(t, m, key)
	checkContiguous(t, recs)
	at := map[string][]uint64{} // agent -> store seqs of its records
	for _, r := range recs {
		at[r.Event.AgentID] = append(at[r.Event.AgentID], r.StoreSeq)
	}
	stored, cancelled, gaveUpWaiting := 0, 0, 0
	for o := range results {
		seqs := at[o.agent]
		if o.err != nil {
			if !errors.Is(o.err, context.Canceled) {
				t.Fatalf("%s: Append = %v, want success or context.Canceled", o.agent, o.err)
			}
			if len(seqs) != 0 {
				t.Fatalf("%s: Append failed with %v but stored records at %v", o.agent, o.err, seqs)
			}
			cancelled++
			if strings.Contains(o.err.Error(), "waiting for an earlier append") {
				gaveUpWaiting++
			}
			continue
		}
		if len(seqs) != perCall {
			t.Fatalf("%s: Append succeeded but stored %d records (at %v), want %d", o.agent, len(seqs), seqs, perCall)
		}
		for i, s := range seqs {
			if s != seqs[0]+uint64(i) || recs[s].Event.WorkerSeq != uint64(i+1) {
				t.Fatalf("%s: records at %v are not its events 1..%d in one run", o.agent, seqs, perCall)
			}
		}
		stored++
	}
	if len(recs) != stored*perCall {
		t.Fatalf("stream holds %d records, want %d (of %d successful Appends)", len(recs), stored*perCall, stored)
	}
	t.Logf("%d Appends stored, %d cancelled (%d while waiting for the stream)", stored, cancelled, gaveUpWaiting)
	res, err := seq.Append(context.Background(), eventsIn(key, "last", 1, 1))
	if err != nil || res.Streams[0].FirstSeq != uint64(len(recs)) {
		t.Fatalf("Append after the storm = %+v, %v; want it at store seq %d", res, err, len(recs))
	}
}

// TestSequencerRefusesBadContentWritingNothing: a Content the stores refuse,
// in any stream of a batch, fails the whole Append before anything is
// written, also to the streams before it.
func TestSequencerRefusesBadContentWritingNothing(t *testing.T) {
	testCases := []struct {
		name    string
		content keyspace.Content
	}{
		{"nil *ToolCall", (*keyspace.ToolCall)(nil)},
		{"custom kind", customContent{}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m, spy := newSpy()
			first, second := keyOf(0, 0), keyOf(1, 0)
			batch := append(eventsIn(first, "x", 1, 2), eventsIn(second, "x", 1, 2)...)
			batch[3].Content = tc.content
			_, err := keyspace.NewSequencer(spy).Append(context.Background(), batch)
			if !errors.Is(err, eventstore.ErrInvalidArgument) || !strings.Contains(err.Error(), "event 3") {
				t.Fatalf("Append = %v, want ErrInvalidArgument naming event 3", err)
			}
			if n := len(spy.takeAppends()); n != 0 || headOf(t, m, first) != 0 || headOf(t, m, second) != 0 {
				t.Fatalf("a refused Append made %d AppendEvents calls or wrote", n)
			}
		})
	}
}

// TestSequencerGivingUpKeepsEarlierStreams: an Append of two streams whose
// second stream is busy commits the first, then gives up on the second when
// its context is cancelled, returning the first stream's result with the
// error; nothing of the second stream is written by it.
func TestSequencerGivingUpKeepsEarlierStreams(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := keyspace.NewMemory()
		gate := newGate(m)
		seq := keyspace.NewSequencer(gate)
		free, busy := keyOf(0, 0), keyOf(1, 0)

		holder := make(chan error, 1)
		go func() {
			_, err := seq.Append(context.Background(), eventsIn(busy, "a", 1, 1))
			holder <- err
		}()
		<-gate.entered

		ctx, cancel := context.WithCancel(context.Background())
		type result struct {
			res keyspace.AppendResult
			err error
		}
		waiter := make(chan result, 1)
		go func() {
			res, err := seq.Append(ctx, append(eventsIn(free, "b", 1, 2), eventsIn(busy, "b", 1, 1)...))
			waiter <- result{res, err}
		}()
		synctest.Wait()
		cancel()
		r := <-waiter
		if !errors.Is(r.err, context.Canceled) {
			t.Fatalf("Append = %v, want context.Canceled", r.err)
		}
		if len(r.res.Streams) != 1 || r.res.Streams[0].Key != free || r.res.Streams[0].Written != 2 {
			t.Fatalf("result = %+v, want the first stream's two events only", r.res)
		}
		close(gate.release)
		if err := <-holder; err != nil {
			t.Fatal(err)
		}
		if got := agentSeqs(readAll(t, m, busy)); !slices.Equal(got, []string{"a#1"}) {
			t.Fatalf("busy stream = %v, want [a#1]", got)
		}
		if got := agentSeqs(readAll(t, m, free)); !slices.Equal(got, []string{"b#1", "b#2"}) {
			t.Fatalf("free stream = %v, want [b#1 b#2]", got)
		}
	})
}

// endlessStore's ReadFrom ignores its context and always returns a full
// page, as a store reading a stream that grows without end would; after
// maxReads it fails, so that a loop that never stops fails the test instead
// of hanging it. Its cancel is called at the third read.
type endlessStore struct {
	keyspace.Store
	reads, maxReads int
	cancel          func()
}

func (s *endlessStore) ReadFrom(_ context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	s.reads++
	if s.reads == 3 {
		s.cancel()
	}
	if s.reads > s.maxReads {
		return nil, errors.New("endlessStore: still reading")
	}
	recs := make([]keyspace.Record, limit)
	for i := range recs {
		recs[i] = keyspace.Record{StoreSeq: fromSeq + uint64(i), Event: eventIn(key, "", 0)}
	}
	return recs, nil
}

// Regression: loading a stream read page after page without looking at the
// context, so over a store that ignores it (or a stream that keeps
// growing) a cancelled Append never returned. It now ends with ctx.Err()
// at the next page.
func TestSequencerLoadEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	store := &endlessStore{Store: keyspace.NewMemory(), maxReads: 1000, cancel: cancel}
	_, err := keyspace.NewSequencer(store).Append(ctx, eventsIn(keyOf(0, 0), "x", 1, 1))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Append = %v after %d reads, want context.Canceled", err, store.reads)
	}
	if store.reads != 3 {
		t.Errorf("%d reads, want 3: the load must stop at the first page after the context ended", store.reads)
	}
}

// nilConflictStore's AppendEvents fails with a typed nil
// *SequenceConflictError: a conflict without a head.
type nilConflictStore struct{ keyspace.Store }

func (nilConflictStore) AppendEvents(context.Context, uint64, []keyspace.ActivityEvent) (uint64, error) {
	return 0, (*eventstore.SequenceConflictError)(nil)
}

// pathErrorStore's AppendEvents fails with a typed nil *fs.PathError, whose
// Unwrap reads its receiver.
type pathErrorStore struct{ keyspace.Store }

func (pathErrorStore) AppendEvents(context.Context, uint64, []keyspace.ActivityEvent) (uint64, error) {
	return 0, (*fs.PathError)(nil)
}

// Regression: a typed nil *SequenceConflictError from the store made Append
// panic reading its Found, and a typed nil *fs.PathError panicked in the
// errors.As looking for a conflict. Each is now returned as the store gave
// it.
func TestSequencerReturnsTypedNilConflict(t *testing.T) {
	testCases := []struct {
		name  string
		store keyspace.Store
		want  error
	}{
		{"typed nil conflict", nilConflictStore{keyspace.NewMemory()}, (*eventstore.SequenceConflictError)(nil)},
		{"typed nil path error", pathErrorStore{keyspace.NewMemory()}, (*fs.PathError)(nil)},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Append panicked: %v", r)
					}
				}()
				_, err = keyspace.NewSequencer(tc.store).Append(context.Background(), eventsIn(keyOf(0, 0), "x", 1, 1))
			}()
			if err != tc.want {
				t.Fatalf("Append = %#v, want the store's error", err)
			}
		})
	}
}

// Regression: Append set Committed on any *RetryExhaustedError it met, also
// one the store returned: a typed nil one panicked (there, and in its
// Unwrap, walked by errors.As), and the store's own was changed. A store's error is now returned untouched.
func TestSequencerLeavesTheStoresRetryErrorAlone(t *testing.T) {
	testCases := []struct {
		name string
		err  *keyspace.RetryExhaustedError
	}{
		{"typed nil", nil},
		{"the store's own", &keyspace.RetryExhaustedError{Attempts: 7}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			a, b := keyOf(0, 0), keyOf(1, 0)
			inner := keyspace.NewMemory()
			if _, err := inner.AppendEvents(context.Background(), 0, eventsIn(a, "x", 1, 1)); err != nil {
				t.Fatal(err)
			}
			store := &splitStore{Memory: inner, failKey: b, err: tc.err}
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("Append panicked: %v", r)
					}
				}()
				_, err = keyspace.NewSequencer(store).Append(context.Background(), append(eventsIn(a, "x", 2, 2), eventsIn(b, "x", 1, 1)...))
			}()
			var got *keyspace.RetryExhaustedError
			if !errors.As(err, &got) || got != tc.err {
				t.Fatalf("Append = %#v, want the store's error", err)
			}
			if tc.err != nil && tc.err.Committed != nil {
				t.Errorf("the store's error was changed: Committed = %v", tc.err.Committed)
			}
		})
	}
}

// splitStore fails AppendEvents for one stream with err.
type splitStore struct {
	*keyspace.Memory
	failKey keyspace.StreamKey
	err     *keyspace.RetryExhaustedError
}

func (s *splitStore) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	if len(events) > 0 && keyspace.KeyOf(events[0]) == s.failKey {
		return 0, s.err
	}
	return s.Memory.AppendEvents(ctx, expectedSeq, events)
}
