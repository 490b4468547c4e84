package eventstore

import (
	"slices"
	"testing"
	"time"
)

func TestMemoryReadHistoryFrom(t *testing.T) {
	m, _ := newTestMemory(t)
	mustAppend(t, m, wfA, started(runA, "t"), signal(runA, "a"), signal(runA, "b"))
	testCases := []struct {
		name    string
		wf      WorkflowID
		fromSeq uint64
		want    []uint64
	}{
		{name: "zero reads all", wf: wfA, fromSeq: 0, want: []uint64{1, 2, 3}},
		{name: "one reads all", wf: wfA, fromSeq: 1, want: []uint64{1, 2, 3}},
		{name: "middle", wf: wfA, fromSeq: 2, want: []uint64{2, 3}},
		{name: "last", wf: wfA, fromSeq: 3, want: []uint64{3}},
		{name: "past head", wf: wfA, fromSeq: 4, want: []uint64{}},
		{name: "far past head", wf: wfA, fromSeq: 1 << 40, want: []uint64{}},
		{name: "unknown workflow", wf: wfB, fromSeq: 1, want: []uint64{}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.ReadHistoryFrom(t.Context(), tc.wf, tc.fromSeq)
			if err != nil {
				t.Fatal(err)
			}
			if s := seqsOf(got); !slices.Equal(s, tc.want) {
				t.Errorf("Seqs = %v, want %v", s, tc.want)
			}
		})
	}
	t.Run("ReadHistory unknown workflow", func(t *testing.T) {
		h, err := m.ReadHistory(t.Context(), wfB)
		if err != nil || len(h) != 0 {
			t.Errorf("ReadHistory(unknown) = %v, %v; want empty, nil", h, err)
		}
		c, err := m.ReadRunChain(t.Context(), wfB)
		if err != nil || len(c) != 0 {
			t.Errorf("ReadRunChain(unknown) = %v, %v; want empty, nil", c, err)
		}
	})
}

func TestMemoryRunChainContinueAsNew(t *testing.T) {
	m, clock := newTestMemory(t)
	at := func(step int) time.Time { return t0.Add(time.Duration(step) * time.Minute) }
	step := func(events ...Event) {
		t.Helper()
		mustAppend(t, m, wfA, events...)
		clock.Advance(time.Minute)
	}
	step(started(runA, "loop"), signal(runA, "a")) // seqs 1-2 at step 0
	step(WorkflowContinuedAsNew{Envelope: env(runA), NewRunID: runB})
	// Between the close of runA and the start of runB the chain goes on.
	if got, _ := m.ListActive(t.Context()); !slices.Equal(got, []WorkflowID{wfA}) {
		t.Errorf("ListActive during the continue-as-new gap = %v, want [wfA]", got)
	}
	step(started(runB, "loop"))                                                          // seq 4 at step 2
	step(signal(runB, "b"), WorkflowContinuedAsNew{Envelope: env(runB), NewRunID: runC}) // 5-6 at step 3
	step(started(runC, "loop2"), WorkflowCompleted{Envelope: env(runC)})                 // 7-8 at step 4

	chain, err := m.ReadRunChain(t.Context(), wfA)
	if err != nil {
		t.Fatal(err)
	}
	want := []RunSummary{
		{RunID: runA, WorkflowType: "loop", Status: StatusContinuedAsNew, StartedAt: at(0), ClosedAt: at(1), FirstSeq: 1, LastSeq: 3},
		{RunID: runB, WorkflowType: "loop", Status: StatusContinuedAsNew, StartedAt: at(2), ClosedAt: at(3), FirstSeq: 4, LastSeq: 6},
		{RunID: runC, WorkflowType: "loop2", Status: StatusCompleted, StartedAt: at(4), ClosedAt: at(4), FirstSeq: 7, LastSeq: 8},
	}
	if !slices.Equal(chain, want) {
		t.Errorf("run chain:\n got %+v\nwant %+v", chain, want)
	}
	if got, _ := m.ListActive(t.Context()); len(got) != 0 {
		t.Errorf("ListActive after the last run completed = %v, want none", got)
	}
	q, _ := m.Query(t.Context(), WorkflowFilter{})
	if len(q) != 1 || q[0].RunID != runC || q[0].Status != StatusCompleted || q[0].Head != 8 || q[0].WorkflowType != "loop2" {
		t.Errorf("Query describes the workflow as %+v, want its third run, completed, head 8", q)
	}
}

