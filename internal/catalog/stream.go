package catalog

import (
	"go.opentelemetry.io/otel/attribute"

	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/keyspace"
)

// StreamAttrs are a transcript stream's coordinates as attributes (spans
// and log records only, never metrics): the keyspace decorator's call
// spans and the GenAI telemetry's invoke_agent spans carry them.
func StreamAttrs(key keyspace.StreamKey) []attribute.KeyValue {
	return []attribute.KeyValue{
		WorkflowID.String(key.WorkflowID.String()),
		RunID.String(key.RunID.String()),
		ActivityID.Int64(attrvalue.Int64(uint64(key.ActivityID))),
		Attempt.Int64(int64(key.Attempt)),
	}
}
