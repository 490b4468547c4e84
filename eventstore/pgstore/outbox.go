package pgstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/aionotel/aionotel/eventstore"
)

const (
	// Oldest first among the pending rows no concurrent claimer has
	// locked: two claimers never get the same row, and neither waits for
	// the other.
	qClaim = `UPDATE {outbox} SET state = 2 WHERE id IN (
	SELECT id FROM {outbox} WHERE state = 1 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
) RETURNING id, dispatch_key, workflow_id, run_id, ordinal, activity_type, input_type, input_data, created_at`
	// The same, among the rows of the shards this Store holds now ($2
	// node, $3 life, $4 lease clock), whose lease rows it locks FOR KEY
	// SHARE, as a write does, so that no takeover commits meanwhile.
	qClaimOwned = `UPDATE {outbox} SET state = 2 WHERE id IN (
	SELECT id FROM {outbox} WHERE state = 1 AND shard IN (
		SELECT shard FROM {shards} WHERE owner = $2 AND life = $3 AND epoch > 0 AND expires > coalesce($4::timestamptz, clock_timestamp())
		FOR KEY SHARE
	) ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED
) RETURNING id, dispatch_key, workflow_id, run_id, ordinal, activity_type, input_type, input_data, created_at`
	qCountClaimed = `SELECT count(*) FROM {outbox} WHERE state = 2`
	qLockKeys     = `SELECT key_hash FROM {outbox} WHERE key_hash = ANY($1) FOR UPDATE`
	qRearm        = `UPDATE {outbox} SET state = 1 WHERE key_hash = ANY($1) AND state = 2`
	// The EXISTS reads the statement's snapshot, where the row is whatever
	// the update does to it.
	qCancelRow = `WITH u AS (UPDATE {outbox} SET state = 4 WHERE key_hash = $1 AND state IN (1, 2) RETURNING 1)
SELECT EXISTS (SELECT 1 FROM {outbox} WHERE key_hash = $1)`
	qCancelWorkflow = `WITH ` + fenceCTE + `, u AS (
	UPDATE {outbox} SET state = 4 WHERE workflow_id = $4 AND state IN (1, 2) AND (SELECT ok FROM ok)
	RETURNING id, dispatch_key
)
SELECT ` + fenceCols + `, (SELECT coalesce(array_agg(dispatch_key ORDER BY id), '{}') FROM u)`
)

// ClaimOutboxRows claims up to limit pending rows, oldest (first staged)
// first, and returns them in state [eventstore.OutboxClaimed], in staging
// order; an empty slice when nothing is pending. A limit <= 0 returns an
// error wrapping [eventstore.ErrInvalidArgument]. It is one statement
// (UPDATE ... FOR UPDATE SKIP LOCKED): concurrent claimers, on any node,
// never claim the same row and do not wait for each other, so a row locked
// by a concurrent claim or append may be passed over for a younger one.
// Claims ignore the enumeration scope. Without [WithOwnedShardClaims] they
// are not fenced and a dispatcher claims for every shard; with it, only
// rows of the shards this Store holds now, checked in the claiming
// statement itself.
func (s *Store) ClaimOutboxRows(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, fmt.Errorf("%w: claim limit %d is not positive", eventstore.ErrInvalidArgument, limit)
	}
	var (
		rows pgx.Rows
		err  error
	)
	if s.cfg.ownClaims {
		rows, err = s.pool.Query(ctx, s.q.claimOwned, int64(limit), s.cfg.node, s.life, s.leaseNow())
	} else {
		rows, err = s.pool.Query(ctx, s.q.claim, int64(limit))
	}
	if err != nil {
		return nil, s.dbErr("claim outbox rows", err)
	}
	defer rows.Close()
	type claimed struct {
		id  int64
		row eventstore.OutboxRow
	}
	var got []claimed
	for rows.Next() {
		var (
			c                                 claimed
			key, typ, itype, idata, createdAt []byte
			wf, run                           pgtype.UUID
			ord                               int64
		)
		if err := rows.Scan(&c.id, &key, &wf, &run, &ord, &typ, &itype, &idata, &createdAt); err != nil {
			return nil, s.dbErr("claim outbox rows", err)
		}
		at, err := readTime(createdAt)
		if err != nil {
			return nil, err
		}
		c.row = eventstore.OutboxRow{DispatchKey: string(key), WorkflowID: eventstore.WorkflowID(wf.Bytes), RunID: eventstore.RunID(run.Bytes),
			Ordinal: eventstore.ActivityID(ord), ActivityType: string(typ), Input: eventstore.Payload{ContentType: string(itype), Data: idata},
			CreatedAt: at, State: eventstore.OutboxClaimed}
		got = append(got, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("claim outbox rows", err)
	}
	slices.SortFunc(got, func(a, b claimed) int { return cmp.Compare(a.id, b.id) })
	out := make([]eventstore.OutboxRow, len(got))
	for i, c := range got {
		out[i] = c.row
	}
	return out, nil
}

