package server

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// Outcomes of an ended activity, as the history records them. They match the
// aion.activity.outcome values.
const (
	outcomeSucceeded = "succeeded"
	outcomeFailed    = "failed"
	outcomeCancelled = "cancelled"
	outcomeTimedOut  = "timed_out"
)

// startInput is the WorkflowStarted input of every simulated workflow.
type startInput struct {
	Generation int    `json:"generation"`
	Customer   string `json:"customer"`
}

// activityInput is the ActivityScheduled input (and the outbox row input):
// which step and slot of the workflow the activity serves, the behaviour the
// simulated worker follows, and the activity's timeout timer, which the worker
// retires once it has recorded the activity's end.
type activityInput struct {
	Step     int       `json:"step"`
	Slot     int       `json:"slot"`
	Plan     plan      `json:"plan"`
	Retries  int       `json:"retries,omitempty"`
	Turns    int       `json:"turns,omitempty"`
	Timer    string    `json:"timeout_timer"`
	FireAt   time.Time `json:"fire_at"`
	ArmedSeq uint64    `json:"armed_seq"`
}

// signalInput is the SignalReceived input: the client's request ID.
type signalInput struct {
	RequestID string `json:"request_id"`
}

const contentTypeJSON = "application/json"

func jsonPayload(v any) eventstore.Payload {
	data, err := json.Marshal(v)
	if err != nil {
		// Only the package's own plain structs are marshalled.
		panic(fmt.Sprintf("server: marshal %T: %v", v, err))
	}
	return eventstore.Payload{ContentType: contentTypeJSON, Data: data}
}

func decodeActivityInput(p eventstore.Payload) (activityInput, error) {
	var in activityInput
	if err := json.Unmarshal(p.Data, &in); err != nil {
		return in, fmt.Errorf("server: activity input: %w", err)
	}
	return in, nil
}

// actState is one activity of the current run, as the history leaves it.
type actState struct {
	id      eventstore.ActivityID
	typ     string
	in      activityInput
	attempt uint32 // the current attempt: 1 + the retryable failures so far
	outcome string // "" while open
	// forgiven: the activity ended without success before the run was
	// reopened, so its step schedules it again.
	forgiven bool
}

func (a *actState) open() bool { return a.outcome == "" }

// timerState is a timer the current run armed.
type timerState struct {
	fireAt   time.Time
	armedSeq uint64
	fired    bool
}

// runState is the current run of a workflow, folded from its history. It is
// what every writer decides from: the workflow runner, the activity workers,
// the signal sender, the timer firer and the operator. Events of other runs
// (a late result for a run that has continued as new) are skipped.
type runState struct {
	workflow eventstore.WorkflowID
	run      eventstore.RunID // zero before the first WorkflowStarted
	typ      string
	gen      int
	status   eventstore.WorkflowStatus
	head     uint64 // Seq of the last event folded, of any run
	startSeq uint64 // Seq of the run's WorkflowStarted
	reopens  int
	acts     []*actState // indexed by ActivityID: a run numbers them from 0
	timers   map[eventstore.TimerID]*timerState
	signals  map[string]int
	requests map[string]bool // signal request IDs recorded
	triggers int
	err      error // the first malformed event met
}

func newRunState(workflow eventstore.WorkflowID) *runState {
	return &runState{workflow: workflow}
}

func (st *runState) applyAll(events []eventstore.Event) {
	for _, ev := range events {
		st.apply(ev)
	}
}

