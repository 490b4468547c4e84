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
// PostgreSQL: every rule, Outbox and ShardOwner rules required (losing
// either capability fails), and the election rules between two nodes. Every
// rule gets a fresh schema (the outbox rules claim every pending row, the
// listings see every workflow) on one pool.
//
// A single store's lease is an hour: a rule acquires shard 0 and goes on
// writing to its workflows without renewing, as it would on
// eventstore.Memory, whose holders never lapse. The two nodes share a fake
// lease clock; Kill lets A's leases run out while B keeps renewing.
func TestConformance(t *testing.T) {
	pool := testPool(t)
	open := func(t *testing.T, schema string, opts ...pgstore.Option) *pgstore.Store {
		s, err := pgstore.New(context.Background(), pool, append([]pgstore.Option{pgstore.WithSchema(schema)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	conformance.TestEventStore(t, func(t *testing.T) eventstore.Store {
		return open(t, testSchema(t, pool), pgstore.WithLeaseDuration(time.Hour))
	},
		conformance.WithRequiredCapabilities(conformance.CapOutbox|conformance.CapShardOwner),
		// Every append commits (a WAL flush): the rules of thousands of
		// appends take most of the default 30 s on a loaded machine.
		conformance.WithRuleTimeout(2*time.Minute),
		conformance.WithNodes(func(t *testing.T) conformance.Nodes {
			schema, clock := testSchema(t, pool), newFakeClock()
			node := func(name string) *pgstore.Store {
				return open(t, schema, pgstore.WithNode(name), pgstore.WithLeaseDuration(testLease), pgstore.WithLeaseClock(clock.Now))
			}
			a, b := node("a"), node("b")
			return conformance.Nodes{A: a, B: b, ShardCount: b.ShardCount(), Kill: func(ctx context.Context) error {
				// A stops renewing; B renews half-way, so that only A's
				// leases run out.
				clock.Advance(testLease / 2)
				if _, err := b.RenewOwnedShards(ctx); err != nil {
					return err
				}
				clock.Advance(testLease/2 + time.Nanosecond)
				return nil
			}}
		}))
}
