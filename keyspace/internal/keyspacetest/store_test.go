package keyspacetest_test

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/codec"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
)

var errClosed = errors.New("durable: closed")

// durable is what the checks expect of a durable backend, built from a
// keyspace.Memory: events go through the record encoding the backends share
// (so a pointer content reads back as its value and a foreign content is
// refused), and Close ends every method with errClosed. The Memory outlives
// the store, as a file does, so that a store opened again on it reads what
// was written.
type durable struct {
	mem    *keyspace.Memory
	closed atomic.Bool
}

func newDurable() *durable { return &durable{mem: keyspace.NewMemory()} }

func (d *durable) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.closed.Load() {
		return errClosed
	}
	return nil
}

func (d *durable) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	if err := d.begin(ctx); err != nil {
		return 0, err
	}
	if len(events) == 0 {
		return expectedSeq, nil
	}
	if err := keyspace.ValidateBatch(events); err != nil {
		return 0, err
	}
	stored := make([]keyspace.ActivityEvent, len(events))
	for i := range events {
		b, err := codec.AppendEvent(nil, &events[i])
		if err != nil {
			return 0, err
		}
		if stored[i], err = codec.DecodeEvent(b); err != nil {
			return 0, err
		}
		stored[i].WorkflowID, stored[i].RunID = events[i].WorkflowID, events[i].RunID
		stored[i].ActivityID, stored[i].Attempt = events[i].ActivityID, events[i].Attempt
	}
	return d.mem.AppendEvents(ctx, expectedSeq, stored)
}

func (d *durable) Head(ctx context.Context, key keyspace.StreamKey) (uint64, error) {
	if err := d.begin(ctx); err != nil {
		return 0, err
	}
	return d.mem.Head(ctx, key)
}

func (d *durable) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	if err := d.begin(ctx); err != nil {
		return nil, err
	}
	return d.mem.ReadFrom(ctx, key, fromSeq, limit)
}

func (d *durable) ListStreams(ctx context.Context, workflowID eventstore.WorkflowID, runID eventstore.RunID) ([]keyspace.StreamSummary, error) {
	if err := d.begin(ctx); err != nil {
		return nil, err
	}
	return d.mem.ListStreams(ctx, workflowID, runID)
}

func (d *durable) Close() error {
	d.closed.Store(true)
	return nil
}

// reopener returns an open function for CheckRecordsSurviveReopen whose
// stores share one Memory.
func reopener() func(testing.TB) keyspacetest.Store {
	mem := keyspace.NewMemory()
	return func(testing.TB) keyspacetest.Store { return &durable{mem: mem} }
}

func TestChecksPassOnADurableStore(t *testing.T) {
	testCases := []struct {
		name  string
		check func(t testing.TB)
	}{
		{"records-survive-reopen", func(t testing.TB) { keyspacetest.CheckRecordsSurviveReopen(t, reopener()) }},
		{"append-refusals-write-nothing", func(t testing.TB) { keyspacetest.CheckAppendRefusalsWriteNothing(t, newDurable()) }},
		{"list-order-is-unsigned", func(t testing.TB) { keyspacetest.CheckListOrderIsUnsigned(t, newDurable()) }},
		{"read-from-bounds", func(t testing.TB) { keyspacetest.CheckReadFromBounds(t, newDurable()) }},
		{"read-methods-refuse-zero-ids", func(t testing.TB) { keyspacetest.CheckReadMethodsRefuseZeroIDs(t, newDurable()) }},
		{"close-ends-every-method", func(t testing.TB) { keyspacetest.CheckCloseEndsEveryMethod(t, newDurable(), errClosed) }},
		{"concurrent-safe", func(t testing.TB) { keyspacetest.CheckConcurrentSafe(t, newDurable()) }},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) { tc.check(t) })
	}
}

// The broken stores: each a durable store with one method changed.

// plain keeps contents as given, without checking them: a foreign content
// is stored and a pointer content reads back as the same pointer. It stores
// the events without their contents and keeps those aside, in given, which
// outlives the store as its Memory does.
type plain struct {
	*durable
	given *givenContents
}

type givenContents struct {
	mu sync.Mutex
	at map[keyspace.StreamKey]map[uint64]keyspace.Content
}

func newGiven() *givenContents {
	return &givenContents{at: map[keyspace.StreamKey]map[uint64]keyspace.Content{}}
}

func (p plain) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	if err := p.begin(ctx); err != nil {
		return 0, err
	}
	bare := slices.Clone(events)
	for i := range bare {
		bare[i].Content = nil
	}
	head, err := p.mem.AppendEvents(ctx, expectedSeq, bare)
	if err != nil || len(events) == 0 {
		return head, err
	}
	p.given.mu.Lock()
	defer p.given.mu.Unlock()
	key := keyspace.KeyOf(events[0])
	if p.given.at[key] == nil {
		p.given.at[key] = map[uint64]keyspace.Content{}
	}
	for i, ev := range events {
		p.given.at[key][expectedSeq+uint64(i)] = ev.Content
	}
	return head, nil
}

func (p plain) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	recs, err := p.durable.ReadFrom(ctx, key, fromSeq, limit)
	p.given.mu.Lock()
	defer p.given.mu.Unlock()
	for i := range recs {
		recs[i].Event.Content = p.given.at[key][recs[i].StoreSeq]
	}
	return recs, err
}

// utcReader reads every EmittedAt back in UTC.
type utcReader struct{ *durable }

func (u utcReader) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	recs, err := u.durable.ReadFrom(ctx, key, fromSeq, limit)
	for i := range recs {
		recs[i].Event.EmittedAt = recs[i].Event.EmittedAt.UTC()
	}
	return recs, err
}

