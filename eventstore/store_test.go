package eventstore

import (
	"strings"
	"testing"
)

func TestWorkflowStatusClosed(t *testing.T) {
	testCases := []struct {
		status WorkflowStatus
		closed bool
	}{
		{StatusRunning, false},
		{StatusPaused, false},
		{StatusCompleted, true},
		{StatusFailed, true},
		{StatusCancelled, true},
		{StatusTimedOut, true},
		{StatusContinuedAsNew, true},
		{"", false},
	}
	for _, tc := range testCases {
		if got := tc.status.Closed(); got != tc.closed {
			t.Errorf("%q.Closed() = %v, want %v", tc.status, got, tc.closed)
		}
	}
}

func TestEnumStrings(t *testing.T) {
	testCases := []struct {
		got, want string
	}{
		{TimerRetired.String(), "retired"},
		{TimerSuperseded.String(), "superseded"},
		{TimerAbsent.String(), "absent"},
		{TimerRetirement(0).String(), "unknown"},
		{OutboxPending.String(), "pending"},
		{OutboxClaimed.String(), "claimed"},
		{OutboxSettled.String(), "settled"},
		{OutboxCancelled.String(), "cancelled"},
		{OutboxState(0).String(), "unknown"},
	}
	for _, tc := range testCases {
		if tc.got != tc.want {
			t.Errorf("String() = %q, want %q", tc.got, tc.want)
		}
	}
}

func TestDispatchKey(t *testing.T) {
	got := DispatchKey(wfA, runA, 7)
	want := wfA.String() + "/" + runA.String() + "/7"
	if got != want {
		t.Errorf("DispatchKey = %q, want %q", got, want)
	}
	if DispatchKey(wfA, runB, 7) == got || DispatchKey(wfA, runA, 8) == got {
		t.Error("dispatch keys of different activities collide")
	}
	if strings.Count(got, "/") != 2 {
		t.Errorf("DispatchKey = %q, want three parts", got)
	}
}

func TestShardOf(t *testing.T) {
	var id WorkflowID
	id[7] = 10
	id[6] = 1 // first eight bytes, big-endian: 266
	testCases := []struct {
		n, want int
	}{
		{1, 0},
		{4, 266 % 4},
		{16, 266 % 16},
		{1000, 266},
	}
	for _, tc := range testCases {
		if got := ShardOf(id, tc.n); got != tc.want {
			t.Errorf("ShardOf(id, %d) = %d, want %d", tc.n, got, tc.want)
		}
	}
	id[8] = 0xff // bytes past the eighth do not count
	if got := ShardOf(id, 1000); got != 266 {
		t.Errorf("ShardOf depends on byte 8: %d", got)
	}
	for range 100 {
		if s := ShardOf(NewWorkflowID(), 7); s < 0 || s >= 7 {
			t.Fatalf("ShardOf(random, 7) = %d, out of range", s)
		}
	}
}
