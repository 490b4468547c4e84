package cluster

import (
	"slices"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore/pgstore"
)

func held(shards ...int) map[int]bool {
	m := map[int]bool{}
	for _, s := range shards {
		m[s] = true
	}
	return m
}

func live(owner string, shards ...int) []pgstore.Lease {
	var out []pgstore.Lease
	for _, s := range shards {
		out = append(out, pgstore.Lease{Shard: s, Owner: owner, Live: true})
	}
	return out
}

func TestPlan(t *testing.T) {
	t0 := time.Unix(1000, 0)
	testCases := []struct {
		name    string
		me      string
		members []string
		leases  []pgstore.Lease
		held    map[int]bool
		leaving map[int]time.Time
		target  int
		free    []int // sorted
		reclaim []int
		leave   []int
		stay    []int
	}{
		{name: "alone on a new database", me: "a", members: []string{"a"}, held: held(),
			target: 16, free: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{name: "not yet listed: counted", me: "b", members: []string{"a"}, leases: live("a", 0, 1, 2, 3, 4, 5, 6, 7), held: held(),
			target: 8, free: []int{8, 9, 10, 11, 12, 13, 14, 15}},
		{name: "first by name takes the extra shard", me: "a", members: []string{"c", "b", "a"}, held: held(),
			target: 6, free: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{name: "last by name", me: "c", members: []string{"a", "b", "c"}, held: held(), target: 5,
			free: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{name: "expired and released leases are free", me: "a", members: []string{"a", "b"},
			leases: append(append(live("a", 0, 1), live("b", 2, 3)...), pgstore.Lease{Shard: 4, Owner: "c"}, pgstore.Lease{Shard: 5, Owner: "b"}),
			held:   held(0, 1), target: 8, free: []int{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}},
		{name: "a node joined: the highest shards go", me: "a", members: []string{"a", "b"}, leases: live("a", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
			held: held(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), target: 8, leave: []int{8, 9, 10, 11, 12, 13, 14, 15}},
		{name: "hand-overs already started are not started again", me: "a", members: []string{"a", "b"}, leases: live("a", 0, 1, 2, 3, 4, 5, 6, 7, 8, 9),
			held: held(0, 1, 2, 3, 4, 5, 6, 7, 8, 9), leaving: map[int]time.Time{9: t0}, target: 8, leave: []int{8},
			free: []int{10, 11, 12, 13, 14, 15}},
		{name: "a node left: hand-overs cancelled", me: "a", members: []string{"a"}, leases: live("a", 0, 1, 2, 3),
			held: held(0, 1, 2, 3), leaving: map[int]time.Time{2: t0, 3: t0}, target: 16,
			free: []int{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, stay: []int{2, 3}},
		{name: "a previous life's leases are taken back", me: "a", members: []string{"a", "b"}, leases: append(live("a", 3, 4), live("b", 8)...),
			held: held(), target: 8, reclaim: []int{3, 4},
			free: []int{0, 1, 2, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			leaving := tc.leaving
			if leaving == nil {
				leaving = map[int]time.Time{}
			}
			p := plan(tc.me, tc.members, tc.leases, 16, tc.held, leaving)
			free := slices.Sorted(slices.Values(p.free))
			if p.target != tc.target || !slices.Equal(free, tc.free) || !slices.Equal(p.reclaim, tc.reclaim) ||
				!slices.Equal(p.leave, tc.leave) || !slices.Equal(p.stay, tc.stay) {
				t.Errorf("plan: target %d, free %v, reclaim %v, leave %v, stay %v; want %d, %v, %v, %v, %v",
					p.target, free, p.reclaim, p.leave, p.stay, tc.target, tc.free, tc.reclaim, tc.leave, tc.stay)
			}
		})
	}
}

// TestPlanShares checks that the shares of any number of live nodes add
// up to the shards, differ by one at most, and that nodes acquiring
// together try the free shards in different orders.
func TestPlanShares(t *testing.T) {
	for nodes := 1; nodes <= 20; nodes++ {
		var members []string
		for i := range nodes {
			members = append(members, string(rune('a'+i)))
		}
		sum, lo, hi := 0, 1<<30, 0
		for _, m := range members {
			p := plan(m, members, nil, 16, held(), map[int]time.Time{})
			sum += p.target
			lo, hi = min(lo, p.target), max(hi, p.target)
		}
		if sum != 16 || hi-lo > 1 {
			t.Errorf("%d nodes: shares sum to %d (want 16), from %d to %d", nodes, sum, lo, hi)
		}
	}
	orders := map[string]bool{}
	for range 10 {
		p := plan("a", []string{"a"}, nil, 16, held(), map[int]time.Time{})
		orders[string(rune(p.free[0]))+string(rune(p.free[1]))] = true
	}
	if len(orders) < 2 {
		t.Error("ten plans tried the free shards in the same order")
	}
}
