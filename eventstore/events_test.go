package eventstore

import (
	"reflect"
	"testing"
	"time"
)

// oneOfEachKind returns one event of every kind, each with every payload
// filled in.
func oneOfEachKind() []Event {
	p := func(s string) Payload { return Payload{ContentType: "application/octet-stream", Data: []byte(s)} }
	e := Envelope{RunID: runA}
	return []Event{
		WorkflowStarted{Envelope: e, WorkflowType: "t", Input: p("in"), ParentWorkflowID: wfB, ParentRunID: runB, PackageVersion: "h"},
		WorkflowCompleted{Envelope: e, Result: p("result")},
		WorkflowFailed{Envelope: e, Message: "m", Details: p("details")},
		WorkflowCancelled{Envelope: e, Reason: "r"},
		WorkflowTimedOut{Envelope: e},
		WorkflowContinuedAsNew{Envelope: e, NewRunID: runB, Input: p("next")},
		WorkflowReopened{Envelope: e, Reason: "r"},
		WorkflowPaused{Envelope: e, Reason: "r"},
		WorkflowResumed{Envelope: e},
		SignalReceived{Envelope: e, SignalName: "s", Input: p("signal")},
		ScheduleTriggered{Envelope: e, ScheduleID: "sch"},
		TimerScheduled{Envelope: e, TimerID: "tm", FireAt: t0},
		TimerFired{Envelope: e, TimerID: "tm"},
		ActivityScheduled{Envelope: e, ActivityID: 3, ActivityType: "a", Input: p("input"), TaskQueue: "q", Node: "n"},
		ActivityCompleted{Envelope: e, ActivityID: 3, Result: p("out"), Attempt: 2},
		ActivityFailed{Envelope: e, ActivityID: 3, Error: ActivityError{Kind: Terminal, Message: "m", Details: p("why")}, Attempt: 2},
		ActivityCancelled{Envelope: e, ActivityID: 3, Attempt: 1},
		ActivityTimedOut{Envelope: e, ActivityID: 3, Attempt: 1},
	}
}

// byteSlices returns every []byte reachable through v's struct fields.
func byteSlices(v reflect.Value) [][]byte {
	switch v.Kind() {
	case reflect.Struct:
		var out [][]byte
		for i := range v.NumField() {
			out = append(out, byteSlices(v.Field(i))...)
		}
		return out
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return [][]byte{v.Bytes()}
		}
	}
	return nil
}

func TestEventKinds(t *testing.T) {
	events := oneOfEachKind()
	names := map[string]bool{}
	for _, ev := range events {
		name, ok := kindName(ev)
		if !ok || name == "" {
			t.Errorf("kindName(%T) = %q, %v", ev, name, ok)
		}
		names[name] = true
		ptr := reflect.New(reflect.TypeOf(ev))
		ptr.Elem().Set(reflect.ValueOf(ev))
		if _, ok := kindName(ptr.Interface().(Event)); ok {
			t.Errorf("kindName(%T) accepted a pointer", ptr.Interface())
		}
	}
	if len(names) != len(events) {
		t.Errorf("%d distinct kind names for %d kinds", len(names), len(events))
	}
	if _, ok := kindName(nil); ok {
		t.Error("kindName(nil) reported a kind")
	}
}

func TestWithEnvelope(t *testing.T) {
	newEnv := Envelope{WorkflowID: wfA, RunID: runB, Seq: 9, RecordedAt: t0.Add(time.Hour)}
	for _, ev := range oneOfEachKind() {
		t.Run(reflect.TypeOf(ev).Name(), func(t *testing.T) {
			out := WithEnvelope(ev, newEnv)
			if reflect.TypeOf(out) != reflect.TypeOf(ev) {
				t.Fatalf("WithEnvelope returned a %T", out)
			}
			if got := out.EventEnvelope(); got != newEnv {
				t.Errorf("envelope = %+v, want %+v", got, newEnv)
			}
			if got := ev.EventEnvelope(); got != (Envelope{RunID: runA}) {
				t.Errorf("the original's envelope changed to %+v", got)
			}
			// Apart from the envelope, the copy equals the original.
			back := WithEnvelope(out, ev.EventEnvelope())
			if !reflect.DeepEqual(back, ev) {
				t.Errorf("fields changed:\n got %#v\nwant %#v", back, ev)
			}
			// Every payload is a deep copy: no byte slice is shared.
			orig, cp := byteSlices(reflect.ValueOf(ev)), byteSlices(reflect.ValueOf(out))
			if len(orig) != len(cp) {
				t.Fatalf("%d byte slices in the original, %d in the copy", len(orig), len(cp))
			}
			for i := range orig {
				if len(orig[i]) > 0 && &orig[i][0] == &cp[i][0] {
					t.Errorf("byte slice %d (%q) is shared with the original", i, orig[i])
				}
			}
		})
	}
	t.Run("nil data stays nil", func(t *testing.T) {
		out := WithEnvelope(SignalReceived{}, newEnv).(SignalReceived)
		if out.Input.Data != nil {
			t.Errorf("Data = %#v, want nil", out.Input.Data)
		}
	})
}
