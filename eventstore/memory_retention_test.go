package eventstore

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// at returns an envelope of run recorded at t0 plus d.
func at(run RunID, d time.Duration) Envelope {
	return Envelope{RunID: run, RecordedAt: t0.Add(d)}
}

// internalSizes reports the size of every per-workflow structure a Memory
// keeps, to show that pruning releases them.
func internalSizes(m *Memory) map[string]int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return map[string]int{
		"workflows":   len(m.workflows),
		"timers":      len(m.timers),
		"outbox":      len(m.outbox),
		"outboxByKey": len(m.outboxByKey),
		"outboxByWf":  len(m.outboxByWf),
		"claimed":     m.claimedCount,
		"pendingFrom": m.pendingFrom,
	}
}

func TestMemoryPruneClosedSelects(t *testing.T) {
	cutoff := t0.Add(time.Hour)
	early, late := 10*time.Minute, 2*time.Hour
	st := func(d time.Duration) Event { return WorkflowStarted{Envelope: at(runA, d), WorkflowType: "t"} }
	testCases := []struct {
		name   string
		events []Event
		pruned bool
	}{
		{name: "completed before", events: []Event{st(0), WorkflowCompleted{Envelope: at(runA, early)}}, pruned: true},
		{name: "failed before", events: []Event{st(0), WorkflowFailed{Envelope: at(runA, early)}}, pruned: true},
		{name: "cancelled before", events: []Event{st(0), WorkflowCancelled{Envelope: at(runA, early)}}, pruned: true},
		{name: "timed out before", events: []Event{st(0), WorkflowTimedOut{Envelope: at(runA, early)}}, pruned: true},
		{name: "completed at cutoff", events: []Event{st(0), WorkflowCompleted{Envelope: at(runA, time.Hour)}}},
		{name: "completed after", events: []Event{st(0), WorkflowCompleted{Envelope: at(runA, late)}}},
		{name: "running", events: []Event{st(0)}},
		{name: "paused", events: []Event{st(0), WorkflowPaused{Envelope: at(runA, early)}}},
		{name: "continued as new", events: []Event{st(0), WorkflowContinuedAsNew{Envelope: at(runA, early), NewRunID: runB}}},
		{name: "next run running", events: []Event{
			st(0), WorkflowContinuedAsNew{Envelope: at(runA, early), NewRunID: runB},
			WorkflowStarted{Envelope: at(runB, early), WorkflowType: "t"},
		}},
		{name: "next run completed", events: []Event{
			st(0), WorkflowContinuedAsNew{Envelope: at(runA, early), NewRunID: runB},
			WorkflowStarted{Envelope: at(runB, early), WorkflowType: "t"},
			WorkflowCompleted{Envelope: at(runB, early)},
		}, pruned: true},
		{name: "reopened", events: []Event{st(0), WorkflowCompleted{Envelope: at(runA, early)}, WorkflowReopened{Envelope: at(runA, early)}}},
		{name: "late event after close", events: []Event{
			st(0), WorkflowCompleted{Envelope: at(runA, early)},
			ActivityCompleted{Envelope: at(runA, late), ActivityID: 1},
		}, pruned: true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestMemory(t)
			mustAppend(t, m, wfA, tc.events...)
			mustAppend(t, m, wfB, started(runC, "keep"))
			want := 0
			if tc.pruned {
				want = 1
			}
			if got := m.PruneClosed(cutoff); got != want {
				t.Fatalf("PruneClosed = %d, want %d", got, want)
			}
			ids, err := m.ListWorkflowIDs(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			wantIDs := []WorkflowID{wfA, wfB}
			if tc.pruned {
				wantIDs = []WorkflowID{wfB}
			}
			slices.SortFunc(wantIDs, compareWorkflowIDs)
			if !slices.Equal(ids, wantIDs) {
				t.Errorf("ListWorkflowIDs = %v, want %v", ids, wantIDs)
			}
		})
	}
}

