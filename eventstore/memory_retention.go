package eventstore

import "time"

// PruneClosed removes every workflow whose current run closed before the
// given time, and returns how many it removed. It is the retention of a
// long-running [Memory]: without it the store keeps every workflow forever.
//
// A workflow is removed when its current run's status is
// [StatusCompleted], [StatusFailed], [StatusCancelled] or [StatusTimedOut]
// and that run's ClosedAt (the RecordedAt of its closing event) is strictly
// before before. A run closed by continue-as-new is never pruned: its chain
// goes on. A running or paused workflow is never pruned, and neither is one
// whose closed run was reopened. Events appended after the closing event (a
// late activity result, say) do not keep a closed workflow from being
// pruned.
//
// Everything the store keeps for a removed workflow goes with it: its
// history, its run chain, its timers and its outbox rows, whatever their
// state (a claimed row stops counting in [Memory.CountClaimedOutboxRows]).
// Afterwards the workflow ID is as if never written: reads return empty
// results, listings and [Memory.Query] leave it out, and the next Append
// starts again at expectedSeq 0 (a writer still holding the old head gets a
// *SequenceConflictError). Packages and routes are not per workflow and
// stay.
//
// PruneClosed takes the store's write lock once, so it is atomic with
// respect to every other method and safe for concurrent use with them. It
// visits every workflow, timer and outbox row: its cost grows with what
// the store holds, not with what it removes, so call it periodically (say
// once per retention interval), not per operation. It ignores the
// enumeration scope. Through any node of a [MemoryCluster] it prunes the
// cluster's shared history. On a Memory not made by [NewMemory] or
// [MemoryCluster.Node], and on a killed node, it returns 0.
func (m *Memory) PruneClosed(before time.Time) int {
	if m == nil || m.memShared == nil || m.dead.Load() {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()

	var gone map[WorkflowID]struct{}
	for id, w := range m.workflows {
		run := w.currentRun()
		if run.Status.Closed() && run.Status != StatusContinuedAsNew && run.ClosedAt.Before(before) {
			if gone == nil {
				gone = make(map[WorkflowID]struct{})
			}
			gone[id] = struct{}{}
		}
	}
	if len(gone) == 0 {
		return 0
	}
	for id := range gone {
		delete(m.workflows, id)
	}
	for k := range m.timers {
		if _, ok := gone[k.workflowID]; ok {
			delete(m.timers, k)
		}
	}
	m.pruneOutboxLocked(gone)
	return len(gone)
}

// pruneOutboxLocked drops the outbox rows of the gone workflows, renumbers
// the rows that stay (their staging order is kept) and recomputes the
// pending cursor and the claimed count. m.mu must be held for writing.
func (m *Memory) pruneOutboxLocked(gone map[WorkflowID]struct{}) {
	dropped := 0
	for id := range gone {
		dropped += len(m.outboxByWf[id])
		delete(m.outboxByWf, id)
	}
	if dropped == 0 {
		return
	}
	// A fresh slice of the right size, so the dropped entries and the old
	// backing array can be collected.
	kept := make([]*outboxEntry, 0, len(m.outbox)-dropped)
	m.pendingFrom = -1
	m.claimedCount = 0
	for _, e := range m.outbox {
		if _, ok := gone[e.row.WorkflowID]; ok {
			delete(m.outboxByKey, e.row.DispatchKey)
			continue
		}
		e.index = len(kept)
		kept = append(kept, e)
		switch e.row.State {
		case OutboxPending:
			if m.pendingFrom < 0 {
				m.pendingFrom = e.index
			}
		case OutboxClaimed:
			m.claimedCount++
		}
	}
	if m.pendingFrom < 0 {
		m.pendingFrom = len(kept)
	}
	m.outbox = kept
}
