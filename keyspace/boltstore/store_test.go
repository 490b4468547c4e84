package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/boltstore"
)

// openStore opens a store on a fresh file and closes it at the end of the
// test. It returns the file's path for tests that reopen it.
func openStore(t testing.TB, opts ...boltstore.Option) (*boltstore.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "keyspace.db")
	s, err := boltstore.Open(path, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func newKey(activity eventstore.ActivityID, attempt uint32) keyspace.StreamKey {
	return keyspace.NewStreamKey(eventstore.NewWorkflowID(), eventstore.NewRunID(), activity, attempt)
}

func event(key keyspace.StreamKey, workerSeq uint64, content keyspace.Content) keyspace.ActivityEvent {
	return keyspace.ActivityEvent{
		WorkflowID: key.WorkflowID, RunID: key.RunID, ActivityID: key.ActivityID, Attempt: key.Attempt,
		AgentID: "agent", AgentRole: "assistant",
		EmittedAt: time.Date(2025, 1, 2, 3, 4, 5, int(workerSeq), time.UTC),
		WorkerSeq: workerSeq,
		Content:   content,
	}
}

func messages(key keyspace.StreamKey, first uint64, n int) []keyspace.ActivityEvent {
	out := make([]keyspace.ActivityEvent, n)
	for i := range out {
		seq := first + uint64(i)
		out[i] = event(key, seq, keyspace.Message{Role: "assistant", Text: fmt.Sprintf("message %d", seq)})
	}
	return out
}

// persisted returns ev as a store returns it at seq.
func persisted(ev keyspace.ActivityEvent, seq uint64) keyspace.Record {
	ev.StoreSeq, ev.Persisted = seq, true
	return keyspace.Record{StoreSeq: seq, Event: ev}
}

func mustAppend(t testing.TB, s keyspace.Store, expected uint64, evs []keyspace.ActivityEvent) {
	t.Helper()
	head, err := s.AppendEvents(context.Background(), expected, evs)
	if err != nil || head != expected+uint64(len(evs)) {
		t.Fatalf("AppendEvents(%d, %d events) = %d, %v", expected, len(evs), head, err)
	}
}

func TestRecordsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	s, path := openStore(t)
	key := newKey(2, 1)
	sibling := keyspace.NewStreamKey(key.WorkflowID, key.RunID, 0, 3)
	evs := []keyspace.ActivityEvent{
		event(key, 1, keyspace.Message{Role: "user", Text: "hi"}),
		event(key, 2, keyspace.ToolCall{CallID: "c", Name: "grep", Arguments: "-r x"}),
		event(key, 3, keyspace.ToolResult{CallID: "c", Output: "none", IsError: true}),
		event(key, 4, keyspace.Status{State: "done", Detail: "ok"}),
		event(key, 5, keyspace.Usage{InputTokens: 10, OutputTokens: math.MaxUint64}),
	}
	mustAppend(t, s, 0, evs[:2])
	mustAppend(t, s, 2, evs[2:])
	mustAppend(t, s, 0, messages(sibling, 0, 1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := boltstore.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	recs, err := s2.ReadFrom(ctx, key, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]keyspace.Record, len(evs))
	for i, ev := range evs {
		want[i] = persisted(ev, uint64(i))
	}
	if !reflect.DeepEqual(recs, want) {
		t.Fatalf("after reopening:\n got %+v\nwant %+v", recs, want)
	}
	list, err := s2.ListStreams(ctx, key.WorkflowID, key.RunID)
	if err != nil {
		t.Fatal(err)
	}
	wantList := []keyspace.StreamSummary{{Key: sibling, Head: 1}, {Key: key, Head: 5}}
	if !reflect.DeepEqual(list, wantList) {
		t.Fatalf("ListStreams after reopening = %v, want %v", list, wantList)
	}
	// The reopened store continues at the head, and refuses the old one.
	mustAppend(t, s2, 5, messages(key, 6, 1))
	_, err = s2.AppendEvents(ctx, 5, messages(key, 7, 1))
	var conflict *eventstore.SequenceConflictError
	if !errors.As(err, &conflict) || conflict.Found != 6 {
		t.Fatalf("append at a consumed seq after reopening = %v, want a conflict finding 6", err)
	}
}

func TestReadFromReturnsTheStoredValues(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	key := newKey(0, 0)
	zone := time.FixedZone("XST", -5*3600)
	evs := []keyspace.ActivityEvent{
		event(key, 0, &keyspace.Message{Role: "pointer", Text: "stored as its value"}),
		event(key, 1, nil),
		event(key, 2, keyspace.Message{Text: "not utf-8: \xff\x00"}),
	}
	evs[1].EmittedAt = time.Date(2025, 6, 1, 12, 0, 0, 7, zone)
	mustAppend(t, s, 0, evs)
	recs, err := s.ReadFrom(ctx, key, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := recs[0].Event.Content, (keyspace.Message{Role: "pointer", Text: "stored as its value"}); got != want {
		t.Errorf("pointer content read back as %#v, want the value %#v", got, want)
	}
	if recs[1].Event.Content != nil {
		t.Errorf("nil content read back as %#v", recs[1].Event.Content)
	}
	if at := recs[1].Event.EmittedAt; !at.Equal(evs[1].EmittedAt) || at.Location().String() != "XST" {
		t.Errorf("EmittedAt read back as %v, want %v in zone XST", at, evs[1].EmittedAt)
	}
	if got := recs[2].Event.Content.(keyspace.Message).Text; got != "not utf-8: \xff\x00" {
		t.Errorf("text read back as %q, want the exact bytes", got)
	}
}

func TestAppendRefusalsWriteNothing(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	key := newKey(1, 1)
	mustAppend(t, s, 0, messages(key, 0, 2))
	ephemeral := messages(key, 2, 3)
	ephemeral[2].Ephemeral = true
	foreign := messages(key, 2, 3)
	foreign[2].Content = customContent{}
	nilPointer := messages(key, 2, 3)
	nilPointer[1].Content = (*keyspace.Status)(nil)
	mixed := messages(key, 2, 3)
	mixed[2].Attempt = 2
	zeroRun := messages(key, 2, 1)
	zeroRun[0].RunID = eventstore.RunID{}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	testCases := []struct {
		name     string
		ctx      context.Context
		expected uint64
		batch    []keyspace.ActivityEvent
		want     error
	}{
		{"ephemeral", ctx, 2, ephemeral, keyspace.ErrEphemeral},
		{"foreign-content", ctx, 2, foreign, eventstore.ErrInvalidArgument},
		{"nil-pointer-content", ctx, 2, nilPointer, eventstore.ErrInvalidArgument},
		{"mixed-streams", ctx, 2, mixed, keyspace.ErrMixedStreams},
		{"zero-run", ctx, 0, zeroRun, eventstore.ErrInvalidArgument},
		{"stale", ctx, 1, messages(key, 2, 3), eventstore.ErrSequenceConflict},
		{"ahead", ctx, 3, messages(key, 2, 3), eventstore.ErrSequenceConflict},
		{"cancelled", cancelled, 2, messages(key, 2, 3), context.Canceled},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			head, err := s.AppendEvents(tc.ctx, tc.expected, tc.batch)
			if !errors.Is(err, tc.want) || head != 0 {
				t.Fatalf("AppendEvents = %d, %v; want 0 and an error matching %v", head, err, tc.want)
			}
			recs, err := s.ReadFrom(ctx, key, 0, 0)
			if err != nil || len(recs) != 2 {
				t.Fatalf("after the refusal the stream holds %d records (%v), want 2", len(recs), err)
			}
			list, err := s.ListStreams(ctx, key.WorkflowID, key.RunID)
			if err != nil || len(list) != 1 || list[0].Head != 2 {
				t.Fatalf("after the refusal ListStreams = %v, %v; want the one stream at head 2", list, err)
			}
		})
	}
}

