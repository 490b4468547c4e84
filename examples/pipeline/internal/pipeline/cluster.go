package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
)

// clusterDB is the database of the cluster scenario: a schema of its own
// in the PostgreSQL of AIONOTEL_POSTGRES_DSN, which the demo nodes reach
// through the DSN's search_path, and the test's read-only view of it.
//
// The truth is read through pgstore (the store the nodes write with, so
// that events decode as they were written): a Store of a node that never
// runs an election and whose writing methods the test never calls; one
// listing and one ReadHistory per workflow (readTruth). To compare the
// telemetry with a history that does not move, the test freezes it: a
// transaction holds the workflows table in SHARE mode, which
// lets every read through and holds every append until it ends (leases,
// timers and claims go on), so the nodes' gauges and counters stop moving
// with the history.
type clusterDB struct {
	admin  string // the DSN as given
	dsn    string // with search_path set to the schema
	schema string
	reader *pgstore.Store
}

// newClusterDB creates a schema of its own in the database of dsn.
func newClusterDB(ctx context.Context, dsn string) (*clusterDB, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	c := &clusterDB{admin: dsn, schema: "aionotel_e2e_cluster_" + hex.EncodeToString(b[:])}
	var err error
	if c.dsn, err = withSearchPath(dsn, c.schema); err != nil {
		return nil, err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return nil, fmt.Errorf("connecting to AIONOTEL_POSTGRES_DSN: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{c.schema}.Sanitize()); err != nil {
		return nil, fmt.Errorf("creating schema %s: %w", c.schema, err)
	}
	return c, nil
}

// withSearchPath returns dsn (a URL or key=value DSN) with search_path set
// to schema.
func withSearchPath(dsn, schema string) (string, error) {
	return withParam(dsn, "search_path", schema)
}

// withParam returns dsn (a URL or key=value DSN) with a run-time parameter
// set.
func withParam(dsn, key, value string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", errors.New("AIONOTEL_POSTGRES_DSN is not a valid URL")
		}
		q := u.Query()
		q.Set(key, value)
		u.RawQuery = q.Encode()
		return u.String(), nil
	}
	return dsn + " " + key + "=" + value, nil
}

// open opens the read-only store, once the nodes have created the tables.
func (c *clusterDB) open(ctx context.Context) error {
	if c.reader != nil {
		return nil
	}
	s, err := pgstore.Open(ctx, c.dsn, pgstore.WithNode("e2e-truth-reader"))
	if err != nil {
		return fmt.Errorf("opening the store read-only: %w", err)
	}
	c.reader = s
	return nil
}

// leases returns the owner of every shard with a live lease.
func (c *clusterDB) leases(ctx context.Context) (map[int]string, error) {
	if err := c.open(ctx); err != nil {
		return nil, err
	}
	ls, err := c.reader.Leases(ctx)
	if err != nil {
		return nil, err
	}
	owners := map[int]string{}
	for _, l := range ls {
		if l.Live {
			owners[l.Shard] = l.Owner
		}
	}
	return owners, nil
}

// oldestInFlight returns the earliest dispatch time among the activities
// in flight in the shards the node holds, by the history and the leases
// now (zero when none is).
func (c *clusterDB) oldestInFlight(ctx context.Context, node string) (time.Time, error) {
	owners, err := c.leases(ctx)
	if err != nil {
		return time.Time{}, err
	}
	tr, err := readTruth(ctx, c.reader)
	if err != nil {
		return time.Time{}, err
	}
	var oldest time.Time
	for _, run := range tr.Runs {
		if owners[eventstore.ShardOf(run.Workflow, c.reader.ShardCount())] != node {
			continue
		}
		for _, a := range run.Activities {
			if !a.Settled && (oldest.IsZero() || a.Dispatched.Before(oldest)) {
				oldest = a.Dispatched
			}
		}
	}
	return oldest, nil
}

// freeze holds every append until the returned function is called (see
// clusterDB). It returns once no append is in progress.
func (c *clusterDB) freeze(ctx context.Context) (func(), error) {
	conn, err := pgx.Connect(ctx, c.dsn)
	if err != nil {
		return nil, err
	}
	tx, err := conn.Begin(ctx)
	if err == nil {
		// Every append updates its workflow's row (its head) in the same
		// transaction as its events. One table, so that the lock waits
		// for appends in progress and deadlocks with none.
		_, err = tx.Exec(ctx, "LOCK TABLE aionotel_workflows IN SHARE MODE")
	}
	if err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("freezing the history: %w", err)
	}
	return func() {
		ctx := context.WithoutCancel(ctx)
		_ = tx.Rollback(ctx)
		_ = conn.Close(ctx)
	}, nil
}

// nodeDSN is the DSN of the named node: the schema's, with an
// application_name of the node's own, by which endSessions finds its
// connections.
func (c *clusterDB) nodeDSN(node string) (string, error) {
	return withParam(c.dsn, "application_name", c.schema+"-"+node)
}

// endSessions ends the named node's sessions (pg_terminate_backend) and
// waits until none is left: what the server does once it notices that a
// client is gone. A node killed while its appends waited in the server
// (the history frozen) would otherwise have them commit later, sent whole
// with their COMMIT: history that no node saw committing.
func (c *clusterDB) endSessions(ctx context.Context, node string) error {
	conn, err := pgx.Connect(ctx, c.admin)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	const q = `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()`
	return poll(ctx, 100*time.Millisecond, func(ctx context.Context) error {
		var n int
		if err := conn.QueryRow(ctx, q, c.schema+"-"+node).Scan(&n); err != nil {
			return permanent(err)
		}
		if n > 0 {
			return fmt.Errorf("%d sessions of node %s were still there", n, node)
		}
		return nil
	})
}

// close closes the reader and drops the schema.
func (c *clusterDB) close(ctx context.Context) error {
	if c.reader != nil {
		c.reader.Close()
	}
	conn, err := pgx.Connect(ctx, c.admin)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{c.schema}.Sanitize()+" CASCADE")
	return err
}

// kill ends the process group at once with SIGKILL, as a crash would: no
// drain, no flush, no lease released.
func (p *process) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	// Until Wait has reaped the leader, its group ID is ours.
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.done
}
