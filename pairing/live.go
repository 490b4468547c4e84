package pairing

import "time"

// nilSlot marks the end of a slot list.
const nilSlot int32 = -1

// slot is one live entry, stored by value in liveSet.slots. A live slot is on
// three intrusive doubly linked lists: the dispatch-order list (oldest first,
// for eviction), its run-hash list (for AbandonRun) and its key-hash chain
// (almost always of length one). A free slot is on the free list, linked
// through next.
type slot struct {
	key     Key
	attrs   *typeAttrs
	at      time.Time // dispatch time
	keyHash uint64
	runHash uint64
	seq     uint64 // global dispatch order (see shards)

	prev, next       int32 // dispatch order
	runPrev, runNext int32 // slots whose run hashes to runHash
	keyPrev, keyNext int32 // slots whose key hashes to keyHash
}

// liveSet is one shard's table of live entries: a slab of slots reused
// through a free list, an index from key hash to slot, an index from run hash
// to the run's slots, and the dispatch-order list. Every operation is O(1)
// (amortised for the maps and the slab), except walking one run's list, which
// is O(that run's entries). In steady state (the slab and the maps at their
// high-water size) nothing allocates.
//
// Both indexes are keyed by 64-bit hashes (see hasher) and resolve
// collisions by comparing full keys, so two keys or runs that share a hash
// are still told apart.
//
// liveSet is not safe for concurrent use; the Tracker's mutex guards it. The
// zero value is not ready; use newLiveSet.
type liveSet struct {
	keys   map[uint64]int32 // key hash -> first slot of its chain
	runs   map[uint64]int32 // run hash -> first slot of its list
	slots  []slot
	n      int   // live slots
	free   int32 // first free slot
	oldest int32 // first slot in dispatch order
	newest int32 // last slot in dispatch order
}

func newLiveSet() liveSet {
	return liveSet{
		keys:   make(map[uint64]int32),
		runs:   make(map[uint64]int32),
		free:   nilSlot,
		oldest: nilSlot,
		newest: nilSlot,
	}
}

func (s *liveSet) len() int { return s.n }

// lookup returns the slot of k, whose hash is keyHash.
func (s *liveSet) lookup(k Key, keyHash uint64) (int32, bool) {
	i, ok := s.keys[keyHash]
	if !ok {
		return nilSlot, false
	}
	for ; i != nilSlot; i = s.slots[i].keyNext {
		if s.slots[i].key == k {
			return i, true
		}
	}
	return nilSlot, false
}

// add makes k live as the newest entry, with dispatch sequence number seq,
// unless it already is. It returns whether k was added.
func (s *liveSet) add(k Key, runHash, keyHash, seq uint64, attrs *typeAttrs, at time.Time) bool {
	head, chained := s.keys[keyHash]
	if chained {
		for i := head; i != nilSlot; i = s.slots[i].keyNext {
			if s.slots[i].key == k {
				return false
			}
		}
	}

	i := s.free
	if i != nilSlot {
		s.free = s.slots[i].next
	} else {
		i = int32(len(s.slots))
		s.slots = append(s.slots, slot{})
	}
	s.slots[i] = slot{
		key:     k,
		attrs:   attrs,
		at:      at,
		keyHash: keyHash,
		runHash: runHash,
		seq:     seq,
		prev:    s.newest,
		next:    nilSlot,
		runPrev: nilSlot,
		runNext: nilSlot,
		keyPrev: nilSlot,
		keyNext: nilSlot,
	}
	s.n++

	if s.newest != nilSlot {
		s.slots[s.newest].next = i
	} else {
		s.oldest = i
	}
	s.newest = i

	// A run's first entry becomes its list head; a later one goes second,
	// right after the head, so the runs map is written once per run. The
	// key chain works the same way.
	if rh, ok := s.runs[runHash]; ok {
		after := s.slots[rh].runNext
		s.slots[i].runPrev, s.slots[i].runNext = rh, after
		if after != nilSlot {
			s.slots[after].runPrev = i
		}
		s.slots[rh].runNext = i
	} else {
		s.runs[runHash] = i
	}
	if chained {
		after := s.slots[head].keyNext
		s.slots[i].keyPrev, s.slots[i].keyNext = head, after
		if after != nilSlot {
			s.slots[after].keyPrev = i
		}
		s.slots[head].keyNext = i
	} else {
		s.keys[keyHash] = i
	}
	return true
}

// remove unlinks live slot i from every list and index, frees it, and
// returns the entry's type options and dispatch time.
func (s *liveSet) remove(i int32) (*typeAttrs, time.Time) {
	sl := &s.slots[i]
	attrs, at := sl.attrs, sl.at

	if sl.prev != nilSlot {
		s.slots[sl.prev].next = sl.next
	} else {
		s.oldest = sl.next
	}
	if sl.next != nilSlot {
		s.slots[sl.next].prev = sl.prev
	} else {
		s.newest = sl.prev
	}

	if sl.runNext != nilSlot {
		s.slots[sl.runNext].runPrev = sl.runPrev
	}
	if sl.runPrev != nilSlot {
		s.slots[sl.runPrev].runNext = sl.runNext
	} else if sl.runNext != nilSlot {
		s.runs[sl.runHash] = sl.runNext
	} else {
		delete(s.runs, sl.runHash)
	}

	if sl.keyNext != nilSlot {
		s.slots[sl.keyNext].keyPrev = sl.keyPrev
	}
	if sl.keyPrev != nilSlot {
		s.slots[sl.keyPrev].keyNext = sl.keyNext
	} else if sl.keyNext != nilSlot {
		s.keys[sl.keyHash] = sl.keyNext
	} else {
		delete(s.keys, sl.keyHash)
	}

	s.n--
	// Clear the slot so a freed slot keeps no strings or pointers alive.
	*sl = slot{next: s.free}
	s.free = i
	return attrs, at
}

// nextOfRun returns the first live slot of run rk at or after slot i in its
// run-hash list (start with i = runFirst), skipping slots of other runs that
// share the hash.
func (s *liveSet) nextOfRun(rk runKey, i int32) int32 {
	for ; i != nilSlot; i = s.slots[i].runNext {
		if s.slots[i].key.run() == rk {
			return i
		}
	}
	return nilSlot
}

// oldestSeq returns the sequence number of the oldest live entry, or 0 if
// there is none (sequence numbers start at 1).
func (s *liveSet) oldestSeq() uint64 {
	if s.oldest == nilSlot {
		return 0
	}
	return s.slots[s.oldest].seq
}

// runFirst returns the head of the list of runs hashing to runHash.
func (s *liveSet) runFirst(runHash uint64) int32 {
	if i, ok := s.runs[runHash]; ok {
		return i
	}
	return nilSlot
}
