package eventstore

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"
)

// rowStates returns every staged row's state by dispatch key.
func rowStates(m *Memory) map[string]OutboxState {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := map[string]OutboxState{}
	for k, e := range m.outboxByKey {
		out[k] = e.row.State
	}
	return out
}

func keysOf(rows []OutboxRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.DispatchKey
	}
	return out
}

func scheduled(run RunID, id ActivityID) Event {
	return ActivityScheduled{Envelope: env(run), ActivityID: id, ActivityType: "work"}
}

// stageRows starts wfA's runA and stages one row per ordinal with the
// conventional dispatch keys, which it returns.
func stageRows(t *testing.T, m *Memory, ordinals ...ActivityID) []string {
	t.Helper()
	events := []Event{started(runA, "t")}
	rows := []OutboxRow{}
	keys := []string{}
	for _, o := range ordinals {
		events = append(events, scheduled(runA, o))
		rows = append(rows, OutboxRow{RunID: runA, Ordinal: o, ActivityType: "work"})
		keys = append(keys, DispatchKey(wfA, runA, o))
	}
	if err := m.AppendWithOutbox(t.Context(), RecorderToken(), wfA, events, 0, rows); err != nil {
		t.Fatalf("AppendWithOutbox: %v", err)
	}
	return keys
}

func mustClaim(t *testing.T, m *Memory, limit int) []OutboxRow {
	t.Helper()
	rows, err := m.ClaimOutboxRows(t.Context(), limit)
	if err != nil {
		t.Fatalf("ClaimOutboxRows(%d): %v", limit, err)
	}
	return rows
}

