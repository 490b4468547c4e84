package server

import (
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

func TestAttemptResult(t *testing.T) {
	testCases := []struct {
		plan    plan
		retries int
		attempt uint32
		want    string
		retry   bool
	}{
		{planSucceed, 0, 1, "ActivityCompleted", false},
		{planRetry, 2, 1, "ActivityFailed/retryable", true},
		{planRetry, 2, 2, "ActivityFailed/retryable", true},
		{planRetry, 2, 3, "ActivityCompleted", false},
		{planFail, 0, 1, "ActivityFailed/terminal", false},
		{planCancel, 0, 1, "ActivityCancelled", false},
		{planTimeout, 0, 1, "ActivityCompleted", false}, // late: the workflow has timed it out
	}
	for _, tc := range testCases {
		t.Run(string(tc.plan), func(t *testing.T) {
			a := &attemptRun{row: eventstore.OutboxRow{Ordinal: 4, ActivityType: "charge_card"}, in: activityInput{Plan: tc.plan, Retries: tc.retries}, attempt: tc.attempt}
			ev, retry := a.result(eventstore.Envelope{RunID: eventstore.RunID{1}})
			got := kinds([]eventstore.Event{ev})
			switch e := ev.(type) {
			case eventstore.ActivityFailed:
				got += "/" + e.Error.Kind.String()
				if e.Attempt != tc.attempt || e.ActivityID != 4 {
					t.Errorf("failure %+v", e)
				}
			case eventstore.ActivityCompleted:
				if e.Attempt != tc.attempt || e.ActivityID != 4 {
					t.Errorf("completion %+v", e)
				}
			}
			if got != tc.want || retry != tc.retry {
				t.Errorf("attempt %d: %s retry=%v, want %s retry=%v", tc.attempt, got, retry, tc.want, tc.retry)
			}
		})
	}
}

func TestTranscriptTurn(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	row := eventstore.OutboxRow{WorkflowID: eventstore.WorkflowID{1}, RunID: eventstore.RunID{2}, Ordinal: 3, ActivityType: "agent_summarize"}
	a := &attemptRun{row: row, in: activityInput{Turns: 2}, spec: activitySpecs[row.ActivityType], attempt: 2}
	var all []keyspace.ActivityEvent
	for turn := 1; turn <= 2; turn++ {
		a.turn = turn
		all = append(all, srv.transcriptTurn(a)...)
	}
	want := []struct {
		kind      string
		ephemeral bool
	}{
		{"message", false}, // the task
		{"status", true}, {"message", false}, {"tool_call", false}, {"tool_result", false}, {"usage", false},
		{"status", true}, {"message", false}, {"tool_call", false}, {"tool_result", false}, {"usage", false},
		{"status", true}, // done
	}
	if len(all) != len(want) {
		t.Fatalf("%d events, want %d", len(all), len(want))
	}
	key := keyspace.StreamKey{WorkflowID: row.WorkflowID, RunID: row.RunID, ActivityID: 3, Attempt: 2}
	for i, ev := range all {
		if ev.Content.ContentKind() != want[i].kind || ev.Ephemeral != want[i].ephemeral {
			t.Errorf("event %d: %s ephemeral=%v, want %s ephemeral=%v", i, ev.Content.ContentKind(), ev.Ephemeral, want[i].kind, want[i].ephemeral)
		}
		if keyspace.KeyOf(ev) != key || ev.WorkerSeq != uint64(i+1) || ev.AgentID != "agent/agent_summarize" || ev.EmittedAt.IsZero() {
			t.Errorf("event %d: key %v worker seq %d agent %q", i, keyspace.KeyOf(ev), ev.WorkerSeq, ev.AgentID)
		}
	}
	call, result := all[3].Content.(keyspace.ToolCall), all[4].Content.(keyspace.ToolResult)
	if call.CallID == "" || call.CallID != result.CallID {
		t.Errorf("tool call %q answered by %q", call.CallID, result.CallID)
	}
}
