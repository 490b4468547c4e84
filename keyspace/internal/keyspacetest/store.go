package keyspacetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// Store is a durable keyspace store: a [keyspace.Store] that is closed when
// done with, as boltstore.Store and pgstore.Store are.
type Store interface {
	keyspace.Store
	io.Closer
}

// CheckRecordsSurviveReopen writes two streams of one run through a store
// from open, closes it, and opens another on the same storage. Both stores
// must read back what was written: every content kind, a pointer content as
// its value, a nil content as nil, text that is not UTF-8 (NUL included)
// byte for byte, the largest token count, and an EmittedAt in a zone other
// than UTC with its instant, zone name and offset. The reopened store must
// list both streams with their heads, append at the head, and refuse an
// append at a consumed seq with a conflict finding the new head.
//
// open is called twice, on the test's goroutine; it stops the test if it
// cannot open. Both stores are closed before the check returns, the first
// one twice: by the check, whose Close must succeed, and again on the way
// out (the durable backends' Close is idempotent).
func CheckRecordsSurviveReopen(t testing.TB, open func(t testing.TB) Store) {
	t.Helper()
	ctx := context.Background()
	s := open(t)
	defer s.Close() // a second time, unless the check stops before closing it
	key := NewKey(2, 1)
	sibling := keyspace.NewStreamKey(key.WorkflowID, key.RunID, 0, 3)
	evs := []keyspace.ActivityEvent{
		Event(key, 1, keyspace.Message{Role: "user", Text: "hi \x00 \xff"}),
		Event(key, 2, keyspace.ToolCall{CallID: "c", Name: "grep", Arguments: "-r x"}),
		Event(key, 3, keyspace.ToolResult{CallID: "c", Output: "none", IsError: true}),
		Event(key, 4, keyspace.Status{State: "done", Detail: "ok"}),
		Event(key, 5, keyspace.Usage{InputTokens: 10, OutputTokens: math.MaxUint64, CacheReadInputTokens: 6,
			CacheCreationInputTokens: 3, ReasoningOutputTokens: math.MaxUint64 - 1, Provider: "p", RequestModel: "m\x00",
			ResponseModel: "r\xff", Operation: "chat", StartedAt: time.Unix(1_700_000_000, 1).UTC(), FirstChunkAt: time.Unix(1_700_000_001, 2).UTC()}),
		Event(key, 6, &keyspace.Message{Role: "pointer", Text: "read back as a value"}),
		Event(key, 7, nil),
	}
	evs[3].EmittedAt = time.Date(2025, 6, 1, 12, 0, 0, 7, time.FixedZone("XST", -5*3600))
	want := make([]keyspace.Record, len(evs))
	for i, ev := range evs {
		want[i] = Persisted(ev, uint64(i))
		if m, ok := ev.Content.(*keyspace.Message); ok {
			want[i].Event.Content = *m
		}
	}
	MustAppend(t, s, 0, evs[:2])
	MustAppend(t, s, 2, evs[2:])
	MustAppend(t, s, 0, Messages(sibling, 0, 1))
	checkRecords(t, "before closing", s, key, want)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2 := open(t)
	defer s2.Close()
	checkRecords(t, "after reopening", s2, key, want)
	list, err := s2.ListStreams(ctx, key.WorkflowID, key.RunID)
	if err != nil {
		t.Fatal(err)
	}
	head := uint64(len(evs))
	wantList := []keyspace.StreamSummary{{Key: sibling, Head: 1}, {Key: key, Head: head}}
	if !reflect.DeepEqual(list, wantList) {
		t.Fatalf("ListStreams after reopening = %v, want %v", list, wantList)
	}
	// The reopened store continues at the head, and refuses the old one.
	MustAppend(t, s2, head, Messages(key, head+1, 1))
	_, err = s2.AppendEvents(ctx, head, Messages(key, head+2, 1))
	var conflict *eventstore.SequenceConflictError
	if !errors.As(err, &conflict) || conflict.Found != head+1 {
		t.Fatalf("append at a consumed seq after reopening = %v, want a conflict finding %d", err, head+1)
	}
}

