package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
	"github.com/aionotel/aionotel/keyspace/pgstore"
)

func TestRecordsSurviveReopen(t *testing.T) {
	pool := testPool(t)
	schema := testSchema(t, pool)
	keyspacetest.CheckRecordsSurviveReopen(t, func(t testing.TB) keyspacetest.Store {
		s, err := pgstore.Open(context.Background(), keyspacetest.PostgresDSN(t), pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestAppendRefusalsWriteNothing(t *testing.T) {
	s, _, _ := newStore(t)
	keyspacetest.CheckAppendRefusalsWriteNothing(t, s)
}

// TestActivityIDsOrderAsUnsigned stores activity IDs on both sides of 2^63:
// the bigint column holds their bits (2^63 reads as -2^63 in SQL), and
// ListStreams still lists them in unsigned order.
func TestActivityIDsOrderAsUnsigned(t *testing.T) {
	ctx := context.Background()
	s, pool, schema := newStore(t)
	keyspacetest.CheckListOrderIsUnsigned(t, s)

	var stored []int64
	rows, err := pool.Query(ctx, `SELECT DISTINCT activity_id FROM `+pgx.Identifier{schema, pgstore.DefaultTable}.Sanitize()+` ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	stored, err = pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	if wantStored := []int64{math.MinInt64, -1, 0, 1, math.MaxInt64}; !reflect.DeepEqual(stored, wantStored) {
		t.Fatalf("activity_id column holds %v, want the IDs' bits as bigints %v", stored, wantStored)
	}
}

func TestReadFromLimitsAndBounds(t *testing.T) {
	s, _, _ := newStore(t)
	keyspacetest.CheckReadFromBounds(t, s)
}

func TestReadMethodsRefuseZeroIDs(t *testing.T) {
	s, _, _ := newStore(t)
	keyspacetest.CheckReadMethodsRefuseZeroIDs(t, s)
}

// TestUniqueViolationBecomesAConflict makes AppendEvents meet a concurrent
// writer's uncommitted rows at the same store seqs: its INSERT waits on the
// primary key. When the other transaction commits, the INSERT fails with
// unique_violation, and AppendEvents returns a conflict carrying the head
// re-read after it; when the other transaction rolls back, the INSERT goes
// through.
func TestUniqueViolationBecomesAConflict(t *testing.T) {
	testCases := []struct {
		name        string
		commit      bool
		wantErr     bool
		wantFound   uint64
		wantWorkers []uint64
	}{
		{"other-commits", true, true, 5, []uint64{0, 1, 900, 901, 902}},
		{"other-rolls-back", false, false, 0, []uint64{0, 1, 2, 3}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, pool, schema := newStore(t)
			key := keyspacetest.NewKey(3, 1)
			keyspacetest.MustAppend(t, s, 0, keyspacetest.Messages(key, 0, 2))

			// The other writer: a second Store on its own connection,
			// inside a transaction that stays open until we say so.
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Release()
			tx, err := conn.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `SET LOCAL search_path = `+pgx.Identifier{schema}.Sanitize()); err != nil {
				t.Fatal(err)
			}
			other := keyspacetest.Messages(key, 900, 3)
			if err := insertRaw(ctx, tx, other, 2); err != nil {
				t.Fatal(err)
			}

			type result struct {
				head uint64
				err  error
			}
			done := make(chan result, 1)
			go func() {
				head, err := s.AppendEvents(ctx, 2, keyspacetest.Messages(key, 2, 2))
				done <- result{head, err}
			}()
			waitForLockWait(t, pool, schema)
			if tc.commit {
				err = tx.Commit(ctx)
			} else {
				err = tx.Rollback(ctx)
			}
			if err != nil {
				t.Fatal(err)
			}
			r := <-done
			if tc.wantErr {
				var conflict *eventstore.SequenceConflictError
				if !errors.As(r.err, &conflict) || conflict.Expected != 2 || conflict.Found != tc.wantFound {
					t.Fatalf("AppendEvents racing a committed writer = %d, %v; want a conflict {2, %d}", r.head, r.err, tc.wantFound)
				}
			} else if r.err != nil || r.head != 4 {
				t.Fatalf("AppendEvents after the other writer rolled back = %d, %v; want head 4", r.head, r.err)
			}
			recs, err := s.ReadFrom(ctx, key, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			var workers []uint64
			for _, r := range recs {
				workers = append(workers, r.Event.WorkerSeq)
			}
			if !reflect.DeepEqual(workers, tc.wantWorkers) {
				t.Fatalf("stream holds worker seqs %v, want %v", workers, tc.wantWorkers)
			}
		})
	}
}

// insertRaw inserts events at store seqs from, from+1, ... with the same
// payload encoding, through a second store's statement shape, on tx.
func insertRaw(ctx context.Context, tx pgx.Tx, evs []keyspace.ActivityEvent, from uint64) error {
	// A Store on the transaction's connection is not possible (a Store
	// wants a pool), so the rows are copied from a scratch store's payloads.
	for i, ev := range evs {
		payload, err := pgstore.EncodeForTest(ev)
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO `+pgx.Identifier{pgstore.DefaultTable}.Sanitize()+
			` (workflow_id, run_id, activity_id, attempt, store_seq, payload) VALUES ($1, $2, $3, $4, $5, $6)`,
			ev.WorkflowID.String(), ev.RunID.String(), int64(ev.ActivityID), int64(ev.Attempt), int64(from)+int64(i), payload)
		if err != nil {
			return err
		}
	}
	return nil
}

// waitForLockWait returns once a backend of the test database is waiting
// for a lock in a statement inserting into the test schema: AppendEvents has reached the
// primary key and is blocked behind the other transaction. It polls
// pg_stat_activity (no sleeping: each query is its own round trip), bounded
// by a deadline so a broken store fails instead of hanging.
func waitForLockWait(t *testing.T, pool interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		var n int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()
AND query LIKE '%INSERT INTO%' AND strpos(query, $1) > 0`, schema).Scan(&n)
		if err != nil {
			t.Fatalf("waiting for AppendEvents to block on the other writer's rows: %v", err)
		}
		if n > 0 {
			return
		}
	}
}

func TestMigrationIsIdempotentAndSafeConcurrently(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	schema := testSchema(t, pool)
	key := keyspacetest.NewKey(0, 0)
	// Several processes starting at once on a database without the tables.
	const starters = 6
	stores := make([]*pgstore.Store, starters)
	errs := make([]error, starters)
	var wg sync.WaitGroup
	for i := range starters {
		wg.Go(func() { stores[i], errs[i] = pgstore.New(ctx, pool, pgstore.WithSchema(schema)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("concurrent first migrations: %v", err)
	}
	keyspacetest.MustAppend(t, stores[0], 0, keyspacetest.Messages(key, 0, 3))
	// Migrating again keeps the rows.
	again, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	if head, err := again.Head(ctx, key); err != nil || head != 3 {
		t.Fatalf("after migrating again Head = %d, %v; want 3", head, err)
	}
	var version string
	if err := pool.QueryRow(ctx, `SELECT value FROM `+pgx.Identifier{schema, pgstore.DefaultTable + "_meta"}.Sanitize()+` WHERE key = 'schema_version'`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != fmt.Sprint(pgstore.SchemaVersion) {
		t.Fatalf("schema version row = %q, want %d", version, pgstore.SchemaVersion)
	}
}

func TestNewRefusesANewerSchemaVersion(t *testing.T) {
	ctx := context.Background()
	s, pool, schema := newStore(t)
	key := keyspacetest.NewKey(0, 0)
	keyspacetest.MustAppend(t, s, 0, keyspacetest.Messages(key, 0, 1))
	meta := pgx.Identifier{schema, pgstore.DefaultTable + "_meta"}.Sanitize()
	if _, err := pool.Exec(ctx, `UPDATE `+meta+` SET value = $1 WHERE key = 'schema_version'`, fmt.Sprint(pgstore.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema)); !errors.Is(err, pgstore.ErrSchemaVersion) {
		t.Fatalf("New on a newer schema = %v, want ErrSchemaVersion", err)
	}
	var version string
	if err := pool.QueryRow(ctx, `SELECT value FROM `+meta+` WHERE key = 'schema_version'`).Scan(&version); err != nil || version != fmt.Sprint(pgstore.SchemaVersion+1) {
		t.Fatalf("the refused New changed the version row to %q (%v)", version, err)
	}
}

func TestNewRefusesBadArguments(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	testCases := []struct {
		name string
		new  func() (*pgstore.Store, error)
	}{
		{"nil-pool", func() (*pgstore.Store, error) { return pgstore.New(ctx, nil) }},
		{"empty-table", func() (*pgstore.Store, error) { return pgstore.New(ctx, pool, pgstore.WithTable("")) }},
		{"long-table", func() (*pgstore.Store, error) {
			return pgstore.New(ctx, pool, pgstore.WithTable(strings.Repeat("t", 59)))
		}},
		{"nul-in-schema", func() (*pgstore.Store, error) { return pgstore.New(ctx, pool, pgstore.WithSchema("a\x00b")) }},
		{"long-schema", func() (*pgstore.Store, error) {
			return pgstore.New(ctx, pool, pgstore.WithSchema(strings.Repeat("s", 64)))
		}},
		{"bad-dsn", func() (*pgstore.Store, error) { return pgstore.Open(ctx, "postgres://%zz") }},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.new()
			if !errors.Is(err, eventstore.ErrInvalidArgument) || s != nil {
				t.Fatalf("= %v, %v; want nil and an error matching ErrInvalidArgument", s, err)
			}
		})
	}
}

// TestOddNamesAreQuoted uses a schema and table whose names would be SQL if
// pasted unquoted.
func TestOddNamesAreQuoted(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	schema := testSchema(t, pool) + `"; DROP TABLE x; --`
	t.Cleanup(func() { _, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE") })
	s, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema), pgstore.WithTable(`Mixed Case "table"`))
	if err != nil {
		t.Fatal(err)
	}
	key := keyspacetest.NewKey(1, 1)
	keyspacetest.MustAppend(t, s, 0, keyspacetest.Messages(key, 0, 2))
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, `Mixed Case "table"`}.Sanitize()).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows in the quoted table = %d, %v; want 2", n, err)
	}
}

