package keyspace_test

import (
	"errors"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

func TestValidateBatch(t *testing.T) {
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	ev := func(activity eventstore.ActivityID, ephemeral bool) keyspace.ActivityEvent {
		return keyspace.ActivityEvent{WorkflowID: wf, RunID: run, ActivityID: activity, Ephemeral: ephemeral}
	}
	testCases := []struct {
		name   string
		events []keyspace.ActivityEvent
		want   error
	}{
		{"empty", nil, nil},
		{"one stream", []keyspace.ActivityEvent{ev(1, false), ev(1, false)}, nil},
		{"zero run", []keyspace.ActivityEvent{{WorkflowID: wf}}, eventstore.ErrInvalidArgument},
		{"mixed", []keyspace.ActivityEvent{ev(1, false), ev(2, false)}, keyspace.ErrMixedStreams},
		{"ephemeral", []keyspace.ActivityEvent{ev(1, false), ev(1, true)}, keyspace.ErrEphemeral},
		{"mixed before ephemeral", []keyspace.ActivityEvent{ev(1, true), ev(2, false)}, keyspace.ErrMixedStreams},
		{"nil message pointer", []keyspace.ActivityEvent{ev(1, false), withContent(ev(1, false), (*keyspace.Message)(nil))}, eventstore.ErrInvalidArgument},
		{"custom kind", []keyspace.ActivityEvent{withContent(ev(1, false), customContent{})}, eventstore.ErrInvalidArgument},
		{"ephemeral before content", []keyspace.ActivityEvent{withContent(ev(1, false), customContent{}), ev(1, true)}, keyspace.ErrEphemeral},
		{"every kind, value and pointer", []keyspace.ActivityEvent{
			withContent(ev(1, false), nil),
			withContent(ev(1, false), keyspace.Message{}), withContent(ev(1, false), &keyspace.Message{}),
			withContent(ev(1, false), keyspace.ToolCall{}), withContent(ev(1, false), &keyspace.ToolCall{}),
			withContent(ev(1, false), keyspace.ToolResult{}), withContent(ev(1, false), &keyspace.ToolResult{}),
			withContent(ev(1, false), keyspace.Status{}), withContent(ev(1, false), &keyspace.Status{}),
			withContent(ev(1, false), keyspace.Usage{}), withContent(ev(1, false), &keyspace.Usage{}),
		}, nil},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := keyspace.ValidateBatch(tc.events)
			if (tc.want == nil) != (err == nil) || (tc.want != nil && !errors.Is(err, tc.want)) {
				t.Fatalf("ValidateBatch = %v, want %v", err, tc.want)
			}
		})
	}
}

func withContent(ev keyspace.ActivityEvent, c keyspace.Content) keyspace.ActivityEvent {
	ev.Content = c
	return ev
}