func TestMemoryAppendWithOutboxStagesRows(t *testing.T) {
	m, clock := newTestMemory(t)
	given := t0.Add(-time.Hour)
	rows := []OutboxRow{
		{RunID: runA, Ordinal: 0, ActivityType: "a", Input: Payload{Data: []byte("i0")}, State: OutboxSettled},
		{DispatchKey: "custom", WorkflowID: wfA, RunID: runA, Ordinal: 1, ActivityType: "b", CreatedAt: given},
	}
	orig := slices.Clone(rows)
	clock.Advance(time.Second)
	events := []Event{started(runA, "t"), scheduled(runA, 0), scheduled(runA, 1)}
	if err := m.AppendWithOutbox(t.Context(), RecorderToken(), wfA, events, 0, rows); err != nil {
		t.Fatal(err)
	}
	rows[0].Input.Data[0] = 'X' // the caller reuses its buffer
	if rows[0].DispatchKey != "" || rows[0].WorkflowID != (WorkflowID{}) || rows[0].State != orig[0].State {
		t.Errorf("the caller's rows were modified: %+v", rows[0])
	}
	if h := mustHistory(t, m, wfA); len(h) != 3 {
		t.Errorf("history has %d events, want 3", len(h))
	}
	got := mustClaim(t, m, 10)
	want := []OutboxRow{
		{DispatchKey: DispatchKey(wfA, runA, 0), WorkflowID: wfA, RunID: runA, Ordinal: 0, ActivityType: "a", Input: Payload{Data: []byte("i0")}, CreatedAt: t0.Add(time.Second), State: OutboxClaimed},
		{DispatchKey: "custom", WorkflowID: wfA, RunID: runA, Ordinal: 1, ActivityType: "b", CreatedAt: given, State: OutboxClaimed},
	}
	if len(got) != len(want) {
		t.Fatalf("claimed %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].DispatchKey != want[i].DispatchKey || got[i].WorkflowID != want[i].WorkflowID ||
			got[i].RunID != want[i].RunID || got[i].Ordinal != want[i].Ordinal ||
			got[i].ActivityType != want[i].ActivityType || string(got[i].Input.Data) != string(want[i].Input.Data) ||
			!got[i].CreatedAt.Equal(want[i].CreatedAt) || got[i].State != want[i].State {
			t.Errorf("row %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	// A claimed copy is the caller's: changing it changes nothing stored.
	got[0].Input.Data[0] = 'Y'
	if err := m.RearmOutboxPending(t.Context(), got[:1]); err != nil {
		t.Fatal(err)
	}
	if again := mustClaim(t, m, 1); len(again) != 1 || string(again[0].Input.Data) != "i0" {
		t.Errorf("re-claimed row = %+v, want input i0", again)
	}
}

func TestMemoryAppendWithOutboxRefusalsStageNothing(t *testing.T) {
	row := func(run RunID, o ActivityID) OutboxRow { return OutboxRow{RunID: run, Ordinal: o} }
	testCases := []struct {
		name        string
		token       WriteToken
		events      []Event
		expectedSeq uint64
		rows        []OutboxRow
		wantErr     error
	}{
		{name: "zero token", events: []Event{scheduled(runA, 5)}, expectedSeq: 2, rows: []OutboxRow{row(runA, 5)}, wantErr: ErrInvalidToken},
		{name: "conflict", token: RecorderToken(), events: []Event{scheduled(runA, 5)}, expectedSeq: 1, rows: []OutboxRow{row(runA, 5)}, wantErr: ErrSequenceConflict},
		{name: "conflict rows only", token: RecorderToken(), expectedSeq: 0, rows: []OutboxRow{row(runA, 5)}, wantErr: ErrSequenceConflict},
		{name: "bad event", token: RecorderToken(), events: []Event{scheduled(runA, 5), nil}, expectedSeq: 2, rows: []OutboxRow{row(runA, 5)}, wantErr: ErrInvalidArgument},
		{name: "row of another workflow", token: RecorderToken(), events: []Event{scheduled(runA, 5)}, expectedSeq: 2, rows: []OutboxRow{row(runA, 5), {WorkflowID: wfB, RunID: runA, Ordinal: 6}}, wantErr: ErrInvalidArgument},
		{name: "row with zero run", token: RecorderToken(), events: []Event{scheduled(runA, 5)}, expectedSeq: 2, rows: []OutboxRow{row(runA, 5), {Ordinal: 6}}, wantErr: ErrInvalidArgument},
		{name: "duplicate key in batch", token: RecorderToken(), events: []Event{scheduled(runA, 5)}, expectedSeq: 2, rows: []OutboxRow{row(runA, 5), row(runA, 5)}, wantErr: ErrInvalidArgument},
		{name: "duplicate explicit key in batch", token: RecorderToken(), events: []Event{scheduled(runA, 5)}, expectedSeq: 2, rows: []OutboxRow{{DispatchKey: "k", RunID: runA}, {DispatchKey: "k", RunID: runA, Ordinal: 1}}, wantErr: ErrInvalidArgument},
		{name: "key already staged", token: RecorderToken(), events: []Event{scheduled(runA, 5)}, expectedSeq: 2, rows: []OutboxRow{row(runA, 5), row(runA, 0)}, wantErr: ErrInvalidArgument},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestMemory(t)
			stageRows(t, m, 0) // history of 2 events, one pending row
			before := snapshot(t, m)
			err := m.AppendWithOutbox(t.Context(), tc.token, wfA, tc.events, tc.expectedSeq, tc.rows)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("AppendWithOutbox = %v, want %v", err, tc.wantErr)
			}
			if after := snapshot(t, m); after != before {
				t.Errorf("a refused AppendWithOutbox changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if got := keysOf(mustClaim(t, m, 10)); !slices.Equal(got, []string{DispatchKey(wfA, runA, 0)}) {
				t.Errorf("claimable rows = %v, want only the first staged one", got)
			}
		})
	}
}

func TestMemoryAppendWithOutboxEdgeBatches(t *testing.T) {
	t.Run("nothing to do", func(t *testing.T) {
		m, _ := newTestMemory(t)
		if err := m.AppendWithOutbox(t.Context(), RecorderToken(), wfA, nil, 9, nil); err != nil {
			t.Errorf("AppendWithOutbox(no events, no rows, stale seq) = %v, want nil", err)
		}
		if ids, _ := m.ListWorkflowIDs(t.Context()); len(ids) != 0 {
			t.Errorf("workflows %v created", ids)
		}
	})
	t.Run("rows only at the head", func(t *testing.T) {
		m, _ := newTestMemory(t)
		stageRows(t, m)
		err := m.AppendWithOutbox(t.Context(), RecorderToken(), wfA, nil, 1, []OutboxRow{{RunID: runA, Ordinal: 3}})
		if err != nil {
			t.Fatal(err)
		}
		if got := keysOf(mustClaim(t, m, 10)); !slices.Equal(got, []string{DispatchKey(wfA, runA, 3)}) {
			t.Errorf("claimed %v", got)
		}
		if h := mustHistory(t, m, wfA); len(h) != 1 {
			t.Errorf("history grew to %d events", len(h))
		}
	})
	t.Run("events only", func(t *testing.T) {
		m, _ := newTestMemory(t)
		if err := m.AppendWithOutbox(t.Context(), RecorderToken(), wfA, []Event{started(runA, "t")}, 0, nil); err != nil {
			t.Fatal(err)
		}
		if h := mustHistory(t, m, wfA); len(h) != 1 {
			t.Errorf("history has %d events, want 1", len(h))
		}
	})
}

func TestMemoryClaimOutboxRows(t *testing.T) {
	m, _ := newTestMemory(t)
	keys := stageRows(t, m, 0, 1, 2, 3, 4)
	for _, limit := range []int{0, -1} {
		if _, err := m.ClaimOutboxRows(t.Context(), limit); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("ClaimOutboxRows(%d) = %v, want ErrInvalidArgument", limit, err)
		}
	}
	if n, _ := m.CountClaimedOutboxRows(t.Context()); n != 0 {
		t.Errorf("claimed %d rows before any claim", n)
	}
	steps := []struct {
		limit int
		want  []string
	}{
		{limit: 2, want: keys[0:2]},
		{limit: 1, want: keys[2:3]},
		{limit: 5, want: keys[3:5]},
		{limit: 5, want: []string{}},
	}
	for i, s := range steps {
		got := mustClaim(t, m, s.limit)
		if !slices.Equal(keysOf(got), s.want) {
			t.Errorf("step %d: claimed %v, want %v", i, keysOf(got), s.want)
		}
		for _, r := range got {
			if r.State != OutboxClaimed {
				t.Errorf("claimed row in state %s", r.State)
			}
		}
	}
	if n, _ := m.CountClaimedOutboxRows(t.Context()); n != 5 {
		t.Errorf("CountClaimedOutboxRows = %d, want 5", n)
	}
}

func TestMemoryRearmOutboxPending(t *testing.T) {
	ctx := t.Context()
	m, _ := newTestMemory(t)
	keys := stageRows(t, m, 0, 1, 2, 3)
	mustClaim(t, m, 3) // 0, 1, 2 claimed; 3 pending
	if err := m.SettleOutboxRowCancelled(ctx, keys[1]); err != nil {
		t.Fatal(err)
	}
	// State: 0 claimed, 1 cancelled, 2 claimed, 3 pending.
	testCases := []struct {
		name    string
		keys    []string
		wantErr error
	}{
		{name: "unknown key changes nothing", keys: []string{keys[0], "nope"}, wantErr: ErrNotFound},
		{name: "empty key", keys: []string{keys[0], ""}, wantErr: ErrInvalidArgument},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			rows := make([]OutboxRow, len(tc.keys))
			for i, k := range tc.keys {
				rows[i] = OutboxRow{DispatchKey: k}
			}
			before := rowStates(m)
			if err := m.RearmOutboxPending(ctx, rows); !errors.Is(err, tc.wantErr) {
				t.Fatalf("RearmOutboxPending = %v, want %v", err, tc.wantErr)
			}
			if after := rowStates(m); !maps.Equal(after, before) {
				t.Errorf("row states changed from %v to %v", before, after)
			}
		})
	}
	// Re-arm the later claimed row, the cancelled one and the pending one.
	if err := m.RearmOutboxPending(ctx, []OutboxRow{{DispatchKey: keys[2]}, {DispatchKey: keys[1]}, {DispatchKey: keys[3]}}); err != nil {
		t.Fatal(err)
	}
	want := map[string]OutboxState{keys[0]: OutboxClaimed, keys[1]: OutboxCancelled, keys[2]: OutboxPending, keys[3]: OutboxPending}
	if got := rowStates(m); !maps.Equal(got, want) {
		t.Errorf("states = %v, want %v", got, want)
	}
	if n, _ := m.CountClaimedOutboxRows(ctx); n != 1 {
		t.Errorf("CountClaimedOutboxRows = %d, want 1", n)
	}
	// Re-armed rows are claimed again in staging order.
	if err := m.RearmOutboxPending(ctx, []OutboxRow{{DispatchKey: keys[0]}}); err != nil {
		t.Fatal(err)
	}
	if got := keysOf(mustClaim(t, m, 10)); !slices.Equal(got, []string{keys[0], keys[2], keys[3]}) {
		t.Errorf("claimed %v after re-arm, want rows 0, 2, 3", got)
	}
	if err := m.RearmOutboxPending(ctx, nil); err != nil {
		t.Errorf("RearmOutboxPending(nil) = %v", err)
	}
}

