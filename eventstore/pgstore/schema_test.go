package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
)

var wantTables = []string{
	"aionotel_eventstore_meta", "aionotel_events", "aionotel_outbox", "aionotel_packages", "aionotel_routes",
	"aionotel_runs", "aionotel_shard_directory", "aionotel_shard_lives", "aionotel_shards", "aionotel_timers", "aionotel_workflows",
}

func tablesIn(t *testing.T, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, schema string) []string {
	t.Helper()
	rows, err := q.Query(context.Background(), `SELECT tablename FROM pg_tables WHERE schemaname = $1 ORDER BY tablename`, schema)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestMigrationFromEmptyIsIdempotentAndSafeConcurrently: processes starting
// together on a database without the tables all succeed and create them
// once; opening again keeps every row and the recorded version.
func TestMigrationFromEmptyIsIdempotentAndSafeConcurrently(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	schema := testSchema(t, pool)
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
	got := tablesIn(t, pool, schema)
	want := append([]string(nil), wantTables...)
	sort.Strings(want)
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("tables %v, want %v", got, want)
	}

	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	if err := stores[0].Append(ctx, token, wf, []eventstore.Event{started(wf, run)}, 0); err != nil {
		t.Fatal(err)
	}
	if err := stores[1].PutPackage(ctx, eventstore.PackageRecord{WorkflowType: "order", ContentHash: "h"}); err != nil {
		t.Fatal(err)
	}
	again, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	wantHead(t, again, wf, 1)
	if pkgs, err := again.ListPackages(ctx); err != nil || len(pkgs) != 1 {
		t.Fatalf("packages after migrating again: %v, %v", pkgs, err)
	}
	var version string
	if err := pool.QueryRow(ctx, `SELECT value FROM `+table(schema, "aionotel_eventstore_meta")+` WHERE key = 'schema_version'`).Scan(&version); err != nil {
		t.Fatal(err)
	}
	if version != fmt.Sprint(pgstore.SchemaVersion) {
		t.Fatalf("schema_version %q, want %d", version, pgstore.SchemaVersion)
	}
}

func TestNewRefusesANewerSchemaVersion(t *testing.T) {
	ctx := context.Background()
	_, pool, schema := newStore(t)
	meta := table(schema, "aionotel_eventstore_meta")
	if _, err := pool.Exec(ctx, `UPDATE `+meta+` SET value = $1 WHERE key = 'schema_version'`, fmt.Sprint(pgstore.SchemaVersion+1)); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema)); !errors.Is(err, pgstore.ErrSchemaVersion) {
		t.Fatalf("New on a newer schema = %v, want ErrSchemaVersion", err)
	}
	var version string
	if err := pool.QueryRow(ctx, `SELECT value FROM `+meta+` WHERE key = 'schema_version'`).Scan(&version); err != nil || version != fmt.Sprint(pgstore.SchemaVersion+1) {
		t.Fatalf("the refused New changed the version to %q (%v)", version, err)
	}
}

// TestShardCountIsTheDatabases: the first New records the count; later
// stores adopt it, and one that names another count is refused.
func TestShardCountIsTheDatabases(t *testing.T) {
	ctx := context.Background()
	first, pool, schema := newStore(t, pgstore.WithShardCount(4))
	if first.ShardCount() != 4 {
		t.Fatalf("ShardCount = %d, want 4", first.ShardCount())
	}
	adopted, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
	if err != nil || adopted.ShardCount() != 4 {
		t.Fatalf("New without WithShardCount = %v (count %d), want the recorded 4", err, adopted.ShardCount())
	}
	if _, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema), pgstore.WithShardCount(16)); !errors.Is(err, eventstore.ErrInvalidArgument) {
		t.Fatalf("New with another shard count = %v, want ErrInvalidArgument", err)
	}
	if err := adopted.AcquireOwnedShard(ctx, 4); !errors.Is(err, eventstore.ErrInvalidArgument) {
		t.Fatalf("AcquireOwnedShard(4) of 4 shards = %v, want ErrInvalidArgument", err)
	}
	fresh, _, _ := newStore(t)
	if fresh.ShardCount() != pgstore.DefaultShardCount {
		t.Fatalf("a fresh database has %d shards, want %d", fresh.ShardCount(), pgstore.DefaultShardCount)
	}
}

