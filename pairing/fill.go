package pairing

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/livetracer"
)

// A gap is filled, not waited for. The join knows history positions: a
// live batch of a workflow whose first position is past what this tracker
// has seen of that workflow (positions 1 to the batch's first are not all
// observed) follows facts it never saw: written before a restart, by the
// node whose shards it adopted, or by another node. Their partners (the
// dispatch of a terminal committed here, the start of a run closed here,
// the retries between) are in history, so the tracker reads that
// workflow's history once, off the caller's path, and joins it as facts
// read back: they count nothing themselves, and pair with the facts
// committed here, which count once.

// HistoryReader reads workflow histories: what filling a gap needs of a
// store. Every eventstore.Store is one.
type HistoryReader interface {
	ReadHistory(ctx context.Context, workflowID eventstore.WorkflowID) ([]eventstore.Event, error)
	ReadHistoryFrom(ctx context.Context, workflowID eventstore.WorkflowID, fromSeq uint64) ([]eventstore.Event, error)
}

// DefaultFillConcurrency is how many reads of gaps' histories a [Tracker]
// makes at once without [WithFillConcurrency]: each of one history, or of
// up to [eventstore.HistoriesPage] from a reader that is an
// [eventstore.HistoriesReader].
const DefaultFillConcurrency = 4

// maxPendingFills bounds the gaps waiting for a reader: each is about 100
// bytes. Past it a gap is not filled; it counts on [FillReport.Dropped]
// and its facts wait, as without a reader, until the memory bound drops
// them (aion.pairing.forgotten).
const maxPendingFills = 1 << 16

// WithHistory gives the tracker the store to fill gaps from (see the
// package doc, "A gap is filled"): every batch given to [Tracker.Observe]
// whose first position is past what the tracker has seen of its workflow
// makes it read that workflow's history once, through r. When r is also
// an [eventstore.HistoriesReader] (pgstore, or otelstore over it), the
// gaps waiting for r are read together, one ReadHistories call per page
// of up to [eventstore.HistoriesPage]. Without it (or with nil) Observe
// fills no gap; [Tracker.ObserveFrom] names the reader per batch.
func WithHistory(r HistoryReader) Option {
	return optionFunc(func(c *config) {
		c.history = r
	})
}

// WithFillConcurrency sets how many reads of gaps' histories the tracker
// makes at once, each holding what it read in memory while it is joined:
// one history, or from an [eventstore.HistoriesReader] a page of up to
// [eventstore.HistoriesPage] histories (a history is let go once joined).
// Without it, or with n <= 0, it is [DefaultFillConcurrency].
func WithFillConcurrency(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.fillConcurrency = n
		}
	})
}

// FillReport is what the tracker did about gaps since it was made
// ([Tracker.Fills]). Every figure only grows.
type FillReport struct {
	// Gaps is the number of gaps found: live batches past what the
	// tracker had seen of their workflow, one per workflow while its fill
	// is pending.
	Gaps int64
	// Read is the number of histories read and joined; Failed, those that
	// could not be read, or read ending before the gap's positions (a
	// workflow deleted by retention reads as empty: error.type not_found);
	// each also counts on aion.pairing.resumed with its error.type. Their
	// facts are not guessed: they wait for their partners until the memory
	// bound drops them (aion.pairing.forgotten).
	Read, Failed int64
	// Skipped is the number of fills not read: the gap closed before the
	// read (the batches in between were observed, or a resume read the
	// workflow), or the workflow was released meanwhile.
	Skipped int64
	// Dropped is the number of gaps not filled because too many waited.
	Dropped int64
	// Events is the number of events the fills joined: of each history
	// read, its events from the first position the tracker had not seen
	// (what ReadHistoryFrom returns from there; a batch read returns
	// whole histories, whose prefix already seen is not joined again).
	Events int64
}

