// Package catalog is the single source of the telemetry names aionotel emits:
// instrument names, units, attribute keys and values, and the histogram
// boundaries. The public packages (otelstore, pairing) use these constants;
// dashboards and alert rules rely on the Prometheus names derived from them.
//
// Keys and values the semantic conventions define come from the semconv
// package of the OTel release in go.mod (and [SchemaURL] with them); names
// semconv does not define keep the aion. prefix.
package catalog

import (
	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// SchemaURL is the schema URL of every meter and tracer the library creates:
// the semantic conventions version the keys below come from.
const SchemaURL = semconv.SchemaURL

// Instrument names.
const (
	StoreOperationDuration    = "aion.store.operation.duration"
	WorkflowsStarted          = "aion.workflows.started"
	WorkflowsCompleted        = "aion.workflows.completed"
	WorkflowsReopened         = "aion.workflows.reopened"
	SignalsDelivered          = "aion.signals.delivered"
	SchedulesFired            = "aion.schedules.fired"
	ActivitiesDispatched      = "aion.activities.dispatched"
	InflightActivities        = "aion.inflight_activities"
	ActivitiesCompleted       = "aion.activities.completed"
	ActivityDuration          = "aion.activity.duration"
	ActivitiesRetried         = "aion.activities.retried"
	ActivityPairingEvicted    = "aion.activity.pairing.evicted"
	KeyspaceOperationDuration = "aion.keyspace.operation.duration"
	KeyspaceAppendBatchSize   = "aion.keyspace.append.batch_size"
	// PairingForgotten counts facts the pairing tracker remembered for a
	// partner that had not arrived (a terminal before its dispatch, a
	// close before its run's start, a settlement waiting for history
	// positions not observed) and that its memory bound dropped.
	PairingForgotten = "aion.pairing.forgotten"
	// PairingResumed counts the open workflows a resume read, with
	// error.type for those it could not.
	PairingResumed = "aion.pairing.resumed"
	// PairingReleased counts the activities in flight and open runs a
	// tracker gave up when their shards moved to another node.
	PairingReleased = "aion.pairing.released"
)

// Units (UCUM; the annotations in braces are dropped from Prometheus names).
const (
	UnitSeconds  = "s"
	UnitWorkflow = "{workflow}"
	UnitActivity = "{activity}"
	UnitSignal   = "{signal}"
	UnitSchedule = "{schedule}"
	UnitEvent    = "{event}"
	UnitFact     = "{fact}"
	UnitEntry    = "{entry}"
)

// Attribute keys the semantic conventions define.
const (
	OperationName = semconv.DBOperationNameKey
	ErrorType     = semconv.ErrorTypeKey
	DBSystemName  = semconv.DBSystemNameKey
	// Set by the program through WithAttributes, never by the library: it
	// cannot know the database or collection behind a store.
	DBNamespace      = semconv.DBNamespaceKey
	DBCollectionName = semconv.DBCollectionNameKey
	// The exception event of a failed call's span.
	ExceptionType    = semconv.ExceptionTypeKey
	ExceptionMessage = semconv.ExceptionMessageKey
)

// Attribute keys of aionotel's own.
const (
	Namespace       attribute.Key = "aion.namespace"
	WorkflowType    attribute.Key = "aion.workflow.type"
	WorkflowStatus  attribute.Key = "aion.workflow.status"
	SignalDelivery  attribute.Key = "aion.signal.delivery"
	ActivityType    attribute.Key = "aion.activity.type"
	ActivityOutcome attribute.Key = "aion.activity.outcome"
	WorkflowID      attribute.Key = "aion.workflow.id"
	RunID           attribute.Key = "aion.run.id"
	ExpectedSeq     attribute.Key = "aion.store.expected_seq"
	FoundSeq        attribute.Key = "aion.store.found_seq"
	EventCount      attribute.Key = "aion.store.event_count"
	OutboxRowCount  attribute.Key = "aion.store.outbox_row_count"
	ActivityID      attribute.Key = "aion.activity.id"
	Attempt         attribute.Key = "aion.activity.attempt"
)

// ExceptionEvent is the name of the span event of a failed call.
const ExceptionEvent = semconv.ExceptionEventName

// Attribute values with a fixed meaning.
const (
	DefaultNamespace = "default"
	OtherType        = "_other"   // a type past the cardinality limit
	UnknownType      = "_unknown" // an empty type
	DeliveryResident = "resident"
	// The db.system.name values when the program does not say which
	// database is behind a decorator: the semantic conventions list only
	// products (and other_sql, for SQL only), so an unknown store is named
	// by the interface it is reached through.
	DefaultStoreSystem    = "aion.eventstore"
	DefaultKeyspaceSystem = "aion.keyspace"
)

// OtherError is the error.type of an error no classifier recognises: the
// semantic conventions' fallback value.
var OtherError = semconv.ErrorTypeOther.Value.AsString()

// DurationBoundaries are the explicit bucket boundaries, in seconds, of every
// duration histogram: in-memory store calls take microseconds, so the buckets
// start at 100µs rather than the semantic conventions' 1ms.
var DurationBoundaries = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

// BatchSizeBoundaries are the bucket boundaries of the keyspace batch-size
// histogram, in events.
var BatchSizeBoundaries = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024}