// checkRecords reads key from s and checks it holds exactly want.
func checkRecords(t testing.TB, when string, s keyspace.Store, key keyspace.StreamKey, want []keyspace.Record) {
	t.Helper()
	recs, err := s.ReadFrom(context.Background(), key, 0, 0)
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if len(recs) != len(want) {
		t.Fatalf("%s: read %d records, want %d", when, len(recs), len(want))
	}
	for i := range want {
		if diff := recordDiff(recs[i], want[i]); diff != "" {
			t.Errorf("%s: record %d: %s", when, i, diff)
		}
	}
}

// recordDiff says how got differs from want, or returns "". A store keeps
// an EmittedAt's instant, its zone's name and offset, and whether it is UTC,
// but not its *time.Location: those are compared, then everything else
// exactly.
func recordDiff(got, want keyspace.Record) string {
	ga, wa := got.Event.EmittedAt, want.Event.EmittedAt
	gz, goff := ga.Zone()
	wz, woff := wa.Zone()
	if !ga.Equal(wa) || gz != wz || goff != woff || (ga.Location() == time.UTC) != (wa.Location() == time.UTC) {
		return fmt.Sprintf("EmittedAt %v (%s), want %v (%s)", ga, ga.Location(), wa, wa.Location())
	}
	got.Event.EmittedAt, want.Event.EmittedAt = time.Time{}, time.Time{}
	if !reflect.DeepEqual(got, want) {
		return fmt.Sprintf("\n got %+v\nwant %+v", got, want)
	}
	return ""
}

// foreignContent is a Content that is none of the keyspace kinds: the
// record encoding cannot store it. Its method has a value receiver, so
// calling it on a nil *foreignContent panics: a store must refuse that
// content without calling it.
type foreignContent struct{}

func (foreignContent) ContentKind() string { return "custom" }

