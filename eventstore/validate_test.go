package eventstore

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateAppend(t *testing.T) {
	type wrapped struct{ SignalReceived } // embeds a kind, is not one
	foreign := testID(9, 9)
	testCases := []struct {
		name    string
		wf      WorkflowID
		events  []Event
		wantErr bool
		mention string // the message names this
	}{
		{name: "every kind", wf: wfA, events: oneOfEachKind()},
		{name: "empty batch", wf: wfA},
		{name: "own workflow named", wf: wfA, events: []Event{SignalReceived{Envelope: Envelope{WorkflowID: wfA, RunID: runA}}}},
		{name: "seq and time ignored", wf: wfA, events: []Event{SignalReceived{Envelope: Envelope{RunID: runA, Seq: 77, RecordedAt: t0}}}},
		{name: "zero workflow", events: []Event{signal(runA, "s")}, wantErr: true, mention: "zero workflow"},
		{name: "zero workflow empty batch", wantErr: true, mention: "zero workflow"},
		{name: "nil event", wf: wfA, events: []Event{signal(runA, "s"), nil}, wantErr: true, mention: "event 1"},
		{name: "pointer", wf: wfA, events: []Event{&SignalReceived{Envelope: env(runA)}}, wantErr: true, mention: "event 0"},
		{name: "nil pointer", wf: wfA, events: []Event{signal(runA, "s"), signal(runA, "s"), (*WorkflowStarted)(nil)}, wantErr: true, mention: "event 2"},
		{name: "embedding type", wf: wfA, events: []Event{wrapped{SignalReceived{Envelope: env(runA)}}}, wantErr: true, mention: "event 0"},
		{name: "foreign workflow", wf: wfA, events: []Event{SignalReceived{Envelope: Envelope{WorkflowID: foreign, RunID: runA}}}, wantErr: true, mention: foreign.String()},
		{name: "zero run", wf: wfA, events: []Event{signal(runA, "s"), SignalReceived{}}, wantErr: true, mention: "event 1"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := ValidateAppend(tc.wf, tc.events)
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("ValidateAppend = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("ValidateAppend = %v, want ErrInvalidArgument", err)
			}
			if !strings.Contains(err.Error(), tc.mention) {
				t.Errorf("message %q does not mention %q", err, tc.mention)
			}
		})
	}
}
