package pairing

import (
	"fmt"
	"testing"
)

// check verifies every structural invariant of the table and returns the live
// keys in dispatch order: each live entry is under its own key, in its run's
// index at its recorded position, and has exactly one live queue item; queue
// items are in increasing dispatch order; the run index holds no empty run
// and no entry that is not live; the queue is at most about twice the live
// count.
func (tb *table) check() ([]Key, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for k, e := range tb.live {
		if e.key != k || e.seq == 0 || e.seq > tb.seq {
			return nil, fmt.Errorf("entry under %v holds key %v, seq %d (last %d)", k, e.key, e.seq, tb.seq)
		}
		if e.run == nil || e.run.key != k.run() || tb.runs[k.run()] != e.run {
			return nil, fmt.Errorf("entry %v is not in its run's index", k)
		}
		if e.runPos >= len(e.run.entries) || e.run.entries[e.runPos] != e {
			return nil, fmt.Errorf("entry %v: run position %d is wrong", k, e.runPos)
		}
	}
	inRuns := 0
	for rk, rs := range tb.runs {
		if rs.key != rk || len(rs.entries) == 0 {
			return nil, fmt.Errorf("run %v: index keyed %v with %d entries", rk, rs.key, len(rs.entries))
		}
		for _, e := range rs.entries {
			if tb.live[e.key] != e {
				return nil, fmt.Errorf("run %v indexes an entry that is not live", rk)
			}
		}
		inRuns += len(rs.entries)
	}
	if inRuns != len(tb.live) {
		return nil, fmt.Errorf("run index holds %d entries, %d live", inRuns, len(tb.live))
	}
	var order []Key
	var last uint64
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
		if q.live() {
			if tb.live[q.e.key] != q.e {
				return nil, fmt.Errorf("queue item %d is live but its entry is not", i)
			}
			order = append(order, q.e.key)
		}
	}
	if len(order) != len(tb.live) {
		return nil, fmt.Errorf("queue holds %d live items, %d live entries", len(order), len(tb.live))
	}
	if len(tb.order) > 2*(len(tb.live)+1)+minQueue {
		return nil, fmt.Errorf("queue holds %d items for %d live entries", len(tb.order), len(tb.live))
	}
	return order, nil
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
			tb.add(pinned, pinnedAttrs, ts(0))
			for i := range 10_000 {
				k := key("n", 1, byte(i%5), uint64(i))
				if ok, _ := tb.add(k, nil, ts(i)); !ok {
					t.Fatalf("add %d: not added", i)
				}
				if _, _, ok := tb.take(k); !ok {
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
				tb.add(key("n", 2, 1, uint64(i)), nil, ts(0))
			}
			if tc.max == 3 {
				// Full (pinned + 2): the next dispatch evicts pinned, the oldest.
				if _, ev := tb.add(key("n", 3, 1, 0), nil, ts(0)); ev != pinnedAttrs {
					t.Fatal("the dispatch at the bound did not evict the oldest entry")
				}
				if tb.attrsOf(pinned) != nil || tb.len() != 3 {
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
