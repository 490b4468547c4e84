package keyspace

import (
	"container/list"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/guard"
)

// Sequencer is the single writer in front of a [Store]: the read-head,
// append-at-expected-seq, retry-on-conflict loop that gives a stream its
// contiguous store seqs, with deduplication of re-delivered events.
//
// [Sequencer.Append] takes events of any streams in arrival order. It sets the
// ephemeral ones aside, groups the rest by stream (keeping their order), drops
// re-deliveries, and commits each stream's remainder as one
// [Store.AppendEvents] call. The Sequencer caches each stream's head and, per
// agent, the highest WorkerSeq it holds; on a sequence conflict it reads what
// other writers added since its cached head, drops what is now a duplicate, and
// retries, at most [WithMaxRetries] times.
//
// Re-delivery: a worker that loses its connection, or adopts a dying
// worker's attempt, may send events the store already holds. The Sequencer
// never stores one twice: it keeps, per stream and per agent, the highest WorkerSeq persisted,
// and treats an event whose WorkerSeq is at or below it as a re-delivery
// (counted in [StreamResult].Duplicates). This assumes an agent's WorkerSeq
// grows with every new event it emits and reaches the Sequencer in that
// order: an event arriving after a higher WorkerSeq of its agent was stored
// is dropped as a duplicate, and two events of one agent with the same
// WorkerSeq in one batch collapse into the first. Events with an empty
// AgentID are never deduplicated. The Sequencer learns a stream's state the
// first time it touches it by reading the whole stream, so deduplication
// holds across a restart of the server and against other writers, whose
// records it reads on a conflict; retrying a failed Append with the same
// batch is therefore safe for events that carry an AgentID.
//
// Costs: one AppendEvents call per stream per Append when no other writer
// interferes. The first touch of a stream reads the whole stream once, in
// pages; each conflict reads the records added since the cached head. At most
// [WithMaxCachedStreams] streams are cached, the least recently used idle one
// evicted first and reloaded from the store when touched again.
//
// A Sequencer is safe for concurrent use. Appends to one stream are serialised
// inside it, so goroutines sharing a Sequencer never conflict with each other;
// conflicts come only from other writers of the same store. A call waiting for
// its turn on a stream gives up when its context ends. Its zero value is not
// ready: use [NewSequencer]. It must not be copied after first use.
type Sequencer struct {
	store Store
	cfg   sequencerConfig

	// mu guards streams, lru and every entry's refs and elem. It is held
	// only briefly and never while waiting for an entry's lock.
	mu      sync.Mutex
	streams map[StreamKey]*seqStream
	lru     list.List // of *seqStream, most recently used at the front
}

// seqStream is the Sequencer's cached view of one stream.
type seqStream struct {
	key  StreamKey
	refs int           // calls using the entry; guarded by Sequencer.mu
	elem *list.Element // position in Sequencer.lru; guarded by Sequencer.mu

	// lock serialises appends to the stream through this Sequencer and
	// guards the fields below: holding it is having sent on it (capacity 1).
	// A channel rather than a mutex, so that a caller waiting for the stream
	// can give up when its context ends.
	lock   chan struct{}
	loaded bool              // head and maxSeq describe a prefix of the stored stream
	head   uint64            // the stream's next store seq
	maxSeq map[string]uint64 // per AgentID, the highest WorkerSeq persisted
}

const (
	defaultMaxRetries       = 8
	defaultMaxCachedStreams = 1 << 16
	// loadPageSize bounds each ReadFrom made to load or catch up a stream.
	loadPageSize = 1024
)

type sequencerConfig struct {
	maxRetries       int
	maxCachedStreams int
}

// SequencerOption configures a [Sequencer].
type SequencerOption interface {
	applySequencer(*sequencerConfig)
}

type sequencerOptionFunc func(*sequencerConfig)

func (f sequencerOptionFunc) applySequencer(c *sequencerConfig) { f(c) }

// WithMaxRetries sets how many times [Sequencer.Append] retries a stream's
// append after a sequence conflict before giving up with a
// [*RetryExhaustedError]: a stream gets at most n+1 AppendEvents calls per
// Append. n = 0 means no retry. A negative n is ignored. Without this option
// a stream is retried up to 8 times.
func WithMaxRetries(n int) SequencerOption {
	return sequencerOptionFunc(func(c *sequencerConfig) {
		if n >= 0 {
			c.maxRetries = n
		}
	})
}