// Fills returns what the tracker did about gaps so far.
func (t *Tracker) Fills() FillReport {
	if t == nil || t.fill == nil {
		return FillReport{}
	}
	f := t.fill
	return FillReport{Gaps: f.gaps.Load(), Read: f.read.Load(), Failed: f.failed.Load(),
		Skipped: f.skipped.Load(), Dropped: f.dropped.Load(), Events: f.events.Load()}
}

// WaitFilled waits until every gap found so far is filled (read and
// joined, or given up), or ctx is done, whose error it then returns. A
// program can call it before a final export; tests call it instead of
// sleeping.
func (t *Tracker) WaitFilled(ctx context.Context) error {
	if t == nil || t.fill == nil {
		return nil
	}
	ctx = orBackground(ctx)
	t.fill.mu.Lock()
	idle := t.fill.idle
	t.fill.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ObserveFrom is [Tracker.Observe], filling a gap of the batch's workflow
// from history (nil: the reader of [WithHistory], if any). The read
// happens in the background, at most [WithFillConcurrency] at a time: the
// call itself never waits for it. Gaps queued one after another for the
// same history reader that is an [eventstore.HistoriesReader] are read
// together (see [WithHistory]).
func (t *Tracker) ObserveFrom(ctx context.Context, history HistoryReader, namespace string, workflowID eventstore.WorkflowID, firstSeq uint64, events []eventstore.Event) {
	t.observeFrom(ctx, livetracer.Lookup{}, history, namespace, workflowID, firstSeq, events)
}

// observeFrom is ObserveFrom in a call whose look at the global provider
// is lk.
func (t *Tracker) observeFrom(ctx context.Context, lk livetracer.Lookup, history HistoryReader, namespace string, workflowID eventstore.WorkflowID, firstSeq uint64, events []eventstore.Event) {
	if t == nil || t.join == nil || len(events) == 0 {
		return
	}
	fx := getEffectsAt(orBackground(ctx), lk)
	defer putEffects(fx)
	if firstSeq > ^uint64(0)-uint64(len(events)) {
		firstSeq = 0
	}
	fx.history = history
	if fx.history == nil {
		fx.history = t.history
	}
	t.collect(fx, firstSeq, events, true)
	t.observe(fx, namespace, workflowID)
}

// filler runs the fills: a queue of gaps and up to max readers, started
// when work comes and gone when there is none. A reader takes the gap at
// the head of the queue, and with it, when that gap's reader is an
// [eventstore.HistoriesReader], the gaps that follow it for the same
// reader, up to [eventstore.HistoriesPage]: so a burst of gaps (an
// adoption, a restart under load) costs a round trip per page, not per
// workflow, while a lone gap is read at once.
type filler struct {
	mu      sync.Mutex
	queue   []fillRequest
	workers int
	max     int
	// idle is closed when no fill is queued or running; nil while so.
	idle chan struct{}
	// pending are the fills queued or running (joined and recorded or
	// not), by token; ended is closed, and made again by a waiter, when
	// one of them ends (waitFor).
	pending map[uint64]wfKey
	ended   chan struct{}
	// onWait, set by tests only, is called when waitFor blocks.
	onWait func()

	gaps, read, failed, skipped, dropped, events atomic.Int64
}

// fillRequest is a gap to fill: its workflow, the reader, and the token
// the workflow holds while the fill is pending (a workflow released or
// forgotten meanwhile holds another, or none).
type fillRequest struct {
	k      wfKey
	reader HistoryReader
	token  uint64
	// upTo is the last position of the gap when its fill started: a
	// history read back that ends before it no longer holds the gap.
	upTo uint64
}

// What a live batch decided about a gap.
const (
	gapNone    uint8 = iota
	gapQueued        // a fill to queue once the lock is released
	gapDropped       // too many fills wait
	gapStale         // a fill's history came back for a workflow released meanwhile
)

// gap decides, under the join's lock, whether the live batch just applied
// to w (whose first position is lo) leaves a gap to fill, and if so marks
// w and puts the request to queue, once the lock is released, in fx.
func (j *join) gap(w *workflow, lo uint64, fx *effects) {
	if lo <= 1 || fx.history == nil {
		return
	}
	upTo := lo - 1
	if upTo <= w.fillTried || w.seen.covers(w.fillTried+1, upTo) {
		return
	}
	w.fillTo = max(w.fillTo, upTo)
	if w.fill != 0 {
		return // one pending fill per workflow
	}
	if j.pendingFills >= maxPendingFills {
		w.fillTried = w.fillTo
		fx.gap = gapDropped
		return
	}
	j.fillSeq++
	j.pendingFills++
	w.fill = j.fillSeq
	fx.gap, fx.fillReq = gapQueued, fillRequest{k: w.key, reader: fx.history, token: w.fill}
}

// firstUnseen is the lowest position from lo on not observed.
func (s *seen) firstUnseen(lo uint64) uint64 {
	for _, r := range s.ranges {
		if r.lo > lo {
			break
		}
		if r.hi >= lo {
			lo = r.hi + 1
		}
	}
	return lo
}

// enqueue queues a fill and starts a reader if fewer than max run.
func (f *filler) enqueue(t *Tracker, r fillRequest) {
	f.gaps.Add(1)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.queue = append(f.queue, r)
	if f.pending == nil {
		f.pending = make(map[uint64]wfKey)
	}
	f.pending[r.token] = r.k
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	if f.workers < f.max {
		f.workers++
		go t.fillLoop()
	}
}

// fillLoop fills queued gaps until none is left. It takes one gap at a
// time, or, when the gap's reader is an [eventstore.HistoriesReader], the
// gaps queued for that same reader, up to [eventstore.HistoriesPage] of
// them, to read in one call (fillBatch).
func (t *Tracker) fillLoop() {
	f := t.fill
	var batch []fillRequest // reused: at most HistoriesPage requests
	for {
		f.mu.Lock()
		if len(f.queue) == 0 {
			f.workers--
			if f.workers == 0 && f.idle != nil {
				close(f.idle)
				f.idle = nil
			}
			f.mu.Unlock()
			return
		}
		n := 1
		if _, ok := f.queue[0].reader.(eventstore.HistoriesReader); ok {
			for n < len(f.queue) && n < eventstore.HistoriesPage && sameReader(f.queue[n].reader, f.queue[0].reader) {
				n++
			}
		}
		batch = append(batch[:0], f.queue[:n]...)
		clear(f.queue[:n])
		f.queue = f.queue[n:]
		if len(f.queue) == 0 {
			f.queue = nil // let the backing array go
		}
		f.mu.Unlock()
		if _, ok := batch[0].reader.(eventstore.HistoriesReader); ok {
			t.fillBatch(batch)
		} else {
			t.fillOne(batch[0])
			f.done(batch[0].token)
		}
		clear(batch)
	}
}

// sameReader reports whether a and b are the same reader, false when they
// cannot be compared (a reader of a type that is not comparable).
func sameReader(a, b HistoryReader) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// done ends the pending fill of token: a waiter (waitFor) sees it gone.
func (f *filler) done(token uint64) {
	f.mu.Lock()
	delete(f.pending, token)
	if f.ended != nil {
		close(f.ended)
		f.ended = nil
	}
	f.mu.Unlock()
}

// waitFor waits until every fill of a workflow in ids (of namespace ns)
// that is queued or running now has ended, its telemetry recorded, or ctx
// is done, whose error it then returns. Fills begun later do not hold it.
func (f *filler) waitFor(ctx context.Context, ns string, ids []eventstore.WorkflowID) error {
	f.mu.Lock()
	var tokens []uint64
	if len(f.pending) > 0 {
		want := make(map[eventstore.WorkflowID]bool, len(ids))
		for _, id := range ids {
			want[id] = true
		}
		for token, k := range f.pending {
			if k.namespace == ns && want[k.id] {
				tokens = append(tokens, token)
			}
		}
	}
	f.mu.Unlock()
	for _, token := range tokens {
		for {
			f.mu.Lock()
			_, ok := f.pending[token]
			if !ok {
				f.mu.Unlock()
				break
			}
			if f.ended == nil {
				f.ended = make(chan struct{})
			}
			ended, onWait := f.ended, f.onWait
			f.mu.Unlock()
			if onWait != nil {
				onWait()
			}
			select {
			case <-ended:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return nil
}

// fillOne reads the history of one gap's workflow and joins it, unless the
// gap closed meanwhile.
func (t *Tracker) fillOne(r fillRequest) {
	from, ok := t.startFill(&r)
	if !ok {
		return
	}
	ctx := markReadBack(context.Background())
	history, err := t.readHistory(ctx, r.reader, r.k.id, from)
	t.joinFill(ctx, r, history, err)
}

// startFill decides, under the join's lock, whether r's gap still needs
// its history read, and from which position: a gap closed meanwhile (the
// batches in between were observed, or a resume read the workflow), or a
// workflow released meanwhile, is skipped and its fill ended.
func (t *Tracker) startFill(r *fillRequest) (from uint64, ok bool) {
	j := t.join
	j.mu.Lock()
	defer j.mu.Unlock()
	return t.startFillLocked(r)
}

func (t *Tracker) startFillLocked(r *fillRequest) (from uint64, ok bool) {
	j := t.join
	w := j.workflows.get(r.k)
	if w == nil || w.fill != r.token {
		j.pendingFills--
		t.fill.skipped.Add(1)
		return 0, false
	}
	if w.seen.covers(w.fillTried+1, w.fillTo) {
		j.endFill(w)
		t.fill.skipped.Add(1)
		return 0, false
	}
	r.upTo = w.fillTo
	return w.seen.firstUnseen(w.fillTried + 1), true
}

// joinFill joins the history read for r's gap (its events from the first
// position not seen when the fill started) as facts read back, or, when
// the read failed, ends the fill and counts it failed. A history that ends
// before the gap's last position (the workflow deleted by retention: a
// store reads an unknown workflow as empty) is a failed read too, with an
// error wrapping eventstore.ErrNotFound: what it lacks cannot be joined.
func (t *Tracker) joinFill(ctx context.Context, r fillRequest, history []eventstore.Event, err error) {
	f := t.fill
	if err == nil && !reaches(history, r.upTo) {
		err = fmt.Errorf("pairing: fill: workflow %s: the history read ends before position %d: %w", r.k.id, r.upTo, eventstore.ErrNotFound)
	}
	t.countResumed(ctx, t.attrs.namespaces.Get(r.k.namespace), err)
	fx := getEffects(ctx)
	defer putEffects(fx)
	fx.fill = r.token
	if err == nil {
		t.collect(fx, 0, history, false)
	}
	if len(fx.facts) == 0 && len(fx.ranges) == 0 {
		fx.ranges = append(fx.ranges, seqRange{}) // still end the fill
	}
	t.observe(fx, r.k.namespace, r.k.id) // ends the fill, also a failed one
	if err != nil {
		f.failed.Add(1)
		return
	}
	if fx.gap == gapStale {
		f.skipped.Add(1)
		return
	}
	f.read.Add(1)
	f.events.Add(int64(len(history)))
}

// fillBatch fills the gaps of batch, all of one reader that is an
// [eventstore.HistoriesReader], with one ReadHistories call for those
// still open. Each history comes back whole; its prefix this tracker had
// seen when the fill started is skipped, so that each gap joins what a
// fill of its own (ReadHistoryFrom) would have read. A call that fails
// (an error, a panic, fewer histories than asked) loses no gap: each is
// then read on its own, as without the capability, so that one
// workflow's unreadable history fails its own gap only. A lone gap past a
// prefix already seen is read from its first unseen position instead: one
// round trip either way, and only the unseen part.
func (t *Tracker) fillBatch(batch []fillRequest) {
	f := t.fill
	j := t.join
	froms := make([]uint64, len(batch))
	ids := make([]eventstore.WorkflowID, 0, len(batch))
	var skipped []uint64
	open := batch[:0] // the gaps still to read, in place
	j.mu.Lock()
	for _, r := range batch {
		from, ok := t.startFillLocked(&r)
		if !ok {
			skipped = append(skipped, r.token)
			continue
		}
		froms[len(open)] = from
		open = append(open, r)
		ids = append(ids, r.k.id)
	}
	j.mu.Unlock()
	for _, token := range skipped {
		f.done(token)
	}
	if len(open) == 0 {
		return
	}
	ctx := markReadBack(context.Background())
	var histories [][]eventstore.Event
	batched := len(open) > 1 || froms[0] <= 1
	var err error
	if batched {
		histories, err = t.readHistories(ctx, open[0].reader.(eventstore.HistoriesReader), ids)
	}
	for i, r := range open {
		if !batched || err != nil {
			history, err := t.readHistory(ctx, r.reader, r.k.id, froms[i])
			t.joinFill(ctx, r, history, err)
		} else {
			t.joinFill(ctx, r, unseenFrom(histories[i], froms[i]), nil)
			histories[i] = nil // joined: let it go
		}
		f.done(r.token)
	}
}

// reaches reports whether history, read from a position up to upTo,
// holds position upTo: its last event is there or later (or carries no
// position, from a reader that does not stamp them).
func reaches(history []eventstore.Event, upTo uint64) bool {
	if len(history) == 0 {
		return upTo == 0
	}
	last := envelopeOf(history[len(history)-1]).Seq
	return last == 0 || last >= upTo
}

// unseenFrom returns history from its first event at position from or
// later: a history is in position order, and what comes before from was
// seen (an event without a position is kept).
func unseenFrom(history []eventstore.Event, from uint64) []eventstore.Event {
	i := 0
	for i < len(history) {
		seq := envelopeOf(history[i]).Seq
		if seq == 0 || seq >= from {
			break
		}
		i++
	}
	return history[i:]
}

// readHistories reads the histories of ids in one call; a panic of the
// reader, or an answer for another number of workflows, is an error.
func (t *Tracker) readHistories(ctx context.Context, r eventstore.HistoriesReader, ids []eventstore.WorkflowID) (histories [][]eventstore.Event, err error) {
	defer func() {
		if p := recover(); p != nil {
			histories, err = nil, errReaderPanicked{p}
		}
	}()
	histories, err = r.ReadHistories(ctx, ids)
	if err == nil && len(histories) != len(ids) {
		return nil, fmt.Errorf("pairing: ReadHistories returned %d histories for %d workflows", len(histories), len(ids))
	}
	return histories, err
}

// readHistory reads a workflow's history from position from; a panic of
// the reader is an error.
func (t *Tracker) readHistory(ctx context.Context, r HistoryReader, id eventstore.WorkflowID, from uint64) (history []eventstore.Event, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = errReaderPanicked{p}
		}
	}()
	if from <= 1 {
		return r.ReadHistory(ctx, id)
	}
	return r.ReadHistoryFrom(ctx, id, from)
}

// IsReadBack reports whether ctx is the context of a read the tracker
// makes on its own, not a caller's: a gap fill's, or a resume's. A test
// that checks what reaches a store through a decorator (every method
// once) tells these apart with it.
func IsReadBack(ctx context.Context) bool {
	return ctx != nil && ctx.Value(readBackKey{}) != nil
}

type readBackKey struct{}

func markReadBack(ctx context.Context) context.Context {
	return context.WithValue(ctx, readBackKey{}, true)
}

type errReaderPanicked struct{ v any }

func (e errReaderPanicked) Error() string { return "pairing: history reader panicked" }

// endFill ends w's pending fill: the gaps up to what it was asked for are
// not read again.
func (j *join) endFill(w *workflow) {
	w.fill = 0
	w.fillTried = max(w.fillTried, w.fillTo)
	j.pendingFills--
}