// RearmOutboxPending returns claimed rows to pending (crash recovery: their
// dispatcher died before they settled); they are claimed again in their
// original staging order. Rows are named by DispatchKey; their other fields
// are ignored. Every named row must be staged, else the call returns an
// error wrapping [eventstore.ErrNotFound] and changes nothing; an empty
// DispatchKey returns an error wrapping [eventstore.ErrInvalidArgument]. A
// pending row stays pending; a settled or cancelled row is not revived.
func (s *Store) RearmOutboxPending(ctx context.Context, rows []eventstore.OutboxRow) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	keys := make([][]byte, len(rows))
	for i, r := range rows {
		if r.DispatchKey == "" {
			return fmt.Errorf("%w: outbox row %d has an empty dispatch key", eventstore.ErrInvalidArgument, i)
		}
		keys[i] = digest(r.DispatchKey)
	}
	if len(rows) == 0 {
		return nil
	}
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		found, err := tx.Query(ctx, s.q.lockKeys, keys)
		if err != nil {
			return err
		}
		held, err := pgx.CollectRows(found, pgx.RowTo[[]byte])
		if err != nil {
			return err
		}
		have := make(map[string]bool, len(held))
		for _, h := range held {
			have[string(h)] = true
		}
		for i, k := range keys {
			if !have[string(k)] {
				return refusal{fmt.Errorf("%w: outbox row %d: dispatch key %q", eventstore.ErrNotFound, i, rows[i].DispatchKey)}
			}
		}
		_, err = tx.Exec(ctx, s.q.rearm, keys)
		return err
	})
	if err != nil && !isRefusal(err) {
		return s.dbErr("re-arm outbox rows", err)
	}
	return err
}

// CountClaimedOutboxRows returns how many rows are claimed now, across the
// whole store.
func (s *Store) CountClaimedOutboxRows(ctx context.Context) (int, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	var n int64
	if err := s.pool.QueryRow(ctx, s.q.countClaimed).Scan(&n); err != nil {
		return 0, s.dbErr("count claimed outbox rows", err)
	}
	return int(n), nil
}

// SettleOutboxRowCancelled cancels the row with this dispatch key if it is
// pending or claimed; a row already settled or cancelled is left as it is
// and the call succeeds. An unknown key returns an error wrapping
// [eventstore.ErrNotFound]; an empty one an error wrapping
// [eventstore.ErrInvalidArgument]. Like the claims it is a dispatcher's
// call, named by key, and not fenced.
func (s *Store) SettleOutboxRowCancelled(ctx context.Context, dispatchKey string) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if dispatchKey == "" {
		return fmt.Errorf("%w: empty dispatch key", eventstore.ErrInvalidArgument)
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, s.q.cancelRow, digest(dispatchKey)).Scan(&exists); err != nil {
		return s.dbErr("settle outbox row", err)
	}
	if !exists {
		return fmt.Errorf("%w: dispatch key %q", eventstore.ErrNotFound, dispatchKey)
	}
	return nil
}

// SettleWorkflowOutboxRowsCancelled cancels every pending or claimed row of
// the workflow (any run) and returns their dispatch keys in staging order;
// with none open it returns an empty slice. A zero workflow ID returns an
// error wrapping [eventstore.ErrInvalidArgument]. It is a write to the
// workflow, fenced as an append is ([eventstore.ErrNotOwner]).
func (s *Store) SettleWorkflowOutboxRowsCancelled(ctx context.Context, workflowID eventstore.WorkflowID) ([]string, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	if workflowID.IsZero() {
		return nil, fmt.Errorf("%w: zero workflow ID", eventstore.ErrInvalidArgument)
	}
	shard := s.shardOf(workflowID)
	var (
		ok   bool
		fr   fenceRead
		keys [][]byte
	)
	err := s.pool.QueryRow(ctx, s.q.cancelWorkflow, shard, s.epochOf(shard), s.leaseNow(), uuidArg(workflowID)).
		Scan(append(append([]any{&ok}, fr.dest()...), &keys)...)
	if err != nil {
		return nil, s.dbErr("settle workflow outbox rows", err)
	}
	if err := s.fenceErr(shard, workflowID, ok, fr); err != nil {
		return nil, err
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	return out, nil
}
