package otelworkflows

import (
	"sync"
	"sync/atomic"

	"github.com/cschleiden/go-workflows/backend/history"

	"github.com/aionotel/aionotel/eventstore"
)

// batchClaims makes sure a batch of history is observed once, whether its
// own successful CompleteWorkflowTask or the check that follows a failed one
// observes it. A batch is named by its execution and its first sequence ID:
// history has one batch at a position, so two observations of the same
// (execution, first sequence ID) are of the same committed events. Only the
// executions with a failed CompleteWorkflowTask are tracked (at most max,
// oldest forgotten first); while there are none, claim takes no lock.
type batchClaims struct {
	n    atomic.Int64 // executions tracked
	mu   sync.Mutex
	m    map[eventstore.WorkflowID]map[int64]struct{}
	ring []eventstore.WorkflowID
	next int
	max  int
}

func newBatchClaims(max int) *batchClaims {
	if max <= 0 {
		max = DefaultMaxKnownInstances
	}
	return &batchClaims{m: make(map[eventstore.WorkflowID]map[int64]struct{}), max: max}
}

// failed starts tracking wf's batches: called before the check of a failed
// call is queued, so that a retry committing afterwards is tracked too.
func (b *batchClaims) failed(wf eventstore.WorkflowID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.m[wf]; ok {
		return
	}
	b.m[wf] = make(map[int64]struct{})
	if len(b.ring) < b.max {
		b.ring = append(b.ring, wf)
		b.n.Add(1)
		return
	}
	delete(b.m, b.ring[b.next])
	b.ring[b.next] = wf
	b.next = (b.next + 1) % b.max
}

// claim reports whether the batch of wf at first is to be observed: false
// when it already was.
func (b *batchClaims) claim(wf eventstore.WorkflowID, first int64) bool {
	if b.n.Load() == 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	set, ok := b.m[wf]
	if !ok {
		return true
	}
	if _, done := set[first]; done {
		return false
	}
	set[first] = struct{}{}
	return true
}

// firstSeq is the sequence ID of a batch's first event, 0 for none.
func firstSeq(events []*history.Event) int64 {
	for _, e := range events {
		if e != nil {
			return e.SequenceID
		}
	}
	return 0
}

// committed reports whether every event of batch is in h (a history read
// after the call) at its sequence ID, with its own event ID. go-workflows
// gives every event a fresh UUID when it is made, so a batch that did not
// commit is not in h even when a retry of the task committed events at the
// same positions; only the events the task carried in (a signal, an
// activity's result) keep their IDs, and a retry made of those alone is the
// same events, observed once through batchClaims.
func committed(batch, h []*history.Event) bool {
	at := make(map[int64]string, len(h))
	for _, e := range h {
		if e != nil {
			at[e.SequenceID] = e.ID
		}
	}
	n := 0
	for _, e := range batch {
		if e == nil {
			continue
		}
		if id, ok := at[e.SequenceID]; !ok || id != e.ID {
			return false
		}
		n++
	}
	return n > 0
}
