package keyspace

import "github.com/aionotel/aionotel/eventstore"

// DeleteRun removes every stream of one run of one workflow, with all its
// records, and returns how many streams it removed. It is the retention of
// a long-running [Memory]: without it the store keeps every record forever.
// Delete a run once its transcripts are finished, typically when the run
// closes or when its workflow is pruned from the event store.
//
// Afterwards the run is as if never written: [Memory.ListStreams] returns
// nothing for it, Head returns 0 and ReadFrom nothing for each of its keys,
// and a new append starts a fresh stream at expected seq 0. Other runs of
// the same workflow are untouched. A zero workflow or run ID names no run
// and removes nothing.
//
// DeleteRun is safe for concurrent use with every other method, and costs
// the number of the run's streams. An append to the run that is still in
// flight when DeleteRun is called may complete into the removed stream: it
// takes effect as if just before the deletion, and is lost with it. A
// [Sequencer] that cached a removed stream's head recovers on its next
// append there (the store reports a lower head, and it reloads).
func (m *Memory) DeleteRun(workflowID eventstore.WorkflowID, runID eventstore.RunID) int {
	if m == nil || workflowID.IsZero() || runID.IsZero() {
		return 0
	}
	rk := runKey{workflowID: workflowID, runID: runID}
	m.mu.Lock()
	defer m.mu.Unlock()
	entries := m.runs[rk]
	for _, e := range entries {
		delete(m.streams, e.key)
	}
	delete(m.runs, rk)
	return len(entries)
}
