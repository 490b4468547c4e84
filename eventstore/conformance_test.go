package eventstore_test

import (
	"context"
	"testing"

	"github.com/aionotel/aionotel/conformance"
	"github.com/aionotel/aionotel/eventstore"
)

// TestMemoryConformance runs the reusable event store contract suite on the
// reference store, Outbox and ShardOwner rules included, and the election
// rules on two nodes of one cluster: every rule is a subtest on a fresh
// store (or a fresh pair of nodes).
func TestMemoryConformance(t *testing.T) {
	// Memory is an Outbox and a ShardOwner: losing either must fail, not skip.
	conformance.TestEventStore(t, func(*testing.T) eventstore.Store { return eventstore.NewMemory() },
		conformance.WithRequiredCapabilities(conformance.CapOutbox|conformance.CapShardOwner),
		conformance.WithNodes(func(*testing.T) conformance.Nodes {
			c := eventstore.NewMemoryCluster(eventstore.WithShardCount(8))
			return conformance.Nodes{
				A:          c.Node("a"),
				B:          c.Node("b"),
				ShardCount: 8,
				Kill:       func(context.Context) error { c.Kill("a"); return nil },
			}
		}))
}