// CheckAppendRefusalsWriteNothing writes two events to a stream of s, then
// makes appends s must refuse: an ephemeral event, a content that is none of
// the keyspace kinds (as a value, a pointer and a nil pointer whose
// ContentKind panics), a nil pointer content, a batch mixing attempts, a zero
// workflow ID, a zero run ID, a stale, an ahead and a near-maximal expected
// seq, and a cancelled context. Each must return head 0 and an error
// matching the contract's (a conflict's Expected the seq given and Found 2),
// and leave the stream and its run's listing as they were.
func CheckAppendRefusalsWriteNothing(t testing.TB, s keyspace.Store) {
	t.Helper()
	ctx := context.Background()
	key := NewKey(1, 1)
	MustAppend(t, s, 0, Messages(key, 0, 2))
	ephemeral := Messages(key, 2, 3)
	ephemeral[2].Ephemeral = true
	foreign := Messages(key, 2, 3)
	foreign[2].Content = foreignContent{}
	foreignPointer := Messages(key, 2, 3)
	foreignPointer[0].Content = &foreignContent{}
	nilForeign := Messages(key, 2, 3)
	nilForeign[1].Content = (*foreignContent)(nil)
	nilPointer := Messages(key, 2, 3)
	nilPointer[1].Content = (*keyspace.Status)(nil)
	mixed := Messages(key, 2, 3)
	mixed[2].Attempt = 2
	zeroWF := Messages(key, 2, 1)
	zeroWF[0].WorkflowID = eventstore.WorkflowID{}
	zeroRun := Messages(key, 2, 1)
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
		{"foreign-pointer-content", ctx, 2, foreignPointer, eventstore.ErrInvalidArgument},
		{"nil-foreign-pointer-content", ctx, 2, nilForeign, eventstore.ErrInvalidArgument},
		{"nil-pointer-content", ctx, 2, nilPointer, eventstore.ErrInvalidArgument},
		{"mixed-streams", ctx, 2, mixed, keyspace.ErrMixedStreams},
		{"zero-workflow", ctx, 0, zeroWF, eventstore.ErrInvalidArgument},
		{"zero-run", ctx, 0, zeroRun, eventstore.ErrInvalidArgument},
		{"stale", ctx, 1, Messages(key, 2, 3), eventstore.ErrSequenceConflict},
		{"ahead", ctx, 3, Messages(key, 2, 3), eventstore.ErrSequenceConflict},
		{"near-max-seq", ctx, math.MaxUint64 - 1, Messages(key, 2, 3), eventstore.ErrSequenceConflict},
		{"cancelled", cancelled, 2, Messages(key, 2, 3), context.Canceled},
	}
	for _, tc := range testCases {
		run(t, tc.name, func(t testing.TB) {
			t.Helper()
			head, err := s.AppendEvents(tc.ctx, tc.expected, tc.batch)
			if !errors.Is(err, tc.want) || head != 0 {
				t.Fatalf("AppendEvents = %d, %v; want 0 and an error matching %v", head, err, tc.want)
			}
			var conflict *eventstore.SequenceConflictError
			if errors.As(err, &conflict) && (conflict.Found != 2 || conflict.Expected != tc.expected) {
				t.Fatalf("conflict %+v, want Expected %d Found 2", conflict, tc.expected)
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

// CheckListOrderIsUnsigned writes streams of one run whose activity IDs and
// attempts lie on both sides of 2^63 and 2^31, each of a different length,
// checking each one's Head; ListStreams must list them in unsigned order,
// with their heads.
func CheckListOrderIsUnsigned(t testing.TB, s keyspace.Store) {
	t.Helper()
	ctx := context.Background()
	base := NewKey(0, 0)
	coords := []struct {
		activity eventstore.ActivityID
		attempt  uint32
	}{{math.MaxUint64, math.MaxUint32}, {1 << 63, 0}, {1<<63 - 1, 1}, {0, math.MaxUint32}, {0, 0}, {1, 1 << 31}}
	for i, c := range coords {
		key := keyspace.NewStreamKey(base.WorkflowID, base.RunID, c.activity, c.attempt)
		MustAppend(t, s, 0, Messages(key, 0, i+1))
		if head, err := s.Head(ctx, key); err != nil || head != uint64(i+1) {
			t.Fatalf("Head(%v) = %d, %v; want %d", key, head, err, i+1)
		}
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

// CheckReadFromBounds writes six events to a stream and four to the stream
// that sorts right after it, then reads the first with limits and from seqs
// at every bound: no limit, a negative one, a window, a limit past the head,
// at the head, past it, and from 2^63 and from the largest seq. Each read
// must return exactly the records of the range, none of the neighbour's.
func CheckReadFromBounds(t testing.TB, s keyspace.Store) {
	t.Helper()
	ctx := context.Background()
	key := NewKey(0, 0)
	next := keyspace.NewStreamKey(key.WorkflowID, key.RunID, 0, 1) // sorts right after key
	evs := Messages(key, 0, 6)
	MustAppend(t, s, 0, evs)
	MustAppend(t, s, 0, Messages(next, 100, 4))
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
		{"top-bit-seq", 1 << 63, 0, 6, 6},
		{"max-seq", math.MaxUint64, 0, 6, 6},
	}
	for _, tc := range testCases {
		run(t, tc.name, func(t testing.TB) {
			t.Helper()
			recs, err := s.ReadFrom(ctx, key, tc.from, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var want []keyspace.Record
			for i := tc.first; i < tc.last; i++ {
				want = append(want, Persisted(evs[i], uint64(i)))
			}
			if len(recs) != len(want) || (len(want) > 0 && !reflect.DeepEqual(recs, want)) {
				t.Fatalf("ReadFrom(%d, %d) = %+v, want %+v", tc.from, tc.limit, recs, want)
			}
		})
	}
}

// CheckReadMethodsRefuseZeroIDs calls Head, ReadFrom and ListStreams with a
// zero workflow ID and with a zero run ID: each must return an error
// matching eventstore.ErrInvalidArgument.
func CheckReadMethodsRefuseZeroIDs(t testing.TB, s keyspace.Store) {
	t.Helper()
	ctx := context.Background()
	key := NewKey(0, 0)
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

// CheckCloseEndsEveryMethod writes an event to s, closes s twice (both
// Closes must return nil), and then calls every method, an empty append
// included: each must return an error matching errClosed, the backend's
// ErrClosed.
func CheckCloseEndsEveryMethod(t testing.TB, s Store, errClosed error) {
	t.Helper()
	ctx := context.Background()
	key := NewKey(0, 0)
	MustAppend(t, s, 0, Messages(key, 0, 1))
	for i := range 2 {
		if err := s.Close(); err != nil {
			t.Fatalf("Close #%d = %v", i+1, err)
		}
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"AppendEvents", func() error { _, err := s.AppendEvents(ctx, 1, Messages(key, 1, 1)); return err }},
		{"AppendEvents-empty", func() error { _, err := s.AppendEvents(ctx, 1, nil); return err }},
		{"Head", func() error { _, err := s.Head(ctx, key); return err }},
		{"ReadFrom", func() error { _, err := s.ReadFrom(ctx, key, 0, 0); return err }},
		{"ListStreams", func() error { _, err := s.ListStreams(ctx, key.WorkflowID, key.RunID); return err }},
	}
	for _, c := range calls {
		run(t, c.name, func(t testing.TB) {
			t.Helper()
			if err := c.call(); !errors.Is(err, errClosed) {
				t.Fatalf("%s after Close = %v, want %v", c.name, err, errClosed)
			}
		})
	}
}

// CheckUnmadeStoreFailsWithoutPanic calls every method, an empty append
// included, of s, a nil or zero Store of a backend (one its constructor did
// not make): each must return an error wrapping
// [eventstore.ErrInvalidArgument] instead of panicking, and Close must
// return nil.
func CheckUnmadeStoreFailsWithoutPanic(t testing.TB, s Store) {
	t.Helper()
	ctx := context.Background()
	key := NewKey(1, 1)
	calls := []struct {
		name string
		call func() error
	}{
		{"AppendEvents", func() error { _, err := s.AppendEvents(ctx, 0, Messages(key, 0, 1)); return err }},
		{"AppendEvents-empty", func() error { _, err := s.AppendEvents(ctx, 0, nil); return err }},
		{"Head", func() error { _, err := s.Head(ctx, key); return err }},
		{"ReadFrom", func() error { _, err := s.ReadFrom(ctx, key, 0, 1); return err }},
		{"ListStreams", func() error { _, err := s.ListStreams(ctx, key.WorkflowID, key.RunID); return err }},
	}
	for _, c := range calls {
		run(t, c.name, func(t testing.TB) {
			t.Helper()
			defer func() {
				if r := recover(); r != nil {
					t.Fatalf("%s panicked: %v", c.name, r)
				}
			}()
			if err := c.call(); !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Fatalf("%s = %v, want an error wrapping ErrInvalidArgument", c.name, err)
			}
		})
	}
	run(t, "Close", func(t testing.TB) {
		t.Helper()
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("Close panicked: %v", r)
			}
		}()
		if err := s.Close(); err != nil {
			t.Fatalf("Close = %v, want nil", err)
		}
	})
}

// CheckConcurrentSafe runs, at once, six writers appending ten batches of
// five events each to a stream of their own in one run, and as many readers
// reading those streams and listing the run (run it under -race). Then the
// run must list the six streams, in order, each at head 50 and holding its
// writer's events in order.
func CheckConcurrentSafe(t testing.TB, s keyspace.Store) {
	t.Helper()
	ctx := context.Background()
	base := NewKey(0, 0)
	const writers, batches, perBatch = 6, 10, 5
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for w := range writers {
		key := keyspace.NewStreamKey(base.WorkflowID, base.RunID, eventstore.ActivityID(w), 0)
		wg.Go(func() {
			for b := range batches {
				if _, err := s.AppendEvents(ctx, uint64(b*perBatch), Messages(key, uint64(b*perBatch), perBatch)); err != nil {
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
