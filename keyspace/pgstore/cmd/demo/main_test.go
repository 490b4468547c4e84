package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/examples/demo/server"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/pgstore"
)

// dsnEnv names the variable holding the test database's DSN; .ci/postgres.sh
// starts a local PostgreSQL and exports it.
const dsnEnv = "AIONOTEL_POSTGRES_DSN"

// testDSN returns the test database's DSN. Without one the test is skipped,
// unless CI is set (to anything but "" or "false"): CI must not pass by
// skipping.
func testDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv(dsnEnv)
	if dsn == "" {
		if ci := os.Getenv("CI"); ci != "" && ci != "false" {
			t.Fatalf("CI=%s but %s is not set; run: source .ci/postgres.sh", ci, dsnEnv)
		}
		t.Skip("set " + dsnEnv + ", e.g. run: source .ci/postgres.sh")
	}
	return dsn
}

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
		t.Fatalf("connecting to %s: %v", dsnEnv, err)
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

// recorder wraps the store the backend opened and remembers the streams
// appended to, so that the test can read them back afterwards.
type recorder struct {
	keyspace.Store
	mu      sync.Mutex
	streams map[keyspace.StreamKey]bool
}

func (r *recorder) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	head, err := r.Store.AppendEvents(ctx, expectedSeq, events)
	if err == nil && len(events) > 0 {
		r.mu.Lock()
		r.streams[keyspace.KeyOf(events[0])] = true
		r.mu.Unlock()
	}
	return head, err
}

// TestDemoOnPostgres runs the demo in-process for a second on the test
// database, then reads the transcripts back through a new Store and checks
// that the table holds every event the summary reports stored.
func TestDemoOnPostgres(t *testing.T) {
	dsn, pool := freshSchema(t, testDSN(t))
	rec := &recorder{streams: map[keyspace.StreamKey]bool{}}
	var opened []string
	var closer io.Closer
	wrapped := server.Backend{Scheme: backend.Scheme, Open: func(ctx context.Context, arg string) (keyspace.Store, io.Closer, error) {
		opened = append(opened, arg)
		s, c, err := backend.Open(ctx, arg)
		if err != nil {
			return s, c, err
		}
		rec.Store, closer = s, c
		return rec, c, nil
	}}
	var stdout, stderr bytes.Buffer
	args := []string{"-keyspace", "postgres:" + dsn, "-listen", "127.0.0.1:0", "-duration", "1s", "-rate", "60", "-drain", "200ms"}
	if code := server.Command(t.Context(), args, &stdout, &stderr, wrapped); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	if len(opened) != 1 || opened[0] != dsn {
		t.Errorf("Open called %d times, want once with the DSN", len(opened))
	}
	out := stdout.String()
	if !strings.Contains(out, "keeping agent transcripts in the postgres keyspace") {
		t.Errorf("stdout lacks the keyspace banner:\n%s", out)
	}
	if strings.Contains(out, "  errors ") {
		t.Errorf("the run counted errors:\n%s", out)
	}
	reported := eventsStored(t, out)
	if reported == 0 {
		t.Fatalf("no transcript event stored in 1s:\n%s", out)
	}
	if len(rec.streams) == 0 {
		t.Fatal("no stream was appended to")
	}
	// The demo closed its Store: every call on it now fails.
	for key := range rec.streams {
		if _, err := rec.Store.Head(t.Context(), key); !errors.Is(err, pgstore.ErrClosed) || closer == nil {
			t.Errorf("after the run, the demo's Store answers Head with %v, want ErrClosed", err)
		}
		break
	}

	s, err := pgstore.Open(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var stored int64
	for key := range rec.streams {
		recs, err := s.ReadFrom(t.Context(), key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			if r.StoreSeq != uint64(i) || keyspace.KeyOf(r.Event) != key {
				t.Errorf("stream %s: record %d has seq %d, key %s", key, i, r.StoreSeq, keyspace.KeyOf(r.Event))
			}
		}
		stored += int64(len(recs))
	}
	if stored != reported {
		t.Errorf("the table holds %d records in the streams appended to, the summary reports %d stored", stored, reported)
	}
	// And nothing else: the fresh schema's table holds exactly these.
	var rows int64
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM "+pgx.Identifier{schemaOf(t, dsn), pgstore.DefaultTable}.Sanitize()).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != reported {
		t.Errorf("the table has %d rows, the summary reports %d stored", rows, reported)
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

// eventsStored returns the summary's count of transcript events stored.
func eventsStored(t *testing.T, out string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  events stored +(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary in:\n%s", out)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestDemoPostgresOpenFails: a DSN pgx cannot parse fails the run with exit
// status 1 before anything starts, without quoting the password. It needs no
// database.
func TestDemoPostgresOpenFails(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := server.Command(t.Context(), []string{"-keyspace", "postgres:postgres://u:secret@host:notaport/db", "-listen", "127.0.0.1:0", "-duration", "1s"}, &stdout, &stderr, backend)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if want := "demo: -keyspace postgres:...: cannot open the keyspace: "; !strings.HasPrefix(stderr.String(), want) {
		t.Errorf("stderr = %q, want it to begin with %q", stderr.String(), want)
	}
	if strings.Contains(stderr.String(), "secret") {
		t.Errorf("stderr quotes the password: %q", stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("the run started: %s", stdout.String())
	}
}

// TestDemoPostgresUsage: this build lists postgres:DSN, and still sends bolt
// to its own demo.
func TestDemoPostgresUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := server.Command(t.Context(), []string{"-keyspace", "bolt:/tmp/demo.db"}, &stdout, &stderr, backend); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	for _, want := range []string{
		"cd keyspace/boltstore && go run ./cmd/demo -keyspace bolt:/tmp/demo.db",
		"where agent transcripts are kept: memory, postgres:DSN (bolt:PATH needs the demo of keyspace/boltstore)",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
