package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the version of the table layout this package creates,
// recorded in the "_meta" table. [New] refuses a table recording another
// version with [ErrSchemaVersion] and leaves it as it is.
//
// [New] and [Open] migrate in one transaction, under a transaction-scoped
// advisory lock (so processes starting together do not race each other's
// CREATE statements): they create what is missing and leave what exists.
// With the default names ([DefaultTable], no [WithSchema]):
//
//	CREATE TABLE IF NOT EXISTS aionotel_keyspace (
//		workflow_id uuid   NOT NULL,
//		run_id      uuid   NOT NULL,
//		activity_id bigint NOT NULL,
//		attempt     bigint NOT NULL CHECK (attempt BETWEEN 0 AND 4294967295),
//		store_seq   bigint NOT NULL CHECK (store_seq >= 0),
//		payload     bytea  NOT NULL,
//		PRIMARY KEY (workflow_id, run_id, activity_id, attempt, store_seq)
//	);
//	CREATE TABLE IF NOT EXISTS aionotel_keyspace_meta (key text PRIMARY KEY, value text NOT NULL);
//	-- one row: ('schema_version', '1')
//
// The primary key is the only index, and it does every job: its order is
// the stream key's order, so a stream's head (max(store_seq)+1) is one
// backward descent, a read is a range scan, and its (workflow_id, run_id)
// prefix is what ListStreams walks; it is also what stops two writers from
// taking the same store seq. attempt, a uint32, fits a bigint exactly.
// activity_id is the uint64 stored bit for bit as a bigint, int64(id): IDs
// below 2^63 read as themselves in SQL, IDs from 2^63 up as negative
// numbers, and ListStreams sorts them back into unsigned order.
const SchemaVersion = 1

// names holds the quoted, schema-qualified table names and the statements
// built from them.
type names struct {
	records string // quoted records table
	meta    string // quoted schema-version table
	schema  string // quoted schema, "" when unqualified
	lockKey int64  // advisory lock serialising migrations of this table
}

func newNames(c config) names {
	qualify := func(table string) string {
		if c.schema == "" {
			return pgx.Identifier{table}.Sanitize()
		}
		return pgx.Identifier{c.schema, table}.Sanitize()
	}
	n := names{records: qualify(c.table), meta: qualify(c.table + "_meta")}
	if c.schema != "" {
		n.schema = pgx.Identifier{c.schema}.Sanitize()
	}
	h := fnv.New64a()
	h.Write([]byte("aionotel/keyspace/pgstore\x00" + c.schema + "\x00" + c.table))
	n.lockKey = int64(h.Sum64())
	return n
}

// migrate creates what is missing (schema, records table, schema-version
// table and its row) in one transaction, under a transaction-scoped advisory
// lock so that processes starting together do not race each other's CREATE
// statements, and checks the recorded version. Running it again changes
// nothing.
func migrate(ctx context.Context, pool *pgxpool.Pool, n names) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()

	stmts := []string{fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", n.lockKey)}
	if n.schema != "" {
		stmts = append(stmts, "CREATE SCHEMA IF NOT EXISTS "+n.schema)
	}
	stmts = append(stmts,
		// The primary key's order is the stream key's order: its index finds
		// a stream's head (max store_seq) with one descent, serves ReadFrom
		// as a range scan, and, through its (workflow_id, run_id) prefix,
		// serves ListStreams. It is also what detects two writers claiming
		// one store seq.
		`CREATE TABLE IF NOT EXISTS `+n.records+` (
	workflow_id uuid   NOT NULL,
	run_id      uuid   NOT NULL,
	activity_id bigint NOT NULL,
	attempt     bigint NOT NULL CHECK (attempt BETWEEN 0 AND 4294967295),
	store_seq   bigint NOT NULL CHECK (store_seq >= 0),
	payload     bytea  NOT NULL,
	PRIMARY KEY (workflow_id, run_id, activity_id, attempt, store_seq)
)`,
		`CREATE TABLE IF NOT EXISTS `+n.meta+` (
	key   text PRIMARY KEY,
	value text NOT NULL
)`,
		`INSERT INTO `+n.meta+` (key, value) VALUES ('schema_version', '`+strconv.Itoa(SchemaVersion)+`')
ON CONFLICT (key) DO NOTHING`,
	)
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return err
		}
	}
	var recorded string
	if err := tx.QueryRow(ctx, `SELECT value FROM `+n.meta+` WHERE key = 'schema_version'`).Scan(&recorded); err != nil {
		return err
	}
	if v, err := strconv.Atoi(recorded); err != nil || v != SchemaVersion {
		return fmt.Errorf("%w: table %s records schema version %q, this build uses %d", ErrSchemaVersion, n.records, recorded, SchemaVersion)
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	return nil
}

// isUniqueViolation reports whether err is PostgreSQL's unique_violation
// (SQLSTATE 23505).
func isUniqueViolation(err error) bool {
	var pgErr interface{ SQLState() string }
	return errors.As(err, &pgErr) && pgErr.SQLState() == "23505"
}
