package otelworkflows

import (
	"crypto/sha1"
	"encoding/binary"

	"github.com/cschleiden/go-workflows/core"
	"github.com/google/uuid"

	"github.com/aionotel/aionotel/eventstore"
)

// keySpace is the name space of the UUIDs (RFC 9562, version 5) the
// decorator derives from go-workflows' IDs. Fixed forever: every process,
// and every version of this module, must derive the same UUID from the
// same execution, or trace IDs and pairing keys would disagree.
var keySpace = uuid.MustParse("5b0e6f1c-8f3a-5d2e-9c41-0a7e2f6b9d13")

// executionKey is the pairing workflow (and run) ID of one execution of a
// go-workflows instance: a version-5 UUID of the length-prefixed instance
// ID and the execution ID, so that no two (instance, execution) pairs
// share a key unless SHA-1 collides.
func executionKey(instanceID, executionID string) eventstore.WorkflowID {
	var buf [128]byte
	b := buf[:0]
	b = binary.AppendUvarint(b, uint64(len(instanceID)))
	b = append(b, instanceID...)
	b = append(b, executionID...)
	h := sha1.New()
	h.Write(keySpace[:])
	h.Write(b)
	var sum [sha1.Size]byte
	h.Sum(sum[:0])
	var u uuid.UUID
	copy(u[:], sum[:16])
	u[6] = (u[6] & 0x0f) | 0x50 // version 5
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 9562 variant
	return eventstore.WorkflowID(u)
}

// keyOf is executionKey of a go-workflows instance; a nil instance has the
// zero key.
func keyOf(wi *core.WorkflowInstance) eventstore.WorkflowID {
	if wi == nil {
		return eventstore.WorkflowID{}
	}
	return executionKey(wi.InstanceID, wi.ExecutionID)
}
