package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
	"github.com/aionotel/aionotel/keyspace/pgstore"
)

// testPool connects a pool to the test database, closed when the test ends.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), keyspacetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(context.Background()); err != nil {
		pool.Close()
		t.Fatalf("connecting to %s: %v", keyspacetest.PostgresDSNEnv, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// testSchema returns a fresh schema name for the test and drops the schema,
// with everything in it, when the test ends. Tests in different schemas never
// see each other's rows, so they run in parallel safely.
func testSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "aionotel_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		if err != nil {
			t.Errorf("dropping test schema %s: %v", name, err)
		}
	})
	return name
}

// newStore returns a Store in a fresh schema of the test database.
func newStore(t testing.TB, opts ...pgstore.Option) (*pgstore.Store, *pgxpool.Pool, string) {
	t.Helper()
	pool := testPool(t)
	schema := testSchema(t, pool)
	s, err := pgstore.New(context.Background(), pool, append([]pgstore.Option{pgstore.WithSchema(schema)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, pool, schema
}
