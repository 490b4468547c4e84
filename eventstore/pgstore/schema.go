package pgstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/eventstore"
)

// SchemaVersion is the version of the table layout this package creates,
// recorded in the meta table. [New] migrates an older layout (or an empty
// schema) to it and refuses a newer one with [ErrSchemaVersion].
//
// [New] and [Open] migrate in one transaction, under a transaction-scoped
// advisory lock (so that processes starting together do not race each
// other's CREATE statements): they apply the steps between the recorded
// version and this one, record it, and leave everything else as it is, so
// running them again changes nothing. Version 1, with the default names (no
// [WithSchema]):
//
//	aionotel_eventstore_meta (key text PRIMARY KEY, value text)
//	    -- schema_version, and shard_count, fixed when the tables are created
//	aionotel_workflows (workflow_id uuid PRIMARY KEY, shard, head, run_count,
//	    and the current run: current_run, workflow_type, status, started_at,
//	    closed_at, with started_s/started_ns and closed_s/closed_ns to sort on)
//	aionotel_events (workflow_id, seq, run_id, kind, body; PRIMARY KEY (workflow_id, seq))
//	aionotel_runs (workflow_id, run_id, pos, workflow_type, status, started_at,
//	    closed_at, first_seq, last_seq; PRIMARY KEY (workflow_id, run_id))
//	aionotel_timers (workflow_id, timer_key, timer_id, shard, fire_s, fire_ns,
//	    fire_at, armed_seq; PRIMARY KEY (workflow_id, timer_key))
//	aionotel_packages (type_key, hash_key, workflow_type, content_hash, data,
//	    created_at; PRIMARY KEY (type_key, hash_key))
//	aionotel_routes (type_key PRIMARY KEY, workflow_type, content_hash)
//	aionotel_outbox (id identity PRIMARY KEY, key_hash UNIQUE, dispatch_key,
//	    workflow_id, run_id, ordinal, activity_type, input_type, input_data,
//	    created_at, state)
//	aionotel_shards (shard PRIMARY KEY, owner, epoch, expires)
//	aionotel_shard_directory (shard PRIMARY KEY, owner, epoch, published_at)
//
// Every string a caller controls (types, timer IDs, dispatch keys, package
// names, payloads) is bytea, kept byte for byte (text refuses NUL and
// invalid UTF-8); where one is part of a key, the key column is its SHA-256
// (the *_key and key_hash columns), so a value of any length can be stored
// (a btree entry holds at most about 2.7 kB). Times are kept exactly as
// time.Time.MarshalBinary encodes them (bytea), with two sortable columns
// (seconds since year 1, nanoseconds) where they are compared. uint64
// values (seqs, ordinals, armed seqs) are stored bit for bit as bigint.
// Outbox states are 1 pending, 2 claimed, 3 settled, 4 cancelled
// ([eventstore.OutboxState]). Lease times (expires, published_at) are
// timestamptz, on the database's clock unless [WithLeaseClock] says
// otherwise.
//
// Version 2 (fencing by epoch) adds:
//
//	aionotel_shard_lives (node text PRIMARY KEY, life bigint)
//	    -- how many Stores ever opened under each node name
//	aionotel_shards.life -- the life of the node name that holds the lease
//	aionotel_outbox.shard -- the row's workflow's shard, for owned-shard claims
//
// and one lease row per shard from the start, at epoch 0 (never acquired),
// so that an acquisition only ever updates a row and never waits on another
// process's insertion of it.
const SchemaVersion = 2

