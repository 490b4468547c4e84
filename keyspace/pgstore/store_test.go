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
	"github.com/aionotel/aionotel/keyspace/pgstore"
)

func newKey(activity eventstore.ActivityID, attempt uint32) keyspace.StreamKey {
	return keyspace.NewStreamKey(eventstore.NewWorkflowID(), eventstore.NewRunID(), activity, attempt)
}

func event(key keyspace.StreamKey, workerSeq uint64, content keyspace.Content) keyspace.ActivityEvent {
	return keyspace.ActivityEvent{
		WorkflowID: key.WorkflowID, RunID: key.RunID, ActivityID: key.ActivityID, Attempt: key.Attempt,
		AgentID: "agent", AgentRole: "assistant",
		EmittedAt: time.Date(2025, 1, 2, 3, 4, 5, int(workerSeq), time.UTC),
		WorkerSeq: workerSeq,
		Content:   content,
	}
}

func messages(key keyspace.StreamKey, first uint64, n int) []keyspace.ActivityEvent {
	out := make([]keyspace.ActivityEvent, n)
	for i := range out {
		seq := first + uint64(i)
		out[i] = event(key, seq, keyspace.Message{Role: "assistant", Text: fmt.Sprintf("message %d", seq)})
	}
	return out
}

func persisted(ev keyspace.ActivityEvent, seq uint64) keyspace.Record {
	ev.StoreSeq, ev.Persisted = seq, true
	return keyspace.Record{StoreSeq: seq, Event: ev}
}

func mustAppend(t testing.TB, s keyspace.Store, expected uint64, evs []keyspace.ActivityEvent) {
	t.Helper()
	head, err := s.AppendEvents(context.Background(), expected, evs)
	if err != nil || head != expected+uint64(len(evs)) {
		t.Fatalf("AppendEvents(%d, %d events) = %d, %v", expected, len(evs), head, err)
	}
}

func TestRecordsSurviveReopen(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	schema := testSchema(t, pool)
	s, err := pgstore.Open(ctx, testDSN(t), pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	key := newKey(2, 1)
	sibling := keyspace.NewStreamKey(key.WorkflowID, key.RunID, 0, 3)
	evs := []keyspace.ActivityEvent{
		event(key, 1, keyspace.Message{Role: "user", Text: "hi \x00 \xff"}),
		event(key, 2, keyspace.ToolCall{CallID: "c", Name: "grep", Arguments: "-r x"}),
		event(key, 3, keyspace.ToolResult{CallID: "c", Output: "none", IsError: true}),
		event(key, 4, keyspace.Status{State: "done", Detail: "ok"}),
		event(key, 5, keyspace.Usage{InputTokens: 10, OutputTokens: math.MaxUint64}),
		event(key, 6, &keyspace.Message{Role: "pointer", Text: "read back as a value"}),
		event(key, 7, nil),
	}
	evs[3].EmittedAt = time.Date(2025, 6, 1, 12, 0, 0, 7, time.FixedZone("XST", -5*3600))
	mustAppend(t, s, 0, evs[:2])
	mustAppend(t, s, 2, evs[2:])
	mustAppend(t, s, 0, messages(sibling, 0, 1))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s2, err := pgstore.Open(ctx, testDSN(t), pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	recs, err := s2.ReadFrom(ctx, key, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(evs) {
		t.Fatalf("read %d records, want %d", len(recs), len(evs))
	}
	for i, ev := range evs {
		want := persisted(ev, uint64(i))
		if m, ok := ev.Content.(*keyspace.Message); ok {
			want.Event.Content = *m
		}
		got := recs[i]
		if !got.Event.EmittedAt.Equal(want.Event.EmittedAt) {
			t.Errorf("record %d EmittedAt %v, want %v", i, got.Event.EmittedAt, want.Event.EmittedAt)
		}
		got.Event.EmittedAt, want.Event.EmittedAt = time.Time{}, time.Time{}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("record %d after reopening:\n got %+v\nwant %+v", i, got, want)
		}
	}
	if zone, _ := recs[3].Event.EmittedAt.Zone(); zone != "XST" {
		t.Errorf("zone read back as %q, want XST", zone)
	}
	list, err := s2.ListStreams(ctx, key.WorkflowID, key.RunID)
	if err != nil {
		t.Fatal(err)
	}
	wantList := []keyspace.StreamSummary{{Key: sibling, Head: 1}, {Key: key, Head: uint64(len(evs))}}
	if !reflect.DeepEqual(list, wantList) {
		t.Fatalf("ListStreams after reopening = %v, want %v", list, wantList)
	}
}

func TestAppendRefusalsWriteNothing(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t)
	key := newKey(1, 1)
	mustAppend(t, s, 0, messages(key, 0, 2))
	ephemeral := messages(key, 2, 3)
	ephemeral[2].Ephemeral = true
	foreign := messages(key, 2, 3)
	foreign[2].Content = customContent{}
	nilPointer := messages(key, 2, 3)
	nilPointer[1].Content = (*keyspace.Status)(nil)
	mixed := messages(key, 2, 3)
	mixed[2].Attempt = 2
	zeroWF := messages(key, 2, 1)
	zeroWF[0].WorkflowID = eventstore.WorkflowID{}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	testCases := []struct {
		name     string
		ctx      context.Context
		expected uint64
		batch    []keyspace.ActivityEvent
		want     error
	}{
		{"ephemeral", ctx, 2, ephemeral, keyspace.ErrEphemeral},
		{"foreign-content", ctx, 2, foreign, eventstore.ErrInvalidArgument},
		{"nil-pointer-content", ctx, 2, nilPointer, eventstore.ErrInvalidArgument},
		{"mixed-streams", ctx, 2, mixed, keyspace.ErrMixedStreams},
		{"zero-workflow", ctx, 0, zeroWF, eventstore.ErrInvalidArgument},
		{"stale", ctx, 1, messages(key, 2, 3), eventstore.ErrSequenceConflict},
		{"ahead", ctx, 3, messages(key, 2, 3), eventstore.ErrSequenceConflict},
		{"beyond-bigint", ctx, math.MaxUint64 - 1, messages(key, 2, 3), eventstore.ErrSequenceConflict},
		{"cancelled", cancelled, 2, messages(key, 2, 3), context.Canceled},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			head, err := s.AppendEvents(tc.ctx, tc.expected, tc.batch)
			if !errors.Is(err, tc.want) || head != 0 {
				t.Fatalf("AppendEvents = %d, %v; want 0 and an error matching %v", head, err, tc.want)
			}
			var conflict *eventstore.SequenceConflictError
			if errors.As(err, &conflict) && (conflict.Found != 2 || conflict.Expected != tc.expected) {
				t.Fatalf("conflict %+v, want Expected %d Found 2", conflict, tc.expected)
			}
			recs, err := s.ReadFrom(ctx, key, 0, 0)
			if err != nil || len(recs) != 2 {
				t.Fatalf("after the refusal the stream holds %d records (%v), want 2", len(recs), err)
			}
			list, err := s.ListStreams(ctx, key.WorkflowID, key.RunID)
			if err != nil || len(list) != 1 || list[0].Head != 2 {
				t.Fatalf("after the refusal ListStreams = %v, %v; want the one stream at head 2", list, err)
			}
		})
	}
}