func TestMemorySettleOutboxRowCancelled(t *testing.T) {
	testCases := []struct {
		name    string
		prepare func(t *testing.T, m *Memory, key string)
		key     string // "" means the staged row's key
		wantErr error
		want    OutboxState
	}{
		{name: "pending", prepare: func(*testing.T, *Memory, string) {}, want: OutboxCancelled},
		{name: "claimed", prepare: func(t *testing.T, m *Memory, _ string) { mustClaim(t, m, 1) }, want: OutboxCancelled},
		{name: "already cancelled", prepare: func(t *testing.T, m *Memory, k string) { _ = m.SettleOutboxRowCancelled(t.Context(), k) }, want: OutboxCancelled},
		{name: "settled stays settled", prepare: func(t *testing.T, m *Memory, _ string) {
			mustAppend(t, m, wfA, ActivityCompleted{Envelope: env(runA), ActivityID: 0})
		}, want: OutboxSettled},
		{name: "unknown key", prepare: func(*testing.T, *Memory, string) {}, key: "nope", wantErr: ErrNotFound, want: OutboxPending},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestMemory(t)
			key := stageRows(t, m, 0)[0]
			tc.prepare(t, m, key)
			target := key
			if tc.key != "" {
				target = tc.key
			}
			if err := m.SettleOutboxRowCancelled(t.Context(), target); !errors.Is(err, tc.wantErr) {
				t.Fatalf("SettleOutboxRowCancelled = %v, want %v", err, tc.wantErr)
			}
			if got := rowStates(m)[key]; got != tc.want {
				t.Errorf("state = %s, want %s", got, tc.want)
			}
			if n, _ := m.CountClaimedOutboxRows(t.Context()); n != 0 && tc.want != OutboxClaimed {
				t.Errorf("CountClaimedOutboxRows = %d, want 0", n)
			}
		})
	}
	t.Run("empty key", func(t *testing.T) {
		m, _ := newTestMemory(t)
		if err := m.SettleOutboxRowCancelled(t.Context(), ""); !errors.Is(err, ErrInvalidArgument) {
			t.Errorf("SettleOutboxRowCancelled(\"\") = %v, want ErrInvalidArgument", err)
		}
	})
}

