package pairing

import (
	"fmt"
	"testing"
	"time"
)

// check verifies every structural invariant of the live table: the
// dispatch-order list holds exactly the live slots, linked both ways; there
// are at least as many key buckets (a power of two) as live slots, and as
// many run buckets; every live slot is on exactly one key chain and one run
// list, those of its own hashes' buckets, linked consistently; lookup finds
// each live key; no key is live twice; every slot is either live or free.
// With a non-nil hasher it also checks that the stored hashes are the key's.
func (s *liveSet) check(h *hasher) error {
	live := map[int32]bool{}
	prev := nilSlot
	for i := s.oldest; i != nilSlot; i = s.slots[i].next {
		if live[i] || len(live) > s.n {
			return fmt.Errorf("order list revisits slot %d or is longer than %d", i, s.n)
		}
		if s.slots[i].prev != prev {
			return fmt.Errorf("slot %d prev = %d, want %d", i, s.slots[i].prev, prev)
		}
		live[i] = true
		prev = i
	}
	if len(live) != s.n || s.newest != prev {
		return fmt.Errorf("order list has %d slots ending at %d; n = %d, newest = %d", len(live), prev, s.n, s.newest)
	}

	keys := map[Key]int32{}
	onChain := 0
	if len(s.keys) < s.n || len(s.keys)&(len(s.keys)-1) != 0 {
		return fmt.Errorf("%d key buckets for %d live slots (want a power of two, at least as many)", len(s.keys), s.n)
	}
	for bucket, head := range s.keys {
		prev := nilSlot
		for i := head; i != nilSlot; i = s.slots[i].keyNext {
			sl := &s.slots[i]
			if !live[i] || int(sl.keyHash&uint64(len(s.keys)-1)) != bucket {
				return fmt.Errorf("key bucket %d reaches slot %d (live %v, hash %x)", bucket, i, live[i], sl.keyHash)
			}
			if sl.keyPrev != prev {
				return fmt.Errorf("slot %d keyPrev = %d, want %d", i, sl.keyPrev, prev)
			}
			prev = i
			if j, dup := keys[sl.key]; dup {
				return fmt.Errorf("key %v live in slots %d and %d", sl.key, j, i)
			}
			keys[sl.key] = i
			if onChain++; onChain > s.n {
				return fmt.Errorf("key chains longer than the live count (cycle?)")
			}
		}
	}
	if onChain != s.n {
		return fmt.Errorf("key chains hold %d slots, n = %d", onChain, s.n)
	}
	for k, i := range keys {
		if j, ok := s.lookup(k, s.slots[i].keyHash); !ok || j != i {
			return fmt.Errorf("lookup(%v) = %d %v, want slot %d", k, j, ok, i)
		}
		if h != nil {
			if rh, kh := h.hashes(k); rh != s.slots[i].runHash || kh != s.slots[i].keyHash {
				return fmt.Errorf("slot %d stores hashes %x/%x, key hashes to %x/%x", i, s.slots[i].runHash, s.slots[i].keyHash, rh, kh)
			}
		}
	}

	onRuns := 0
	if len(s.runs) != len(s.keys) {
		return fmt.Errorf("%d run buckets, %d key buckets", len(s.runs), len(s.keys))
	}
	for bucket, head := range s.runs {
		prev := nilSlot
		for i := head; i != nilSlot; i = s.slots[i].runNext {
			if !live[i] || int(s.slots[i].runHash&uint64(len(s.runs)-1)) != bucket {
				return fmt.Errorf("run bucket %d reaches slot %d (live %v, hash %x)", bucket, i, live[i], s.slots[i].runHash)
			}
			if s.slots[i].runPrev != prev {
				return fmt.Errorf("slot %d runPrev = %d, want %d", i, s.slots[i].runPrev, prev)
			}
			if onRuns++; onRuns > s.n {
				return fmt.Errorf("run lists longer than the live count (cycle?)")
			}
			prev = i
		}
	}
	if onRuns != s.n {
		return fmt.Errorf("run lists hold %d slots, n = %d", onRuns, s.n)
	}

	free := 0
	for i := s.free; i != nilSlot; i = s.slots[i].next {
		if live[i] {
			return fmt.Errorf("free list reaches live slot %d", i)
		}
		if free++; free > len(s.slots) {
			return fmt.Errorf("free list cycles")
		}
	}
	if free+s.n != len(s.slots) {
		return fmt.Errorf("%d free + %d live != %d slots", free, s.n, len(s.slots))
	}
	return nil
}