// TestMigrationFromVersion1: tables of layout version 1 with a shard lease
// and outbox rows are migrated to the current one: each outbox row gets
// its workflow's shard (eventstore.ShardOf, over UUIDs whose first bit is
// set too), the lease keeps its holder and epoch, every other shard gets a
// never-acquired lease row, and the stores work on them: the old holder's
// name, reused, takes its live lease over in a new epoch.
func TestMigrationFromVersion1(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	schema := testSchema(t, pool)
	if err := pgstore.MigrateToForTest(ctx, pool, schema, 1, 16); err != nil {
		t.Fatal(err)
	}
	outbox := table(schema, "aionotel_outbox")
	want := map[eventstore.WorkflowID]int{}
	for i := range 64 {
		wf := eventstore.NewWorkflowID()
		if i%2 == 0 {
			wf[0] |= 0x80 // negative as a signed 64-bit prefix
		}
		want[wf] = eventstore.ShardOf(wf, 16)
		_, err := pool.Exec(ctx, `INSERT INTO `+outbox+` (key_hash, dispatch_key, workflow_id, run_id, ordinal, activity_type, input_type, created_at, state)
VALUES ($1, $1, $2, $2, 0, '', '', '', 1)`, []byte(wf.String()), wf)
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO `+table(schema, "aionotel_shards")+` VALUES (3, 'a', 7, clock_timestamp() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}

	s, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema), pgstore.WithNode("a"), pgstore.WithLeaseDuration(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	rows, err := pool.Query(ctx, `SELECT workflow_id, shard FROM `+outbox)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var wf eventstore.WorkflowID
		var shard int
		if err := rows.Scan(&wf, &shard); err != nil {
			t.Fatal(err)
		}
		if shard != want[wf] {
			t.Errorf("outbox row of %s migrated to shard %d, want %d", wf, shard, want[wf])
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	leases, err := s.Leases(ctx)
	if err != nil || len(leases) != 1 || leases[0].Shard != 3 || leases[0].Owner != "a" || leases[0].Epoch != 7 || !leases[0].Live {
		t.Fatalf("leases after the migration = %+v, %v; want shard 3 held by a in epoch 7", leases, err)
	}
	if err := s.AcquireOwnedShards(ctx, []int{3, 4}); err != nil {
		t.Fatal(err)
	}
	for _, l := range []struct{ shard, epoch int }{{3, 8}, {4, 1}} {
		if got := lease(t, s, l.shard); got.Owner != "a" || got.Epoch != uint64(l.epoch) {
			t.Fatalf("shard %d after acquiring: %+v, want epoch %d", l.shard, got, l.epoch)
		}
	}
}

// TestNewRefusesADamagedMetaTable: a schema version or shard count in the
// meta table that no New records (not a positive integer, or past the
// largest shard count) is damage: New fails with ErrCorruptRecord and
// changes nothing. Regression: a negative schema version made New panic
// (index out of range), and a version of 0 sent it to re-create tables
// that exist.
func TestNewRefusesADamagedMetaTable(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ key, value string }{
		{"schema_version", "-1"}, {"schema_version", "0"}, {"schema_version", "two"}, {"schema_version", ""},
		{"shard_count", "0"}, {"shard_count", "-16"}, {"shard_count", "99999999999"}, {"shard_count", "sixteen"},
	} {
		t.Run(tc.key+"="+tc.value, func(t *testing.T) {
			_, pool, schema := newStore(t)
			meta := table(schema, "aionotel_eventstore_meta")
			if _, err := pool.Exec(ctx, `UPDATE `+meta+` SET value = $1 WHERE key = $2`, tc.value, tc.key); err != nil {
				t.Fatal(err)
			}
			s, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
			if !errors.Is(err, pgstore.ErrCorruptRecord) || s != nil {
				t.Fatalf("New = %v, %v; want nil and ErrCorruptRecord", s, err)
			}
			var value string
			if err := pool.QueryRow(ctx, `SELECT value FROM `+meta+` WHERE key = $1`, tc.key).Scan(&value); err != nil || value != tc.value {
				t.Fatalf("the refused New changed %s to %q (%v)", tc.key, value, err)
			}
		})
	}
}