// TestMemoryPruneClosedForgetsEverything checks that a pruned workflow
// leaves nothing behind and behaves like one never written, while the
// workflow that stays keeps its rows, timers and outbox order.
func TestMemoryPruneClosedForgetsEverything(t *testing.T) {
	ctx := t.Context()
	m, clock := newTestMemory(t)
	tok := RecorderToken()
	row := func(wf WorkflowID, run RunID, ord ActivityID) OutboxRow {
		return OutboxRow{WorkflowID: wf, RunID: run, Ordinal: ord, ActivityType: "a"}
	}
	// Rows interleaved between the two workflows, so pruning one renumbers
	// the other's.
	if err := m.AppendWithOutbox(ctx, tok, wfB, []Event{started(runC, "keep")}, 0, []OutboxRow{row(wfB, runC, 0)}); err != nil {
		t.Fatal(err)
	}
	if err := m.AppendWithOutbox(ctx, tok, wfA, []Event{started(runA, "gone")}, 0, []OutboxRow{row(wfA, runA, 0), row(wfA, runA, 1), row(wfA, runA, 2)}); err != nil {
		t.Fatal(err)
	}
	if err := m.AppendWithOutbox(ctx, tok, wfB, nil, 1, []OutboxRow{row(wfB, runC, 1), row(wfB, runC, 2)}); err != nil {
		t.Fatal(err)
	}
	// Claim wfB's first row and wfA's first two, so both have claimed rows
	// and wfA has one pending.
	if got, err := m.ClaimOutboxRows(ctx, 3); err != nil || len(got) != 3 {
		t.Fatalf("ClaimOutboxRows = %d rows, %v", len(got), err)
	}
	for _, wf := range []WorkflowID{wfA, wfB} {
		if err := m.ScheduleTimer(ctx, wf, "t1", t0.Add(time.Minute), 1); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, m, wfA, WorkflowCompleted{Envelope: env(runA)})
	clock.Advance(time.Second)

	if got := m.PruneClosed(clock.Now()); got != 1 {
		t.Fatalf("PruneClosed = %d, want 1", got)
	}

	if h := mustHistory(t, m, wfA); len(h) != 0 {
		t.Errorf("ReadHistory of a pruned workflow = %d events, want 0", len(h))
	}
	if c, _ := m.ReadRunChain(ctx, wfA); len(c) != 0 {
		t.Errorf("ReadRunChain of a pruned workflow = %+v, want empty", c)
	}
	if q, _ := m.Query(ctx, WorkflowFilter{}); len(q) != 1 || q[0].WorkflowID != wfB {
		t.Errorf("Query = %+v, want only %s", q, wfB)
	}
	if heads, _ := m.StreamHeads(ctx); len(heads) != 1 || heads[0].WorkflowID != wfB {
		t.Errorf("StreamHeads = %+v, want only %s", heads, wfB)
	}
	timers, _ := m.ExpiredTimers(ctx, t0.Add(time.Hour))
	if len(timers) != 1 || timers[0].WorkflowID != wfB {
		t.Errorf("ExpiredTimers = %+v, want only %s's", timers, wfB)
	}
	if n, _ := m.CountClaimedOutboxRows(ctx); n != 1 {
		t.Errorf("CountClaimedOutboxRows = %d, want 1 (wfB's)", n)
	}
	if err := m.SettleOutboxRowCancelled(ctx, DispatchKey(wfA, runA, 2)); err == nil {
		t.Error("a pruned workflow's row can still be settled")
	}
	// wfB's two pending rows are claimed next, in staging order.
	got, err := m.ClaimOutboxRows(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range got {
		keys = append(keys, r.DispatchKey)
	}
	if want := []string{DispatchKey(wfB, runC, 1), DispatchKey(wfB, runC, 2)}; !slices.Equal(keys, want) {
		t.Errorf("ClaimOutboxRows after prune = %v, want %v", keys, want)
	}

	// The ID starts afresh, and its old dispatch keys are free again.
	if err := m.AppendWithOutbox(ctx, tok, wfA, []Event{started(runB, "again")}, 0, []OutboxRow{row(wfA, runA, 0)}); err != nil {
		t.Errorf("Append at 0 after prune: %v", err)
	}
	if h := mustHistory(t, m, wfA); len(h) != 1 || h[0].EventEnvelope().Seq != 1 {
		t.Errorf("history after re-append = %+v, want one event at Seq 1", h)
	}
}

func TestMemoryPruneClosedReleasesMemory(t *testing.T) {
	ctx := t.Context()
	m, clock := newTestMemory(t)
	for i := range 300 {
		wf := testID(byte(i), byte(i>>8))
		run := testRun(byte(i))
		rows := []OutboxRow{{RunID: run, Ordinal: 0}, {RunID: run, Ordinal: 1}}
		if err := m.AppendWithOutbox(ctx, RecorderToken(), wf, []Event{started(run, "t")}, 0, rows); err != nil {
			t.Fatal(err)
		}
		if err := m.ScheduleTimer(ctx, wf, "t", t0, 1); err != nil {
			t.Fatal(err)
		}
		end := []Event{WorkflowCompleted{Envelope: env(run)}, WorkflowFailed{Envelope: env(run)}, WorkflowCancelled{Envelope: env(run)}, WorkflowTimedOut{Envelope: env(run)}}[i%4]
		mustAppend(t, m, wf, end)
	}
	if _, err := m.ClaimOutboxRows(ctx, 100); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	if got := m.PruneClosed(clock.Now()); got != 300 {
		t.Fatalf("PruneClosed = %d, want 300", got)
	}
	want := map[string]int{"workflows": 0, "timers": 0, "outbox": 0, "outboxByKey": 0, "outboxByWf": 0, "claimed": 0, "pendingFrom": 0}
	if got := internalSizes(m); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after pruning everything: %v, want %v", got, want)
	}
	if got := m.PruneClosed(clock.Now()); got != 0 {
		t.Errorf("second PruneClosed = %d, want 0", got)
	}
}