// migrations[i] takes the tables from version i to version i+1. Append a
// step for a new version; never edit a released one.
var migrations = []string{
	`CREATE TABLE {workflows} (
	workflow_id   uuid    PRIMARY KEY,
	shard         integer NOT NULL,
	head          bigint  NOT NULL,
	run_count     integer NOT NULL,
	current_run   uuid,
	workflow_type bytea,
	status        text,
	started_at    bytea,
	started_s     bigint,
	started_ns    integer,
	closed_at     bytea,
	closed_s      bigint,
	closed_ns     integer
);
CREATE INDEX {workflows_shard_idx} ON {workflows} (shard, workflow_id);
CREATE INDEX {workflows_started_idx} ON {workflows} (started_s, started_ns, workflow_id);
CREATE TABLE {events} (
	workflow_id uuid   NOT NULL,
	seq         bigint NOT NULL CHECK (seq >= 1),
	run_id      uuid   NOT NULL,
	kind        text   NOT NULL,
	body        bytea  NOT NULL,
	PRIMARY KEY (workflow_id, seq)
);
CREATE TABLE {runs} (
	workflow_id   uuid    NOT NULL,
	run_id        uuid    NOT NULL,
	pos           integer NOT NULL,
	workflow_type bytea   NOT NULL,
	status        text    NOT NULL,
	started_at    bytea   NOT NULL,
	closed_at     bytea,
	first_seq     bigint  NOT NULL,
	last_seq      bigint  NOT NULL,
	PRIMARY KEY (workflow_id, run_id)
);
CREATE TABLE {timers} (
	workflow_id uuid    NOT NULL,
	timer_key   bytea   NOT NULL,
	timer_id    bytea   NOT NULL,
	shard       integer NOT NULL,
	fire_s      bigint  NOT NULL,
	fire_ns     integer NOT NULL,
	fire_at     bytea   NOT NULL,
	armed_seq   bigint  NOT NULL,
	PRIMARY KEY (workflow_id, timer_key)
);
CREATE INDEX {timers_due_idx} ON {timers} (fire_s, fire_ns);
CREATE TABLE {packages} (
	type_key      bytea NOT NULL,
	hash_key      bytea NOT NULL,
	workflow_type bytea NOT NULL,
	content_hash  bytea NOT NULL,
	data          bytea,
	created_at    bytea NOT NULL,
	PRIMARY KEY (type_key, hash_key)
);
CREATE INDEX {packages_hash_idx} ON {packages} (hash_key);
CREATE TABLE {routes} (
	type_key      bytea PRIMARY KEY,
	workflow_type bytea NOT NULL,
	content_hash  bytea NOT NULL,
	hash_key      bytea NOT NULL
);
CREATE INDEX {routes_hash_idx} ON {routes} (hash_key);
CREATE TABLE {outbox} (
	id            bigint   GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	key_hash      bytea    NOT NULL UNIQUE,
	dispatch_key  bytea    NOT NULL,
	workflow_id   uuid     NOT NULL,
	run_id        uuid     NOT NULL,
	ordinal       bigint   NOT NULL,
	activity_type bytea    NOT NULL,
	input_type    bytea    NOT NULL,
	input_data    bytea,
	created_at    bytea    NOT NULL,
	state         smallint NOT NULL CHECK (state BETWEEN 1 AND 4)
);
CREATE INDEX {outbox_activity_idx} ON {outbox} (workflow_id, run_id, ordinal);
CREATE INDEX {outbox_pending_idx} ON {outbox} (id) WHERE state = 1;
CREATE INDEX {outbox_claimed_idx} ON {outbox} (id) WHERE state = 2;
CREATE TABLE {shards} (
	shard   integer     PRIMARY KEY CHECK (shard >= 0),
	owner   text        NOT NULL,
	epoch   bigint      NOT NULL CHECK (epoch >= 1),
	expires timestamptz NOT NULL
);
CREATE TABLE {directory} (
	shard        integer     PRIMARY KEY,
	owner        text        NOT NULL,
	epoch        bigint      NOT NULL,
	published_at timestamptz NOT NULL
);`,
	// 2: fencing by epoch and life, owned-shard claims. The shard of an
	// existing outbox row is eventstore.ShardOf of its workflow: the first
	// 8 bytes of the UUID, big-endian, unsigned, modulo the shard count.
	`ALTER TABLE {shards} DROP CONSTRAINT IF EXISTS aionotel_shards_epoch_check;
ALTER TABLE {shards} ADD CONSTRAINT aionotel_shards_epoch_nonnegative CHECK (epoch >= 0);
ALTER TABLE {shards} ADD COLUMN life bigint NOT NULL DEFAULT 0;
CREATE TABLE {lives} (
	node text   PRIMARY KEY,
	life bigint NOT NULL
);
ALTER TABLE {outbox} ADD COLUMN shard integer;
UPDATE {outbox} SET shard = (
	(('x' || translate(left(workflow_id::text, 18), '-', ''))::bit(64)::bigint::numeric
	 + CASE WHEN ('x' || translate(left(workflow_id::text, 18), '-', ''))::bit(64)::bigint < 0 THEN 18446744073709551616 ELSE 0 END)
	% (SELECT value::numeric FROM {meta} WHERE key = 'shard_count'))::integer;
ALTER TABLE {outbox} ALTER COLUMN shard SET NOT NULL;
CREATE INDEX {outbox_shard_pending_idx} ON {outbox} (shard, id) WHERE state = 1;`,
}

// tableNames are the tables and indexes, by the placeholder the statements
// use for them.
var tableNames = map[string]string{
	"meta":                     "aionotel_eventstore_meta",
	"workflows":                "aionotel_workflows",
	"workflows_shard_idx":      "aionotel_workflows_shard_idx",
	"workflows_started_idx":    "aionotel_workflows_started_idx",
	"events":                   "aionotel_events",
	"runs":                     "aionotel_runs",
	"timers":                   "aionotel_timers",
	"timers_due_idx":           "aionotel_timers_due_idx",
	"packages":                 "aionotel_packages",
	"packages_hash_idx":        "aionotel_packages_hash_idx",
	"routes":                   "aionotel_routes",
	"routes_hash_idx":          "aionotel_routes_hash_idx",
	"outbox":                   "aionotel_outbox",
	"outbox_activity_idx":      "aionotel_outbox_activity_idx",
	"outbox_pending_idx":       "aionotel_outbox_pending_idx",
	"outbox_claimed_idx":       "aionotel_outbox_claimed_idx",
	"shards":                   "aionotel_shards",
	"directory":                "aionotel_shard_directory",
	"lives":                    "aionotel_shard_lives",
	"outbox_shard_pending_idx": "aionotel_outbox_shard_pending_idx",
}

