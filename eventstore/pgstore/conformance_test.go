package pgstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aionotel/aionotel/conformance"
	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
)

// TestConformance runs the event store contract suite against a real
// PostgreSQL, Outbox and ShardOwner rules included (required: losing either
// capability fails). Every rule gets a fresh schema (the outbox rules claim
// every pending row, the listings see every workflow) on one pool.
//
// The lease is an hour: a rule acquires shard 0 and goes on writing to its
// workflows without renewing, as it would on eventstore.Memory, whose
// leases never expire.
func TestConformance(t *testing.T) {
	pool := testPool(t)
	conformance.TestEventStore(t, func(t *testing.T) eventstore.Store {
		s, err := pgstore.New(context.Background(), pool, pgstore.WithSchema(testSchema(t, pool)), pgstore.WithLeaseDuration(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}, conformance.WithRequiredCapabilities(conformance.CapOutbox|conformance.CapShardOwner))
}
