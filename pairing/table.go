package pairing

import (
	"sync"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// entry is one live dispatch. Entries are reused (see table.free), so a
// pointer to one identifies a dispatch only together with its seq.
type entry struct {
	run   *run
	id    eventstore.ActivityID
	attrs *typeAttrs
	at    time.Time // dispatch time
	seq   uint64    // dispatch order, from 1; 0 once the entry is removed
}

// key returns the key e was dispatched under.
func (e *entry) key() Key {
	rk := e.run.key
	return Key{Namespace: rk.namespace, WorkflowID: rk.workflowID, RunID: rk.runID, ActivityID: e.id}
}

// run is the live entries of one run, by activity: the second level of the
// table. A run in the table holds at least one entry.
type run struct {
	key     runKey
	entries map[eventstore.ActivityID]*entry
	peak    int // most entries held at once since entries was made
	// top is the highest activity ID dispatched in this run (a run is made
	// for its first entry), so a dispatch past it (the usual case: IDs are
	// positions, in increasing order) cannot be a duplicate and needs no
	// lookup.
	top eventstore.ActivityID
}

// queued is one dispatch in the eviction queue. It is stale once its entry
// has been removed: the entry's seq is then 0 or that of a later dispatch.
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
// AbandonRun finds a run's entries without a scan. The dispatch order is a
// slice-backed queue for first-in, first-out eviction.
//
// The queue is not unlinked when an entry is removed out of order (a
// terminal): its item goes stale and is skipped when it reaches the front,
// and the whole queue is compacted once stale items outnumber live ones (plus
// minQueue), so it never holds more than about twice the live entries and
// each dispatch pays O(1) amortised for it. Removed entries and runs are
// reused, so in steady state nothing allocates; container/list would
// allocate an element per dispatch.
//
// One mutex guards everything; every method locks it with a deferred unlock,
// and none calls instruments or user code while holding it.
type table struct {
	mu    sync.Mutex
	max   int
	n     int    // live entries
	seq   uint64 // last dispatch number handed out
	runs  map[runKey]*run
	order []queued // dispatch order; items before head were popped
	head  int

	freeEntries []*entry
	freeRuns    []*run
}

func newTable(max int) *table {
	return &table{max: max, runs: make(map[runKey]*run)}
}

// len returns the number of live entries.
func (tb *table) len() int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.n
}

// add makes k live as the newest dispatch unless it already is, and reports
// whether it did. If the table was full, the oldest entry is evicted to make
// room and its type options returned (nil if nothing was evicted).
func (tb *table) add(k Key, attrs *typeAttrs, at time.Time) (added bool, evicted *typeAttrs) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	r := tb.runs[k.run()]
	if r != nil && k.ActivityID <= r.top {
		if _, ok := r.entries[k.ActivityID]; ok {
			return false, nil
		}
	}
	if tb.n >= tb.max {
		evicted = tb.evictOldest()
		if r != nil && len(r.entries) == 0 {
			r = nil // the evicted entry was the run's last: r was recycled
		}
	}
	if r == nil {
		r = tb.newRun(k.run())
		tb.runs[r.key] = r
	}

	e := tb.newEntry()
	tb.seq++
	*e = entry{run: r, id: k.ActivityID, attrs: attrs, at: at, seq: tb.seq}
	r.entries[k.ActivityID] = e
	r.peak = max(r.peak, len(r.entries))
	r.top = max(r.top, k.ActivityID)
	tb.n++

	if len(tb.order) >= 2*tb.n+minQueue {
		tb.compact()
	}
	tb.order = append(tb.order, queued{e: e, seq: e.seq})
	return true, evicted
}

// lookup returns k's live entry, or nil; tb.mu is held.
func (tb *table) lookup(k Key) *entry {
	if r := tb.runs[k.run()]; r != nil {
		return r.entries[k.ActivityID]
	}
	return nil
}

// take removes k's live entry, if any, and returns its type options and
// dispatch time.
func (tb *table) take(k Key) (*typeAttrs, time.Time, bool) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	e := tb.lookup(k)
	if e == nil {
		return nil, time.Time{}, false
	}
	attrs, at := e.attrs, e.at
	tb.remove(e)
	return attrs, at, true
}

// attrsOf returns the type options of k's live entry, or nil if k is not
// live.
func (tb *table) attrsOf(k Key) *typeAttrs {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if e := tb.lookup(k); e != nil {
		return e.attrs
	}
	return nil
}

// settled is an entry removed under the lock, to be recorded after it.
type settled struct {
	attrs *typeAttrs
	at    time.Time
}

// takeRun removes every live entry of run rk, appending them to dst.
func (tb *table) takeRun(rk runKey, dst []settled) []settled {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	r := tb.runs[rk]
	if r == nil {
		return dst
	}
	for _, e := range r.entries {
		dst = append(dst, settled{attrs: e.attrs, at: e.at})
		tb.freeEntry(e)
	}
	tb.n -= len(r.entries)
	delete(tb.runs, rk)
	tb.freeRun(r)
	return dst
}

// evictOldest removes the oldest live entry and returns its type options;
// tb.mu is held and the table is not empty.
func (tb *table) evictOldest() *typeAttrs {
	for tb.head < len(tb.order) {
		q := tb.order[tb.head]
		tb.order[tb.head] = queued{}
		tb.head++
		if q.live() {
			attrs := q.e.attrs
			tb.remove(q.e)
			return attrs
		}
	}
	return nil
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

// remove unlinks live entry e from its run, and the run from the table if e
// was its last entry, and recycles what it unlinked; e's queue item goes
// stale. tb.mu is held.
func (tb *table) remove(e *entry) {
	r := e.run
	delete(r.entries, e.id)
	tb.n--
	if len(r.entries) == 0 {
		delete(tb.runs, r.key)
		tb.freeRun(r)
	}
	tb.freeEntry(e)
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
	r.key, r.top = runKey{}, 0
	if r.peak > maxRunPeak {
		r.entries, r.peak = nil, 0
	} else {
		clear(r.entries)
	}
	if len(tb.freeRuns) < maxFree {
		tb.freeRuns = append(tb.freeRuns, r)
	}
}