func mustCheck(t *testing.T, s *liveSet, h *hasher) {
	t.Helper()
	if err := s.check(h); err != nil {
		t.Fatal(err)
	}
}

// orderOf lists the live keys' activity IDs oldest first.
func orderOf(s *liveSet) []uint64 {
	var out []uint64
	for i := s.oldest; i != nilSlot; i = s.slots[i].next {
		out = append(out, uint64(s.slots[i].key.ActivityID))
	}
	return out
}

// runOf lists run rk's live activity IDs by walking its run list.
func runOf(s *liveSet, rk runKey, runHash uint64) []uint64 {
	var out []uint64
	for i := s.nextOfRun(rk, s.runFirst(runHash)); i != nilSlot; i = s.nextOfRun(rk, s.slots[i].runNext) {
		out = append(out, uint64(s.slots[i].key.ActivityID))
	}
	return out
}

func TestLiveSetOrderAndRuns(t *testing.T) {
	h := newHasher()
	ta := &typeAttrs{}
	s := newLiveSet()
	seq := uint64(0)
	ins := func(k Key) {
		rh, kh := h.hashes(k)
		seq++
		if !s.add(k, rh, kh, seq, ta, time.Time{}) {
			t.Fatalf("add(%v) = false", k)
		}
		mustCheck(t, &s, &h)
		if s.add(k, rh, kh, seq+100, ta, time.Time{}) {
			t.Fatalf("second add(%v) = true", k)
		}
	}
	rm := func(k Key) {
		_, kh := h.hashes(k)
		i, ok := s.lookup(k, kh)
		if !ok {
			t.Fatalf("%v not live", k)
		}
		s.remove(i)
		mustCheck(t, &s, &h)
	}
	for a := range uint64(6) {
		ins(key("n", 1, byte(a%2), a))
	}
	if s.oldestSeq() != 1 {
		t.Errorf("oldestSeq = %d, want 1", s.oldestSeq())
	}
	for _, a := range []uint64{0, 3, 5} { // the oldest, a middle one, the newest
		rm(key("n", 1, byte(a%2), a))
	}
	if s.oldestSeq() != 2 {
		t.Errorf("oldestSeq = %d after removing the oldest, want 2", s.oldestSeq())
	}
	if got, want := fmt.Sprint(orderOf(&s)), "[1 2 4]"; got != want {
		t.Errorf("order = %s, want %s", got, want)
	}
	run0 := key("n", 1, 0, 0).run()
	if got := fmt.Sprint(runOf(&s, run0, h.run(run0))); got != "[2 4]" && got != "[4 2]" {
		t.Errorf("run 0 = %s, want 2 and 4", got)
	}
	rm(key("n", 1, 0, 2))
	rm(key("n", 1, 0, 4))
	if got := runOf(&s, run0, h.run(run0)); len(got) != 0 {
		t.Errorf("run 0 = %v after removing its entries, want empty", got)
	}
	if s.len() != 1 {
		t.Errorf("len = %d, want 1", s.len())
	}
}

