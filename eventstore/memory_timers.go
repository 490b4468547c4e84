package eventstore

import (
	"context"
	"slices"
	"strings"
	"time"
)

// timerKey identifies a timer: a TimerID is unique within its workflow.
type timerKey struct {
	workflowID WorkflowID
	timerID    TimerID
}

// checkTimer refuses a zero workflow ID or an empty timer ID.
func checkTimer(workflowID WorkflowID, timerID TimerID) error {
	if workflowID.IsZero() {
		return invalidf("zero workflow ID")
	}
	if timerID == "" {
		return invalidf("empty timer ID")
	}
	return nil
}

// ScheduleTimer arms the timer, replacing (re-arming) one already armed under
// the same workflow and timer ID. The workflow need not have a history yet. A
// zero workflow ID or an empty timer ID returns an error wrapping
// [ErrInvalidArgument].
func (m *Memory) ScheduleTimer(ctx context.Context, workflowID WorkflowID, timerID TimerID, fireAt time.Time, armedSeq uint64) error {
	if err := m.enter(ctx); err != nil {
		return err
	}
	if err := checkTimer(workflowID, timerID); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.timers[timerKey{workflowID, timerID}] = TimerEntry{
		WorkflowID: workflowID,
		TimerID:    timerID,
		FireAt:     fireAt,
		ArmedSeq:   armedSeq,
	}
	return nil
}

// ExpiredTimers returns the armed timers with FireAt <= asOf, within the
// enumeration scope, ordered by FireAt, then workflow ID, then timer ID. It
// does not remove them: a timer stays armed until [Memory.RetireTimer].
func (m *Memory) ExpiredTimers(ctx context.Context, asOf time.Time) ([]TimerEntry, error) {
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := []TimerEntry{}
	for _, t := range m.timers {
		if !t.FireAt.After(asOf) && m.inScopeLocked(t.WorkflowID) {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b TimerEntry) int {
		if c := a.FireAt.Compare(b.FireAt); c != 0 {
			return c
		}
		if c := compareWorkflowIDs(a.WorkflowID, b.WorkflowID); c != 0 {
			return c
		}
		return strings.Compare(string(a.TimerID), string(b.TimerID))
	})
	return out, nil
}

// RetireTimer removes the timer only if it is armed with this very fireAt
// (time.Time.Equal) and armedSeq, and returns [TimerRetired]. A timer armed
// with another fireAt or armedSeq was re-armed since the caller saw it: it
// stays and the result is [TimerSuperseded]. No armed timer gives
// [TimerAbsent]. A zero workflow ID or an empty timer ID returns an error
// wrapping [ErrInvalidArgument].
func (m *Memory) RetireTimer(ctx context.Context, workflowID WorkflowID, timerID TimerID, fireAt time.Time, armedSeq uint64) (TimerRetirement, error) {
	if err := m.enter(ctx); err != nil {
		return 0, err
	}
	if err := checkTimer(workflowID, timerID); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := timerKey{workflowID, timerID}
	t, ok := m.timers[key]
	switch {
	case !ok:
		return TimerAbsent, nil
	case !t.FireAt.Equal(fireAt) || t.ArmedSeq != armedSeq:
		return TimerSuperseded, nil
	}
	delete(m.timers, key)
	return TimerRetired, nil
}