type customContent struct{}

func (customContent) ContentKind() string { return "custom" }

// TestActivityIDsOrderAsUnsigned stores activity IDs on both sides of 2^63:
// the bigint column holds their bits (2^63 reads as -2^63 in SQL), and
// ListStreams still lists them in unsigned order.
func TestActivityIDsOrderAsUnsigned(t *testing.T) {
	ctx := context.Background()
	s, pool, schema := newStore(t)
	base := newKey(0, 0)
	coords := []struct {
		activity eventstore.ActivityID
		attempt  uint32
	}{{math.MaxUint64, math.MaxUint32}, {1 << 63, 0}, {1<<63 - 1, 1}, {0, math.MaxUint32}, {0, 0}, {1, 1 << 31}}
	for i, c := range coords {
		key := keyspace.NewStreamKey(base.WorkflowID, base.RunID, c.activity, c.attempt)
		mustAppend(t, s, 0, messages(key, 0, i+1))
		if head, err := s.Head(ctx, key); err != nil || head != uint64(i+1) {
			t.Fatalf("Head(%v) = %d, %v; want %d", key, head, err, i+1)
		}
	}
	list, err := s.ListStreams(ctx, base.WorkflowID, base.RunID)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		activity eventstore.ActivityID
		attempt  uint32
		head     uint64
	}
	var got []row
	for _, sum := range list {
		got = append(got, row{sum.Key.ActivityID, sum.Key.Attempt, sum.Head})
	}
	want := []row{{0, 0, 5}, {0, math.MaxUint32, 4}, {1, 1 << 31, 6}, {1<<63 - 1, 1, 3}, {1 << 63, 0, 2}, {math.MaxUint64, math.MaxUint32, 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ListStreams = %v, want %v", got, want)
	}

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
	ctx := context.Background()
	s, _, _ := newStore(t)
	key := newKey(0, 0)
	next := keyspace.NewStreamKey(key.WorkflowID, key.RunID, 0, 1)
	evs := messages(key, 0, 6)
	mustAppend(t, s, 0, evs)
	mustAppend(t, s, 0, messages(next, 100, 4))
	testCases := []struct {
		name        string
		from        uint64
		limit       int
		first, last int
	}{
		{"all", 0, 0, 0, 6},
		{"negative-limit", 0, -3, 0, 6},
		{"middle", 2, 3, 2, 5},
		{"limit-past-head", 4, 100, 4, 6},
		{"at-head", 6, 0, 6, 6},
		{"past-head", 7, 1, 6, 6},
		{"beyond-bigint", math.MaxUint64, 0, 6, 6},
		{"just-beyond-bigint", 1 << 63, 0, 6, 6},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := s.ReadFrom(ctx, key, tc.from, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			var want []keyspace.Record
			for i := tc.first; i < tc.last; i++ {
				want = append(want, persisted(evs[i], uint64(i)))
			}
			if len(recs) != len(want) || (len(want) > 0 && !reflect.DeepEqual(recs, want)) {
				t.Fatalf("ReadFrom(%d, %d) = %+v, want %+v", tc.from, tc.limit, recs, want)
			}
		})
	}
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
			key := newKey(3, 1)
			mustAppend(t, s, 0, messages(key, 0, 2))

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
			other := messages(key, 900, 3)
			if err := insertRaw(ctx, tx, other, 2); err != nil {
				t.Fatal(err)
			}

			type result struct {
				head uint64
				err  error
			}
			done := make(chan result, 1)
			go func() {
				head, err := s.AppendEvents(ctx, 2, messages(key, 2, 2))
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
	key := newKey(0, 0)
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
	mustAppend(t, stores[0], 0, messages(key, 0, 3))
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
	key := newKey(0, 0)
	mustAppend(t, s, 0, messages(key, 0, 1))
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
	key := newKey(1, 1)
	mustAppend(t, s, 0, messages(key, 0, 2))
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, `Mixed Case "table"`}.Sanitize()).Scan(&n); err != nil || n != 2 {
		t.Fatalf("rows in the quoted table = %d, %v; want 2", n, err)
	}
}

