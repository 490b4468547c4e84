package pairing

import (
	"container/heap"
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// byDispatch is a min-heap (container/heap) of one type's activities by
// dispatch time, each activity knowing its index in it, so that the oldest
// of every type is read in O(types). An activity is in up to two, one per
// slot: in flight (join.ages) and waiting for a worker (join.waits, a
// subset, see claims.go).
type byDispatch struct {
	list []*activity
	slot heapSlot
}

// heapSlot names an activity's place in one of its type's heaps.
type heapSlot uint8

const (
	slotInFlight heapSlot = iota
	slotWaiting
)

func (h *byDispatch) Len() int           { return len(h.list) }
func (h *byDispatch) Less(i, j int) bool { return h.list[i].dat < h.list[j].dat }
func (h *byDispatch) Swap(i, j int) {
	l := h.list
	l[i], l[j] = l[j], l[i]
	l[i].heapAt[h.slot], l[j].heapAt[h.slot] = int32(i), int32(j)
}

func (h *byDispatch) Push(x any) {
	a := x.(*activity)
	a.heapAt[h.slot] = int32(len(h.list))
	h.list = append(h.list, a)
}

func (h *byDispatch) Pop() any {
	n := len(h.list) - 1
	a := h.list[n]
	h.list[n] = nil
	h.list = h.list[:n]
	return a
}

// remove takes a out of the heap.
func (h *byDispatch) remove(a *activity) { heap.Remove(h, int(a.heapAt[h.slot])) }

// age returns the heap's oldest dispatch time, live false when it is
// empty.
func (h *byDispatch) age(ta *typeAttrs) age {
	if len(h.list) == 0 {
		return age{attrs: ta}
	}
	return age{attrs: ta, oldest: h.list[0].dat, live: true}
}

// age is the oldest dispatch time of one type's activities in flight, or
// waiting.
type age struct {
	attrs  *typeAttrs
	oldest int64
	live   bool // false: none in flight (waiting) now
}

// oldest appends to inflight, for every type that has had an activity in
// flight, the dispatch time of its oldest one still in flight, and to
// waiting, for every type that has had a dispatch with a staged row, that
// of its oldest one still waiting. It costs O(types), under one lock.
func (j *join) oldest(inflight, waiting []age) ([]age, []age) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for ta, h := range j.ages {
		inflight = append(inflight, h.age(ta))
	}
	for ta, h := range j.waits {
		waiting = append(waiting, h.age(ta))
	}
	return inflight, waiting
}

// observeAges is the callback of aion.activity.oldest_inflight_age and
// aion.activity.oldest_waiting_age (either may be nil: not created): for
// each (namespace, activity type), the age of its oldest activity in
// flight, and of its oldest waiting for a worker; 0 when none is.
// O(types).
func (t *Tracker) observeAges(_ context.Context, o metric.Observer, inflight, waiting metric.Float64Observable) {
	flying, queued := t.join.oldest(nil, nil)
	now := time.Now().UnixNano()
	for _, g := range [...]struct {
		gauge metric.Float64Observable
		ages  []age
	}{{inflight, flying}, {waiting, queued}} {
		if g.gauge == nil {
			continue
		}
		for _, a := range g.ages {
			v := 0.0
			if a.live {
				v = secondsBetween(a.oldest, now)
			}
			o.ObserveFloat64(g.gauge, v, a.attrs.age...)
		}
	}
}