type customContent struct{}

func (customContent) ContentKind() string { return "custom" }

func TestListStreamsOrdersActivitiesAsUnsigned(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	base := newKey(0, 0)
	coords := []struct {
		activity eventstore.ActivityID
		attempt  uint32
	}{{math.MaxUint64, math.MaxUint32}, {1 << 63, 0}, {1<<63 - 1, 1}, {0, math.MaxUint32}, {0, 0}, {1, 1 << 31}}
	for i, c := range coords {
		key := keyspace.NewStreamKey(base.WorkflowID, base.RunID, c.activity, c.attempt)
		mustAppend(t, s, 0, messages(key, 0, i+1))
	}
	list, err := s.ListStreams(ctx, base.WorkflowID, base.RunID)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		activity eventstore.ActivityID
		attempt  uint32
		head     uint64
	}
	var got []row
	for _, sum := range list {
		got = append(got, row{sum.Key.ActivityID, sum.Key.Attempt, sum.Head})
	}
	want := []row{{0, 0, 5}, {0, math.MaxUint32, 4}, {1, 1 << 31, 6}, {1<<63 - 1, 1, 3}, {1 << 63, 0, 2}, {math.MaxUint64, math.MaxUint32, 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ListStreams = %v, want %v", got, want)
	}
}

func TestReadFromLimitsAndBounds(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	key := newKey(0, 0)
	next := keyspace.NewStreamKey(key.WorkflowID, key.RunID, 0, 1) // sorts right after key
	evs := messages(key, 0, 6)
	mustAppend(t, s, 0, evs)
	mustAppend(t, s, 0, messages(next, 100, 4))
	testCases := []struct {
		name        string
		from        uint64
		limit       int
		first, last int
	}{
		{"all", 0, 0, 0, 6},
		{"negative-limit", 0, -3, 0, 6},
		{"middle", 2, 3, 2, 5},
		{"limit-past-head", 4, 100, 4, 6},
		{"at-head", 6, 0, 6, 6},
		{"past-head", 7, 1, 6, 6},
		{"max-seq", math.MaxUint64, 0, 6, 6},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := s.ReadFrom(ctx, key, tc.from, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var want []keyspace.Record
			for i := tc.first; i < tc.last; i++ {
				want = append(want, persisted(evs[i], uint64(i)))
			}
			if len(recs) != len(want) || (len(want) > 0 && !reflect.DeepEqual(recs, want)) {
				t.Fatalf("ReadFrom(%d, %d) = %+v, want %+v", tc.from, tc.limit, recs, want)
			}
		})
	}
}