func TestMemoryPruneClosedNotReady(t *testing.T) {
	testCases := []struct {
		name string
		m    *Memory
	}{
		{name: "zero value", m: new(Memory)},
		{name: "nil pointer", m: nil},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.m.PruneClosed(t0); got != 0 {
				t.Errorf("PruneClosed = %d, want 0", got)
			}
		})
	}
}

// TestMemoryPruneClosedConcurrentSafe runs workflows to completion, with
// outbox rows and timers, while another goroutine prunes and others read.
func TestMemoryPruneClosedConcurrentSafe(t *testing.T) {
	const (
		writers   = 4
		perWriter = 150
	)
	ctx := t.Context()
	m := NewMemory() // the real clock: RecordedAt only has to precede the final cutoff
	tok := RecorderToken()
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := range writers {
		wg.Go(func() {
			for i := range perWriter {
				wf := testID(byte(g+1), byte(i))
				wf[8], wf[9] = byte(i>>8), byte(g)
				run := testRun(byte(i))
				rows := []OutboxRow{{RunID: run, Ordinal: 0}}
				if err := m.AppendWithOutbox(ctx, tok, wf, []Event{started(run, "t")}, 0, rows); err != nil {
					errs <- err
					return
				}
				if err := m.ScheduleTimer(ctx, wf, "t", t0, 1); err != nil {
					errs <- err
					return
				}
				// A concurrent prune cannot remove a running workflow, so
				// the head is still 1.
				if err := m.Append(ctx, tok, wf, []Event{WorkflowCompleted{Envelope: env(run)}}, 1); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	var pruned int
	var aux sync.WaitGroup
	aux.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			pruned += m.PruneClosed(time.Now().Add(time.Hour))
		}
	})
	aux.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			_, _ = m.ClaimOutboxRows(ctx, 5)
			_, _ = m.ListActive(ctx)
			_, _ = m.Query(ctx, WorkflowFilter{})
		}
	})
	wg.Wait()
	close(done)
	aux.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	pruned += m.PruneClosed(time.Now().Add(time.Hour))
	if pruned != writers*perWriter {
		t.Errorf("pruned %d workflows in all, want %d", pruned, writers*perWriter)
	}
	for k, v := range internalSizes(m) {
		if v != 0 {
			t.Errorf("%s = %d after pruning everything, want 0", k, v)
		}
	}
}
