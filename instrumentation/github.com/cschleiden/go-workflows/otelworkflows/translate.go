package otelworkflows

import (
	"errors"

	"github.com/cschleiden/go-workflows/backend/history"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/pairing"
)

// canceledMessage is the text of go-workflows' workflow.Canceled error (a
// plain errors.New, recorded with an empty error type).
const canceledMessage = "context canceled"

// translated is one go-workflows history event as pairing's facts see it.
type translated struct {
	ev      eventstore.Event
	start   string // a run started: its workflow type
	started bool
	status  int // a run closed: its status; -1 otherwise
	retry   bool
	signal  bool
}

// translate maps a history event of the execution wf onto the eventstore
// event pairing takes, at the event's SequenceID and Timestamp (without a
// monotonic reading, so that a history read back gives the same times).
// Events pairing has no fact for (task started, timers, signals, side
// effects, sub-workflow events) still carry their position.
func translate(wf eventstore.WorkflowID, instanceID string, e *history.Event) translated {
	env := eventstore.Envelope{WorkflowID: wf, RunID: eventstore.RunID(wf), Seq: uint64(max(e.SequenceID, 0)), RecordedAt: e.Timestamp.Round(0)}
	tr := translated{status: -1}
	switch e.Type {
	case history.EventType_WorkflowExecutionStarted:
		typ := ""
		if a, ok := e.Attributes.(*history.ExecutionStartedAttributes); ok && a != nil {
			typ = a.Name
		}
		tr.ev, tr.start, tr.started = eventstore.WorkflowStarted{Envelope: env, WorkflowType: typ}, typ, true
	case history.EventType_WorkflowExecutionFinished:
		tr.status = statusCompleted
		tr.ev = eventstore.WorkflowCompleted{Envelope: env}
		if a, ok := e.Attributes.(*history.ExecutionCompletedAttributes); ok && a != nil && a.Error != nil {
			tr.status = statusFailed
			if isCanceled(a.Error) {
				tr.status = statusCancelled
				tr.ev = eventstore.WorkflowCancelled{Envelope: env}
			} else {
				tr.ev = eventstore.WorkflowFailed{Envelope: env}
			}
		}
	case history.EventType_WorkflowExecutionContinuedAsNew:
		// The next execution is keyed as a workflow of its own: the link
		// goes to its run, under its key (pairing.ContinuedAsNew).
		next := eventstore.WorkflowID{}
		if a, ok := e.Attributes.(*history.ExecutionContinuedAsNewAttributes); ok && a != nil {
			next = executionKey(instanceID, a.ContinuedExecutionID)
		}
		tr.status = statusContinuedAsNew
		tr.ev = pairing.ContinuedAsNew{
			WorkflowContinuedAsNew: eventstore.WorkflowContinuedAsNew{Envelope: env, NewRunID: eventstore.RunID(next)},
			NewWorkflowID:          next,
		}
	case history.EventType_ActivityScheduled:
		typ := ""
		if a, ok := e.Attributes.(*history.ActivityScheduledAttributes); ok && a != nil {
			typ, tr.retry = a.Name, a.Attempt > 0
		}
		tr.ev = eventstore.ActivityScheduled{Envelope: env, ActivityID: activityID(e), ActivityType: typ}
	case history.EventType_ActivityCompleted:
		tr.ev = eventstore.ActivityCompleted{Envelope: env, ActivityID: activityID(e)}
	case history.EventType_ActivityFailed:
		tr.ev = eventstore.ActivityFailed{Envelope: env, ActivityID: activityID(e), Error: eventstore.ActivityError{Kind: eventstore.Terminal}}
	case history.EventType_SignalReceived:
		tr.signal = true
		tr.ev = eventstore.SignalReceived{Envelope: env}
	case history.EventType_TimerScheduled:
		tr.ev = eventstore.TimerScheduled{Envelope: env}
	default:
		tr.ev = eventstore.TimerFired{Envelope: env} // a position, no fact
	}
	return tr
}

// activityID is the pairing activity of an activity event: its schedule
// event ID, unique within an execution.
func activityID(e *history.Event) eventstore.ActivityID {
	return eventstore.ActivityID(uint64(max(e.ScheduleEventID, 0)))
}

// isCanceled says whether a workflow's error is go-workflows' cancellation
// (workflow.Canceled, or an error wrapping it).
func isCanceled(err error) (canceled bool) {
	defer func() {
		if recover() != nil {
			canceled = false
		}
	}()
	for i := 0; err != nil && i < 32; i++ {
		if err.Error() == canceledMessage {
			return true
		}
		err = errors.Unwrap(err)
	}
	return false
}