func TestOpenOfALockedFileFailsWithErrLocked(t *testing.T) {
	s, path := openStore(t)
	_, err := boltstore.Open(path, boltstore.WithOpenTimeout(20*time.Millisecond))
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Fatalf("second Open of an open file = %v, want ErrLocked", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := boltstore.Open(path, boltstore.WithOpenTimeout(20*time.Millisecond))
	if err != nil {
		t.Fatalf("Open after Close = %v, want the lock released", err)
	}
	_ = s2.Close()
}

func TestOpenFailsOnWhatIsNotABoltFile(t *testing.T) {
	testCases := []struct {
		name string
		path func(t *testing.T) string
	}{
		{"directory", func(t *testing.T) string { return t.TempDir() }},
		{"missing-parent", func(t *testing.T) string { return filepath.Join(t.TempDir(), "no", "such", "dir", "k.db") }},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := boltstore.Open(tc.path(t))
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded")
			}
		})
	}
}

func TestCloseIsIdempotentAndEndsEveryMethod(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	key := newKey(0, 0)
	mustAppend(t, s, 0, messages(key, 0, 1))
	for i := range 2 {
		if err := s.Close(); err != nil {
			t.Fatalf("Close #%d = %v", i+1, err)
		}
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"AppendEvents", func() error { _, err := s.AppendEvents(ctx, 1, messages(key, 1, 1)); return err }},
		{"AppendEvents-empty", func() error { _, err := s.AppendEvents(ctx, 1, nil); return err }},
		{"Head", func() error { _, err := s.Head(ctx, key); return err }},
		{"ReadFrom", func() error { _, err := s.ReadFrom(ctx, key, 0, 0); return err }},
		{"ListStreams", func() error { _, err := s.ListStreams(ctx, key.WorkflowID, key.RunID); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			if err := c.call(); !errors.Is(err, boltstore.ErrClosed) {
				t.Fatalf("%s after Close = %v, want ErrClosed", c.name, err)
			}
		})
	}
}

