package pairing

import (
	"container/heap"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// entry is one live slot of the table: an activity dispatch, or the marker
// of an open run (attrs nil). Entries are reused (see table.free), so a
// pointer to one identifies a slot only together with its seq.
type entry struct {
	run   *run
	id    eventstore.ActivityID
	attrs *typeAttrs // nil for a run's marker
	at    time.Time  // dispatch time; a marker: the run's start (zero while pending)
	seq   uint64     // slot order, from 1; 0 once the entry is removed
	// span is the open activity span (a marker: the run span); nil when
	// the timeline is off or the span was not started.
	span    trace.Span
	retries uint32
	heap    int // index in its type's age heap (activities only)
}

func (e *entry) isMarker() bool { return e.attrs == nil }

// key returns the key e was dispatched under.
func (e *entry) key() Key {
	rk := e.run.key
	return Key{Namespace: rk.namespace, WorkflowID: rk.workflowID, RunID: rk.runID, ActivityID: e.id}
}

// run is the live state of one run: its activity entries, the second level
// of the table, and its open-run marker. A run in the table holds at least
// one entry or a marker.
type run struct {
	key     runKey
	entries map[eventstore.ActivityID]*entry
	peak    int // most entries held at once since entries was made
	// top is the highest activity ID dispatched in this run (a run is made
	// for its first entry), so a dispatch past it (the usual case: IDs are
	// positions, in increasing order) cannot be a duplicate and needs no
	// lookup.
	top eventstore.ActivityID

	// marker holds the run's open-run slot from RunStarted (or from the
	// close of the run it continues) until it closes or is evicted.
	marker *entry
	wf     *workflowAttrs    // set by RunStarted: then marker.at and marker.span are the run's
	ns     *nsAttrs          // for counting an evicted marker
	prev   trace.SpanContext // the run span of the run this one continues
}

// started reports whether RunStarted opened r (rather than only the close
// of the run it continues).
func (r *run) started() bool { return r.wf != nil }

func (r *run) empty() bool { return len(r.entries) == 0 && r.marker == nil }

// runSpan returns r's run span when this table holds it, else nil.
func (r *run) runSpan() trace.Span {
	if r == nil || r.marker == nil {
		return nil
	}
	return r.marker.span
}

// queued is one slot in the eviction queue. It is stale once its entry has
// been removed: the entry's seq is then 0 or that of a later slot.
type queued struct {
	e   *entry
	seq uint64
}

func (q queued) live() bool { return q.e.seq == q.seq }

// Reuse bounds: at most maxFree entries and runs wait for reuse, and a run
// keeps its activity map for the next run only if it never held more than
// maxRunPeak entries (a map of that size is one small block; a larger one is
// returned to the garbage collector, since Go maps never shrink).
const (
	maxFree    = 1024
	maxRunPeak = 8
	minQueue   = 64 // slack before the eviction queue is compacted
)

// table is the set of live entries in two levels of Go maps: runs by run key,
// then each run's entries by activity ID, so a dispatch or a terminal hashes
// the large run key once and the activity ID (an integer) once or twice, and
// AbandonRun finds a run's entries without a scan. The slot order is a
// slice-backed queue for first-in, first-out eviction; activities and open
// runs share it and the bound.
//
// The queue is not unlinked when an entry is removed out of order (a
// terminal): its item goes stale and is skipped when it reaches the front,
// and the whole queue is compacted once stale items outnumber live ones (plus
// minQueue), so it never holds more than about twice the live entries and
// each dispatch or removal pays O(1) amortised for it. Removed entries and runs are
// reused, so in steady state nothing allocates; container/list would
// allocate an element per dispatch.
//
// Each activity type's live entries also sit in a min-heap by dispatch
// time, so the oldest in flight of every type is read in O(types).
//
// One mutex guards everything; every method locks it with a deferred unlock,
// and none calls instruments or user code while holding it.
type table struct {
	mu     sync.Mutex
	max    int
	n      int    // live slots: activities and markers
	active int    // live activities
	seq    uint64 // last slot number handed out
	runs   map[runKey]*run
	order  []queued // slot order; items before head were popped
	head   int
	ages   map[*typeAttrs]*ageHeap

	freeEntries []*entry
	freeRuns    []*run
}

func newTable(max int) *table {
	return &table{max: max, runs: make(map[runKey]*run), ages: make(map[*typeAttrs]*ageHeap)}
}

// len returns the number of live activities.
func (tb *table) len() int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.active
}