func TestMemoryRunChainLazyRuns(t *testing.T) {
	m, _ := newTestMemory(t)
	// A history may begin with any event: its run is created from it.
	mustAppend(t, m, wfA, signal(runA, "early"))
	chain, _ := m.ReadRunChain(t.Context(), wfA)
	want := RunSummary{RunID: runA, Status: StatusRunning, StartedAt: t0, FirstSeq: 1, LastSeq: 1}
	if len(chain) != 1 || chain[0] != want {
		t.Fatalf("chain = %+v, want [%+v]", chain, want)
	}
	// A later WorkflowStarted for that run fills in its type in place.
	mustAppend(t, m, wfA, started(runA, "late"))
	chain, _ = m.ReadRunChain(t.Context(), wfA)
	if len(chain) != 1 || chain[0].WorkflowType != "late" || chain[0].FirstSeq != 1 || chain[0].LastSeq != 2 {
		t.Errorf("chain after WorkflowStarted = %+v", chain)
	}
	// An event of an earlier run updates that run, not the current one.
	mustAppend(t, m, wfA, started(runB, "next"), signal(runA, "straggler"))
	chain, _ = m.ReadRunChain(t.Context(), wfA)
	if len(chain) != 2 || chain[0].LastSeq != 4 || chain[1].RunID != runB || chain[1].LastSeq != 3 {
		t.Errorf("chain after a straggler = %+v", chain)
	}
}

func TestMemoryLifecycleListings(t *testing.T) {
	type want struct {
		status WorkflowStatus
		active bool
		paused bool
	}
	testCases := []struct {
		name   string
		events []Event
		want   want
	}{
		{name: "started", events: []Event{started(runA, "t")}, want: want{StatusRunning, true, false}},
		{name: "paused", events: []Event{started(runA, "t"), WorkflowPaused{Envelope: env(runA)}}, want: want{StatusPaused, false, true}},
		{name: "resumed", events: []Event{started(runA, "t"), WorkflowPaused{Envelope: env(runA)}, WorkflowResumed{Envelope: env(runA)}}, want: want{StatusRunning, true, false}},
		{name: "resume while running", events: []Event{started(runA, "t"), WorkflowResumed{Envelope: env(runA)}}, want: want{StatusRunning, true, false}},
		{name: "completed", events: []Event{started(runA, "t"), WorkflowCompleted{Envelope: env(runA)}}, want: want{StatusCompleted, false, false}},
		{name: "failed", events: []Event{started(runA, "t"), WorkflowFailed{Envelope: env(runA)}}, want: want{StatusFailed, false, false}},
		{name: "cancelled", events: []Event{started(runA, "t"), WorkflowCancelled{Envelope: env(runA)}}, want: want{StatusCancelled, false, false}},
		{name: "timed out", events: []Event{started(runA, "t"), WorkflowTimedOut{Envelope: env(runA)}}, want: want{StatusTimedOut, false, false}},
		{name: "paused then failed", events: []Event{started(runA, "t"), WorkflowPaused{Envelope: env(runA)}, WorkflowFailed{Envelope: env(runA)}}, want: want{StatusFailed, false, false}},
		{name: "pause after close", events: []Event{started(runA, "t"), WorkflowCompleted{Envelope: env(runA)}, WorkflowPaused{Envelope: env(runA)}}, want: want{StatusCompleted, false, false}},
		{name: "reopened", events: []Event{started(runA, "t"), WorkflowFailed{Envelope: env(runA)}, WorkflowReopened{Envelope: env(runA)}}, want: want{StatusRunning, true, false}},
		{name: "reopen while paused", events: []Event{started(runA, "t"), WorkflowPaused{Envelope: env(runA)}, WorkflowReopened{Envelope: env(runA)}}, want: want{StatusPaused, false, true}},
		{name: "continued as new, next not started", events: []Event{started(runA, "t"), WorkflowContinuedAsNew{Envelope: env(runA), NewRunID: runB}}, want: want{StatusContinuedAsNew, true, false}},
		{name: "new run paused", events: []Event{started(runA, "t"), WorkflowContinuedAsNew{Envelope: env(runA), NewRunID: runB}, started(runB, "t"), WorkflowPaused{Envelope: env(runB)}}, want: want{StatusPaused, false, true}},
		{name: "old run closed after new run started", events: []Event{started(runA, "t"), started(runB, "t"), WorkflowCompleted{Envelope: env(runA)}}, want: want{StatusRunning, true, false}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestMemory(t)
			other := testID(5, 5) // a running workflow that is always listed
			mustAppend(t, m, other, started(runC, "other"))
			mustAppend(t, m, wfA, tc.events...)
			ctx := t.Context()
			active, _ := m.ListActive(ctx)
			paused, _ := m.ListPaused(ctx)
			if got := slices.Contains(active, wfA); got != tc.want.active {
				t.Errorf("in ListActive = %v, want %v", got, tc.want.active)
			}
			if got := slices.Contains(paused, wfA); got != tc.want.paused {
				t.Errorf("in ListPaused = %v, want %v", got, tc.want.paused)
			}
			if !slices.Contains(active, other) || slices.Contains(paused, other) {
				t.Errorf("the other workflow is misplaced: active %v, paused %v", active, paused)
			}
			q, _ := m.Query(ctx, WorkflowFilter{Status: tc.want.status})
			if !slices.ContainsFunc(q, func(s WorkflowSummary) bool { return s.WorkflowID == wfA }) {
				t.Errorf("Query(status %s) = %+v, does not hold the workflow", tc.want.status, q)
			}
			closed := tc.want.status.Closed()
			chain, _ := m.ReadRunChain(ctx, wfA)
			if cur := chain[len(chain)-1]; cur.ClosedAt.IsZero() == closed {
				t.Errorf("current run ClosedAt = %v with status %s", cur.ClosedAt, cur.Status)
			}
		})
	}
}

