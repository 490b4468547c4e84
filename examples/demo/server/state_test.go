package server

import (
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// historyBuilder writes histories for the fold and decider tests, numbering
// Seq as a store would.
type historyBuilder struct {
	wf     eventstore.WorkflowID
	run    eventstore.RunID
	at     time.Time
	events []eventstore.Event
}

func newHistory(typ string) *historyBuilder {
	h := &historyBuilder{wf: eventstore.WorkflowID{1}, run: eventstore.RunID{1}, at: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	h.add(eventstore.WorkflowStarted{WorkflowType: typ, Input: jsonPayload(startInput{Generation: 1})})
	return h
}

func (h *historyBuilder) env() eventstore.Envelope {
	return eventstore.Envelope{WorkflowID: h.wf, RunID: h.run, Seq: uint64(len(h.events) + 1), RecordedAt: h.at}
}

// add appends ev with the builder's envelope (its own RunID if it has one).
func (h *historyBuilder) add(ev eventstore.Event) *historyBuilder {
	env := h.env()
	if r := ev.EventEnvelope().RunID; !r.IsZero() {
		env.RunID = r
	}
	h.events = append(h.events, eventstore.WithEnvelope(ev, env))
	return h
}

func (h *historyBuilder) schedule(id eventstore.ActivityID, typ string, stepIdx, slot int) *historyBuilder {
	timer := activityTimerID(1, id)
	h.add(eventstore.ActivityScheduled{ActivityID: id, ActivityType: typ, Input: jsonPayload(activityInput{
		Step: stepIdx, Slot: slot, Plan: planSucceed, Timer: string(timer), FireAt: h.at.Add(time.Second), ArmedSeq: uint64(len(h.events) + 2),
	})})
	return h.add(eventstore.TimerScheduled{TimerID: timer, FireAt: h.at.Add(time.Second)})
}

func (h *historyBuilder) fold() *runState {
	st := newRunState(h.wf)
	st.applyAll(h.events)
	return st
}

func TestFold(t *testing.T) {
	other := eventstore.RunID{2}
	testCases := []struct {
		name  string
		build func() *historyBuilder
		check func(t *testing.T, st *runState)
	}{
		{
			name:  "started",
			build: func() *historyBuilder { return newHistory(typeCheckout) },
			check: func(t *testing.T, st *runState) {
				if st.status != eventstore.StatusRunning || st.typ != typeCheckout || st.gen != 1 || st.head != 1 || st.startSeq != 1 {
					t.Errorf("state %+v", st)
				}
			},
		},
		{
			name: "retryable failure keeps the activity open at the next attempt",
			build: func() *historyBuilder {
				return newHistory(typeCheckout).schedule(0, "charge_card", 1, 0).
					add(eventstore.ActivityFailed{ActivityID: 0, Attempt: 1, Error: eventstore.ActivityError{Kind: eventstore.Retryable}})
			},
			check: func(t *testing.T, st *runState) {
				a := st.activity(0)
				if !a.open() || a.attempt != 2 {
					t.Errorf("activity open=%v attempt=%d, want open at attempt 2", a.open(), a.attempt)
				}
			},
		},
		{
			name: "terminals end an activity once",
			build: func() *historyBuilder {
				return newHistory(typeCheckout).schedule(0, "charge_card", 1, 0).
					add(eventstore.ActivityTimedOut{ActivityID: 0, Attempt: 1}).
					add(eventstore.ActivityCompleted{ActivityID: 0, Attempt: 1})
			},
			check: func(t *testing.T, st *runState) {
				if got := st.activity(0).outcome; got != outcomeTimedOut {
					t.Errorf("outcome %q, want the first terminal, timed_out", got)
				}
			},
		},
		{
			name: "reopen forgives failed activities and runs again",
			build: func() *historyBuilder {
				return newHistory(typeCheckout).schedule(0, "reserve_inventory", 0, 0).
					add(eventstore.ActivityFailed{ActivityID: 0, Attempt: 1, Error: eventstore.ActivityError{Kind: eventstore.Terminal}}).
					add(eventstore.WorkflowFailed{}).
					add(eventstore.WorkflowReopened{})
			},
			check: func(t *testing.T, st *runState) {
				if st.status != eventstore.StatusRunning || st.reopens != 1 || !st.activity(0).forgiven || st.latest(0, 0) != nil {
					t.Errorf("status %s reopens %d forgiven %v", st.status, st.reopens, st.activity(0).forgiven)
				}
			},
		},
		{
			name: "pause and resume",
			build: func() *historyBuilder {
				return newHistory(typeCheckout).add(eventstore.WorkflowPaused{})
			},
			check: func(t *testing.T, st *runState) {
				if st.status != eventstore.StatusPaused {
					t.Errorf("status %s, want paused", st.status)
				}
			},
		},
		{
			name: "signals, requests, triggers and timers",
			build: func() *historyBuilder {
				return newHistory(typeReport).
					add(eventstore.SignalReceived{SignalName: signalNote, Input: jsonPayload(signalInput{RequestID: "r1"})}).
					add(eventstore.ScheduleTriggered{}).
					add(eventstore.TimerScheduled{TimerID: "t"}).
					add(eventstore.TimerFired{TimerID: "t"})
			},
			check: func(t *testing.T, st *runState) {
				if st.signals[signalNote] != 1 || !st.requests["r1"] || st.triggers != 1 || !st.timers["t"].fired || st.timers["t"].armedSeq != 4 {
					t.Errorf("state %+v", st)
				}
			},
		},
		{
			name: "continue-as-new switches to the new run",
			build: func() *historyBuilder {
				return newHistory(typeReport).schedule(0, "publish_report", 2, 0).
					add(eventstore.ActivityCompleted{ActivityID: 0}).
					add(eventstore.WorkflowContinuedAsNew{NewRunID: other}).
					add(eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: other}, WorkflowType: typeReport, Input: jsonPayload(startInput{Generation: 2})})
			},
			check: func(t *testing.T, st *runState) {
				if st.run != other || st.gen != 2 || len(st.acts) != 0 || st.status != eventstore.StatusRunning || st.startSeq != 6 || st.head != 6 {
					t.Errorf("state %+v", st)
				}
			},
		},
		{
			name: "a late event of an earlier run is skipped",
			build: func() *historyBuilder {
				h := newHistory(typeReport).
					add(eventstore.WorkflowContinuedAsNew{NewRunID: other}).
					add(eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: other}, WorkflowType: typeReport, Input: jsonPayload(startInput{Generation: 2})})
				return h.add(eventstore.SignalReceived{Envelope: eventstore.Envelope{RunID: h.run}, SignalName: signalNote})
			},
			check: func(t *testing.T, st *runState) {
				if st.signals[signalNote] != 0 || st.head != 4 {
					t.Errorf("signals %v head %d", st.signals, st.head)
				}
			},
		},
		{
			name: "malformed activity input is reported",
			build: func() *historyBuilder {
				return newHistory(typeCheckout).add(eventstore.ActivityScheduled{ActivityID: 0, Input: eventstore.Payload{Data: []byte("{")}})
			},
			check: func(t *testing.T, st *runState) {
				if st.err == nil {
					t.Error("no error for a malformed activity input")
				}
			},
		},
		{
			name: "activities out of order are reported",
			build: func() *historyBuilder {
				return newHistory(typeCheckout).schedule(3, "charge_card", 0, 0)
			},
			check: func(t *testing.T, st *runState) {
				if st.err == nil {
					t.Error("no error for activity 3 scheduled first")
				}
			},
		},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, tc.build().fold())
		})
	}
}
