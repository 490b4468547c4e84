package pairing

import (
	"sync"
	"time"
)

// entry is one live dispatch. Entries are reused (see table.free), so a
// pointer to one identifies a dispatch only together with its seq.
type entry struct {
	key    Key
	attrs  *typeAttrs
	at     time.Time // dispatch time
	seq    uint64    // dispatch order, from 1; 0 once the entry is removed
	run    *runEntries
	runPos int // index of this entry in run.entries
}

// runEntries are the live entries of one run, in no particular order: the
// per-run index that lets AbandonRun settle a run in O(its entries).
type runEntries struct {
	key     runKey
	entries []*entry
}

// queued is one dispatch in the eviction queue. It is stale once its entry
// has been removed: the entry's seq is then 0 or that of a later dispatch.
type queued struct {
	e   *entry
	seq uint64
}

func (q queued) live() bool { return q.e.seq == q.seq }

// Reuse bounds: at most maxFree entries and run indexes wait for reuse, and
// a run index keeps a slice of at most maxRunCap for its next run, so a burst
// is returned to the garbage collector once it is over.
const (
	maxFree   = 1024
	maxRunCap = 64
	minQueue  = 64 // slack before the eviction queue is compacted
)

// table is the set of live entries: a Go map by key, a Go map by run, and the
// dispatch order as a slice-backed queue for first-in, first-out eviction.
//
// The queue is not unlinked when an entry is removed out of order (a
// terminal): its item goes stale and is skipped when it reaches the front,
// and the whole queue is compacted once stale items outnumber live ones (plus
// minQueue), so it never holds more than about twice the live entries and
// each dispatch pays O(1) amortised for it. Removed entries and run indexes
// are reused, so in steady state nothing allocates; container/list would
// allocate an element per dispatch.
//
// One mutex guards everything; every method locks it with a deferred unlock,
// and none calls instruments or user code while holding it.
type table struct {
	mu    sync.Mutex
	max   int
	seq   uint64 // last dispatch number handed out
	live  map[Key]*entry
	runs  map[runKey]*runEntries
	order []queued // dispatch order; items before head were popped
	head  int

	freeEntries []*entry
	freeRuns    []*runEntries
}

func newTable(max int) *table {
	return &table{
		max:  max,
		live: make(map[Key]*entry),
		runs: make(map[runKey]*runEntries),
	}
}

// len returns the number of live entries.
func (tb *table) len() int {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return len(tb.live)
}

// add makes k live as the newest dispatch unless it already is, and reports
// whether it did. If the table was full, the oldest entry is evicted to make
// room and its type options returned (nil if nothing was evicted).
func (tb *table) add(k Key, attrs *typeAttrs, at time.Time) (added bool, evicted *typeAttrs) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if _, ok := tb.live[k]; ok {
		return false, nil
	}
	if len(tb.live) >= tb.max {
		evicted = tb.evictOldest()
	}

	rk := k.run()
	rs := tb.runs[rk]
	if rs == nil {
		rs = tb.newRun(rk)
		tb.runs[rk] = rs
	}
	e := tb.newEntry()
	tb.seq++
	*e = entry{key: k, attrs: attrs, at: at, seq: tb.seq, run: rs, runPos: len(rs.entries)}
	rs.entries = append(rs.entries, e)
	tb.live[k] = e

	if len(tb.order) >= 2*len(tb.live)+minQueue {
		tb.compact()
	}
	tb.order = append(tb.order, queued{e: e, seq: e.seq})
	return true, evicted
}

// take removes k's live entry, if any, and returns its type options and
// dispatch time.
func (tb *table) take(k Key) (*typeAttrs, time.Time, bool) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	e := tb.live[k]
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
	if e := tb.live[k]; e != nil {
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
	rs := tb.runs[rk]
	if rs == nil {
		return dst
	}
	for n := len(rs.entries); n > 0; n = len(rs.entries) {
		e := rs.entries[n-1]
		dst = append(dst, settled{attrs: e.attrs, at: e.at})
		tb.remove(e) // the last removal recycles rs, leaving it empty
	}
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

// remove unlinks live entry e from both maps and recycles it; its queue item
// goes stale. tb.mu is held.
func (tb *table) remove(e *entry) {
	delete(tb.live, e.key)
	rs := e.run
	last := len(rs.entries) - 1
	moved := rs.entries[last]
	rs.entries[e.runPos], moved.runPos = moved, e.runPos
	rs.entries[last] = nil
	rs.entries = rs.entries[:last]
	if last == 0 {
		delete(tb.runs, rs.key)
		tb.freeRun(rs)
	}
	*e = entry{}
	if len(tb.freeEntries) < maxFree {
		tb.freeEntries = append(tb.freeEntries, e)
	}
}

func (tb *table) newEntry() *entry {
	if n := len(tb.freeEntries); n > 0 {
		e := tb.freeEntries[n-1]
		tb.freeEntries = tb.freeEntries[:n-1]
		return e
	}
	return new(entry)
}

func (tb *table) newRun(rk runKey) *runEntries {
	if n := len(tb.freeRuns); n > 0 {
		rs := tb.freeRuns[n-1]
		tb.freeRuns = tb.freeRuns[:n-1]
		rs.key = rk
		return rs
	}
	return &runEntries{key: rk}
}

func (tb *table) freeRun(rs *runEntries) {
	rs.key = runKey{}
	if cap(rs.entries) > maxRunCap {
		rs.entries = nil
	}
	if len(tb.freeRuns) < maxFree {
		tb.freeRuns = append(tb.freeRuns, rs)
	}
}
