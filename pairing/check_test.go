package pairing

import (
	"errors"
	"fmt"
)

// check verifies the join's structural invariants: every item is in the
// queue its state says, the counts agree, the age heaps hold exactly the
// activities in flight, and nothing freed is still reachable. Tests call
// it after every step.
func (j *join) check() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	live, remembered, active := 0, 0, 0
	facts := map[*activityFacts]bool{} // held by an activity
	runFacts := map[*runFacts]bool{}   // held by a run
	inHeaps := 0
	for _, h := range j.ages {
		for i, a := range h.list {
			if int(a.heapAt[slotInFlight]) != i || a.state != actLive {
				fail("age heap: activity %d at %d says %d, state %d", a.id, i, a.heapAt[slotInFlight], a.state)
			}
			inHeaps++
		}
	}
	count := func(s *slot) {
		switch s.in {
		case &j.live:
			live++
		case &j.remembered:
			remembered++
		}
	}
	for id, head := range j.workflows.m {
		namespaces := map[string]bool{}
		for w := head; w != nil; w = w.sameID {
			if w.key.id != id || namespaces[w.key.namespace] {
				fail("workflow %v filed under %v, or twice", w.key, id)
			}
			namespaces[w.key.namespace] = true
		}
	}
	for w := range j.workflows.all {
		k := w.key
		if j.workflows.get(k) != w {
			fail("workflow %v not found as filed", k)
		}
		count(&w.slot)
		if w.empty() != (w.slot.in == &j.remembered) {
			fail("workflow %v has %d runs and is in queue %p", k, w.numRuns(), w.slot.in)
		}
		if r := w.run1; r != nil && w.more[r.id] != nil {
			fail("run %v both first and in the map", r.id)
		}
		for id, r := range w.more {
			if r.id != id {
				fail("run %v filed under %v", r.id, id)
			}
		}
		for r := range w.runs {
			id := r.id
			if r.wf != w || w.run(id) != r {
				fail("run %v not found as filed", id)
			}
			count(&r.slot)
			if r.x != nil {
				if runFacts[r.x] {
					fail("run %v shares its facts", id)
				}
				runFacts[r.x] = true
			}
			want := map[runState]*queue{runNone: nil, runPending: &j.remembered, runOpen: &j.live, runClosing: &j.remembered, runDone: &j.remembered}[r.state]
			if r.state == runNone && r.hasSettled() {
				want = &j.remembered // kept for its settled activities
			}
			if r.slot.in != want {
				fail("run %v in state %d is in the wrong queue", id, r.state)
			}
			if r.state == runNone && r.numActivities() == 0 && !r.hasSettled() {
				fail("empty run %v kept", id)
			}
			if a := r.act1; a != nil && r.moreActivities()[a.id] != nil {
				fail("activity %d both first and in the map", a.id)
			}
			for aid, a := range r.moreActivities() {
				if a.id != aid {
					fail("activity %d filed under %d", a.id, aid)
				}
			}
			for a := range r.activities {
				aid := a.id
				if a.run != r || r.activity(aid) != a {
					fail("activity %d not found as filed", aid)
				}
				count(&a.slot)
				wantQ := &j.remembered
				if a.state == actLive {
					wantQ = &j.live
					active++
					if !a.dispatched {
						fail("activity %d in flight without a dispatch", aid)
					}
				}
				if a.slot.in != wantQ {
					fail("activity %d in state %d is in the wrong queue", aid, a.state)
				}
				if a.state == actDone && a.emitted && a.counted && a.retriesLive() {
					fail("activity %d settled and recorded but kept as an entry", aid)
				}
				if r.isSettled(aid) {
					fail("activity %d both an entry and settled", aid)
				}
				if a.hasTerm && a.x == nil {
					fail("activity %d has a terminal and no facts", aid)
				}
				if a.x != nil {
					if facts[a.x] {
						fail("activity %d shares its facts", aid)
					}
					facts[a.x] = true
				}
			}
		}
	}
	if live != j.live.n || remembered != j.remembered.n {
		fail("queues count %d/%d items, the workflows hold %d/%d", j.live.n, j.remembered.n, live, remembered)
	}
	if active != j.active || inHeaps != active {
		fail("active = %d, %d in flight, %d in the age heaps", j.active, active, inHeaps)
	}
	if j.live.n > j.live.max || j.remembered.n > j.remembered.max {
		fail("over the bound: %d/%d live, %d/%d remembered", j.live.n, j.live.max, j.remembered.n, j.remembered.max)
	}
	for _, q := range []*queue{&j.live, &j.remembered} {
		if len(q.items) > 2*q.n+minQueue {
			fail("queue holds %d entries for %d items", len(q.items), q.n)
		}
		held := map[*slot]bool{}
		for _, e := range q.items[q.head:] {
			if q.holds(e) {
				if held[e.slot()] {
					fail("an item is held twice by one queue")
				}
				held[e.slot()] = true
			}
		}
		if len(held) != q.n {
			fail("queue holds %d items by its entries, counts %d", len(held), q.n)
		}
	}
	for _, w := range j.freeWorkflows {
		if w.sameID != nil || !w.empty() || w.slot.in != nil || (w.waiting != nil && len(*w.waiting) > 0) {
			fail("workflow %v freed with a chain, runs, a queue or waiting decisions", w.key)
		}
	}
	for _, r := range j.freeRuns {
		if r.x != nil || r.wf != nil || r.act1 != nil || r.slot.in != nil {
			fail("run %v freed with its facts, workflow, activity or queue", r.id)
		}
	}
	for _, x := range j.freeRunFacts {
		if runFacts[x] || len(x.acts) > 0 || len(x.closes) > 0 || len(x.settled.ranges) > 0 || x.span != nil || x.spanRef != (callRef{}) || x.ids != nil || x.startCall != (callRef{}) {
			fail("freed run facts not cleared: %+v", x)
		}
	}
	for _, a := range j.freeActs {
		if a.x != nil || a.run != nil || a.slot.in != nil {
			fail("activity %d freed with its facts, run or queue", a.id)
		}
	}
	for _, x := range j.freeFacts {
		if facts[x] || x.span != nil || x.spanSC.IsValid() || len(x.retries) > 0 || len(x.claims) > 0 || x.extra != 0 || x.term != (termFact{}) {
			fail("freed activity facts still held or not cleared: %+v", x)
		}
	}
	if err := j.checkWaits(); err != nil {
		fail("%w", err)
	}
	return errors.Join(errs...)
}
