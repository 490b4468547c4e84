package eventstore

import "context"

// outboxEntry is a staged row and its position in staging order.
type outboxEntry struct {
	row   OutboxRow // row.State is the row's current state
	index int       // position in Memory.outbox
}

// cloneRow returns a copy of r whose Input does not alias r's.
func cloneRow(r OutboxRow) OutboxRow {
	r.Input = r.Input.clone()
	return r
}

// AppendWithOutbox is [Memory.Append] that also stages outbox rows, in one
// commit: the events and the rows land together or not at all.
//
// The Append checks come first, in Append's order (token, context,
// [ValidateAppend]). With no events and no rows the call is a no-op. Then
// the fence (see the Shards section of [Memory]): an append to a workflow
// whose shard another node holds, or whose shard has no holder since its
// last one left, returns an error wrapping [ErrNotOwner]. Then the expected
// sequence is checked, also when only rows are staged: a stale one returns
// a *SequenceConflictError and stages nothing. Then each row is
// checked and completed: a zero WorkflowID is set to workflowID, another
// workflow or a zero RunID is refused, an empty DispatchKey is set to
// [DispatchKey](workflow, run, ordinal), and a dispatch key repeated in the
// batch or already staged (in any state, until [Memory.PruneClosed] removes
// its workflow) is refused; refusals wrap
// [ErrInvalidArgument]. Only then are the rows staged (pending, CreatedAt set
// to the store's clock when zero, State ignored) and the events committed.
// Rows are staged before the events are applied, so an activity terminal
// event in the same batch settles the row staged for it.
func (m *Memory) AppendWithOutbox(ctx context.Context, token WriteToken, workflowID WorkflowID, events []Event, expectedSeq uint64, rows []OutboxRow) error {
	if !token.Valid() {
		return ErrInvalidToken
	}
	if err := m.enter(ctx); err != nil {
		return err
	}
	if err := ValidateAppend(workflowID, events); err != nil {
		return err
	}
	if len(events) == 0 && len(rows) == 0 {
		return nil
	}

	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.fenceLocked(workflowID); err != nil {
		return err
	}
	if head := m.headLocked(workflowID); head != expectedSeq {
		return &SequenceConflictError{Expected: expectedSeq, Found: head}
	}
	staged := make([]OutboxRow, len(rows))
	seen := make(map[string]int, len(rows))
	for i, r := range rows {
		if r.WorkflowID.IsZero() {
			r.WorkflowID = workflowID
		}
		if r.WorkflowID != workflowID {
			return invalidf("outbox row %d names workflow %s, but the append is for workflow %s", i, r.WorkflowID, workflowID)
		}
		if r.RunID.IsZero() {
			return invalidf("outbox row %d has a zero run ID", i)
		}
		if r.DispatchKey == "" {
			r.DispatchKey = DispatchKey(r.WorkflowID, r.RunID, r.Ordinal)
		}
		if j, dup := seen[r.DispatchKey]; dup {
			return invalidf("outbox rows %d and %d share dispatch key %q", j, i, r.DispatchKey)
		}
		if _, dup := m.outboxByKey[r.DispatchKey]; dup {
			return invalidf("outbox row %d: dispatch key %q is already staged", i, r.DispatchKey)
		}
		seen[r.DispatchKey] = i
		staged[i] = r
	}

	now := m.cfg.now()
	for _, r := range staged {
		r = cloneRow(r)
		r.State = OutboxPending
		if r.CreatedAt.IsZero() {
			r.CreatedAt = now
		}
		e := &outboxEntry{row: r, index: len(m.outbox)}
		m.outbox = append(m.outbox, e)
		m.outboxByKey[r.DispatchKey] = e
		m.outboxByWf[r.WorkflowID] = append(m.outboxByWf[r.WorkflowID], e)
	}
	if len(events) > 0 {
		m.commitLocked(workflowID, events, expectedSeq, now)
	}
	return nil
}

// setStateLocked moves a row to state s, keeping the claimed count and the
// pending cursor right. m.mu must be held for writing.
func (m *Memory) setStateLocked(e *outboxEntry, s OutboxState) {
	if e.row.State == OutboxClaimed {
		m.claimedCount--
	}
	if s == OutboxClaimed {
		m.claimedCount++
	}
	if s == OutboxPending && e.index < m.pendingFrom {
		m.pendingFrom = e.index
	}
	e.row.State = s
}

