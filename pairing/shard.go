package pairing

import (
	"sync"
	"sync/atomic"
	"time"
)

// The live table is split into shards, each with its own mutex, so that
// concurrent calls about different runs rarely wait for each other
// (BenchmarkDispatchFinishParallel against a single mutex showed the
// contention). All entries of one run share a shard, chosen by the run hash,
// so a run is settled under one lock.
//
// The bound and the eviction order stay global: one atomic counter holds the
// number of live entries over all shards, and every entry carries a global
// dispatch sequence number, taken under its shard's lock so each shard's
// dispatch-order list is sorted by it. Evicting means finding the shard whose
// oldest entry has the smallest number (each shard publishes that number in
// an atomic, so the scan takes no lock) and removing that entry.
const (
	shardBits = 4
	numShards = 1 << shardBits
)

// shard is one independently locked part of the live table.
type shard struct {
	mu   sync.Mutex
	live liveSet
	// oldest is the sequence number of this shard's oldest live entry, 0
	// when it has none. Written under mu; read without it by eviction.
	oldest atomic.Uint64
	_      [64]byte // keep neighbouring shards' hot fields off one cache line
}

// noteOldest republishes the shard's oldest sequence number; mu is held.
func (sh *shard) noteOldest() {
	if seq := sh.live.oldestSeq(); sh.oldest.Load() != seq {
		sh.oldest.Store(seq)
	}
}

// table is the sharded live table with a global bound. It is safe for
// concurrent use; no method holds two shard locks at once, and every lock is
// released by defer.
type table struct {
	max    int64
	n      atomic.Int64  // live entries over all shards
	seq    atomic.Uint64 // last dispatch sequence number handed out
	_      [64]byte      // keep the counters off shard 0's cache line
	shards [numShards]shard
}

func newTable(max int) *table {
	tb := &table{max: int64(max)}
	for i := range tb.shards {
		tb.shards[i].live = newLiveSet()
	}
	return tb
}

func (tb *table) shardOf(runHash uint64) *shard {
	return &tb.shards[runHash>>(64-shardBits)]
}

// len returns the number of live entries.
func (tb *table) len() int { return int(tb.n.Load()) }

// overBound reports whether the table holds more entries than its bound.
func (tb *table) overBound() bool { return tb.n.Load() > tb.max }

// add makes k live as the newest dispatch unless it already is. It returns
// whether it did, and whether the table is now over its bound, in which case
// the caller evicts (see evictOldest).
func (tb *table) add(k Key, runHash, keyHash uint64, attrs *typeAttrs, at time.Time) (added, over bool) {
	sh := tb.shardOf(runHash)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if !sh.live.add(k, runHash, keyHash, tb.seq.Add(1), attrs, at) {
		return false, false
	}
	sh.noteOldest()
	return true, tb.n.Add(1) > tb.max
}

// take removes k's live entry, if any, and returns its type options and
// dispatch time.
func (tb *table) take(k Key, runHash, keyHash uint64) (*typeAttrs, time.Time, bool) {
	sh := tb.shardOf(runHash)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, live := sh.live.lookup(k, keyHash)
	if !live {
		return nil, time.Time{}, false
	}
	ta, at := sh.live.remove(i)
	sh.noteOldest()
	tb.n.Add(-1)
	return ta, at, true
}

// attrsOf returns the type options of k's live entry, or nil if k is not
// live.
func (tb *table) attrsOf(k Key, runHash, keyHash uint64) *typeAttrs {
	sh := tb.shardOf(runHash)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i, live := sh.live.lookup(k, keyHash)
	if !live {
		return nil
	}
	return sh.live.slots[i].attrs
}

// settled is an entry removed under a lock, to be recorded after it.
type settled struct {
	attrs *typeAttrs
	at    time.Time
}

// takeRun removes every live entry of run rk, appending them to dst.
func (tb *table) takeRun(rk runKey, runHash uint64, dst []settled) []settled {
	sh := tb.shardOf(runHash)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	removed := 0
	for i := sh.live.nextOfRun(rk, sh.live.runFirst(runHash)); i != nilSlot; {
		next := sh.live.slots[i].runNext // stays valid: removal relinks only i's neighbours
		ta, at := sh.live.remove(i)
		dst = append(dst, settled{attrs: ta, at: at})
		removed++
		i = sh.live.nextOfRun(rk, next)
	}
	if removed > 0 {
		sh.noteOldest()
		tb.n.Add(int64(-removed))
	}
	return dst
}

// evictAttempts bounds how often evictOldest rescans after losing a race
// for the entry it picked; the last attempt takes the picked shard's oldest
// entry whatever its number.
const evictAttempts = 4

// evictOldest removes the live entry with the smallest sequence number and
// returns its type options; ok is false if it found nothing to evict. With
// calls running concurrently the pick is best effort: the entry chosen may be
// finished meanwhile, and after evictAttempts lost races the oldest entry of
// the last shard picked goes instead. Called without any lock held, it takes
// one shard lock.
func (tb *table) evictOldest() (*typeAttrs, bool) {
	for attempt := 1; attempt <= evictAttempts; attempt++ {
		var pick *shard
		pickSeq := ^uint64(0)
		for i := range tb.shards {
			if seq := tb.shards[i].oldest.Load(); seq != 0 && seq < pickSeq {
				pick, pickSeq = &tb.shards[i], seq
			}
		}
		if pick == nil {
			return nil, false
		}
		if ta, ok := tb.evictFrom(pick, pickSeq, attempt == evictAttempts); ok {
			return ta, true
		}
	}
	return nil, false
}

// evictFrom removes sh's oldest entry if its sequence number is still seq
// (or, with anySeq, whatever it is).
func (tb *table) evictFrom(sh *shard, seq uint64, anySeq bool) (*typeAttrs, bool) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.live.len() == 0 || (!anySeq && sh.live.oldestSeq() != seq) {
		return nil, false
	}
	ta, _ := sh.live.remove(sh.live.oldest)
	sh.noteOldest()
	tb.n.Add(-1)
	return ta, true
}
