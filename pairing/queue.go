package pairing

// The tracker keeps every activity and run it knows of in one of two
// first-in, first-out queues, bounded separately: the live queue holds
// activities in flight and open runs (what the gauge and the open spans
// stand for), the remembered queue everything kept only to join later
// facts: settled activities and closed runs (to recognise a repeat or a
// late partner), and facts whose partner has not arrived. Past its bound,
// each queue drops its oldest item.
//
// A queue is a slice with a moving head. An item that leaves out of order
// (an activity settled, say) is not unlinked: its slot's stamp changes, so
// its queue entry goes stale and is skipped when it reaches the head; the
// slice is compacted once stale entries outnumber live ones (plus
// minQueue), so it never holds more than about twice its live items and
// each operation costs O(1) amortised, without an allocation per item as
// container/list would make.

// minQueue is the slack before a queue is compacted.
const minQueue = 64

// slot is an item's place in a queue: which queue holds it (nil: none) and
// the stamp of its entry there.
type slot struct {
	in    *queue
	stamp uint64
}

// queued is a queue entry: an activity, a run or a workflow that holds
// only the positions it has seen, with the stamp it was pushed with; stale
// once the item's slot has another stamp.
type queued struct {
	act   *activity
	run   *run
	wf    *workflow
	stamp uint64
}

func (q queued) slot() *slot {
	switch {
	case q.act != nil:
		return &q.act.slot
	case q.run != nil:
		return &q.run.slot
	}
	return &q.wf.slot
}

// holds reports whether e is still in q: its item's slot says q, with e's
// stamp. Stamps are per queue, so the queue must be checked too: an item
// that moved on may have the same stamp in another queue.
func (q *queue) holds(e queued) bool {
	s := e.slot()
	return s.in == q && s.stamp == e.stamp
}

type queue struct {
	items []queued
	head  int
	n     int    // items in the queue
	max   int    // bound
	stamp uint64 // last stamp handed out
}

// push appends an item whose slot is in no queue.
func (q *queue) push(e queued, s *slot) {
	q.stamp++
	s.in, s.stamp = q, q.stamp
	e.stamp = q.stamp
	q.n++
	q.shrink()
	q.items = append(q.items, e)
}

// remove takes the item of s out of whatever queue holds it.
func remove(s *slot) {
	if q := s.in; q != nil {
		s.in, s.stamp = nil, 0
		q.n--
		q.shrink()
	}
}

// full reports whether the queue is over its bound.
func (q *queue) full() bool { return q.n > q.max }

// pop removes and returns the oldest item; the queue must not be empty.
func (q *queue) pop() queued {
	for q.head < len(q.items) {
		e := q.items[q.head]
		q.items[q.head] = queued{}
		q.head++
		if q.holds(e) {
			remove(e.slot())
			return e
		}
	}
	panic("pairing: pop of an empty queue")
}

// shrink compacts the queue once its popped and stale entries outnumber
// the live ones (plus minQueue).
func (q *queue) shrink() {
	if len(q.items) < 2*q.n+minQueue {
		return
	}
	n := 0
	for _, e := range q.items[q.head:] {
		if q.holds(e) {
			q.items[n] = e
			n++
		}
	}
	clear(q.items[n:])
	q.items, q.head = q.items[:n], 0
}