func TestReadMethodsRefuseZeroIDs(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t)
	key := newKey(0, 0)
	zeroWF, zeroRun := key, key
	zeroWF.WorkflowID = eventstore.WorkflowID{}
	zeroRun.RunID = eventstore.RunID{}
	for _, k := range []keyspace.StreamKey{zeroWF, zeroRun} {
		if _, err := s.Head(ctx, k); !errors.Is(err, eventstore.ErrInvalidArgument) {
			t.Errorf("Head(%v) = %v, want ErrInvalidArgument", k, err)
		}
		if _, err := s.ReadFrom(ctx, k, 0, 0); !errors.Is(err, eventstore.ErrInvalidArgument) {
			t.Errorf("ReadFrom(%v) = %v, want ErrInvalidArgument", k, err)
		}
		if _, err := s.ListStreams(ctx, k.WorkflowID, k.RunID); !errors.Is(err, eventstore.ErrInvalidArgument) {
			t.Errorf("ListStreams(%v) = %v, want ErrInvalidArgument", k, err)
		}
	}
}

// TestStoreConcurrentSafe runs appends to many streams, reads and listings at
// once (run it under -race), then checks every stream holds exactly what its
// writer appended.
func TestStoreConcurrentSafe(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, boltstore.WithNoSync())
	base := newKey(0, 0)
	const writers, batches, perBatch = 6, 10, 5
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for w := range writers {
		key := keyspace.NewStreamKey(base.WorkflowID, base.RunID, eventstore.ActivityID(w), 0)
		wg.Go(func() {
			for b := range batches {
				if _, err := s.AppendEvents(ctx, uint64(b*perBatch), messages(key, uint64(b*perBatch), perBatch)); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for range batches {
				if _, err := s.ReadFrom(ctx, key, 0, 0); err != nil {
					errs <- err
					return
				}
				if _, err := s.ListStreams(ctx, base.WorkflowID, base.RunID); err != nil {
					errs <- err
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
	list, err := s.ListStreams(ctx, base.WorkflowID, base.RunID)
	if err != nil || len(list) != writers {
		t.Fatalf("ListStreams = %v, %v; want %d streams", list, err, writers)
	}
	for i, sum := range list {
		if sum.Key.ActivityID != eventstore.ActivityID(i) || sum.Head != batches*perBatch {
			t.Errorf("stream %d = %+v, want activity %d at head %d", i, sum, i, batches*perBatch)
		}
		recs, err := s.ReadFrom(ctx, sum.Key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for j, r := range recs {
			if r.StoreSeq != uint64(j) || r.Event.WorkerSeq != uint64(j) {
				t.Fatalf("stream %d record %d = seq %d worker seq %d", i, j, r.StoreSeq, r.Event.WorkerSeq)
			}
		}
	}
}

// TestCloseConcurrentWithCallsIsSafe closes the store while calls are in
// flight: each call either completes or returns ErrClosed, and nothing
// panics or races.
func TestCloseConcurrentWithCallsIsSafe(t *testing.T) {
	ctx := context.Background()
	s, _ := openStore(t, boltstore.WithNoSync())
	key := newKey(0, 0)
	const goroutines = 4
	running := make(chan struct{}, goroutines)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			k := key
			k.Attempt = uint32(g)
			for i := uint64(0); ; i++ {
				_, err := s.AppendEvents(ctx, i, messages(k, i, 1))
				if err == nil {
					_, err = s.ReadFrom(ctx, k, 0, 0)
				}
				if i == 0 {
					running <- struct{}{}
				}
				if errors.Is(err, boltstore.ErrClosed) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	// Close once every goroutine has made a call, so Close meets calls in
	// flight.
	for range goroutines {
		<-running
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a call racing Close failed with %v, want nil or ErrClosed", err)
	}
}
