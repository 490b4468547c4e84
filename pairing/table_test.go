package pairing

import (
	"fmt"
	"math"
	"testing"
)

// check verifies every structural invariant of the table and returns the live
// keys in dispatch order: each run is under its own key and holds at least
// one entry, each entry under its own activity ID and pointing back at its
// run; the live count is the sum over runs; each live entry has exactly one
// live queue item; queue items are in increasing dispatch order; the queue
// is at most about twice the live count.
func (tb *table) check() ([]Key, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	live, activities := 0, 0
	for rk, r := range tb.runs {
		if r.key != rk || r.empty() {
			return nil, fmt.Errorf("run %v: held under %v with %d entries", r.key, rk, len(r.entries))
		}
		if r.peak < len(r.entries) {
			return nil, fmt.Errorf("run %v: peak %d below its %d entries", rk, r.peak, len(r.entries))
		}
		for id, e := range r.entries {
			if id > r.top {
				return nil, fmt.Errorf("run %v: entry %d above the run's top %d", rk, id, r.top)
			}
			if e.run != r || e.id != id || e.seq == 0 || e.seq > tb.seq {
				return nil, fmt.Errorf("entry under %v/%d holds activity %d, seq %d (last %d), right run %v", rk, id, e.id, e.seq, tb.seq, e.run == r)
			}
		}
		live += len(r.entries)
		if r.marker != nil {
			live++
		}
		activities += len(r.entries)
	}
	if live != tb.n || activities != tb.active {
		return nil, fmt.Errorf("runs hold %d slots and %d activities, live counts %d and %d", live, activities, tb.n, tb.active)
	}
	inHeaps := 0
	for ta, h := range tb.ages {
		for i, e := range *h {
			if e.heap != i || e.attrs != ta || e.seq == 0 {
				return nil, fmt.Errorf("age heap item %d: index %d, own type %v, seq %d", i, e.heap, e.attrs == ta, e.seq)
			}
			if i > 0 && e.at.Before((*h)[(i-1)/2].at) {
				return nil, fmt.Errorf("age heap item %d is older than its parent", i)
			}
		}
		inHeaps += len(*h)
	}
	if inHeaps != tb.active {
		return nil, fmt.Errorf("age heaps hold %d entries, %d activities live", inHeaps, tb.active)
	}
	var order []Key
	var last uint64
	markers := 0
	for i, q := range tb.order {
		if i < tb.head {
			if q.e != nil {
				return nil, fmt.Errorf("popped queue item %d still holds an entry", i)
			}
			continue
		}
		if q.seq <= last {
			return nil, fmt.Errorf("queue item %d has seq %d after %d", i, q.seq, last)
		}
		last = q.seq
		if q.live() && q.e.isMarker() {
			if q.e.run.marker != q.e || tb.runs[q.e.run.key] != q.e.run {
				return nil, fmt.Errorf("queue item %d is a live marker its run does not hold", i)
			}
			markers++
			continue
		}
		if q.live() {
			k := q.e.key()
			if tb.lookup(k) != q.e {
				return nil, fmt.Errorf("queue item %d is live but its entry is not", i)
			}
			order = append(order, k)
		}
	}
	if len(order)+markers != tb.n {
		return nil, fmt.Errorf("queue holds %d live items, %d live entries", len(order)+markers, tb.n)
	}
	if len(tb.order) > 2*(tb.n+1)+minQueue {
		return nil, fmt.Errorf("queue holds %d items for %d live entries", len(tb.order), tb.n)
	}
	return order, nil
}

// anyAttrs stands for the type options of entries whose type a test does
// not look at.
var anyAttrs = &typeAttrs{}

// isLive reports whether k has a live entry.
func (tb *table) isLive(k Key) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	return tb.lookup(k) != nil
}