func TestCloseIsIdempotentAndEndsEveryMethod(t *testing.T) {
	s, pool, _ := newStore(t)
	keyspacetest.CheckCloseEndsEveryMethod(t, s, pgstore.ErrClosed)
	// A Store from New borrows its pool: closing the Store leaves it open.
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatalf("the borrowed pool after Close: %v", err)
	}
}

// Regression: every method of a nil or zero Store panicked on the missing
// pool, where keyspace.Memory, boltstore and the event store's pgstore fail
// with ErrInvalidArgument.
func TestNilAndZeroStoreFailWithoutPanic(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    *pgstore.Store
	}{{"nil", nil}, {"zero", &pgstore.Store{}}} {
		t.Run(tc.name, func(t *testing.T) { keyspacetest.CheckUnmadeStoreFailsWithoutPanic(t, tc.s) })
	}
}

func TestCorruptRecordsFailReadsClearly(t *testing.T) {
	testCases := []struct {
		name   string
		damage string
		want   string
	}{
		{"future-version", `UPDATE %s SET payload = '\x09'::bytea || substring(payload from 2) WHERE store_seq = 1`, "format version 9 is not supported"},
		{"gap", `DELETE FROM %s WHERE store_seq = 1`, "found record 2 where record 1 belongs"},
		{"truncated", `UPDATE %s SET payload = substring(payload from 1 for 4) WHERE store_seq = 1`, "record 1"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			s, pool, schema := newStore(t)
			key := keyspacetest.NewKey(0, 0)
			keyspacetest.MustAppend(t, s, 0, keyspacetest.Messages(key, 0, 3))
			if _, err := pool.Exec(ctx, fmt.Sprintf(tc.damage, pgx.Identifier{schema, pgstore.DefaultTable}.Sanitize())); err != nil {
				t.Fatal(err)
			}
			_, err := s.ReadFrom(ctx, key, 0, 0)
			if !errors.Is(err, pgstore.ErrCorruptRecord) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), key.String()) {
				t.Fatalf("ReadFrom of a damaged stream = %v, want ErrCorruptRecord naming the stream and saying %q", err, tc.want)
			}
		})
	}
}

// TestStoreConcurrentSafe runs appends to many streams, reads and listings at
// once (run it under -race), then checks every stream holds exactly what its
// writer appended.
func TestStoreConcurrentSafe(t *testing.T) {
	s, _, _ := newStore(t)
	keyspacetest.CheckConcurrentSafe(t, s)
}