// evicted is what one eviction removed: an activity (attrs; its span is
// dropped) or an open run's marker (ns); neither when nothing was.
type evicted struct {
	attrs *typeAttrs
	ns    *nsAttrs
}

// runSpanOf returns run rk's run span if the table holds it, else nil.
func (tb *table) runSpanOf(rk runKey) trace.Span {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.runs[rk].runSpan()
}

// add makes k live as the newest slot, holding span, unless it already is,
// and reports whether it did. If the table was full, the oldest slot is
// evicted to make room and reported (nil if nothing was evicted).
func (tb *table) add(k Key, attrs *typeAttrs, at time.Time, span trace.Span) (added bool, ev evicted) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	rk := k.run()
	r := tb.runs[rk]
	if r != nil && k.ActivityID <= r.top {
		if _, ok := r.entries[k.ActivityID]; ok {
			return false, evicted{}
		}
	}
	ev = tb.makeRoom()
	r = tb.runOf(rk)
	e := tb.newEntry()
	tb.seq++
	*e = entry{run: r, id: k.ActivityID, attrs: attrs, at: at, seq: tb.seq, span: span}
	r.entries[k.ActivityID] = e
	r.peak = max(r.peak, len(r.entries))
	r.top = max(r.top, k.ActivityID)
	tb.active++
	h := tb.ages[attrs]
	if h == nil {
		h = new(ageHeap)
		tb.ages[attrs] = h
	}
	heap.Push(h, e)
	tb.push(e)
	return true, ev
}

// makeRoom evicts the oldest slot if the table is full; tb.mu is held.
func (tb *table) makeRoom() evicted {
	if tb.n < tb.max {
		return evicted{}
	}
	return tb.evictOldest()
}

// runOf returns rk's run, making it if the table has none; tb.mu is held.
func (tb *table) runOf(rk runKey) *run {
	r := tb.runs[rk]
	if r == nil {
		r = tb.newRun(rk)
		tb.runs[rk] = r
	}
	return r
}

// push appends e to the slot order; tb.mu is held.
func (tb *table) push(e *entry) {
	tb.n++
	tb.shrink()
	tb.order = append(tb.order, queued{e: e, seq: e.seq})
}

// shrink compacts the queue once its popped and stale items outnumber the
// live slots (plus minQueue); tb.mu is held. It runs after every change of
// the live count, so the bound holds after removals too (an AbandonRun of
// a large run, a burst of terminals), and each call pays O(1) amortised.
func (tb *table) shrink() {
	if len(tb.order) >= 2*tb.n+minQueue {
		tb.compact()
	}
}

// lookup returns k's live entry, or nil; tb.mu is held.
func (tb *table) lookup(k Key) *entry {
	if r := tb.runs[k.run()]; r != nil {
		return r.entries[k.ActivityID]
	}
	return nil
}

// taken is an activity entry removed under the lock, to be recorded after
// it.
type taken struct {
	attrs   *typeAttrs
	at      time.Time
	span    trace.Span
	retries uint32
}

func takenOf(e *entry) taken {
	return taken{attrs: e.attrs, at: e.at, span: e.span, retries: e.retries}
}

// take removes k's live entry, if any, and returns what settling it needs.
func (tb *table) take(k Key) (taken, bool) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	e := tb.lookup(k)
	if e == nil {
		return taken{}, false
	}
	t := takenOf(e)
	tb.remove(e)
	return t, true
}