func (st *runState) apply(ev eventstore.Event) {
	env := ev.EventEnvelope()
	if env.Seq > st.head {
		st.head = env.Seq
	}
	if e, ok := ev.(eventstore.WorkflowStarted); ok {
		st.start(e)
		return
	}
	if st.run.IsZero() || env.RunID != st.run {
		return
	}
	switch e := ev.(type) {
	case eventstore.WorkflowCompleted:
		st.status = eventstore.StatusCompleted
	case eventstore.WorkflowFailed:
		st.status = eventstore.StatusFailed
	case eventstore.WorkflowCancelled:
		st.status = eventstore.StatusCancelled
	case eventstore.WorkflowTimedOut:
		st.status = eventstore.StatusTimedOut
	case eventstore.WorkflowContinuedAsNew:
		st.status = eventstore.StatusContinuedAsNew
	case eventstore.WorkflowReopened:
		if st.status.Closed() {
			st.status = eventstore.StatusRunning
			st.reopens++
			for _, a := range st.acts {
				if !a.open() && a.outcome != outcomeSucceeded {
					a.forgiven = true
				}
			}
		}
	case eventstore.WorkflowPaused:
		if st.status == eventstore.StatusRunning {
			st.status = eventstore.StatusPaused
		}
	case eventstore.WorkflowResumed:
		if st.status == eventstore.StatusPaused {
			st.status = eventstore.StatusRunning
		}
	case eventstore.SignalReceived:
		st.signals[e.SignalName]++
		var in signalInput
		if json.Unmarshal(e.Input.Data, &in) == nil && in.RequestID != "" {
			st.requests[in.RequestID] = true
		}
	case eventstore.ScheduleTriggered:
		st.triggers++
	case eventstore.TimerScheduled:
		st.timers[e.TimerID] = &timerState{fireAt: e.FireAt, armedSeq: env.Seq}
	case eventstore.TimerFired:
		if t := st.timers[e.TimerID]; t != nil {
			t.fired = true
		}
	case eventstore.ActivityScheduled:
		in, err := decodeActivityInput(e.Input)
		if err != nil && st.err == nil {
			st.err = err
		}
		if int(e.ActivityID) != len(st.acts) && st.err == nil {
			st.err = fmt.Errorf("server: workflow %s: activity %d scheduled out of order", st.workflow, e.ActivityID)
		}
		st.acts = append(st.acts, &actState{id: e.ActivityID, typ: e.ActivityType, in: in, attempt: 1})
	case eventstore.ActivityCompleted:
		st.end(e.ActivityID, outcomeSucceeded)
	case eventstore.ActivityFailed:
		if e.Error.Kind == eventstore.Retryable {
			if a := st.activity(e.ActivityID); a != nil && a.open() {
				a.attempt = e.Attempt + 1
			}
			return
		}
		st.end(e.ActivityID, outcomeFailed)
	case eventstore.ActivityCancelled:
		st.end(e.ActivityID, outcomeCancelled)
	case eventstore.ActivityTimedOut:
		st.end(e.ActivityID, outcomeTimedOut)
	}
}

func (st *runState) start(e eventstore.WorkflowStarted) {
	var in startInput
	if err := json.Unmarshal(e.Input.Data, &in); err != nil && st.err == nil {
		st.err = fmt.Errorf("server: workflow %s: start input: %w", st.workflow, err)
	}
	*st = runState{
		workflow: st.workflow,
		run:      e.RunID,
		typ:      e.WorkflowType,
		gen:      max(in.Generation, 1),
		status:   eventstore.StatusRunning,
		head:     st.head,
		startSeq: e.Seq,
		timers:   map[eventstore.TimerID]*timerState{},
		signals:  map[string]int{},
		requests: map[string]bool{},
		err:      st.err,
	}
}

func (st *runState) activity(id eventstore.ActivityID) *actState {
	if int(id) < len(st.acts) {
		return st.acts[id]
	}
	return nil
}

func (st *runState) end(id eventstore.ActivityID, outcome string) {
	if a := st.activity(id); a != nil && a.open() {
		a.outcome = outcome
	}
}

// latest returns the activity that currently serves a step's slot: the most
// recent one not forgiven by a reopen, or nil when the slot has none.
func (st *runState) latest(stepIdx, slot int) *actState {
	for i := len(st.acts) - 1; i >= 0; i-- {
		a := st.acts[i]
		if a.in.Step == stepIdx && a.in.Slot == slot && !a.forgiven {
			return a
		}
	}
	return nil
}

// Timer IDs are unique within a workflow's whole chain: the generation (run)
// and, for the execution timeout, the reopen count are part of them.

func execTimerID(gen, reopens int) eventstore.TimerID {
	return eventstore.TimerID(fmt.Sprintf("g%d/execution-timeout/%d", gen, reopens))
}

func activityTimerID(gen int, id eventstore.ActivityID) eventstore.TimerID {
	return eventstore.TimerID(fmt.Sprintf("g%d/activity/%d/timeout", gen, id))
}

func sleepTimerID(gen, stepIdx int) eventstore.TimerID {
	return eventstore.TimerID(fmt.Sprintf("g%d/sleep/%d", gen, stepIdx))
}
