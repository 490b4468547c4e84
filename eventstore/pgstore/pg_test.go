package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/eventstore/pgstore"
)

// dsnEnv names the variable holding the test database's DSN.
const dsnEnv = "AIONOTEL_POSTGRES_DSN"

// testDSN returns the test database's DSN. Without one the test is skipped,
// except under CI, where it fails: CI must run these tests.
func testDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(dsnEnv)
	if dsn == "" {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" {
			t.Fatalf("CI=%s but %s is not set; run: source .ci/postgres.sh", ci, dsnEnv)
		}
		t.Skip("set " + dsnEnv + " to a PostgreSQL database, e.g. run: source .ci/postgres.sh")
	}
	return dsn
}

// testPool connects a pool to the test database, closed when the test ends.
func testPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(context.Background()); err != nil {
		pool.Close()
		t.Fatalf("connecting to %s: %v", dsnEnv, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// testSchema returns a fresh schema name and drops the schema, with
// everything in it, when the test ends. Tests in different schemas never see
// each other's rows.
func testSchema(t testing.TB, pool *pgxpool.Pool) string {
	t.Helper()
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "aionotel_es_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
		if err != nil {
			t.Errorf("dropping test schema %s: %v", name, err)
		}
	})
	return name
}

// newStore returns a Store in a fresh schema of the test database, with
// its pool and schema.
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

// table returns the quoted name of one of the store's tables in schema.
func table(schema, name string) string { return pgx.Identifier{schema, name}.Sanitize() }