// retry counts a retry of k's live entry and returns its type options, its
// span and the retries so far; nil options if k is not live.
func (tb *table) retry(k Key) (*typeAttrs, trace.Span, uint32) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	e := tb.lookup(k)
	if e == nil {
		return nil, nil, 0
	}
	e.retries++
	return e.attrs, e.span, e.retries
}

// takeRun removes every live activity entry of run rk, appending them to
// dst; the run's marker stays.
func (tb *table) takeRun(rk runKey, dst []taken) []taken {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	r := tb.runs[rk]
	if r == nil {
		return dst
	}
	return tb.takeEntries(r, dst)
}

// takeEntries removes r's activity entries, appending them to dst; tb.mu is
// held.
func (tb *table) takeEntries(r *run, dst []taken) []taken {
	for _, e := range r.entries {
		dst = append(dst, takenOf(e))
		tb.unlinkActivity(e)
		tb.freeEntry(e)
	}
	clear(r.entries)
	if r.empty() {
		delete(tb.runs, r.key)
		tb.freeRun(r)
	}
	tb.shrink()
	return dst
}

// openRun is an open run's state removed at its close; wf is nil for a
// run this tracker never saw start.
type openRun struct {
	at   time.Time
	span trace.Span
	wf   *workflowAttrs
}

// closeRun removes run rk's activity entries (appended to dst) and its
// marker, returned as the run's state.
func (tb *table) closeRun(rk runKey, dst []taken) ([]taken, openRun) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	r := tb.runs[rk]
	if r == nil {
		return dst, openRun{}
	}
	var o openRun
	if m := r.marker; m != nil {
		o = openRun{at: m.at, span: m.span, wf: r.wf}
		tb.removeMarker(r)
	}
	return tb.takeEntries(r, dst), o
}

// pending reports whether run rk was already started here, and the run
// span of the run it continues, if known.
func (tb *table) pending(rk runKey) (prev trace.SpanContext, started bool) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	r := tb.runs[rk]
	if r == nil {
		return trace.SpanContext{}, false
	}
	return r.prev, r.started()
}

// open makes run rk open, started at at with its run span, unless it
// already is; it reports whether it did and what it evicted to make room.
func (tb *table) open(rk runKey, wf *workflowAttrs, at time.Time, span trace.Span) (opened bool, ev evicted) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	r := tb.runs[rk]
	if r != nil && r.started() {
		return false, evicted{}
	}
	if r == nil || r.marker == nil {
		ev = tb.makeRoom()
		r = tb.runOf(rk)
		tb.addMarker(r, wf.ns)
	}
	r.wf, r.prev = wf, trace.SpanContext{}
	r.marker.at, r.marker.span = at, span
	return true, ev
}

// expect records that run rk continues a run whose run span is prev: its
// RunStarted will link to it. It takes an open-run slot (nothing if rk is
// already open) and reports what it evicted.
func (tb *table) expect(rk runKey, ns *nsAttrs, prev trace.SpanContext) evicted {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if r := tb.runs[rk]; r != nil && r.marker != nil {
		return evicted{}
	}
	ev := tb.makeRoom()
	r := tb.runOf(rk)
	tb.addMarker(r, ns)
	r.prev = prev
	return ev
}

// addMarker gives r an open-run slot; tb.mu is held and r has none.
func (tb *table) addMarker(r *run, ns *nsAttrs) {
	e := tb.newEntry()
	tb.seq++
	*e = entry{run: r, seq: tb.seq}
	r.marker, r.ns = e, ns
	tb.push(e)
}

// removeMarker frees r's open-run slot; tb.mu is held. r stays in the
// table even if it is now empty: the caller decides.
func (tb *table) removeMarker(r *run) {
	tb.freeEntry(r.marker)
	r.marker, r.wf, r.ns, r.prev = nil, nil, nil, trace.SpanContext{}
	tb.n--
	tb.shrink()
}

// age is the oldest dispatch time of one type's live activities (zero if
// none is live).
type age struct {
	attrs  *typeAttrs
	oldest time.Time
}

