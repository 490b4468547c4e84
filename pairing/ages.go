package pairing

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/metric"
)

// ageHeap is a min-heap of one type's activities in flight by dispatch
// time (container/heap), each activity knowing its index: the oldest of
// every type is read in O(types).
type ageHeap []*activity

func (h ageHeap) Len() int           { return len(h) }
func (h ageHeap) Less(i, j int) bool { return h[i].dat < h[j].dat }
func (h ageHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].heap, h[j].heap = i, j
}

func (h *ageHeap) Push(x any) {
	a := x.(*activity)
	a.heap = len(*h)
	*h = append(*h, a)
}

func (h *ageHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return a
}

// waitHeap is the same for one type's activities waiting for a worker (a
// subset of those in flight, see claims.go), with an index of its own.
type waitHeap []*activity

func (h waitHeap) Len() int           { return len(h) }
func (h waitHeap) Less(i, j int) bool { return h[i].dat < h[j].dat }
func (h waitHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].wheap, h[j].wheap = i, j
}

func (h *waitHeap) Push(x any) {
	a := x.(*activity)
	a.wheap = len(*h)
	*h = append(*h, a)
}

func (h *waitHeap) Pop() any {
	old := *h
	a := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return a
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
		a := age{attrs: ta}
		if len(*h) > 0 {
			a.oldest, a.live = (*h)[0].dat, true
		}
		inflight = append(inflight, a)
	}
	for ta, h := range j.waits {
		a := age{attrs: ta}
		if len(*h) > 0 {
			a.oldest, a.live = (*h)[0].dat, true
		}
		waiting = append(waiting, a)
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