// names expands the {placeholders} of statements to quoted, schema-qualified
// names.
type names struct {
	schema  string // quoted schema, "" when unqualified
	expand  *strings.Replacer
	lockKey int64 // advisory lock serialising migrations and package writes
}

func newNames(schema string) names {
	var pairs []string
	for ph, table := range tableNames {
		q := pgx.Identifier{table}.Sanitize()
		if schema != "" && !strings.HasSuffix(ph, "_idx") {
			// Index names are never schema-qualified in CREATE INDEX: an
			// index lives in its table's schema.
			q = pgx.Identifier{schema, table}.Sanitize()
		}
		pairs = append(pairs, "{"+ph+"}", q)
	}
	n := names{expand: strings.NewReplacer(pairs...)}
	if schema != "" {
		n.schema = pgx.Identifier{schema}.Sanitize()
	}
	h := fnv.New64a()
	h.Write([]byte("aionotel/eventstore/pgstore\x00" + schema))
	n.lockKey = int64(h.Sum64())
	return n
}

// sql expands a statement's placeholders.
func (n names) sql(q string) string { return n.expand.Replace(q) }

// migrate brings the tables to SchemaVersion and returns the shard count the
// database records, recording want (or DefaultShardCount when want is 0)
// if it records none.
func migrate(ctx context.Context, pool *pgxpool.Pool, n names, want int) (int, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()

	stmts := []string{fmt.Sprintf("SELECT pg_advisory_xact_lock(%d)", n.lockKey)}
	if n.schema != "" {
		stmts = append(stmts, "CREATE SCHEMA IF NOT EXISTS "+n.schema)
	}
	stmts = append(stmts, n.sql(`CREATE TABLE IF NOT EXISTS {meta} (key text PRIMARY KEY, value text NOT NULL)`))
	for _, q := range stmts {
		if _, err := tx.Exec(ctx, q); err != nil {
			return 0, err
		}
	}
	version, err := metaInt(ctx, tx, n, "schema_version")
	if err != nil {
		return 0, err
	}
	if version > SchemaVersion {
		return 0, fmt.Errorf("%w: the tables record schema version %d, this build knows %d", ErrSchemaVersion, version, SchemaVersion)
	}
	for v := version; v < SchemaVersion; v++ {
		if _, err := tx.Exec(ctx, n.sql(migrations[v])); err != nil {
			return 0, fmt.Errorf("migrating to schema version %d: %w", v+1, err)
		}
	}
	if want == 0 {
		want = DefaultShardCount
	}
	_, err = tx.Exec(ctx, n.sql(`INSERT INTO {meta} AS m (key, value) VALUES ('schema_version', $1), ('shard_count', $2)
ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value WHERE m.key = 'schema_version'`),
		strconv.Itoa(SchemaVersion), strconv.Itoa(want))
	if err != nil {
		return 0, err
	}
	shards, err := metaInt(ctx, tx, n, "shard_count")
	if err != nil {
		return 0, err
	}
	if shards <= 0 {
		return 0, fmt.Errorf("%w: the tables record shard count %d", ErrCorruptRecord, shards)
	}
	// Every shard has its lease row from the start (epoch 0: never
	// acquired), so that acquisitions only update rows.
	if _, err := tx.Exec(ctx, n.sql(`INSERT INTO {shards} (shard, owner, epoch, expires, life)
SELECT g, '', 0, '-infinity', 0 FROM generate_series(0, $1::int - 1) AS g ON CONFLICT (shard) DO NOTHING`), shards); err != nil {
		return 0, err
	}
	return shards, tx.Commit(ctx)
}

// metaInt reads an integer of the meta table; a missing key reads as 0.
func metaInt(ctx context.Context, tx pgx.Tx, n names, key string) (int, error) {
	var s string
	err := tx.QueryRow(ctx, n.sql(`SELECT value FROM {meta} WHERE key = $1`), key).Scan(&s)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	// Both values are recorded positive (a shard count at most
	// maxShardCount); anything else is damage, not a layout to migrate.
	v, err := strconv.Atoi(s)
	if err != nil || v < 1 || (key == "shard_count" && v > maxShardCount) {
		return 0, fmt.Errorf("%w: meta %s is %q", ErrCorruptRecord, key, s)
	}
	return v, nil
}

// digest is the key column of a caller's string: its SHA-256.
func digest(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// sqlState returns the SQLSTATE of a PostgreSQL error, "" for any other.
func sqlState(err error) string {
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) {
		return pgErr.SQLState()
	}
	return ""
}

// shardCheck is the error of a shard number outside [0, n).
func shardCheck(shard, n int) error {
	if shard < 0 || shard >= n {
		return fmt.Errorf("%w: pgstore: shard %d is outside [0, %d)", eventstore.ErrInvalidArgument, shard, n)
	}
	return nil
}