func TestCloseIsIdempotentAndEndsEveryMethod(t *testing.T) {
	ctx := context.Background()
	s, pool, _ := newStore(t)
	key := newKey(0, 0)
	mustAppend(t, s, 0, messages(key, 0, 1))
	for i := range 2 {
		if err := s.Close(); err != nil {
			t.Fatalf("Close #%d = %v", i+1, err)
		}
	}
	calls := []struct {
		name string
		call func() error
	}{
		{"AppendEvents", func() error { _, err := s.AppendEvents(ctx, 1, messages(key, 1, 1)); return err }},
		{"AppendEvents-empty", func() error { _, err := s.AppendEvents(ctx, 1, nil); return err }},
		{"Head", func() error { _, err := s.Head(ctx, key); return err }},
		{"ReadFrom", func() error { _, err := s.ReadFrom(ctx, key, 0, 0); return err }},
		{"ListStreams", func() error { _, err := s.ListStreams(ctx, key.WorkflowID, key.RunID); return err }},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			if err := c.call(); !errors.Is(err, pgstore.ErrClosed) {
				t.Fatalf("%s after Close = %v, want ErrClosed", c.name, err)
			}
		})
	}
	// A Store from New borrows its pool: closing the Store leaves it open.
	if err := pool.Ping(ctx); err != nil {
		t.Fatalf("the borrowed pool after Close: %v", err)
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
			key := newKey(0, 0)
			mustAppend(t, s, 0, messages(key, 0, 3))
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
	ctx := context.Background()
	s, _, _ := newStore(t)
	base := newKey(0, 0)
	const writers, batches, perBatch = 6, 8, 5
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for w := range writers {
		key := keyspace.NewStreamKey(base.WorkflowID, base.RunID, eventstore.ActivityID(w), 0)
		wg.Go(func() {
			for b := range batches {
				if _, err := s.AppendEvents(ctx, uint64(b*perBatch), messages(key, uint64(b*perBatch), perBatch)); err != nil {
					errs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for range batches {
				if _, err := s.ReadFrom(ctx, key, 0, 0); err != nil {
					errs <- err
					return
				}
				if _, err := s.ListStreams(ctx, base.WorkflowID, base.RunID); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	list, err := s.ListStreams(ctx, base.WorkflowID, base.RunID)
	if err != nil || len(list) != writers {
		t.Fatalf("ListStreams = %v, %v; want %d streams", list, err, writers)
	}
	for i, sum := range list {
		if sum.Key.ActivityID != eventstore.ActivityID(i) || sum.Head != batches*perBatch {
			t.Errorf("stream %d = %+v, want activity %d at head %d", i, sum, i, batches*perBatch)
		}
	}
}
