package pairing

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"
)

// check verifies the sharded table: every shard's liveSet invariants, each
// entry in the shard its run hash selects, each shard's list sorted by
// sequence number with its oldest number published, and the global count. It
// returns the live keys in global dispatch order.
func (tb *table) check(h *hasher) ([]Key, error) {
	type entry struct {
		seq uint64
		key Key
	}
	var all []entry
	for si := range tb.shards {
		sh := &tb.shards[si]
		if err := sh.live.check(h); err != nil {
			return nil, fmt.Errorf("shard %d: %w", si, err)
		}
		if got, want := sh.oldest.Load(), sh.live.oldestSeq(); got != want {
			return nil, fmt.Errorf("shard %d publishes oldest %d, holds %d", si, got, want)
		}
		prev := uint64(0)
		for i := sh.live.oldest; i != nilSlot; i = sh.live.slots[i].next {
			sl := &sh.live.slots[i]
			if tb.shardOf(sl.runHash) != sh {
				return nil, fmt.Errorf("key %v in shard %d, its run hash selects another", sl.key, si)
			}
			if sl.seq <= prev || sl.seq > tb.seq.Load() {
				return nil, fmt.Errorf("shard %d: seq %d after %d (last handed out %d)", si, sl.seq, prev, tb.seq.Load())
			}
			prev = sl.seq
			all = append(all, entry{sl.seq, sl.key})
		}
	}
	if len(all) != tb.len() {
		return nil, fmt.Errorf("shards hold %d entries, count says %d", len(all), tb.len())
	}
	slices.SortFunc(all, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	keys := make([]Key, len(all))
	for i, e := range all {
		keys[i] = e.key
	}
	return keys, nil
}

// The bound is global and eviction takes the globally oldest entry, across
// shards: entries of many runs (spread over the shards) are evicted in
// exactly their dispatch order.
func TestTableEvictsGloballyOldest(t *testing.T) {
	h := newHasher()
	ta := &typeAttrs{}
	tb := newTable(8)
	var keys []Key
	shardsUsed := map[*shard]bool{}
	for i := range 64 {
		k := key("n", byte(i), byte(i), uint64(i))
		keys = append(keys, k)
		rh, kh := h.hashes(k)
		shardsUsed[tb.shardOf(rh)] = true
		added, over := tb.add(k, rh, kh, ta, time.Time{})
		if !added || over != (i >= 8) {
			t.Fatalf("add #%d = %v, over %v", i, added, over)
		}
		if over {
			if _, ok := tb.evictOldest(); !ok {
				t.Fatalf("evictOldest found nothing at %d entries", tb.len())
			}
		}
		order, err := tb.check(&h)
		if err != nil {
			t.Fatal(err)
		}
		first := max(0, i-7)
		if !slices.Equal(order, keys[first:]) {
			t.Fatalf("after add #%d live = %v, want the last %d keys in order", i, order, len(keys[first:]))
		}
	}
	if len(shardsUsed) < numShards/2 {
		t.Errorf("64 runs used only %d of %d shards", len(shardsUsed), numShards)
	}
}

// evictOldest on an empty table finds nothing; a run's entries share a
// shard, and takeRun empties exactly that run.
func TestTableRuns(t *testing.T) {
	h := newHasher()
	ta := &typeAttrs{}
	tb := newTable(100)
	if _, ok := tb.evictOldest(); ok {
		t.Error("evictOldest on an empty table reported an eviction")
	}
	for run := range byte(3) {
		for a := range uint64(5) {
			k := key("n", 1, run, a)
			rh, kh := h.hashes(k)
			tb.add(k, rh, kh, ta, time.Time{})
		}
	}
	rk := key("n", 1, 1, 0).run()
	if got := tb.takeRun(rk, h.run(rk), nil); len(got) != 5 {
		t.Errorf("takeRun settled %d entries, want 5", len(got))
	}
	order, err := tb.check(&h)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range order {
		if k.run() == rk {
			t.Errorf("entry %v of the taken run is still live", k)
		}
	}
	if len(order) != 10 {
		t.Errorf("%d entries left, want 10", len(order))
	}
}