// Keys and runs that share a hash stay distinct: the table compares full
// keys on every chain and run list. All hashes are forced equal here.
func TestLiveSetHashCollisions(t *testing.T) {
	ta := &typeAttrs{}
	s := newLiveSet()
	const sameRun, sameKey = 7, 7
	var keys []Key
	for run := range byte(3) {
		for a := range uint64(3) {
			k := key("n", 1, run, a)
			keys = append(keys, k)
			if !s.add(k, sameRun, sameKey, uint64(len(keys)), ta, time.Time{}) {
				t.Fatalf("add(%v) on a shared chain = false", k)
			}
			mustCheck(t, &s, nil)
		}
	}
	if s.add(keys[4], sameRun, sameKey, 99, ta, time.Time{}) {
		t.Error("a duplicate inside a shared chain was added")
	}
	for _, k := range keys {
		if i, ok := s.lookup(k, sameKey); !ok || s.slots[i].key != k {
			t.Fatalf("lookup(%v) in a shared chain failed", k)
		}
	}
	if _, ok := s.lookup(key("n", 1, 9, 0), sameKey); ok {
		t.Error("lookup of an absent key with a shared hash succeeded")
	}
	run1 := key("n", 1, 1, 0).run()
	if got := runOf(&s, run1, sameRun); len(got) != 3 {
		t.Errorf("run 1 = %v, want its 3 entries only", got)
	}
	// Remove from the middle, the head and the tail of the shared chain.
	for _, k := range []Key{keys[4], keys[0], keys[8]} {
		i, _ := s.lookup(k, sameKey)
		s.remove(i)
		mustCheck(t, &s, nil)
		if _, ok := s.lookup(k, sameKey); ok {
			t.Errorf("%v still found after removal", k)
		}
	}
	if got := runOf(&s, run1, sameRun); len(got) != 2 {
		t.Errorf("run 1 = %v after removing one, want 2 entries", got)
	}

	// Removing the oldest slot (eviction's move) when it heads the chain a
	// new key then joins.
	oldest := s.slots[s.oldest].key
	s.remove(s.oldest)
	if !s.add(key("n", 1, 9, 9), sameRun, sameKey, 100, ta, time.Time{}) {
		t.Error("add after removing the chain head failed")
	}
	mustCheck(t, &s, nil)
	if _, ok := s.lookup(oldest, sameKey); ok {
		t.Errorf("removed key %v still found", oldest)
	}
	if _, ok := s.lookup(key("n", 1, 9, 9), sameKey); !ok {
		t.Error("the key added last is not live")
	}
}

// Freed slots are reused: churn at a steady live count never grows the slab.
func TestLiveSetReusesSlots(t *testing.T) {
	h := newHasher()
	ta := &typeAttrs{}
	s := newLiveSet()
	for a := range uint64(1000) {
		if s.len() == 4 {
			s.remove(s.oldest)
		}
		k := key("n", 1, 1, a)
		rh, kh := h.hashes(k)
		s.add(k, rh, kh, a+1, ta, time.Time{})
	}
	if s.oldestSeq() != 997 {
		t.Errorf("oldestSeq = %d, want 997", s.oldestSeq())
	}
	mustCheck(t, &s, &h)
	if len(s.slots) != 4 {
		t.Errorf("slab grew to %d slots under steady churn, want 4", len(s.slots))
	}
	if got, want := fmt.Sprint(orderOf(&s)), "[996 997 998 999]"; got != want {
		t.Errorf("order = %s, want %s", got, want)
	}
}

// The key and run buckets double as the live count passes them, relinking
// every live slot: all entries stay findable and on their run's list across
// several doublings, and the buckets keep their high-water size after the
// entries go.
func TestLiveSetGrowsBuckets(t *testing.T) {
	h := newHasher()
	ta := &typeAttrs{}
	s := newLiveSet()
	const perRun, runs = 50, 4
	var keys []Key
	for a := range uint64(perRun) {
		for r := range byte(runs) {
			k := key("n", 1, r, a)
			rh, kh := h.hashes(k)
			keys = append(keys, k)
			if !s.add(k, rh, kh, uint64(len(keys)), ta, time.Time{}) {
				t.Fatalf("add(%v) = false", k)
			}
			mustCheck(t, &s, &h)
		}
	}
	if got := len(s.keys); got != 256 {
		t.Errorf("%d key buckets for %d entries, want 256", got, len(keys))
	}
	for r := range byte(runs) {
		rk := key("n", 1, r, 0).run()
		if got := runOf(&s, rk, h.run(rk)); len(got) != perRun {
			t.Errorf("run %d lists %d entries, want %d", r, len(got), perRun)
		}
	}
	for _, k := range keys {
		_, kh := h.hashes(k)
		i, ok := s.lookup(k, kh)
		if !ok {
			t.Fatalf("%v lost across growth", k)
		}
		s.remove(i)
	}
	mustCheck(t, &s, &h)
	if s.len() != 0 || len(s.keys) != 256 || len(s.runs) != 256 {
		t.Errorf("after removing all: len %d, %d key and %d run buckets; want 0, 256, 256", s.len(), len(s.keys), len(s.runs))
	}
}