// WithMaxCachedStreams bounds how many streams the [Sequencer] keeps a cached
// head and deduplication state for. Past n, the least recently used stream
// not in use is forgotten; touching it again reloads it from the store (one
// read of the whole stream), so forgetting costs time, never correctness. An
// n <= 0 is ignored. Without this option up to 65,536 streams are cached.
func WithMaxCachedStreams(n int) SequencerOption {
	return sequencerOptionFunc(func(c *sequencerConfig) {
		if n > 0 {
			c.maxCachedStreams = n
		}
	})
}

// NewSequencer returns a Sequencer writing to store. Nil options are ignored.
// A nil store is not a panic: every Append then fails with an error wrapping
// [eventstore.ErrInvalidArgument]. A typed nil (a nil *Memory, or a nil
// pointer, map, slice, func or channel of another Store type) counts as nil.
func NewSequencer(store Store, opts ...SequencerOption) *Sequencer {
	if guard.IsNil(store) {
		store = nil
	}
	cfg := sequencerConfig{maxRetries: defaultMaxRetries, maxCachedStreams: defaultMaxCachedStreams}
	for _, o := range opts {
		if o != nil {
			o.applySequencer(&cfg)
		}
	}
	return &Sequencer{store: store, cfg: cfg, streams: make(map[StreamKey]*seqStream)}
}

// AppendResult is what [Sequencer.Append] did with a batch.
type AppendResult struct {
	// Streams has one entry per stream that had durable (non-ephemeral)
	// events in the batch, in order of the stream's first appearance. After
	// an error it holds only the streams committed before the failure.
	Streams []StreamResult
	// Ephemeral holds the batch's ephemeral events in arrival order, for
	// live forwarding; they are never stored.
	Ephemeral []ActivityEvent
}

// StreamResult is what [Sequencer.Append] did with one stream's events.
type StreamResult struct {
	Key StreamKey
	// FirstSeq is the store seq of the first event written; equal to Head
	// when nothing was written.
	FirstSeq uint64
	// Head is the stream's head after the append: FirstSeq + Written.
	Head uint64
	// Written is the number of events committed.
	Written int
	// Duplicates is the number of events dropped as re-deliveries: already
	// persisted in the stream, or repeated earlier in the same batch.
	Duplicates int
}

// RetryExhaustedError is returned by [Sequencer.Append] when a stream's
// append still met a sequence conflict after the last allowed retry. It
// unwraps to the last conflict, so errors.Is(err,
// eventstore.ErrSequenceConflict) holds:
//
//	var exhausted *keyspace.RetryExhaustedError
//	if errors.As(err, &exhausted) {
//		log.Printf("stream %s: %d events not written", exhausted.Key, exhausted.Unwritten)
//	}
//
// Nothing of the stream named by Key was written by the failed call; streams
// before it in the batch were committed (Committed, and the AppendResult
// returned with the error), streams after it were not attempted.
type RetryExhaustedError struct {
	// Key is the stream that could not be written.
	Key StreamKey
	// Attempts is the number of AppendEvents calls made for that stream,
	// every one of which conflicted.
	Attempts int
	// Head is the stream's head reported by the last conflict.
	Head uint64
	// Unwritten is the number of that stream's events left unwritten (after
	// dropping duplicates).
	Unwritten int
	// Committed are the results of the batch's streams committed before Key.
	Committed []StreamResult
	// Err is the last conflict, a *eventstore.SequenceConflictError.
	Err error
}

func (e *RetryExhaustedError) Error() string {
	return fmt.Sprintf("keyspace: sequencer: stream %s: %d events unwritten after %d conflicting attempts: %v",
		e.Key, e.Unwritten, e.Attempts, e.Err)
}