func TestMemorySettleWorkflowOutboxRowsCancelled(t *testing.T) {
	ctx := t.Context()
	m, _ := newTestMemory(t)
	keys := stageRows(t, m, 0, 1, 2, 3)
	// A second run of the same workflow, and another workflow.
	if err := m.AppendWithOutbox(ctx, RecorderToken(), wfA, []Event{started(runB, "t")}, 5, []OutboxRow{{RunID: runB, Ordinal: 0}}); err != nil {
		t.Fatal(err)
	}
	if err := m.AppendWithOutbox(ctx, RecorderToken(), wfB, []Event{started(runC, "t")}, 0, []OutboxRow{{RunID: runC, Ordinal: 0}}); err != nil {
		t.Fatal(err)
	}
	mustClaim(t, m, 2) // rows 0 and 1 of runA claimed
	mustAppend(t, m, wfA, ActivityCompleted{Envelope: env(runA), ActivityID: 1})
	if err := m.SettleOutboxRowCancelled(ctx, keys[2]); err != nil {
		t.Fatal(err)
	}
	// Open: runA/0 (claimed), runA/3 (pending), runB/0 (pending).
	got, err := m.SettleWorkflowOutboxRowsCancelled(ctx, wfA)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{keys[0], keys[3], DispatchKey(wfA, runB, 0)}
	if !slices.Equal(got, want) {
		t.Errorf("cancelled %v, want %v", got, want)
	}
	states := rowStates(m)
	wantStates := map[string]OutboxState{
		keys[0]: OutboxCancelled, keys[1]: OutboxSettled, keys[2]: OutboxCancelled, keys[3]: OutboxCancelled,
		DispatchKey(wfA, runB, 0): OutboxCancelled, DispatchKey(wfB, runC, 0): OutboxPending,
	}
	if !maps.Equal(states, wantStates) {
		t.Errorf("states = %v, want %v", states, wantStates)
	}
	if n, _ := m.CountClaimedOutboxRows(ctx); n != 0 {
		t.Errorf("CountClaimedOutboxRows = %d, want 0", n)
	}
	again, err := m.SettleWorkflowOutboxRowsCancelled(ctx, wfA)
	if err != nil || len(again) != 0 {
		t.Errorf("second call = %v, %v; want none, nil", again, err)
	}
	if none, err := m.SettleWorkflowOutboxRowsCancelled(ctx, testID(77, 7)); err != nil || len(none) != 0 {
		t.Errorf("unknown workflow = %v, %v; want none, nil", none, err)
	}
	if _, err := m.SettleWorkflowOutboxRowsCancelled(ctx, WorkflowID{}); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("zero workflow = %v, want ErrInvalidArgument", err)
	}
}