// oldest appends, for every type that has had a live activity, the dispatch
// time of its oldest one still live. It costs O(types).
func (tb *table) oldest(dst []age) []age {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for ta, h := range tb.ages {
		a := age{attrs: ta}
		if len(*h) > 0 {
			a.oldest = (*h)[0].at
		}
		dst = append(dst, a)
	}
	return dst
}

// evictOldest removes the oldest live slot and reports it; tb.mu is held and
// the table is not empty.
func (tb *table) evictOldest() evicted {
	for tb.head < len(tb.order) {
		q := tb.order[tb.head]
		tb.order[tb.head] = queued{}
		tb.head++
		if !q.live() {
			continue
		}
		r := q.e.run
		if q.e.isMarker() {
			ev := evicted{ns: r.ns}
			tb.removeMarker(r)
			if r.empty() {
				delete(tb.runs, r.key)
				tb.freeRun(r)
			}
			return ev
		}
		ev := evicted{attrs: q.e.attrs}
		tb.remove(q.e)
		return ev
	}
	return evicted{}
}

// compact drops the popped and stale items of the queue; tb.mu is held.
func (tb *table) compact() {
	n := 0
	for _, q := range tb.order[tb.head:] {
		if q.live() {
			tb.order[n] = q
			n++
		}
	}
	clear(tb.order[n:])
	tb.order, tb.head = tb.order[:n], 0
}

// remove unlinks live activity entry e from its run, and the run from the
// table if it is now empty, and recycles what it unlinked; e's queue item
// goes stale. tb.mu is held.
func (tb *table) remove(e *entry) {
	r := e.run
	delete(r.entries, e.id)
	tb.unlinkActivity(e)
	if r.empty() {
		delete(tb.runs, r.key)
		tb.freeRun(r)
	}
	tb.freeEntry(e)
	tb.shrink()
}

// unlinkActivity takes activity entry e out of the counts and its age
// heap; tb.mu is held.
func (tb *table) unlinkActivity(e *entry) {
	heap.Remove(tb.ages[e.attrs], e.heap)
	tb.n--
	tb.active--
}

func (tb *table) newEntry() *entry {
	if n := len(tb.freeEntries); n > 0 {
		e := tb.freeEntries[n-1]
		tb.freeEntries = tb.freeEntries[:n-1]
		return e
	}
	return new(entry)
}

// freeEntry clears e, which no map holds any more, and keeps it for reuse.
func (tb *table) freeEntry(e *entry) {
	*e = entry{}
	if len(tb.freeEntries) < maxFree {
		tb.freeEntries = append(tb.freeEntries, e)
	}
}

func (tb *table) newRun(rk runKey) *run {
	if n := len(tb.freeRuns); n > 0 {
		r := tb.freeRuns[n-1]
		tb.freeRuns = tb.freeRuns[:n-1]
		r.key = rk
		if r.entries == nil {
			r.entries = make(map[eventstore.ActivityID]*entry)
		}
		return r
	}
	return &run{key: rk, entries: make(map[eventstore.ActivityID]*entry)}
}

// freeRun keeps r, which the table no longer holds, for reuse.
func (tb *table) freeRun(r *run) {
	entries, peak := r.entries, r.peak
	*r = run{}
	if peak <= maxRunPeak { // keep the small map, and how large it grew
		clear(entries)
		r.entries, r.peak = entries, peak
	}
	if len(tb.freeRuns) < maxFree {
		tb.freeRuns = append(tb.freeRuns, r)
	}
}

// ageHeap is a min-heap of one type's live activity entries by dispatch
// time (container/heap), each entry knowing its index.
type ageHeap []*entry

func (h ageHeap) Len() int           { return len(h) }
func (h ageHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h ageHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heap, h[j].heap = i, j
}

func (h *ageHeap) Push(x any) {
	e := x.(*entry)
	e.heap = len(*h)
	*h = append(*h, e)
}

func (h *ageHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}

// spanOf returns the span of k's live entry, or nil.
func (tb *table) spanOf(k Key) trace.Span {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if e := tb.lookup(k); e != nil {
		return e.span
	}
	return nil
}
