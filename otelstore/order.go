package otelstore

import (
	"context"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// Lifecycle observation follows history order per workflow.
//
// Two appends to one workflow may be in flight at once (one of them will lose
// with a sequence conflict, or both win, one after the other, at different
// expected seqs). Their inner calls return in any order, and observing the
// later batch first would be wrong: a WorkflowCompleted observed before the
// ActivityCompleted that precedes it settles that activity as abandoned, and
// an ActivityScheduled observed after the ActivityCancelled that follows it
// leaks an in-flight slot for good.
//
// So a committed batch is observed only when no append of the same workflow
// with a smaller expected seq is still in flight in this decorator; until
// then what observation needs of it (its facts, never the caller's slice)
// waits, and whichever call finishes last observes the waiting batches in
// seq order. Appends by other processes or other decorators are never waited
// for. A workflow's entry exists only while it has an append in flight or a
// batch waiting, so memory is bounded by concurrency, not by the number of
// workflows; and a workflow holds at most maxWaiting facts waiting, so an
// inner append that never returns cannot hold back the later ones for good.
// When the held-back append does return after its run's close was observed
// ahead of it, the run is settled again (see workflowOrder.closedAhead).

// maxWaiting bounds the facts (one per observable event) a workflow holds
// waiting behind an earlier append. A batch that would go past it is
// observed at once, with every batch waiting, in seq order, and each batch
// so observed ahead of an earlier append still in flight is counted on
// aion.store.lifecycle.unordered.
const maxWaiting = 1024

type orderShard struct {
	mu        sync.Mutex // held while observing, so a workflow's batches are observed one at a time
	workflows map[eventstore.WorkflowID]workflowOrder
}

type workflowOrder struct {
	inFlight seqSet // expected seqs of this decorator's appends in progress
	waiting  []waitingBatch
	facts    int // facts in waiting
	// closedAhead are the run-closing facts of batches observed ahead of an
	// earlier append still in flight (at most maxClosedAhead, the latest),
	// and aheadSeq the largest expected seq of those batches. A batch
	// observed later behind them may dispatch an activity of a run whose
	// close was already observed: the run is settled again after it, so
	// that no gauge slot leaks.
	closedAhead []fact
	aheadSeq    uint64
}

// maxClosedAhead bounds workflowOrder.closedAhead.
const maxClosedAhead = 16

// isClose reports whether f closes its run.
func (f fact) isClose() bool { return f.kind >= kindCompleted && f.kind <= kindContinuedAsNew }

type waitingBatch struct {
	ctx         context.Context // spanOnly of the call's: no caller values
	expectedSeq uint64
	facts       []fact
}

func (l *lifecycle) shard(workflowID eventstore.WorkflowID) *orderShard {
	return &l.order[workflowID[15]%byte(len(l.order))]
}

// start registers an append about to reach the inner store.
func (l *lifecycle) start(workflowID eventstore.WorkflowID, expectedSeq uint64) {
	sh := l.shard(workflowID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.workflows == nil {
		sh.workflows = make(map[eventstore.WorkflowID]workflowOrder)
	}
	w := sh.workflows[workflowID]
	w.inFlight.add(expectedSeq)
	sh.workflows[workflowID] = w
}

// finish ends an append registered by start, before the append returns. A
// committed batch is observed now or, when an earlier append of the workflow
// is still in flight, its facts wait for the call that finishes last. It must
// be called exactly once per start, also when the inner store failed or
// panicked (committed false).
func (l *lifecycle) finish(ctx context.Context, workflowID eventstore.WorkflowID, expectedSeq uint64, events []eventstore.Event, committed bool) {
	sh := l.shard(workflowID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	w := sh.workflows[workflowID]
	w.inFlight.remove(expectedSeq)
	earliest := w.inFlight.min()
	if committed {
		switch {
		case len(w.waiting) == 0 && expectedSeq < earliest:
			for _, ev := range events { // the common case: nothing to wait for
				l.observe(ctx, workflowID, factOf(ev))
			}
			if len(w.closedAhead) > 0 && expectedSeq < w.aheadSeq {
				l.settleClosedAhead(ctx, workflowID, w.closedAhead)
			}
		default:
			if fs := facts(events); len(fs) > 0 {
				b := waitingBatch{ctx: spanOnly(ctx), expectedSeq: expectedSeq, facts: fs}
				at, _ := slices.BinarySearchFunc(w.waiting, expectedSeq, func(b waitingBatch, seq uint64) int {
					return compareSeq(b.expectedSeq, seq)
				})
				w.waiting = slices.Insert(w.waiting, at, b)
				w.facts += len(fs)
			}
		}
	}
	ready := 0
	if w.facts > maxWaiting {
		ready = len(w.waiting) // too much waiting: observe it all now
	} else {
		for ready < len(w.waiting) && w.waiting[ready].expectedSeq < earliest {
			ready++
		}
	}
	var unordered int64
	behind := false // a batch observed behind one observed ahead
	for _, b := range w.waiting[:ready] {
		ahead := b.expectedSeq > earliest
		if ahead {
			unordered++
			w.aheadSeq = max(w.aheadSeq, b.expectedSeq)
		} else if b.expectedSeq < w.aheadSeq {
			behind = true
		}
		for _, f := range b.facts {
			l.observe(b.ctx, workflowID, f)
			if ahead && f.isClose() {
				if len(w.closedAhead) == maxClosedAhead {
					w.closedAhead = slices.Delete(w.closedAhead, 0, 1)
				}
				w.closedAhead = append(w.closedAhead, f)
			}
		}
		w.facts -= len(b.facts)
	}
	if behind {
		l.settleClosedAhead(ctx, workflowID, w.closedAhead)
	}
	if unordered > 0 {
		l.unordered.Add(ctx, unordered, l.nsOpts...)
	}
	clear(w.waiting[:ready]) // drop the contexts and facts
	w.waiting = w.waiting[ready:]
	if w.inFlight.empty() && len(w.waiting) == 0 {
		delete(sh.workflows, workflowID)
		return
	}
	sh.workflows[workflowID] = w
}

// spanOnly returns a context that carries only ctx's span context: what the
// instruments use (for exemplars) of a waiting batch's context. The caller's
// context, its values and its cancellation are not kept after Append
// returns.
func spanOnly(ctx context.Context) context.Context {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return context.Background()
	}
	return trace.ContextWithSpanContext(context.Background(), sc)
}

// settleClosedAhead closes again the runs whose close was observed ahead
// of a batch just observed behind it: their activities still in flight end
// as abandoned, and a run that batch started is closed with the status and
// time it had (so its run span and duration are those of its history), not
// left open.
func (l *lifecycle) settleClosedAhead(ctx context.Context, workflowID eventstore.WorkflowID, closed []fact) {
	defer l.recovered()
	for _, f := range closed {
		at := f.at
		if at.IsZero() {
			at = l.now()
		}
		l.tracker.RunClosed(ctx, l.namespace, workflowID, f.run, statuses[f.kind-kindCompleted], at)
	}
}

func compareSeq(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// seqSet is a small multiset of expected seqs: almost always one, so the
// first two live in the value itself and an append allocates nothing for it.
type seqSet struct {
	n     int
	first [2]uint64
	more  []uint64
}

func (s *seqSet) add(seq uint64) {
	if s.n < len(s.first) {
		s.first[s.n] = seq
	} else {
		s.more = append(s.more, seq)
	}
	s.n++
}

func (s *seqSet) remove(seq uint64) {
	if i := slices.Index(s.more, seq); i >= 0 {
		s.more = slices.Delete(s.more, i, i+1)
		s.n--
		return
	}
	for i := range min(s.n, len(s.first)) {
		if s.first[i] == seq {
			s.n--
			if len(s.more) > 0 { // refill the inline part from the spill
				s.first[i], s.more = s.more[len(s.more)-1], s.more[:len(s.more)-1]
			} else {
				s.first[i] = s.first[s.n] // s.n < len(s.first) here
			}
			return
		}
	}
}

// min returns the smallest seq, or the largest uint64 for an empty set.
func (s *seqSet) min() uint64 {
	m := ^uint64(0)
	for i := range min(s.n, len(s.first)) {
		m = min(m, s.first[i])
	}
	for _, v := range s.more {
		m = min(m, v)
	}
	return m
}

func (s *seqSet) empty() bool { return s.n == 0 }
