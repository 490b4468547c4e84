package eventstore

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func TestMemoryExpiredTimers(t *testing.T) {
	ctx := t.Context()
	m, _ := newTestMemory(t)
	w1, w2 := testID(1, 0), testID(2, 0)
	arm := func(wf WorkflowID, id TimerID, at time.Duration, seq uint64) {
		t.Helper()
		if err := m.ScheduleTimer(ctx, wf, id, t0.Add(at), seq); err != nil {
			t.Fatalf("ScheduleTimer: %v", err)
		}
	}
	arm(w2, "b", time.Minute, 1)
	arm(w1, "z", time.Minute, 2)
	arm(w1, "a", time.Minute, 3)
	arm(w1, "early", 0, 4)
	arm(w2, "late", time.Hour, 5)
	arm(w2, "moved", time.Second, 6)
	arm(w2, "moved", 2*time.Hour, 7) // re-armed later: replaces the first arming

	testCases := []struct {
		name string
		asOf time.Time
		want []TimerEntry
	}{
		{name: "before all", asOf: t0.Add(-time.Nanosecond), want: []TimerEntry{}},
		{name: "boundary is inclusive", asOf: t0, want: []TimerEntry{{w1, "early", t0, 4}}},
		{name: "ordered by time, workflow, timer", asOf: t0.Add(time.Minute), want: []TimerEntry{
			{w1, "early", t0, 4},
			{w1, "a", t0.Add(time.Minute), 3},
			{w1, "z", t0.Add(time.Minute), 2},
			{w2, "b", t0.Add(time.Minute), 1},
		}},
		{name: "re-armed timer moves", asOf: t0.Add(time.Hour), want: []TimerEntry{
			{w1, "early", t0, 4},
			{w1, "a", t0.Add(time.Minute), 3},
			{w1, "z", t0.Add(time.Minute), 2},
			{w2, "b", t0.Add(time.Minute), 1},
			{w2, "late", t0.Add(time.Hour), 5},
		}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.ExpiredTimers(ctx, tc.asOf)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ExpiredTimers(%v):\n got %v\nwant %v", tc.asOf, got, tc.want)
			}
		})
	}
	t.Run("reading does not retire", func(t *testing.T) {
		first, _ := m.ExpiredTimers(ctx, t0)
		second, _ := m.ExpiredTimers(ctx, t0)
		if len(first) != 1 || !slices.Equal(first, second) {
			t.Errorf("ExpiredTimers twice = %v then %v", first, second)
		}
	})
}

func TestMemoryRetireTimer(t *testing.T) {
	fireAt := t0.Add(time.Minute)
	testCases := []struct {
		name      string
		fireAt    time.Time
		armedSeq  uint64
		timerID   TimerID
		want      TimerRetirement
		wantArmed bool
	}{
		{name: "as armed", timerID: "t", fireAt: fireAt, armedSeq: 7, want: TimerRetired},
		{name: "same instant, other location", timerID: "t", fireAt: fireAt.In(time.FixedZone("X", 3600)), armedSeq: 7, want: TimerRetired},
		{name: "stale armed seq", timerID: "t", fireAt: fireAt, armedSeq: 3, want: TimerSuperseded, wantArmed: true},
		{name: "other fire time", timerID: "t", fireAt: fireAt.Add(time.Second), armedSeq: 7, want: TimerSuperseded, wantArmed: true},
		{name: "absent", timerID: "other", fireAt: fireAt, armedSeq: 7, want: TimerAbsent, wantArmed: true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			m, _ := newTestMemory(t)
			// Armed at seq 3, then re-armed by the event at seq 7.
			if err := m.ScheduleTimer(ctx, wfA, "t", fireAt, 3); err != nil {
				t.Fatal(err)
			}
			if err := m.ScheduleTimer(ctx, wfA, "t", fireAt, 7); err != nil {
				t.Fatal(err)
			}
			got, err := m.RetireTimer(ctx, wfA, tc.timerID, tc.fireAt, tc.armedSeq)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("RetireTimer = %s, want %s", got, tc.want)
			}
			armed, _ := m.ExpiredTimers(ctx, fireAt)
			if still := len(armed) == 1 && armed[0].ArmedSeq == 7; still != tc.wantArmed {
				t.Errorf("timer still armed = %v, want %v (armed: %v)", still, tc.wantArmed, armed)
			}
		})
	}
	t.Run("retire twice", func(t *testing.T) {
		ctx := t.Context()
		m, _ := newTestMemory(t)
		_ = m.ScheduleTimer(ctx, wfA, "t", fireAt, 1)
		if got, _ := m.RetireTimer(ctx, wfA, "t", fireAt, 1); got != TimerRetired {
			t.Fatalf("first retire = %s", got)
		}
		if got, _ := m.RetireTimer(ctx, wfA, "t", fireAt, 1); got != TimerAbsent {
			t.Errorf("second retire = %s, want absent", got)
		}
	})
}

func TestMemoryTimersInvalidArguments(t *testing.T) {
	testCases := []struct {
		name    string
		wf      WorkflowID
		timerID TimerID
	}{
		{name: "zero workflow", timerID: "t"},
		{name: "empty timer", wf: wfA},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			m, _ := newTestMemory(t)
			if err := m.ScheduleTimer(ctx, tc.wf, tc.timerID, t0, 1); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("ScheduleTimer = %v, want ErrInvalidArgument", err)
			}
			if r, err := m.RetireTimer(ctx, tc.wf, tc.timerID, t0, 1); !errors.Is(err, ErrInvalidArgument) || r != 0 {
				t.Errorf("RetireTimer = %v, %v; want 0, ErrInvalidArgument", r, err)
			}
			if armed, _ := m.ExpiredTimers(ctx, t0); len(armed) != 0 {
				t.Errorf("a refused ScheduleTimer armed %v", armed)
			}
		})
	}
}