func TestMemoryListingsSorted(t *testing.T) {
	m, _ := newTestMemory(t)
	ids := []WorkflowID{testID(9, 0), testID(3, 0), testID(200, 0), testID(4, 1)}
	for i, id := range ids {
		events := []Event{started(runA, "t")}
		for range i {
			events = append(events, signal(runA, "s"))
		}
		mustAppend(t, m, id, events...)
	}
	want := []WorkflowID{testID(3, 0), testID(4, 1), testID(9, 0), testID(200, 0)}
	ctx := t.Context()
	if got, _ := m.ListWorkflowIDs(ctx); !slices.Equal(got, want) {
		t.Errorf("ListWorkflowIDs = %v, want %v", got, want)
	}
	if got, _ := m.ListActive(ctx); !slices.Equal(got, want) {
		t.Errorf("ListActive = %v, want %v", got, want)
	}
	for i := 1; i < len(want); i++ {
		if want[i-1].String() >= want[i].String() {
			t.Fatalf("the expected order is not string order: %v", want)
		}
	}
	heads, _ := m.StreamHeads(ctx)
	wantHeads := []StreamHead{{want[0], 2}, {want[1], 4}, {want[2], 1}, {want[3], 3}}
	if !slices.Equal(heads, wantHeads) {
		t.Errorf("StreamHeads = %v, want %v", heads, wantHeads)
	}
}

func TestMemoryQuery(t *testing.T) {
	m, clock := newTestMemory(t)
	w1, w2, w3, w4 := testID(1, 1), testID(2, 2), testID(3, 3), testID(4, 4)
	mustAppend(t, m, w3, started(runA, "order")) // t0
	mustAppend(t, m, w1, started(runA, "order")) // t0, sorts before w3 by ID
	clock.Advance(time.Hour)
	mustAppend(t, m, w2, started(runA, "invoice"), WorkflowCompleted{Envelope: env(runA)}) // t0+1h
	clock.Advance(time.Hour)
	mustAppend(t, m, w4, started(runA, "order"), WorkflowPaused{Envelope: env(runA)}) // t0+2h

	testCases := []struct {
		name   string
		filter WorkflowFilter
		want   []WorkflowID
	}{
		{name: "everything, by StartedAt then ID", want: []WorkflowID{w1, w3, w2, w4}},
		{name: "type", filter: WorkflowFilter{WorkflowType: "order"}, want: []WorkflowID{w1, w3, w4}},
		{name: "unknown type", filter: WorkflowFilter{WorkflowType: "nope"}, want: []WorkflowID{}},
		{name: "status", filter: WorkflowFilter{Status: StatusRunning}, want: []WorkflowID{w1, w3}},
		{name: "status completed", filter: WorkflowFilter{Status: StatusCompleted}, want: []WorkflowID{w2}},
		{name: "started after is inclusive", filter: WorkflowFilter{StartedAfter: t0.Add(time.Hour)}, want: []WorkflowID{w2, w4}},
		{name: "started before is exclusive", filter: WorkflowFilter{StartedBefore: t0.Add(time.Hour)}, want: []WorkflowID{w1, w3}},
		{name: "window", filter: WorkflowFilter{StartedAfter: t0.Add(time.Minute), StartedBefore: t0.Add(2 * time.Hour)}, want: []WorkflowID{w2}},
		{name: "limit applied last", filter: WorkflowFilter{WorkflowType: "order", Limit: 2}, want: []WorkflowID{w1, w3}},
		{name: "limit larger than result", filter: WorkflowFilter{Limit: 10}, want: []WorkflowID{w1, w3, w2, w4}},
		{name: "negative limit is no limit", filter: WorkflowFilter{Limit: -1}, want: []WorkflowID{w1, w3, w2, w4}},
		{name: "combined", filter: WorkflowFilter{WorkflowType: "order", Status: StatusPaused, StartedAfter: t0}, want: []WorkflowID{w4}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.Query(t.Context(), tc.filter)
			if err != nil {
				t.Fatal(err)
			}
			ids := make([]WorkflowID, len(got))
			for i, s := range got {
				ids[i] = s.WorkflowID
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("Query(%+v) = %v, want %v", tc.filter, ids, tc.want)
			}
		})
	}
	t.Run("summary fields", func(t *testing.T) {
		got, _ := m.Query(t.Context(), WorkflowFilter{Status: StatusCompleted})
		want := WorkflowSummary{WorkflowID: w2, RunID: runA, WorkflowType: "invoice", Status: StatusCompleted, StartedAt: t0.Add(time.Hour), ClosedAt: t0.Add(time.Hour), Head: 2}
		if len(got) != 1 || got[0] != want {
			t.Errorf("Query = %+v, want [%+v]", got, want)
		}
	})
}
