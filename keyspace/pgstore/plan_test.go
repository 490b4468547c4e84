package pgstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
	"github.com/aionotel/aionotel/keyspace/pgstore"
)

// fillSQL writes records 0..n-1 of key with one INSERT ... generate_series,
// all with the same valid payload: fast enough for streams of 10^4 to 10^5.
// It then vacuums the table, as autovacuum would soon after such an insert,
// so that measurements do not include (or race) that work.
func fillSQL(t testing.TB, pool *pgxpool.Pool, schema string, key keyspace.StreamKey, n int) {
	t.Helper()
	payload, err := pgstore.EncodeForTest(keyspacetest.Event(key, 0, keyspace.Message{Role: "assistant", Text: "filler"}))
	if err != nil {
		t.Fatal(err)
	}
	_, err = pool.Exec(context.Background(), `INSERT INTO `+pgx.Identifier{schema, pgstore.DefaultTable}.Sanitize()+`
SELECT $1::uuid, $2::uuid, $3::bigint, $4::bigint, s, $5::bytea FROM generate_series(0, $6::bigint - 1) AS s`,
		key.WorkflowID.String(), key.RunID.String(), int64(key.ActivityID), int64(key.Attempt), payload, n)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(context.Background(), `VACUUM ANALYZE `+pgx.Identifier{schema, pgstore.DefaultTable}.Sanitize()); err != nil {
		t.Fatal(err)
	}
}

// buffersOf prepares query on conn, runs EXPLAIN (ANALYZE, BUFFERS) of its
// EXECUTE with the given literal arguments, and returns the shared buffers
// the execution touched (hit plus read): the pages it really visited.
// generic forces PostgreSQL's generic plan, the one a long-lived prepared
// statement (pgx caches them per connection) may end up using.
func buffersOf(t *testing.T, conn *pgx.Conn, generic bool, query, types string, args ...any) int {
	t.Helper()
	ctx := context.Background()
	mode := "force_custom_plan"
	if generic {
		mode = "force_generic_plan"
	}
	for _, q := range []string{"SET plan_cache_mode = " + mode, "DEALLOCATE ALL", "PREPARE plan_under_test (" + types + ") AS " + query} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	lits := make([]string, len(args))
	for i, a := range args {
		lits[i] = fmt.Sprintf("'%v'", a)
	}
	var raw []byte
	explain := "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE plan_under_test(" + strings.Join(lits, ", ") + ")"
	if err := conn.QueryRow(ctx, explain, pgx.QueryExecModeSimpleProtocol).Scan(&raw); err != nil {
		t.Fatalf("%s: %v", explain, err)
	}
	var plans []struct {
		Plan map[string]any `json:"Plan"`
	}
	if err := json.Unmarshal(raw, &plans); err != nil || len(plans) != 1 {
		t.Fatalf("EXPLAIN output %s: %v", raw, err)
	}
	hit, _ := plans[0].Plan["Shared Hit Blocks"].(float64)
	read, _ := plans[0].Plan["Shared Read Blocks"].(float64)
	return int(hit + read)
}

// TestCostsFollowWhatIsReturned measures, in pages visited, what PostgreSQL
// does for ListStreams and for a tail ReadFrom: listing a run of 10 streams
// of 5,000 records must visit about as many pages as listing 10 streams of
// one record (a loose index scan, not a scan of the run's rows), and reading
// the last 10 records of a 50,000-record stream about as many as of a
// 20-record one. Both the custom and the generic plan are checked.
func TestCostsFollowWhatIsReturned(t *testing.T) {
	ctx := context.Background()
	s, pool, schema := newStore(t)
	readFrom, listStreams := s.QueriesForTest()

	short := keyspacetest.NewKey(0, 0)
	long := keyspacetest.NewKey(0, 0)
	for a := range 10 {
		fillSQL(t, pool, schema, keyspace.NewStreamKey(short.WorkflowID, short.RunID, eventstore.ActivityID(a), 0), 1)
		fillSQL(t, pool, schema, keyspace.NewStreamKey(long.WorkflowID, long.RunID, eventstore.ActivityID(a), 0), 5_000)
	}
	small := keyspacetest.NewKey(1, 1)
	big := keyspacetest.NewKey(1, 1)
	fillSQL(t, pool, schema, small, 20)
	fillSQL(t, pool, schema, big, 50_000)

	// The statements must give the right answers on this data too.
	if list, err := s.ListStreams(ctx, long.WorkflowID, long.RunID); err != nil || len(list) != 10 || list[9].Head != 5_000 {
		t.Fatalf("ListStreams of the long run = %v, %v", list, err)
	}
	if recs, err := s.ReadFrom(ctx, big, 49_990, 10); err != nil || len(recs) != 10 || recs[9].StoreSeq != 49_999 {
		t.Fatalf("tail ReadFrom of the big stream = %d records, %v", len(recs), err)
	}

	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	c := conn.Conn()
	if _, err := c.Exec(ctx, "SET search_path = "+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	defer c.Exec(ctx, "DEALLOCATE ALL")

	for _, generic := range []bool{false, true} {
		t.Run(fmt.Sprintf("generic=%v", generic), func(t *testing.T) {
			listShort := buffersOf(t, c, generic, listStreams, "uuid, uuid", short.WorkflowID, short.RunID)
			listLong := buffersOf(t, c, generic, listStreams, "uuid, uuid", long.WorkflowID, long.RunID)
			// One more B-tree level per descent at most: 20 descents.
			if listLong > listShort+20 {
				t.Errorf("ListStreams visited %d pages for 10 streams of 5,000 records and %d for 10 streams of 1: the cost follows the streams' length", listLong, listShort)
			}
			tailArgs := func(k keyspace.StreamKey, from int) []any {
				return []any{k.WorkflowID, k.RunID, int64(k.ActivityID), int64(k.Attempt), from, 10}
			}
			tailSmall := buffersOf(t, c, generic, readFrom, "uuid, uuid, bigint, bigint, bigint, bigint", tailArgs(small, 10)...)
			tailBig := buffersOf(t, c, generic, readFrom, "uuid, uuid, bigint, bigint, bigint, bigint", tailArgs(big, 49_990)...)
			if tailBig > 2*tailSmall+4 {
				t.Errorf("reading the last 10 records visited %d pages in a 50,000-record stream and %d in a 20-record one", tailBig, tailSmall)
			}
			t.Logf("pages visited: ListStreams %d (10×1) vs %d (10×5,000); tail read %d (20) vs %d (50,000)", listShort, listLong, tailSmall, tailBig)
		})
	}
}
