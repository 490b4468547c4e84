package pgstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// qPruneClosed locks the workflows to remove; the deletes that follow, each
// a statement of its own, see every event committed before the locks were
// taken, and no append to these workflows can commit while they are held.
const qPruneClosed = `SELECT workflow_id FROM {workflows}
WHERE status IN ('completed', 'failed', 'cancelled', 'timed_out') AND (closed_s, closed_ns) < ($1, $2)
FOR UPDATE`

var pruneDeletes = []string{
	`DELETE FROM {events} WHERE workflow_id = ANY($1)`,
	`DELETE FROM {runs} WHERE workflow_id = ANY($1)`,
	`DELETE FROM {timers} WHERE workflow_id = ANY($1)`,
	`DELETE FROM {outbox} WHERE workflow_id = ANY($1)`,
	`DELETE FROM {workflows} WHERE workflow_id = ANY($1)`,
}

// PruneClosed removes every workflow whose current run closed before the
// given time, and returns how many it removed: the retention of a
// long-running deployment, with [eventstore.Memory.PruneClosed]'s rules. A
// workflow goes when its current run's status is completed, failed,
// cancelled or timed out and its ClosedAt is strictly before before; a run
// closed by continue-as-new, a running or a paused workflow stays. With it
// go its history, run chain, timers and outbox rows in every state;
// afterwards the workflow ID is as if never written (the next Append starts
// at expectedSeq 0). Packages, routes and leases stay.
//
// It runs in one transaction, which locks the workflows it removes: an
// append to one of them waits, then finds the history gone (a
// *[eventstore.SequenceConflictError] with Found 0). It ignores the
// enumeration scope and is not fenced: any node may call it, one is enough.
// Its cost grows with what it removes; call it periodically, not per
// operation.
func (s *Store) PruneClosed(ctx context.Context, before time.Time) (int, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	in := instantOf(before)
	var n int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.setIdle); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, s.q.pruneClosed, in.sec, in.nsec)
		if err != nil {
			return err
		}
		gone, err := pgx.CollectRows(rows, pgx.RowTo[pgtype.UUID])
		if err != nil || len(gone) == 0 {
			return err
		}
		n = len(gone)
		b := &pgx.Batch{}
		for _, q := range pruneDeletes {
			b.Queue(s.n.sql(q), gone)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return 0, s.dbErr("prune closed", err)
	}
	return n, nil
}
