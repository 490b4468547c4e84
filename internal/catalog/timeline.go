package catalog

import "go.opentelemetry.io/otel/attribute"

// The timeline: spans rebuilt from committed history, and the instruments
// that describe work on workflow timescales (seconds to hours).

// Instrument names of the timeline.
const (
	// ActivityOldestInflightAge is the age, in seconds, of the oldest
	// activity of a type still in flight (an observable gauge).
	ActivityOldestInflightAge = "aion.activity.oldest_inflight_age"
	// WorkflowDuration is the time from a run's WorkflowStarted to its
	// closing event, by workflow type and status.
	WorkflowDuration = "aion.workflow.duration"
	// WorkflowPairingEvicted counts open runs the pairing tracker's memory
	// bound dropped: their run span is not emitted.
	WorkflowPairingEvicted = "aion.workflow.pairing.evicted"
)

// Span names of the timeline: the prefix, a space, then the recorded
// (cleaned and cardinality-bounded) workflow or activity type.
const (
	RunSpanPrefix      = "workflow"
	ActivitySpanPrefix = "activity"
	// RetryEvent is the span event of each retryable failure on an
	// activity span, at the failure's RecordedAt.
	RetryEvent = "aion.activity.retry"
)

// Attribute keys of the timeline spans.
const (
	RetryCount attribute.Key = "aion.activity.retry_count"
)

// WorkflowDurationBoundaries are the bucket boundaries, in seconds, of the
// activity and workflow duration histograms: from 5ms to a day, since
// activities (agents, human steps, batch jobs) and runs last from
// milliseconds to hours.
var WorkflowDurationBoundaries = []float64{
	0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30,
	60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400,
}

// TimelineLink is the attribute on each link of a timeline span saying what
// the linked span is: one of the Link* values.
const TimelineLink attribute.Key = "aion.timeline.link"

// The values of TimelineLink.
const (
	LinkScheduled = "scheduled" // the store call that appended the ActivityScheduled
	LinkSettled   = "settled"   // the store call that appended the activity's terminal (or its run's close)
	LinkStarted   = "started"   // the store call that appended the WorkflowStarted
	LinkClosed    = "closed"    // the store call that appended the run's closing event
	LinkNextRun   = "next_run"  // the anchor of the run this one continued as
)
