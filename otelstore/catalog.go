package otelstore

import "github.com/aionotel/aionotel/internal/catalog"

// Operation names a timed store call: the snake_case name of the method. It is
// the value of the db.operation.name attribute and the span name ("append"; see
// [New] for the span name with a target). The three infallible ShardOwner methods
// (SetOwnedShards, ExtendOwnedShards, IsCurrentOwner) are forwarded without
// telemetry and have no Operation.
type Operation string

// Event store operations, one per timed method of [eventstore.Store],
// [eventstore.Outbox], [eventstore.ShardOwner] and
// [eventstore.HistoriesReader].
const (
	OpAppend                            Operation = "append"
	OpReadHistory                       Operation = "read_history"
	OpReadHistoryFrom                   Operation = "read_history_from"
	OpReadRunChain                      Operation = "read_run_chain"
	OpListWorkflowIDs                   Operation = "list_workflow_ids"
	OpListActive                        Operation = "list_active"
	OpListPaused                        Operation = "list_paused"
	OpStreamHeads                       Operation = "stream_heads"
	OpQuery                             Operation = "query"
	OpScheduleTimer                     Operation = "schedule_timer"
	OpExpiredTimers                     Operation = "expired_timers"
	OpRetireTimer                       Operation = "retire_timer"
	OpPutPackage                        Operation = "put_package"
	OpPutPackageWithRoutes              Operation = "put_package_with_routes"
	OpListPackages                      Operation = "list_packages"
	OpDeletePackage                     Operation = "delete_package"
	OpPutPackageRoute                   Operation = "put_package_route"
	OpListPackageRoutes                 Operation = "list_package_routes"
	OpAppendWithOutbox                  Operation = "append_with_outbox"
	OpRearmOutboxPending                Operation = "rearm_outbox_pending"
	OpClaimOutboxRows                   Operation = "claim_outbox_rows"
	OpCountClaimedOutboxRows            Operation = "count_claimed_outbox_rows"
	OpSettleOutboxRowCancelled          Operation = "settle_outbox_row_cancelled"
	OpSettleWorkflowOutboxRowsCancelled Operation = "settle_workflow_outbox_rows_cancelled"
	OpAcquireOwnedShards                Operation = "acquire_owned_shards"
	OpAcquireOwnedShard                 Operation = "acquire_owned_shard"
	OpPublishShardOwner                 Operation = "publish_shard_owner"
	OpReadHistories                     Operation = "read_histories"
)

// Keyspace operations, one per method of [keyspace.Store]; no name is shared
// with an event store operation, so a span name alone says which it was.
const (
	OpKeyspaceAppendEvents Operation = "append_events"
	OpKeyspaceHead         Operation = "head"
	OpKeyspaceReadFrom     Operation = "read_from"
	OpKeyspaceListStreams  Operation = "list_streams"
)

// opID indexes the per-operation state precomputed by New.
type opID uint8

const (
	opAppend opID = iota
	opReadHistory
	opReadHistoryFrom
	opReadRunChain
	opListWorkflowIDs
	opListActive
	opListPaused
	opStreamHeads
	opQuery
	opScheduleTimer
	opExpiredTimers
	opRetireTimer
	opPutPackage
	opPutPackageWithRoutes
	opListPackages
	opDeletePackage
	opPutPackageRoute
	opListPackageRoutes
	opAppendWithOutbox
	opRearmOutboxPending
	opClaimOutboxRows
	opCountClaimedOutboxRows
	opSettleOutboxRowCancelled
	opSettleWorkflowOutboxRowsCancelled
	opAcquireOwnedShards
	opAcquireOwnedShard
	opPublishShardOwner
	opReadHistories
	opKeyspaceAppendEvents
	opKeyspaceHead
	opKeyspaceReadFrom
	opKeyspaceListStreams
	numOps
)

// operations maps each opID to its public name.
var operations = [numOps]Operation{
	opAppend:                            OpAppend,
	opReadHistory:                       OpReadHistory,
	opReadHistoryFrom:                   OpReadHistoryFrom,
	opReadRunChain:                      OpReadRunChain,
	opListWorkflowIDs:                   OpListWorkflowIDs,
	opListActive:                        OpListActive,
	opListPaused:                        OpListPaused,
	opStreamHeads:                       OpStreamHeads,
	opQuery:                             OpQuery,
	opScheduleTimer:                     OpScheduleTimer,
	opExpiredTimers:                     OpExpiredTimers,
	opRetireTimer:                       OpRetireTimer,
	opPutPackage:                        OpPutPackage,
	opPutPackageWithRoutes:              OpPutPackageWithRoutes,
	opListPackages:                      OpListPackages,
	opDeletePackage:                     OpDeletePackage,
	opPutPackageRoute:                   OpPutPackageRoute,
	opListPackageRoutes:                 OpListPackageRoutes,
	opAppendWithOutbox:                  OpAppendWithOutbox,
	opRearmOutboxPending:                OpRearmOutboxPending,
	opClaimOutboxRows:                   OpClaimOutboxRows,
	opCountClaimedOutboxRows:            OpCountClaimedOutboxRows,
	opSettleOutboxRowCancelled:          OpSettleOutboxRowCancelled,
	opSettleWorkflowOutboxRowsCancelled: OpSettleWorkflowOutboxRowsCancelled,
	opAcquireOwnedShards:                OpAcquireOwnedShards,
	opAcquireOwnedShard:                 OpAcquireOwnedShard,
	opPublishShardOwner:                 OpPublishShardOwner,
	opReadHistories:                     OpReadHistories,
	opKeyspaceAppendEvents:              OpKeyspaceAppendEvents,
	opKeyspaceHead:                      OpKeyspaceHead,
	opKeyspaceReadFrom:                  OpKeyspaceReadFrom,
	opKeyspaceListStreams:               OpKeyspaceListStreams,
}

// firstKeyspaceOp splits the table: ops before it are event store calls.
const firstKeyspaceOp = opKeyspaceAppendEvents

// Attribute keys this package puts on spans and metrics. Their values on
// metrics are bounded (namespace, operation, error type, workflow and activity
// types past the cardinality guard); IDs and sequence numbers go on spans only.
// db.operation.name, db.system.name and error.type are the semantic
// conventions' keys (semconv.DBOperationNameKey, ...); the others are
// aionotel's own and carry the aion. prefix.
const (
	AttrNamespace       = catalog.Namespace
	AttrOperationName   = catalog.OperationName
	AttrDBSystemName    = catalog.DBSystemName
	AttrErrorType       = catalog.ErrorType
	AttrWorkflowType    = catalog.WorkflowType
	AttrWorkflowStatus  = catalog.WorkflowStatus
	AttrSignalDelivery  = catalog.SignalDelivery
	AttrActivityType    = catalog.ActivityType
	AttrActivityOutcome = catalog.ActivityOutcome
	AttrWorkflowID      = catalog.WorkflowID
	AttrRunID           = catalog.RunID
	AttrActivityID      = catalog.ActivityID
	AttrAttempt         = catalog.Attempt
	AttrExpectedSeq     = catalog.ExpectedSeq
	AttrFoundSeq        = catalog.FoundSeq
	AttrEventCount      = catalog.EventCount
	AttrOutboxRowCount  = catalog.OutboxRowCount
	// On the timeline's activity spans: the retries before the terminal.
	AttrRetryCount = catalog.RetryCount
	// On each link of a timeline span: what the linked span is, one of
	// "scheduled", "settled" (activity spans), "started", "closed",
	// "next_run" (run spans).
	AttrTimelineLink = catalog.TimelineLink
)
