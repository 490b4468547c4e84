package otelstore

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"github.com/aionotel/aionotel/eventstore"
)

// orderer makes lifecycle observation follow history order.
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
// then it waits, and whichever call finishes last observes the waiting
// batches in seq order. Appends by other processes or other decorators are
// never waited for. A workflow's entry exists only while it has an append in
// flight or a batch waiting, so memory is bounded by concurrency, not by the
// number of workflows.
type orderer struct {
	shards [64]orderShard
}

type orderShard struct {
	mu        sync.Mutex // held while observing, so a workflow's batches are observed one at a time
	workflows map[eventstore.WorkflowID]*workflowOrder
}

type workflowOrder struct {
	inFlight []uint64 // expected seqs of this decorator's appends in progress
	waiting  []committedBatch
	buf      [2]uint64 // inFlight's storage for the common case
}

// orders recycles workflowOrder values: an append would otherwise allocate
// one per call.
var orders = sync.Pool{New: func() any { return new(workflowOrder) }}

type committedBatch struct {
	ctx         context.Context
	expectedSeq uint64
	events      []eventstore.Event
}

func (o *orderer) shard(workflowID eventstore.WorkflowID) *orderShard {
	return &o.shards[workflowID[15]%byte(len(o.shards))]
}

// start registers an append about to reach the inner store.
func (o *orderer) start(workflowID eventstore.WorkflowID, expectedSeq uint64) {
	sh := o.shard(workflowID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.workflows == nil {
		sh.workflows = make(map[eventstore.WorkflowID]*workflowOrder)
	}
	w := sh.workflows[workflowID]
	if w == nil {
		w = orders.Get().(*workflowOrder)
		w.inFlight = w.buf[:0]
		sh.workflows[workflowID] = w
	}
	w.inFlight = append(w.inFlight, expectedSeq)
}

// finish ends an append registered by start. A committed batch is observed
// now or, when an earlier append of the workflow is still in flight, by the
// call that finishes last. It must be called exactly once per start, also
// when the inner store failed or panicked (committed false).
func (o *orderer) finish(ctx context.Context, workflowID eventstore.WorkflowID, expectedSeq uint64, events []eventstore.Event, committed bool, l *lifecycle) {
	sh := o.shard(workflowID)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	w := sh.workflows[workflowID]
	if i := slices.Index(w.inFlight, expectedSeq); i >= 0 {
		w.inFlight = slices.Delete(w.inFlight, i, i+1)
	}
	earliest := ^uint64(0)
	if len(w.inFlight) > 0 {
		earliest = slices.Min(w.inFlight)
	}
	if committed {
		if len(w.waiting) == 0 && expectedSeq < earliest {
			l.observe(ctx, workflowID, events) // the common case: nothing to wait for
		} else {
			w.waiting = append(w.waiting, committedBatch{ctx: ctx, expectedSeq: expectedSeq, events: events})
			slices.SortFunc(w.waiting, func(a, b committedBatch) int { return cmp.Compare(a.expectedSeq, b.expectedSeq) })
		}
	}
	ready := 0
	for ready < len(w.waiting) && w.waiting[ready].expectedSeq < earliest {
		b := w.waiting[ready]
		l.observe(b.ctx, workflowID, b.events)
		ready++
	}
	w.waiting = slices.Delete(w.waiting, 0, ready)
	if len(w.inFlight) == 0 && len(w.waiting) == 0 {
		delete(sh.workflows, workflowID)
		*w = workflowOrder{waiting: w.waiting[:0]}
		orders.Put(w)
	}
}
