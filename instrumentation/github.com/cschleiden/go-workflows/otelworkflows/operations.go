package otelworkflows

// Operation names a backend method: the db.operation.name of its span and
// of its aion.store.operation.duration points, the snake_case of the
// method's name.
type Operation string

// The operations: one per method of backend.Backend that can fail, and of
// the optional interfaces the decorator forwards (diag.Backend and the
// test package's GetFutureEvents).
const (
	OpCreateWorkflowInstance     Operation = "create_workflow_instance"
	OpCancelWorkflowInstance     Operation = "cancel_workflow_instance"
	OpRemoveWorkflowInstance     Operation = "remove_workflow_instance"
	OpRemoveWorkflowInstances    Operation = "remove_workflow_instances"
	OpGetWorkflowInstanceState   Operation = "get_workflow_instance_state"
	OpGetWorkflowInstanceHistory Operation = "get_workflow_instance_history"
	OpSignalWorkflow             Operation = "signal_workflow"
	OpPrepareWorkflowQueues      Operation = "prepare_workflow_queues"
	OpPrepareActivityQueues      Operation = "prepare_activity_queues"
	OpGetWorkflowTask            Operation = "get_workflow_task"
	OpExtendWorkflowTask         Operation = "extend_workflow_task"
	OpCompleteWorkflowTask       Operation = "complete_workflow_task"
	OpGetActivityTask            Operation = "get_activity_task"
	OpExtendActivityTask         Operation = "extend_activity_task"
	OpCompleteActivityTask       Operation = "complete_activity_task"
	OpGetStats                   Operation = "get_stats"
	OpGetWorkflowInstance        Operation = "get_workflow_instance"
	OpGetWorkflowInstances       Operation = "get_workflow_instances"
	OpGetWorkflowTree            Operation = "get_workflow_tree"
	OpGetFutureEvents            Operation = "get_future_events"
)

// operations lists every Operation, in the order of their per-call
// attribute sets.
var operations = [...]Operation{
	OpCreateWorkflowInstance, OpCancelWorkflowInstance, OpRemoveWorkflowInstance,
	OpRemoveWorkflowInstances, OpGetWorkflowInstanceState, OpGetWorkflowInstanceHistory,
	OpSignalWorkflow, OpPrepareWorkflowQueues, OpPrepareActivityQueues, OpGetWorkflowTask,
	OpExtendWorkflowTask, OpCompleteWorkflowTask, OpGetActivityTask, OpExtendActivityTask,
	OpCompleteActivityTask, OpGetStats, OpGetWorkflowInstance, OpGetWorkflowInstances,
	OpGetWorkflowTree, OpGetFutureEvents,
}

// Telemetry names: the aionotel catalog's (the contract dashboards and
// alert rules rely on), kept here because a module never imports another
// module's internal packages.
const (
	storeOperationDuration = "aion.store.operation.duration"
	workflowsStarted       = "aion.workflows.started"
	workflowsCompleted     = "aion.workflows.completed"
	signalsDelivered       = "aion.signals.delivered"
	// workflowTaskWait is go-workflows' workflow task time in queue: from
	// the first new event of a task (a fired timer's due time) to the
	// GetWorkflowTask that claims it.
	workflowTaskWait = "aion.workflow.task.wait.duration"

	keyNamespace      = "aion.namespace"
	keyWorkflowType   = "aion.workflow.type"
	keyWorkflowStatus = "aion.workflow.status"
	keySignalDelivery = "aion.signal.delivery"
	keyWorkflowID     = "aion.workflow.id"
	keyRunID          = "aion.run.id"
	keyActivityID     = "aion.activity.id"
	keyEventCount     = "aion.store.event_count"
	keyTaskTrigger    = "aion.workflow.task.trigger"
	keyInstanceID     = "go_workflows.instance.id"
	keyExecutionID    = "go_workflows.execution.id"

	defaultDBSystem = "aion.go_workflows"
	otherError      = "_OTHER"
)

// durationBoundaries are the catalog's boundaries of every duration
// histogram, in seconds.
var durationBoundaries = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
