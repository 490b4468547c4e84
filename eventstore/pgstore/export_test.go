package pgstore

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5/pgxpool"
)

// SetHooksForTest makes the store's appends call beforeTx once their
// arguments are checked, before their transaction starts, and afterLock
// (with the backend's process ID) once their transaction holds its locks,
// before it writes. Set it before the store is used; nil hooks are skipped.
func SetHooksForTest(s *Store, beforeTx func(), afterLock func(pid uint32)) {
	s.hooks = &testHooks{beforeTx: beforeTx, afterLock: afterLock}
}

// MigrateToForTest creates the tables of schema at an older layout version
// (the first version steps), recording that version and the shard count,
// as a build of that version would have left them.
func MigrateToForTest(ctx context.Context, pool *pgxpool.Pool, schema string, version, shards int) error {
	n := newNames(schema)
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	stmts := []string{"CREATE SCHEMA IF NOT EXISTS " + n.schema, n.sql(`CREATE TABLE {meta} (key text PRIMARY KEY, value text NOT NULL)`)}
	stmts = append(stmts, migrations[:version]...)
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, n.sql(q)); err != nil {
			return err
		}
	}
	if _, err := tx.Exec(ctx, n.sql(`INSERT INTO {meta} (key, value) VALUES ('schema_version', $1), ('shard_count', $2)`),
		strconv.Itoa(version), strconv.Itoa(shards)); err != nil {
		return err
	}
	return tx.Commit(ctx)
}
