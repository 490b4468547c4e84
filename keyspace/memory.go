package keyspace

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/aionotel/aionotel/eventstore"
)

// Memory is the in-memory reference implementation of [Store]. It enforces the
// whole contract (all-or-nothing batches, optimistic concurrency on the
// expected seq, the refusals of [ValidateBatch]) so that code written against
// it behaves the same on a durable backend.
//
// Memory is safe for concurrent use. Appends to different streams do not
// serialise: a store-wide lock is held only to find or create a stream, and
// each stream has its own lock. The zero value is an empty store ready to use;
// [NewMemory] returns one. A Memory must not be copied after first use. Every
// method of a nil *Memory fails with an error wrapping
// [eventstore.ErrInvalidArgument], as a nil *eventstore.Memory's do
// (DeleteRun removes nothing and returns 0), instead of panicking.
//
// Memory's choices where the contract leaves room:
//   - Copies: stored events are copies of the caller's, and a pointer content
//     (*Message and so on) is stored as its value, as the durable backends
//     read it back. The content kinds hold no pointer or slice, so a stored
//     or returned record shares nothing with anyone.
//   - Costs: AppendEvents is O(batch), Head O(1), ReadFrom O(returned
//     records) since the store seq indexes the stream directly, and
//     ListStreams O(the run's streams) from a per-run index kept sorted as
//     streams are created (a stream's first record costs O(the run's streams)
//     to insert there). Records are held in fixed-size chunks, so an append
//     never copies the records already stored: the time it holds its
//     stream's lock does not grow with the stream.
//   - Lifetime: records are held until [Memory.DeleteRun] removes their
//     run, or for the life of the value; nothing survives the process.
type Memory struct {
	// mu guards streams and runs. It is never acquired while a stream's lock
	// is held.
	mu      sync.RWMutex
	streams map[StreamKey]*memStream
	runs    map[runKey][]runEntry // sorted by (activity, attempt); copy-on-write
}

var _ Store = (*Memory)(nil)

// errNilMemory is what every method of a nil *Memory returns.
var errNilMemory = fmt.Errorf("keyspace: nil *Memory: %w", eventstore.ErrInvalidArgument)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory { return &Memory{} }

// runKey names one run of one workflow: the scope of ListStreams.
type runKey struct {
	workflowID eventstore.WorkflowID
	runID      eventstore.RunID
}

// runEntry is one stream in its run's index. A run's index is a slice sorted
// by (activity, attempt) and copy-on-write: an insert builds a new slice, so a
// reader may keep the slice it read under Memory.mu after releasing the lock.
type runEntry struct {
	key    StreamKey
	stream *memStream
}

// memStream is one stream's records, in chunks of chunkSize: records
// 0..chunkSize-1 are in first, the next chunkSize in more[0], and so on. The
// store seq therefore indexes the stream directly, and head is the record
// count.
type memStream struct {
	mu    sync.RWMutex
	head  uint64
	first []Record   // grows by reallocation up to chunkSize
	more  [][]Record // allocated full-size, never moved
}

// chunkSize is the number of records in a full chunk. Only the first chunk
// grows by reallocation (so a short stream stays small, in few objects);
// later chunks are allocated full-size and never moved, so an append never
// copies the records before it, however long the stream.
const chunkSize = 1024

// push appends r, which must have StoreSeq s.head.
func (s *memStream) push(r Record) {
	if s.head < chunkSize {
		if len(s.first) == cap(s.first) {
			grown := make([]Record, len(s.first), min(max(2*cap(s.first), 4), chunkSize))
			copy(grown, s.first)
			s.first = grown
		}
		s.first = append(s.first, r)
	} else {
		if s.head%chunkSize == 0 {
			s.more = append(s.more, make([]Record, 0, chunkSize))
		}
		last := &s.more[len(s.more)-1]
		*last = append(*last, r)
	}
	s.head++
}

// chunk returns the i-th chunk.
func (s *memStream) chunk(i uint64) []Record {
	if i == 0 {
		return s.first
	}
	return s.more[i-1]
}

// read returns a copy of the n records from seq on; seq+n <= s.head.
func (s *memStream) read(seq, n uint64) []Record {
	out := make([]Record, 0, n)
	for end := seq + n; seq < end; {
		c := s.chunk(seq / chunkSize)
		i := seq % chunkSize
		take := min(uint64(len(c))-i, end-seq)
		out = append(out, c[i:i+take]...)
		seq += take
	}
	return out
}

func compareInRun(a, b StreamKey) int {
	if c := cmp.Compare(a.ActivityID, b.ActivityID); c != 0 {
		return c
	}
	return cmp.Compare(a.Attempt, b.Attempt)
}

// lookup returns the stream of key, or nil when it was never created.
func (m *Memory) lookup(key StreamKey) *memStream {
	m.mu.RLock()
	s := m.streams[key]
	m.mu.RUnlock()
	return s
}

