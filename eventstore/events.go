package eventstore

import "time"

// The event kinds. Each is a value type that embeds [Envelope].

// WorkflowStarted opens a run. It is the first event of a workflow, and the first of each new run of a continue-as-new chain.
type WorkflowStarted struct {
	Envelope
	WorkflowType     string
	Input            Payload
	ParentWorkflowID WorkflowID // zero for a top-level workflow
	ParentRunID      RunID
	PackageVersion   string // content hash of the workflow package that runs it
}

// WorkflowCompleted closes the run successfully.
type WorkflowCompleted struct {
	Envelope
	Result Payload
}

// WorkflowFailed closes the run with a failure.
type WorkflowFailed struct {
	Envelope
	Message string
	Details Payload
}

// WorkflowCancelled closes the run on cancellation.
type WorkflowCancelled struct {
	Envelope
	Reason string
}

// WorkflowTimedOut closes the run when its execution timeout expired.
type WorkflowTimedOut struct {
	Envelope
}

// WorkflowContinuedAsNew closes the run and names the run that continues the chain; that run's WorkflowStarted follows in the same history.
type WorkflowContinuedAsNew struct {
	Envelope
	NewRunID RunID
	Input    Payload
}

// WorkflowReopened reopens a closed run, which is running again.
type WorkflowReopened struct {
	Envelope
	Reason string
}

// WorkflowPaused pauses a running run: it stays open but is listed as paused, not active.
type WorkflowPaused struct {
	Envelope
	Reason string
}

// WorkflowResumed resumes a paused run.
type WorkflowResumed struct {
	Envelope
}

// SignalReceived records a signal delivered to the run.
type SignalReceived struct {
	Envelope
	SignalName string
	Input      Payload
}

// ScheduleTriggered records that a schedule fired this workflow.
type ScheduleTriggered struct {
	Envelope
	ScheduleID string
}

// TimerScheduled records that the run armed a timer.
type TimerScheduled struct {
	Envelope
	TimerID TimerID
	FireAt  time.Time
}

// TimerFired records that a timer fired.
type TimerFired struct {
	Envelope
	TimerID TimerID
}

// ActivityScheduled dispatches an activity.
type ActivityScheduled struct {
	Envelope
	ActivityID   ActivityID
	ActivityType string
	Input        Payload
	TaskQueue    string
	Node         string // the node it is pinned to; empty for any
}

// ActivityCompleted records an activity's successful result.
type ActivityCompleted struct {
	Envelope
	ActivityID ActivityID
	Result     Payload
	Attempt    uint32
}

// ActivityFailed records a failed attempt. A Retryable error leaves the activity scheduled for another attempt; a Terminal one ends it.
type ActivityFailed struct {
	Envelope
	ActivityID ActivityID
	Error      ActivityError
	Attempt    uint32
}

// ActivityCancelled records that an activity was cancelled.
type ActivityCancelled struct {
	Envelope
	ActivityID ActivityID
	Attempt    uint32
}

// ActivityTimedOut records that an activity's attempt timed out; it ends the activity.
type ActivityTimedOut struct {
	Envelope
	ActivityID ActivityID
	Attempt    uint32
}

func (e WorkflowStarted) withEnvelope(env Envelope) Event {
	e.Envelope, e.Input = env, e.Input.clone()
	return e
}

func (e WorkflowCompleted) withEnvelope(env Envelope) Event {
	e.Envelope, e.Result = env, e.Result.clone()
	return e
}

func (e WorkflowFailed) withEnvelope(env Envelope) Event {
	e.Envelope, e.Details = env, e.Details.clone()
	return e
}

func (e WorkflowCancelled) withEnvelope(env Envelope) Event { e.Envelope = env; return e }

func (e WorkflowTimedOut) withEnvelope(env Envelope) Event { e.Envelope = env; return e }

func (e WorkflowContinuedAsNew) withEnvelope(env Envelope) Event {
	e.Envelope, e.Input = env, e.Input.clone()
	return e
}

func (e WorkflowReopened) withEnvelope(env Envelope) Event { e.Envelope = env; return e }

func (e WorkflowPaused) withEnvelope(env Envelope) Event { e.Envelope = env; return e }

func (e WorkflowResumed) withEnvelope(env Envelope) Event { e.Envelope = env; return e }

func (e SignalReceived) withEnvelope(env Envelope) Event {
	e.Envelope, e.Input = env, e.Input.clone()
	return e
}

func (e ScheduleTriggered) withEnvelope(env Envelope) Event { e.Envelope = env; return e }

func (e TimerScheduled) withEnvelope(env Envelope) Event { e.Envelope = env; return e }

func (e TimerFired) withEnvelope(env Envelope) Event { e.Envelope = env; return e }

func (e ActivityScheduled) withEnvelope(env Envelope) Event {
	e.Envelope, e.Input = env, e.Input.clone()
	return e
}

func (e ActivityCompleted) withEnvelope(env Envelope) Event {
	e.Envelope, e.Result = env, e.Result.clone()
	return e
}

func (e ActivityFailed) withEnvelope(env Envelope) Event {
	e.Envelope, e.Error.Details = env, e.Error.Details.clone()
	return e
}

func (e ActivityCancelled) withEnvelope(env Envelope) Event { e.Envelope = env; return e }

func (e ActivityTimedOut) withEnvelope(env Envelope) Event { e.Envelope = env; return e }

// kindName returns the snake_case name of a known event kind and false for
// anything else (nil, or a pointer to a kind).
func kindName(ev Event) (string, bool) {
	switch ev.(type) {
	case WorkflowStarted:
		return "workflow_started", true
	case WorkflowCompleted:
		return "workflow_completed", true
	case WorkflowFailed:
		return "workflow_failed", true
	case WorkflowCancelled:
		return "workflow_cancelled", true
	case WorkflowTimedOut:
		return "workflow_timed_out", true
	case WorkflowContinuedAsNew:
		return "workflow_continued_as_new", true
	case WorkflowReopened:
		return "workflow_reopened", true
	case WorkflowPaused:
		return "workflow_paused", true
	case WorkflowResumed:
		return "workflow_resumed", true
	case SignalReceived:
		return "signal_received", true
	case ScheduleTriggered:
		return "schedule_triggered", true
	case TimerScheduled:
		return "timer_scheduled", true
	case TimerFired:
		return "timer_fired", true
	case ActivityScheduled:
		return "activity_scheduled", true
	case ActivityCompleted:
		return "activity_completed", true
	case ActivityFailed:
		return "activity_failed", true
	case ActivityCancelled:
		return "activity_cancelled", true
	case ActivityTimedOut:
		return "activity_timed_out", true
	}
	return "", false
}
