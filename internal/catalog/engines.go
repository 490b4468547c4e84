package catalog

import "go.opentelemetry.io/otel/attribute"

// The instruments of an engine module: recorded by one engine's decorator
// only, from a fact that engine has and eventstore lacks, so otelstore
// never records them. The module keeps its own copy of each name (no
// module imports another's internal packages); the catalog's tests hold
// that copy and the module's package doc to the names here
// (EngineInstruments in docs_test.go).

// WorkflowTaskWaitDuration is go-workflows' workflow task time in queue,
// recorded by otelworkflows: a float64 histogram in seconds
// ([UnitSeconds], [DurationBoundaries]), "Time a workflow task waited
// before a worker claimed it, from its first new event.": from the first
// new event of the task (a fired timer's due time, not its recording) to
// the GetWorkflowTask that claims it, by [Namespace] and
// [WorkflowTaskTrigger]; go-workflows' own workflow.task.time_in_queue by
// the same definition. Prometheus: aion_workflow_task_wait_duration_seconds.
const WorkflowTaskWaitDuration = "aion.workflow.task.wait.duration"

// WorkflowTaskTrigger is the attribute of [WorkflowTaskWaitDuration]: the
// go-workflows history event type of the task's first new event
// (WorkflowExecutionStarted, TimerFired, ActivityCompleted, SignalReceived,
// ...), a value of go-workflows' closed set of event types.
const WorkflowTaskTrigger attribute.Key = "aion.workflow.task.trigger"