// lookupOrCreate returns the stream of key, creating it (and its entry in the
// run index) when absent.
func (m *Memory) lookupOrCreate(key StreamKey) *memStream {
	if s := m.lookup(key); s != nil {
		return s
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s := m.streams[key]; s != nil {
		return s
	}
	if m.streams == nil {
		m.streams = make(map[StreamKey]*memStream)
		m.runs = make(map[runKey][]runEntry)
	}
	s := &memStream{}
	m.streams[key] = s
	rk := runKey{workflowID: key.WorkflowID, runID: key.RunID}
	old := m.runs[rk]
	at, _ := slices.BinarySearchFunc(old, key, func(e runEntry, k StreamKey) int {
		return compareInRun(e.key, k)
	})
	entries := make([]runEntry, 0, len(old)+1)
	entries = append(entries, old[:at]...)
	entries = append(entries, runEntry{key: key, stream: s})
	m.runs[rk] = append(entries, old[at:]...)
	return s
}

// AppendEvents implements [Store.AppendEvents].
//
// The checks run in this order, and the first that fails decides the error:
// the context; an empty batch (a no-op returning expectedSeq); the checks of
// [ValidateBatch], in its order; the expected seq
// ([*eventstore.SequenceConflictError]). On any error nothing is written and
// the returned head is 0.
//
// The stored events are copies of the given ones with StoreSeq set,
// Persisted true and a pointer content replaced by its value; the caller's
// slice is not modified.
func (m *Memory) AppendEvents(ctx context.Context, expectedSeq uint64, events []ActivityEvent) (uint64, error) {
	if m == nil {
		return 0, errNilMemory
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if len(events) == 0 {
		return expectedSeq, nil
	}
	if err := ValidateBatch(events); err != nil {
		return 0, err
	}
	key := KeyOf(events[0])

	var s *memStream
	if expectedSeq == 0 {
		s = m.lookupOrCreate(key)
	} else if s = m.lookup(key); s == nil {
		// An absent stream has head 0, so any other expected seq is stale.
		// Not creating it here keeps refused appends from leaving empty
		// streams behind.
		return 0, &eventstore.SequenceConflictError{Expected: expectedSeq, Found: 0}
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.head != expectedSeq {
		return 0, &eventstore.SequenceConflictError{Expected: expectedSeq, Found: s.head}
	}
	for _, ev := range events {
		ev.Content, _ = contentValue(ev.Content) // valid: checked by ValidateBatch
		ev.StoreSeq = s.head
		ev.Persisted = true
		s.push(Record{StoreSeq: s.head, Event: ev})
	}
	return s.head, nil
}

// Head implements [Store.Head]. A zero workflow or run ID in key returns an
// error wrapping [eventstore.ErrInvalidArgument].
func (m *Memory) Head(ctx context.Context, key StreamKey) (uint64, error) {
	if m == nil {
		return 0, errNilMemory
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := key.Validate(); err != nil {
		return 0, err
	}
	s := m.lookup(key)
	if s == nil {
		return 0, nil
	}
	return s.currentHead(), nil
}

func (s *memStream) currentHead() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.head
}

// ReadFrom implements [Store.ReadFrom]. The store seq indexes the stream
// directly, so the cost is that of copying the returned records. A zero
// workflow or run ID in key returns an error wrapping
// [eventstore.ErrInvalidArgument]. The returned slice is the caller's.
func (m *Memory) ReadFrom(ctx context.Context, key StreamKey, fromSeq uint64, limit int) ([]Record, error) {
	if m == nil {
		return nil, errNilMemory
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := key.Validate(); err != nil {
		return nil, err
	}
	s := m.lookup(key)
	if s == nil {
		return nil, nil
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if fromSeq >= s.head {
		return nil, nil
	}
	n := s.head - fromSeq
	if limit > 0 && uint64(limit) < n {
		n = uint64(limit)
	}
	return s.read(fromSeq, n), nil
}

// ListStreams implements [Store.ListStreams] from a per-run index, so its cost
// is that of the run's own streams. A zero workflow or run ID returns an error
// wrapping [eventstore.ErrInvalidArgument].
//
// Each head is read under its stream's lock, one stream after the other: a
// stream appended to during the call may show its head from before or after
// that append. A stream appears once it holds at least one record.
func (m *Memory) ListStreams(ctx context.Context, workflowID eventstore.WorkflowID, runID eventstore.RunID) ([]StreamSummary, error) {
	if m == nil {
		return nil, errNilMemory
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := (StreamKey{WorkflowID: workflowID, RunID: runID}).Validate(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	entries := m.runs[runKey{workflowID: workflowID, runID: runID}] // copy-on-write: safe to read unlocked
	m.mu.RUnlock()

	if len(entries) == 0 {
		return nil, nil
	}
	out := make([]StreamSummary, 0, len(entries))
	for _, e := range entries {
		// A stream is created just before its first append; one caught in
		// between holds nothing yet and is not listed.
		if head := e.stream.currentHead(); head > 0 {
			out = append(out, StreamSummary{Key: e.key, Head: head})
		}
	}
	return out, nil
}
