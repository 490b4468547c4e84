package eventstore

import (
	"context"
	"slices"
)

// ReadHistory returns copies of the workflow's events in Seq order. An unknown
// workflow has an empty history and no error.
func (m *Memory) ReadHistory(ctx context.Context, workflowID WorkflowID) ([]Event, error) {
	return m.ReadHistoryFrom(ctx, workflowID, 1)
}

// ReadHistoryFrom returns copies of the events with Seq >= fromSeq, in order;
// fromSeq 0 reads from the start, and a fromSeq past the head returns an
// empty slice.
func (m *Memory) ReadHistoryFrom(ctx context.Context, workflowID WorkflowID, fromSeq uint64) ([]Event, error) {
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	w := m.workflows[workflowID]
	if w == nil || fromSeq > uint64(len(w.events)) {
		return []Event{}, nil
	}
	start := uint64(0)
	if fromSeq > 0 {
		start = fromSeq - 1
	}
	out := make([]Event, 0, uint64(len(w.events))-start)
	for _, ev := range w.events[start:] {
		out = append(out, copyEvent(ev))
	}
	return out, nil
}

// copyEvent returns a deep copy of a stored event, so callers can never reach
// the store's payload bytes.
func copyEvent(ev Event) Event { return WithEnvelope(ev, ev.EventEnvelope()) }

// ReadRunChain returns the workflow's runs in the order they first appeared
// in its history. An unknown workflow has no runs and no error.
func (m *Memory) ReadRunChain(ctx context.Context, workflowID WorkflowID) ([]RunSummary, error) {
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	w := m.workflows[workflowID]
	if w == nil {
		return []RunSummary{}, nil
	}
	out := make([]RunSummary, len(w.runs))
	for i, r := range w.runs {
		out[i] = *r
	}
	return out, nil
}

// ListWorkflowIDs returns every workflow with a history, in ID order, limited
// to the enumeration scope when one is set (see [Memory.SetOwnedShards]).
func (m *Memory) ListWorkflowIDs(ctx context.Context) ([]WorkflowID, error) {
	return m.listWorkflows(ctx, func(*memWorkflow) bool { return true })
}

// ListActive returns, in ID order and within the enumeration scope, the
// workflows whose current run is running, counting one whose current run was
// closed by continue-as-new (its next run is still to start).
func (m *Memory) ListActive(ctx context.Context) ([]WorkflowID, error) {
	return m.listWorkflows(ctx, (*memWorkflow).isActive)
}

// ListPaused returns, in ID order and within the enumeration scope, the
// workflows whose current run is paused.
func (m *Memory) ListPaused(ctx context.Context) ([]WorkflowID, error) {
	return m.listWorkflows(ctx, func(w *memWorkflow) bool { return w.currentRun().Status == StatusPaused })
}

func (m *Memory) listWorkflows(ctx context.Context, keep func(*memWorkflow) bool) ([]WorkflowID, error) {
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := []WorkflowID{}
	for id, w := range m.workflows {
		if m.inScopeLocked(id) && keep(w) {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, compareWorkflowIDs)
	return out, nil
}

// StreamHeads returns each workflow's history length, in ID order and within
// the enumeration scope.
func (m *Memory) StreamHeads(ctx context.Context) ([]StreamHead, error) {
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := []StreamHead{}
	for id, w := range m.workflows {
		if m.inScopeLocked(id) {
			out = append(out, StreamHead{WorkflowID: id, Head: uint64(len(w.events))})
		}
	}
	slices.SortFunc(out, func(a, b StreamHead) int { return compareWorkflowIDs(a.WorkflowID, b.WorkflowID) })
	return out, nil
}

// Query returns a summary of each workflow whose current run matches filter:
// WorkflowType and Status compare with the current run's (literally: a run
// closed by continue-as-new has StatusContinuedAsNew), StartedAfter
// (inclusive) and StartedBefore (exclusive) bound the current run's StartedAt.
// Results are ordered by StartedAt, then ID; Limit, when positive, keeps the
// first Limit of them. Query ignores the enumeration scope.
func (m *Memory) Query(ctx context.Context, filter WorkflowFilter) ([]WorkflowSummary, error) {
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := []WorkflowSummary{}
	for id, w := range m.workflows {
		run := w.currentRun()
		switch {
		case filter.WorkflowType != "" && run.WorkflowType != filter.WorkflowType,
			filter.Status != "" && run.Status != filter.Status,
			!filter.StartedAfter.IsZero() && run.StartedAt.Before(filter.StartedAfter),
			!filter.StartedBefore.IsZero() && !run.StartedAt.Before(filter.StartedBefore):
			continue
		}
		out = append(out, WorkflowSummary{
			WorkflowID:   id,
			RunID:        run.RunID,
			WorkflowType: run.WorkflowType,
			Status:       run.Status,
			StartedAt:    run.StartedAt,
			ClosedAt:     run.ClosedAt,
			Head:         uint64(len(w.events)),
		})
	}
	slices.SortFunc(out, func(a, b WorkflowSummary) int {
		if c := a.StartedAt.Compare(b.StartedAt); c != 0 {
			return c
		}
		return compareWorkflowIDs(a.WorkflowID, b.WorkflowID)
	})
	if filter.Limit > 0 && len(out) > filter.Limit {
		out = out[:filter.Limit:filter.Limit]
	}
	return out, nil
}
