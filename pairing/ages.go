package pairing

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

// age is the oldest dispatch time of one type's activities in flight.
type age struct {
	attrs  *typeAttrs
	oldest int64
	live   bool // false: none in flight now
}

// oldest appends, for every type that has had an activity in flight, the
// dispatch time of its oldest one still in flight. It costs O(types).
func (j *join) oldest(dst []age) []age {
	j.mu.Lock()
	defer j.mu.Unlock()
	for ta, h := range j.ages {
		a := age{attrs: ta}
		if len(*h) > 0 {
			a.oldest, a.live = (*h)[0].dat, true
		}
		dst = append(dst, a)
	}
	return dst
}
