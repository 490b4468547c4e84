package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// The heartbeat table: one row per node name, in the schema pgstore's
// tables are in (the connection's search_path). Times are the database's
// clock unless the node has a clock of its own ($ts NULL).
const (
	qCreateNodes = `CREATE TABLE IF NOT EXISTS aionotel_demo_nodes (
	node     text PRIMARY KEY,
	instance text NOT NULL,
	seen     timestamptz NOT NULL
)`
	qHeartbeat = `INSERT INTO aionotel_demo_nodes (node, instance, seen) VALUES ($1, $2, coalesce($3::timestamptz, clock_timestamp()))
ON CONFLICT (node) DO UPDATE SET instance = EXCLUDED.instance, seen = EXCLUDED.seen`
	qLive = `SELECT node FROM aionotel_demo_nodes
WHERE seen > coalesce($2::timestamptz, clock_timestamp()) - $1 * interval '1 microsecond' ORDER BY node`
	qRead = `SELECT instance, seen, seen > coalesce($3::timestamptz, clock_timestamp()) - $2 * interval '1 microsecond'
FROM aionotel_demo_nodes WHERE node = $1`
	qLeave = `DELETE FROM aionotel_demo_nodes WHERE node = $1 AND instance = $2`
)

// createNodesTable creates the heartbeat table if it does not exist, under
// a transaction-scoped advisory lock: concurrent CREATE TABLE IF NOT EXISTS
// can fail in PostgreSQL when nodes start together.
func createNodesTable(ctx context.Context, pool *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('aionotel_demo_nodes'))`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, qCreateNodes)
		return err
	})
}

// heartbeat records that instance of node is alive now.
func heartbeat(ctx context.Context, pool *pgxpool.Pool, node, instance string, now *time.Time) error {
	_, err := pool.Exec(ctx, qHeartbeat, node, instance, now)
	return err
}

// liveNodes returns the nodes whose heartbeat is younger than lease, by
// name.
func liveNodes(ctx context.Context, pool *pgxpool.Pool, lease time.Duration, now *time.Time) ([]string, error) {
	rows, err := pool.Query(ctx, qLive, lease.Microseconds(), now)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// beat is a node's heartbeat row.
type beat struct {
	found    bool
	instance string
	seen     time.Time
	recent   bool // younger than the window asked for
}

func readHeartbeat(ctx context.Context, pool *pgxpool.Pool, node string, window time.Duration, now *time.Time) (beat, error) {
	var b beat
	err := pool.QueryRow(ctx, qRead, node, window.Microseconds(), now).Scan(&b.instance, &b.seen, &b.recent)
	if errors.Is(err, pgx.ErrNoRows) {
		return beat{}, nil
	}
	b.found = err == nil
	return b, err
}

// leave removes the heartbeat of this instance of node.
func leave(ctx context.Context, pool *pgxpool.Pool, node, instance string) error {
	_, err := pool.Exec(ctx, qLeave, node, instance)
	return err
}