// headOnRefusal returns expectedSeq with its errors.
type headOnRefusal struct{ *durable }

func (h headOnRefusal) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	head, err := h.durable.AppendEvents(ctx, expectedSeq, events)
	if err != nil {
		return expectedSeq, err
	}
	return head, nil
}

// signedLister lists activity IDs in signed order, as a bigint column sorts
// them.
type signedLister struct{ *durable }

func (s signedLister) ListStreams(ctx context.Context, workflowID eventstore.WorkflowID, runID eventstore.RunID) ([]keyspace.StreamSummary, error) {
	list, err := s.durable.ListStreams(ctx, workflowID, runID)
	slices.SortFunc(list, func(a, b keyspace.StreamSummary) int {
		return cmp.Or(cmp.Compare(int64(a.Key.ActivityID), int64(b.Key.ActivityID)), cmp.Compare(a.Key.Attempt, b.Key.Attempt))
	})
	return list, err
}

// signedReader takes a from seq of 2^63 and more as a negative number, as
// a bigint parameter would, and reads from 0.
type signedReader struct{ *durable }

func (s signedReader) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	if int64(fromSeq) < 0 {
		fromSeq = 0
	}
	return s.durable.ReadFrom(ctx, key, fromSeq, limit)
}

// lenientHead answers Head for any key, zero IDs included.
type lenientHead struct{ *durable }

func (lenientHead) Head(context.Context, keyspace.StreamKey) (uint64, error) { return 0, nil }

// openLister keeps listing after Close.
type openLister struct{ *durable }

func (o openLister) ListStreams(ctx context.Context, workflowID eventstore.WorkflowID, runID eventstore.RunID) ([]keyspace.StreamSummary, error) {
	return o.mem.ListStreams(ctx, workflowID, runID)
}

// failingSecondClose fails every Close after the first.
type failingSecondClose struct {
	*durable
	calls *atomic.Int32
}

func (f failingSecondClose) Close() error {
	if f.calls.Add(1) > 1 {
		return errors.New("already closed")
	}
	return f.durable.Close()
}

// lossyLister drops the last stream of a listing of six.
type lossyLister struct{ *durable }

func (l lossyLister) ListStreams(ctx context.Context, workflowID eventstore.WorkflowID, runID eventstore.RunID) ([]keyspace.StreamSummary, error) {
	list, err := l.durable.ListStreams(ctx, workflowID, runID)
	if len(list) == 6 {
		list = list[:5]
	}
	return list, err
}

// TestChecksFailOnBrokenStores runs each check on a store that breaks what
// it checks, and sees it report that.
func TestChecksFailOnBrokenStores(t *testing.T) {
	testCases := []struct {
		name  string
		check func(t testing.TB)
		want  string // in one of the failures
	}{
		{"reopen/nothing-survives", func(t testing.TB) {
			keyspacetest.CheckRecordsSurviveReopen(t, func(testing.TB) keyspacetest.Store { return newDurable() })
		}, "after reopening: read 0 records, want 7"},
		{"reopen/contents-as-given", func(t testing.TB) {
			mem, given := keyspace.NewMemory(), newGiven()
			keyspacetest.CheckRecordsSurviveReopen(t, func(testing.TB) keyspacetest.Store { return plain{&durable{mem: mem}, given} })
		}, "before closing: record 5"},
		{"reopen/zone-lost", func(t testing.TB) {
			mem := keyspace.NewMemory()
			keyspacetest.CheckRecordsSurviveReopen(t, func(testing.TB) keyspacetest.Store { return utcReader{&durable{mem: mem}} })
		}, "before closing: record 3: EmittedAt"},
		{"refusals/head-returned", func(t testing.TB) {
			keyspacetest.CheckAppendRefusalsWriteNothing(t, headOnRefusal{newDurable()})
		}, "AppendEvents = 2,"},
		{"refusals/foreign-content-stored", func(t testing.TB) {
			keyspacetest.CheckAppendRefusalsWriteNothing(t, plain{newDurable(), newGiven()})
		}, "AppendEvents = 5, <nil>; want 0 and an error matching"},
		{"list-order/signed", func(t testing.TB) {
			keyspacetest.CheckListOrderIsUnsigned(t, signedLister{newDurable()})
		}, "ListStreams = "},
		{"read-bounds/signed-from", func(t testing.TB) {
			keyspacetest.CheckReadFromBounds(t, signedReader{newDurable()})
		}, "ReadFrom(9223372036854775808, 0) = "},
		{"zero-ids/head-answers", func(t testing.TB) {
			keyspacetest.CheckReadMethodsRefuseZeroIDs(t, lenientHead{newDurable()})
		}, "want ErrInvalidArgument"},
		{"close/lists-after-close", func(t testing.TB) {
			keyspacetest.CheckCloseEndsEveryMethod(t, openLister{newDurable()}, errClosed)
		}, "ListStreams after Close = <nil>"},
		{"close/second-close-fails", func(t testing.TB) {
			keyspacetest.CheckCloseEndsEveryMethod(t, failingSecondClose{newDurable(), new(atomic.Int32)}, errClosed)
		}, "Close #2 = already closed"},
		{"concurrent/stream-lost", func(t testing.TB) {
			keyspacetest.CheckConcurrentSafe(t, lossyLister{newDurable()})
		}, "want 6 streams"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			failures := keyspacetest.ExpectFailure(t, tc.check)
			if !slices.ContainsFunc(failures, func(f string) bool { return strings.Contains(f, tc.want) }) {
				t.Errorf("failures %q, want one containing %q", failures, tc.want)
			}
		})
	}
}
