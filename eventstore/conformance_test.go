package eventstore_test

import (
	"testing"

	"github.com/aionotel/aionotel/conformance"
	"github.com/aionotel/aionotel/eventstore"
)

// TestMemoryConformance runs the reusable event store contract suite on the
// reference store, Outbox and ShardOwner rules included: every rule is a
// subtest on a fresh Memory.
func TestMemoryConformance(t *testing.T) {
	// Memory is an Outbox and a ShardOwner: losing either must fail, not skip.
	conformance.TestEventStore(t, func(*testing.T) eventstore.Store { return eventstore.NewMemory() },
		conformance.WithRequiredCapabilities(conformance.CapOutbox|conformance.CapShardOwner))
}