// settleActivityLocked settles the open rows that dispatch one activity of
// one run: an activity terminal event was committed for it.
func (m *Memory) settleActivityLocked(workflowID WorkflowID, runID RunID, ordinal ActivityID) {
	for _, e := range m.outboxByWf[workflowID] {
		if e.row.RunID == runID && e.row.Ordinal == ordinal && isOpen(e.row.State) {
			m.setStateLocked(e, OutboxSettled)
		}
	}
}

// isOpen reports whether a row in state s can still be dispatched.
func isOpen(s OutboxState) bool { return s == OutboxPending || s == OutboxClaimed }

// ClaimOutboxRows claims up to limit pending rows, oldest (first staged)
// first, and returns copies of them in state [OutboxClaimed]. It returns an
// empty slice when nothing is pending. A limit <= 0 returns an error
// wrapping [ErrInvalidArgument].
func (m *Memory) ClaimOutboxRows(ctx context.Context, limit int) ([]OutboxRow, error) {
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, invalidf("claim limit %d is not positive", limit)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	out := []OutboxRow{}
	for i := m.pendingFrom; i < len(m.outbox) && len(out) < limit; i++ {
		if e := m.outbox[i]; e.row.State == OutboxPending {
			m.setStateLocked(e, OutboxClaimed)
			out = append(out, cloneRow(e.row))
		}
	}
	for m.pendingFrom < len(m.outbox) && m.outbox[m.pendingFrom].row.State != OutboxPending {
		m.pendingFrom++
	}
	return out, nil
}

// RearmOutboxPending returns claimed rows to pending (crash recovery: their
// dispatcher died before they settled); they are claimed again in their
// original staging order. Rows are named by DispatchKey; their other fields
// are ignored. Every named row must be staged, else the call returns an
// error wrapping [ErrNotFound] and changes nothing; an empty DispatchKey
// returns an error wrapping [ErrInvalidArgument]. A pending row stays
// pending; a settled or cancelled row is not revived.
func (m *Memory) RearmOutboxPending(ctx context.Context, rows []OutboxRow) error {
	if err := m.enter(ctx); err != nil {
		return err
	}
	for i, r := range rows {
		if r.DispatchKey == "" {
			return invalidf("outbox row %d has an empty dispatch key", i)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	entries := make([]*outboxEntry, len(rows))
	for i, r := range rows {
		e := m.outboxByKey[r.DispatchKey]
		if e == nil {
			return notFoundf("outbox row %d: dispatch key %q", i, r.DispatchKey)
		}
		entries[i] = e
	}
	for _, e := range entries {
		if e.row.State == OutboxClaimed {
			m.setStateLocked(e, OutboxPending)
		}
	}
	return nil
}

// CountClaimedOutboxRows returns how many rows are claimed now.
func (m *Memory) CountClaimedOutboxRows(ctx context.Context) (int, error) {
	if err := m.enter(ctx); err != nil {
		return 0, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.claimedCount, nil
}

// SettleOutboxRowCancelled cancels the row with this dispatch key if it is
// pending or claimed; a row already settled or cancelled is left as it is
// and the call succeeds. An unknown key returns an error wrapping
// [ErrNotFound]; an empty one an error wrapping [ErrInvalidArgument].
func (m *Memory) SettleOutboxRowCancelled(ctx context.Context, dispatchKey string) error {
	if err := m.enter(ctx); err != nil {
		return err
	}
	if dispatchKey == "" {
		return invalidf("empty dispatch key")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.outboxByKey[dispatchKey]
	if e == nil {
		return notFoundf("dispatch key %q", dispatchKey)
	}
	if isOpen(e.row.State) {
		m.setStateLocked(e, OutboxCancelled)
	}
	return nil
}

// SettleWorkflowOutboxRowsCancelled cancels every pending or claimed row of
// the workflow (any run) and returns their dispatch keys in staging order;
// with none open it returns an empty slice. A zero workflow ID returns an
// error wrapping [ErrInvalidArgument].
func (m *Memory) SettleWorkflowOutboxRowsCancelled(ctx context.Context, workflowID WorkflowID) ([]string, error) {
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	if workflowID.IsZero() {
		return nil, invalidf("zero workflow ID")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	keys := []string{}
	for _, e := range m.outboxByWf[workflowID] {
		if isOpen(e.row.State) {
			m.setStateLocked(e, OutboxCancelled)
			keys = append(keys, e.row.DispatchKey)
		}
	}
	return keys, nil
}