// The eviction queue stays bounded when terminals arrive out of order behind
// an entry that never finishes, and eviction still takes the oldest entry;
// a drained table keeps no run index.
func TestTableQueueBounded(t *testing.T) {
	testCases := []struct {
		name string
		max  int
	}{
		{"unbounded", 1 << 20},
		{"bound 3", 3},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTable(tc.max)
			pinned, pinnedAttrs := key("n", 9, 9, 0), &typeAttrs{}
			tb.add(pinned, pinnedAttrs, ts(0), nil)
			for i := range 10_000 {
				k := key("n", 1, byte(i%5), uint64(i))
				if ok, _ := tb.add(k, anyAttrs, ts(i), nil); !ok {
					t.Fatalf("add %d: not added", i)
				}
				if _, ok := tb.take(k); !ok {
					t.Fatalf("take %d: not live", i)
				}
				if len(tb.order) > 2*(tb.len()+1)+minQueue {
					t.Fatalf("after %d dispatches the queue holds %d items for %d live entries", i+1, len(tb.order), tb.len())
				}
			}
			if _, err := tb.check(); err != nil {
				t.Fatal(err)
			}
			for i := range min(tc.max-1, 10) {
				tb.add(key("n", 2, 1, uint64(i)), anyAttrs, ts(0), nil)
			}
			if tc.max == 3 {
				// Full (pinned + 2): the next dispatch evicts pinned, the oldest.
				if _, ev := tb.add(key("n", 3, 1, 0), anyAttrs, ts(0), nil); ev.attrs != pinnedAttrs {
					t.Fatal("the dispatch at the bound did not evict the oldest entry")
				}
				if tb.isLive(pinned) || tb.len() != 3 {
					t.Errorf("eviction did not take the oldest entry (len %d)", tb.len())
				}
			}
			for _, rk := range []runKey{pinned.run(), key("n", 2, 1, 0).run(), key("n", 3, 1, 0).run()} {
				tb.takeRun(rk, nil)
			}
			if tb.len() != 0 || len(tb.runs) != 0 {
				t.Errorf("drained table holds %d entries and %d run indexes", tb.len(), len(tb.runs))
			}
			if _, err := tb.check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// A duplicate is refused whatever order activity IDs arrive in, including
// the extremes, and a finished key can be dispatched again.
func TestTableDuplicatesInAnyOrder(t *testing.T) {
	testCases := []struct {
		name string
		ids  []uint64 // dispatched in this order, then each again
	}{
		{"increasing", []uint64{0, 1, 2}},
		{"decreasing", []uint64{9, 5, 0}},
		{"extremes", []uint64{math.MaxUint64, 0, math.MaxUint64 - 1}},
		{"mixed", []uint64{4, 7, 2, 9, 3}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			tb := newTable(1 << 20)
			for _, id := range tc.ids {
				if ok, _ := tb.add(key("n", 1, 1, id), anyAttrs, ts(0), nil); !ok {
					t.Fatalf("first dispatch of %d refused", id)
				}
			}
			for _, id := range tc.ids {
				if ok, _ := tb.add(key("n", 1, 1, id), anyAttrs, ts(1), nil); ok {
					t.Errorf("duplicate dispatch of %d accepted", id)
				}
			}
			first := key("n", 1, 1, tc.ids[0])
			if e, ok := tb.take(first); !ok || !e.at.Equal(ts(0)) {
				t.Fatalf("take(%d) = %v, %v; want the first dispatch time", tc.ids[0], e.at, ok)
			}
			if ok, _ := tb.add(first, anyAttrs, ts(2), nil); !ok {
				t.Errorf("dispatch of finished key %d refused", tc.ids[0])
			}
			if _, err := tb.check(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// The queue bound holds after removals too: a burst of terminals or the
// abandon of a large run leaves no queue several times the live entries.
func TestTableQueueShrinksAfterRemovals(t *testing.T) {
	tb := newTable(1 << 20)
	for i := range 300 {
		tb.add(key("n", 1, 1, uint64(i)), anyAttrs, ts(i), nil)
	}
	for i := range 300 {
		if _, ok := tb.take(key("n", 1, 1, uint64(i))); !ok {
			t.Fatalf("take %d: not live", i)
		}
		if _, err := tb.check(); err != nil {
			t.Fatalf("after %d terminals: %v", i+1, err)
		}
	}
	for i := range 300 {
		tb.add(key("n", 2, 2, uint64(i)), anyAttrs, ts(i), nil)
	}
	tb.takeRun(key("n", 2, 2, 0).run(), nil)
	if _, err := tb.check(); err != nil {
		t.Fatalf("after the abandon of a run: %v", err)
	}
}