// Unwrap returns the last sequence conflict (nil for a nil e, so that
// errors.Is and errors.As can walk past a typed nil).
func (e *RetryExhaustedError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

// Append writes a batch of events of any streams, in arrival order.
//
// Before anything is written it checks the context and every event
// (ephemeral ones included): a zero workflow or run ID, or a Content that
// [ValidateBatch] refuses (a nil pointer, a type other than the five kinds),
// fails the whole call with an error wrapping [eventstore.ErrInvalidArgument]
// naming the event, and nothing is written to any stream.
//
// Ephemeral events are returned in AppendResult.Ephemeral and never stored.
// The others are grouped by stream in order of first appearance, keeping
// their relative order. Within a stream, an event whose AgentID is non-empty
// and whose WorkerSeq is at most the highest WorkerSeq already persisted (or
// already accepted earlier in this batch) for that agent is a re-delivery: it
// is dropped and counted in StreamResult.Duplicates. What remains is written
// as one AppendEvents call, retried after a sequence conflict as described on
// [Sequencer].
//
// Each stream is its own commit; there is no atomicity across streams. When a
// stream fails, Append stops and returns the error with the result of the
// streams committed before it; later streams are not attempted. Retrying the
// same batch is then safe for events with an AgentID: those already written
// are dropped as re-deliveries. A conflict that outlasts the retries is a
// [*RetryExhaustedError]; any other store error is returned as the store gave
// it. A durable backend may have committed an append it reported as failed;
// the next Append of that stream then meets a conflict, reads those records
// and drops the re-sent events they contain.
//
// Waiting for a stream that another Append of this Sequencer is writing ends
// when ctx does: that stream and the later ones are not attempted, and the
// error wraps ctx.Err() (errors.Is(err, context.Canceled) or
// context.DeadlineExceeded). A call that gave up has taken nothing: the
// writing call and the waiting ones after it proceed as if it had never
// come. Waiters are not guaranteed to get the stream in arrival order.
// Reading a stream's records (at its first touch, or after a conflict) also
// stops with ctx.Err() before the next page once ctx has ended.
func (s *Sequencer) Append(ctx context.Context, events []ActivityEvent) (AppendResult, error) {
	var res AppendResult
	if s == nil || s.store == nil {
		return res, fmt.Errorf("%w: keyspace: sequencer has no store", eventstore.ErrInvalidArgument)
	}
	if err := ctx.Err(); err != nil {
		return res, err
	}
	for i := range events {
		if err := KeyOf(events[i]).Validate(); err != nil {
			return res, fmt.Errorf("keyspace: sequencer: event %d: %w", i, err)
		}
		if err := checkContent(i, events[i].Content); err != nil {
			return res, fmt.Errorf("keyspace: sequencer: %w", err)
		}
	}

	groups, durable := groupByStream(events, &res)
	res.Streams = make([]StreamResult, 0, len(groups))
	for _, g := range groups {
		r, err := s.appendStream(ctx, g.key, durable[g.off:g.off+g.n:g.off+g.n], res.Streams)
		if err != nil {
			return res, err
		}
		res.Streams = append(res.Streams, r)
	}
	return res, nil
}

// streamGroup is one stream's events: durable[off:off+n].
type streamGroup struct {
	key    StreamKey
	off, n int
}

// linearGroups is how many streams groupByStream finds by linear search
// before it builds a map.
const linearGroups = 8

// groupByStream sets the ephemeral events aside into res.Ephemeral and groups
// the others by stream, in order of first appearance and keeping their order
// within a stream (a stable counting sort). It returns the groups and the
// slice they index; for a batch of one stream without ephemeral events that
// slice is events itself.
func groupByStream(events []ActivityEvent, res *AppendResult) ([]streamGroup, []ActivityEvent) {
	var (
		groups []streamGroup
		index  map[StreamKey]int
		of     = make([]int, len(events)) // each event's group, -1 for ephemeral
	)
	for i := range events {
		if events[i].Ephemeral {
			res.Ephemeral = append(res.Ephemeral, events[i])
			of[i] = -1
			continue
		}
		k := KeyOf(events[i])
		g := -1
		if index != nil {
			if j, ok := index[k]; ok {
				g = j
			}
		} else {
			for j := range groups {
				if groups[j].key == k {
					g = j
					break
				}
			}
		}
		if g < 0 {
			g = len(groups)
			groups = append(groups, streamGroup{key: k})
			if index != nil {
				index[k] = g
			} else if len(groups) > linearGroups {
				index = make(map[StreamKey]int, 2*len(groups))
				for j := range groups {
					index[groups[j].key] = j
				}
			}
		}
		groups[g].n++
		of[i] = g
	}
	if len(groups) == 1 && len(res.Ephemeral) == 0 {
		return groups, events
	}
	off := 0
	for g := range groups {
		groups[g].off = off
		off += groups[g].n
		groups[g].n = 0
	}
	durable := make([]ActivityEvent, off)
	for i, g := range of {
		if g >= 0 {
			durable[groups[g].off+groups[g].n] = events[i]
			groups[g].n++
		}
	}
	return groups, durable
}

// appendStream writes one stream's events (all of key, none ephemeral);
// committed are the results of the batch's streams before it, for a
// RetryExhaustedError. An error of the store, whatever its type, is returned
// as the store gave it and never changed.
func (s *Sequencer) appendStream(ctx context.Context, key StreamKey, events []ActivityEvent, committed []StreamResult) (StreamResult, error) {
	st := s.acquire(key)
	defer s.release(st)
	if err := st.lockCtx(ctx); err != nil {
		return StreamResult{}, fmt.Errorf("keyspace: sequencer: stream %s: waiting for an earlier append: %w", key, err)
	}
	defer st.unlock()

	if !st.loaded {
		if err := st.reload(ctx, s.store); err != nil {
			return StreamResult{}, err
		}
	}
	pending := st.dedupe(events)
	for attempts := 1; ; attempts++ {
		dups := len(events) - len(pending)
		if len(pending) == 0 {
			return StreamResult{Key: key, FirstSeq: st.head, Head: st.head, Duplicates: dups}, nil
		}
		first := st.head
		_, err := s.store.AppendEvents(ctx, first, pending)
		if err == nil {
			st.commit(pending)
			return StreamResult{Key: key, FirstSeq: first, Head: st.head, Written: len(pending), Duplicates: dups}, nil
		}
		// On any failure the cache stays as it is: it never runs ahead of
		// the store, so whatever the store holds beyond it (even records of
		// an append that failed after committing) surfaces as a conflict on
		// the next attempt and is read then.
		// A typed nil *SequenceConflictError says no head: it is returned
		// as the store gave it, like any other store error.
		conflict := guard.Conflict(err)
		if conflict == nil {
			return StreamResult{}, err
		}
		if attempts > s.cfg.maxRetries {
			return StreamResult{}, &RetryExhaustedError{
				Key: key, Attempts: attempts, Head: conflict.Found, Unwritten: len(pending), Err: err,
				Committed: slices.Clone(committed),
			}
		}
		if err := st.resync(ctx, s.store, conflict.Found); err != nil {
			return StreamResult{}, err
		}
		// Filter the original events again: after a reload the cache may
		// know less than before, and an event dropped against the stale
		// cache must get its chance.
		pending = st.dedupe(events)
	}
}

// lockCtx takes the stream's lock, or returns ctx.Err() once ctx is done
// without taking it. A context already done when the call starts is not
// raced against a free lock: it fails at once.
func (st *seqStream) lockCtx(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case st.lock <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (st *seqStream) unlock() { <-st.lock }

// dedupe returns the events that are not re-deliveries, in order. It relies
// on each agent's WorkerSeq growing with every new event: an event is a
// re-delivery when its WorkerSeq is at most the highest seen for its agent,
// persisted or earlier in events. An empty AgentID is never deduplicated.
// events is not modified; when nothing is dropped, it is returned as is.
func (st *seqStream) dedupe(events []ActivityEvent) []ActivityEvent {
	var inBatch batchMax
	var kept []ActivityEvent // nil until the first drop
	for i := range events {
		ev := &events[i]
		dup := false
		if ev.AgentID != "" {
			if m, ok := inBatch.get(ev.AgentID); ok && ev.WorkerSeq <= m {
				dup = true
			} else if m, ok := st.maxSeq[ev.AgentID]; ok && ev.WorkerSeq <= m {
				dup = true
			} else {
				inBatch.set(ev.AgentID, ev.WorkerSeq)
			}
		}
		switch {
		case dup && kept == nil:
			kept = append(make([]ActivityEvent, 0, len(events)-1), events[:i]...)
		case !dup && kept != nil:
			kept = append(kept, *ev)
		}
	}
	if kept == nil {
		return events
	}
	return kept
}

// batchMax is the highest WorkerSeq per agent seen so far in one batch. A
// batch rarely holds more than a few agents, so it starts as a short list
// searched linearly, in an array that needs no allocation, and becomes a map
// past that.
type batchMax struct {
	n    int
	few  [4]agentSeq
	many map[string]uint64
}

type agentSeq struct {
	agent string
	seq   uint64
}

func (b *batchMax) get(agent string) (uint64, bool) {
	if b.many != nil {
		m, ok := b.many[agent]
		return m, ok
	}
	for i := range b.n {
		if b.few[i].agent == agent {
			return b.few[i].seq, true
		}
	}
	return 0, false
}

func (b *batchMax) set(agent string, seq uint64) {
	if b.many != nil {
		b.many[agent] = seq
		return
	}
	for i := range b.n {
		if b.few[i].agent == agent {
			b.few[i].seq = seq
			return
		}
	}
	if b.n < len(b.few) {
		b.few[b.n] = agentSeq{agent: agent, seq: seq}
		b.n++
		return
	}
	b.many = make(map[string]uint64, 2*len(b.few))
	for _, e := range b.few {
		b.many[e.agent] = e.seq
	}
	b.many[agent] = seq
}

// commit records a successful append of events at st.head.
func (st *seqStream) commit(events []ActivityEvent) {
	for i := range events {
		st.observe(&events[i])
	}
	st.head += uint64(len(events))
}

// observe notes a persisted event's agent and WorkerSeq.
func (st *seqStream) observe(ev *ActivityEvent) {
	if ev.AgentID == "" {
		return
	}
	if m, ok := st.maxSeq[ev.AgentID]; !ok || ev.WorkerSeq > m {
		st.maxSeq[ev.AgentID] = ev.WorkerSeq
	}
}

// reload rebuilds the entry from the whole stream.
func (st *seqStream) reload(ctx context.Context, store Store) error {
	st.loaded = false
	st.head = 0
	st.maxSeq = make(map[string]uint64)
	if err := st.catchUp(ctx, store); err != nil {
		return err
	}
	st.loaded = true
	return nil
}

// resync brings a loaded entry up to date after a conflict that reported
// found as the store's head.
func (st *seqStream) resync(ctx context.Context, store Store, found uint64) error {
	if found < st.head {
		// The store holds less than this entry believes: the cache cannot be
		// trusted at all.
		return st.reload(ctx, store)
	}
	if err := st.catchUp(ctx, store); err != nil {
		return err
	}
	// A store whose reads lag its conflicts still gets the next attempt at
	// the head it reported; without the missing records, their re-deliveries
	// cannot be recognised.
	st.head = max(st.head, found)
	return nil
}

// catchUp reads the records from st.head on, in pages, noting each. It
// looks at ctx before each page, so that a long (or endlessly growing)
// stream, or a store that ignores ctx, cannot keep a cancelled call.
func (st *seqStream) catchUp(ctx context.Context, store Store) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		recs, err := store.ReadFrom(ctx, st.key, st.head, loadPageSize)
		if err != nil {
			return err
		}
		for i := range recs {
			st.observe(&recs[i].Event)
		}
		st.head += uint64(len(recs))
		if len(recs) < loadPageSize {
			return nil
		}
	}
}

// acquire returns the entry of key, creating it, and marks it in use so it is
// not evicted.
func (s *Sequencer) acquire(key StreamKey) *seqStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.streams[key]
	if st == nil {
		st = &seqStream{key: key, lock: make(chan struct{}, 1)}
		st.elem = s.lru.PushFront(st)
		s.streams[key] = st
	} else {
		s.lru.MoveToFront(st.elem)
	}
	st.refs++
	return st
}

// release ends a use of st and evicts the least recently used idle entries
// past the cache bound.
func (s *Sequencer) release(st *seqStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st.refs--
	for el := s.lru.Back(); el != nil && s.lru.Len() > s.cfg.maxCachedStreams; {
		prev := el.Prev()
		if victim := el.Value.(*seqStream); victim.refs == 0 {
			s.lru.Remove(el)
			delete(s.streams, victim.key)
		}
		el = prev
	}
}
