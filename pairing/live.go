package pairing

import "time"

// nilSlot marks the end of a slot list.
const nilSlot int32 = -1

// slot is one live entry, stored by value in liveSet.slots. A live slot is on
// three intrusive doubly linked lists: the dispatch-order list (oldest first,
// for eviction), the list of its run bucket (for AbandonRun) and the chain of
// its key bucket (for lookups). A free slot is on the free list, linked
// through next.
type slot struct {
	key     Key
	attrs   *typeAttrs
	at      time.Time // dispatch time
	keyHash uint64
	runHash uint64
	seq     uint64 // global dispatch order (see shards)

	prev, next       int32 // dispatch order
	runPrev, runNext int32 // slots in the same run bucket (see liveSet.runs)
	keyPrev, keyNext int32 // slots in the same key bucket (see liveSet.keys)
}

// liveSet is one shard's table of live entries: a slab of slots reused
// through a free list, two chained hash tables over the slots (by key and by
// run), and the dispatch-order list. Every operation is O(1) (amortised for
// the tables and the slab), except walking one run's list, which is O(the
// entries in that run's bucket). In steady state (the slab and the tables at
// their high-water size) nothing allocates.
//
// Each table is an array of bucket heads, indexed by the low bits of the
// key or run hash, whose lists run through the slots themselves (keyPrev and
// keyNext, runPrev and runNext): finding, adding or removing an entry is one
// array access and a few slot links, with no probing, shifting or hashing
// again, which is several times cheaper than a Go map keyed by the hash.
// There are at least as many buckets as live slots, so lists stay short
// (a run's entries share its bucket, with the few of other runs that land
// there); both arrays double together (relinking every live slot) when the
// live count would pass them, and never shrink.
//
// Slots are told apart by comparing full keys and runs, never by hash
// alone, so two keys or runs that share a bucket or even a hash are still
// distinct.
//
// liveSet is not safe for concurrent use; its shard's mutex guards it. The
// zero value is not ready; use newLiveSet.
type liveSet struct {
	keys   []int32 // key bucket (keyHash & (len-1)) -> first slot of its chain
	runs   []int32 // run bucket (runHash & (len-1)) -> first slot of its list
	slots  []slot
	n      int   // live slots
	free   int32 // first free slot
	oldest int32 // first slot in dispatch order
	newest int32 // last slot in dispatch order
}

func newLiveSet() liveSet {
	return liveSet{
		free:   nilSlot,
		oldest: nilSlot,
		newest: nilSlot,
	}
}

func (s *liveSet) len() int { return s.n }

// lookup returns the slot of k, whose hash is keyHash.
func (s *liveSet) lookup(k Key, keyHash uint64) (int32, bool) {
	if len(s.keys) == 0 {
		return nilSlot, false
	}
	for i := s.keys[keyHash&uint64(len(s.keys)-1)]; i != nilSlot; i = s.slots[i].keyNext {
		if sl := &s.slots[i]; sl.keyHash == keyHash && sl.key == k {
			return i, true
		}
	}
	return nilSlot, false
}

// keyBucket returns the key bucket of keyHash.
func (s *liveSet) keyBucket(keyHash uint64) *int32 {
	return &s.keys[keyHash&uint64(len(s.keys)-1)]
}

// minBuckets is the size of a liveSet's first bucket arrays (a power of
// two).
const minBuckets = 16

// grow doubles both bucket arrays (or makes the first ones) and relinks every
// live slot into them.
func (s *liveSet) grow() {
	size := 2 * len(s.keys)
	if size == 0 {
		size = minBuckets
	}
	s.keys = make([]int32, size)
	s.runs = make([]int32, size)
	for b := range size {
		s.keys[b], s.runs[b] = nilSlot, nilSlot
	}
	for i := s.oldest; i != nilSlot; i = s.slots[i].next {
		s.linkKey(i)
		s.linkRun(i)
	}
}

// linkKey puts slot i at the front of its key bucket's chain.
func (s *liveSet) linkKey(i int32) {
	b := s.keyBucket(s.slots[i].keyHash)
	head := *b
	s.slots[i].keyPrev, s.slots[i].keyNext = nilSlot, head
	if head != nilSlot {
		s.slots[head].keyPrev = i
	}
	*b = i
}

// linkRun puts slot i at the front of its run bucket's list.
func (s *liveSet) linkRun(i int32) {
	b := &s.runs[s.slots[i].runHash&uint64(len(s.runs)-1)]
	head := *b
	s.slots[i].runPrev, s.slots[i].runNext = nilSlot, head
	if head != nilSlot {
		s.slots[head].runPrev = i
	}
	*b = i
}

// add makes k live as the newest entry, with dispatch sequence number seq,
// unless it already is. It returns whether k was added.
func (s *liveSet) add(k Key, runHash, keyHash, seq uint64, attrs *typeAttrs, at time.Time) bool {
	if _, live := s.lookup(k, keyHash); live {
		return false
	}
	if s.n >= len(s.keys) {
		s.grow()
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

	s.linkRun(i)
	s.linkKey(i)
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
	} else {
		s.runs[sl.runHash&uint64(len(s.runs)-1)] = sl.runNext
	}

	if sl.keyNext != nilSlot {
		s.slots[sl.keyNext].keyPrev = sl.keyPrev
	}
	if sl.keyPrev != nilSlot {
		s.slots[sl.keyPrev].keyNext = sl.keyNext
	} else {
		*s.keyBucket(sl.keyHash) = sl.keyNext
	}

	s.n--
	// Clear the slot so a freed slot keeps no strings or pointers alive.
	*sl = slot{next: s.free}
	s.free = i
	return attrs, at
}

// nextOfRun returns the first live slot of run rk at or after slot i in its
// run bucket's list (start with i = runFirst), skipping slots of other runs
// that share the bucket.
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

// runFirst returns the head of the list of the run bucket of runHash.
func (s *liveSet) runFirst(runHash uint64) int32 {
	if len(s.runs) == 0 {
		return nilSlot
	}
	return s.runs[runHash&uint64(len(s.runs)-1)]
}
