package pgstore_test

import (
	"context"
	"testing"

	"github.com/aionotel/aionotel/conformance"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/pgstore"
)

// TestConformance runs the keyspace contract suite against a real
// PostgreSQL. Every rule gets its own Store (each New runs the idempotent
// migration again) on one pool and one schema of this test; the rules use
// fresh random IDs, so they do not see each other's rows.
func TestConformance(t *testing.T) {
	pool := testPool(t)
	schema := testSchema(t, pool)
	conformance.TestKeyspace(t, func(t *testing.T) keyspace.Store {
		s, err := pgstore.New(context.Background(), pool, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}