func TestMemoryActivityTerminalSettlesRow(t *testing.T) {
	failed := func(kind ActivityErrorKind) Event {
		return ActivityFailed{Envelope: env(runA), ActivityID: 1, Error: ActivityError{Kind: kind, Message: "boom"}}
	}
	testCases := []struct {
		name   string
		claim  bool
		events []Event
		want   OutboxState
	}{
		{name: "completed while pending", events: []Event{ActivityCompleted{Envelope: env(runA), ActivityID: 1}}, want: OutboxSettled},
		{name: "completed while claimed", claim: true, events: []Event{ActivityCompleted{Envelope: env(runA), ActivityID: 1}}, want: OutboxSettled},
		{name: "terminal failure", claim: true, events: []Event{failed(Terminal)}, want: OutboxSettled},
		{name: "retryable failure", claim: true, events: []Event{failed(Retryable)}, want: OutboxClaimed},
		{name: "failure of unknown kind", claim: true, events: []Event{failed(0)}, want: OutboxClaimed},
		{name: "cancelled", claim: true, events: []Event{ActivityCancelled{Envelope: env(runA), ActivityID: 1}}, want: OutboxSettled},
		{name: "timed out", claim: true, events: []Event{ActivityTimedOut{Envelope: env(runA), ActivityID: 1}}, want: OutboxSettled},
		{name: "other ordinal", claim: true, events: []Event{ActivityCompleted{Envelope: env(runA), ActivityID: 2}}, want: OutboxClaimed},
		{name: "same ordinal of another run", claim: true, events: []Event{ActivityCompleted{Envelope: env(runB), ActivityID: 1}}, want: OutboxClaimed},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestMemory(t)
			key := stageRows(t, m, 1)[0]
			if tc.claim {
				mustClaim(t, m, 1)
			}
			mustAppend(t, m, wfA, tc.events...)
			if got := rowStates(m)[key]; got != tc.want {
				t.Fatalf("row state = %s, want %s", got, tc.want)
			}
			wantClaimed := 0
			if tc.want == OutboxClaimed {
				wantClaimed = 1
			}
			if n, _ := m.CountClaimedOutboxRows(t.Context()); n != wantClaimed {
				t.Errorf("CountClaimedOutboxRows = %d, want %d", n, wantClaimed)
			}
			if tc.want == OutboxSettled {
				// A settled row is neither claimable nor revived by a re-arm.
				_ = m.RearmOutboxPending(t.Context(), []OutboxRow{{DispatchKey: key}})
				if got := mustClaim(t, m, 1); len(got) != 0 {
					t.Errorf("claimed a settled row: %v", keysOf(got))
				}
			}
		})
	}
	t.Run("terminal in the staging batch", func(t *testing.T) {
		m, _ := newTestMemory(t)
		events := []Event{started(runA, "t"), scheduled(runA, 0), ActivityCompleted{Envelope: env(runA), ActivityID: 0}}
		if err := m.AppendWithOutbox(t.Context(), RecorderToken(), wfA, events, 0, []OutboxRow{{RunID: runA, Ordinal: 0}}); err != nil {
			t.Fatal(err)
		}
		if got := rowStates(m)[DispatchKey(wfA, runA, 0)]; got != OutboxSettled {
			t.Errorf("row state = %s, want settled", got)
		}
	})
}
