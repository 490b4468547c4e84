package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/keyspace/internal/demotest"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
	"github.com/aionotel/aionotel/keyspace/pgstore"
)

// freshSchema creates a schema for the test, dropped with everything in it
// when the test ends, and returns dsn with its search path set to it: the
// demo's unqualified table lands there, apart from every other test's.
func freshSchema(t *testing.T, dsn string) (string, *pgxpool.Pool) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "aionotel_demo_" + hex.EncodeToString(b[:])
	if _, err := pool.Exec(context.Background(), "CREATE SCHEMA "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("connecting to %s: %v", keyspacetest.PostgresDSNEnv, err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping test schema %s: %v", name, err)
		}
	})
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", name)
		u.RawQuery = q.Encode()
		return u.String(), pool
	}
	return dsn + " search_path=" + name, pool
}

// TestDemoOnPostgres runs the demo in-process for a second on the test
// database, then reads the transcripts back through a new Store and checks
// that the table holds every event the summary reports stored.
func TestDemoOnPostgres(t *testing.T) {
	dsn, pool := freshSchema(t, keyspacetest.PostgresDSN(t))
	run := demotest.RunClean(t, backend, dsn)
	// The demo closed its Store: every call on it now fails.
	if _, err := run.Store.Head(t.Context(), run.Streams[0]); !errors.Is(err, pgstore.ErrClosed) || run.Closer == nil {
		t.Errorf("after the run, the demo's Store answers Head with %v, want ErrClosed", err)
	}

	s, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run.CheckStored(t, s)
	// And nothing else: the fresh schema's table holds exactly these.
	var rows int64
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{schemaOf(t, dsn), pgstore.DefaultTable}.Sanitize()).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != run.Stored {
		t.Errorf("the table has %d rows, the summary reports %d stored", rows, run.Stored)
	}
}

// schemaOf returns the search path freshSchema put in dsn.
func schemaOf(t *testing.T, dsn string) string {
	t.Helper()
	m := regexp.MustCompile(`search_path=(aionotel_demo_[0-9a-f]+)`).FindStringSubmatch(dsn)
	if m == nil {
		t.Fatalf("no search_path in the test DSN")
	}
	return m[1]
}

// TestDemoPostgresOpenFails: a DSN pgx cannot parse fails the run with exit
// status 1 before anything starts, without quoting the password. It needs no
// database.
func TestDemoPostgresOpenFails(t *testing.T) {
	res := demotest.CheckOpenFails(t, backend, "postgres://u:secret@host:notaport/db", "")
	if strings.Contains(res.Stderr, "secret") {
		t.Errorf("stderr quotes the password: %q", res.Stderr)
	}
}

// TestDemoPostgresUsage: this build lists postgres:DSN, and still sends bolt
// to its own demo.
func TestDemoPostgresUsage(t *testing.T) {
	demotest.CheckUsageError(t, backend, []string{"-keyspace", "bolt:/tmp/demo.db"},
		"cd keyspace/boltstore && go run ./cmd/demo -keyspace bolt:/tmp/demo.db",
		"where agent transcripts are kept: memory, postgres:DSN (bolt:PATH needs the demo of keyspace/boltstore)")
}
