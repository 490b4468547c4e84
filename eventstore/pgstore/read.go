package pgstore

import (
	"context"
	"fmt"
	"math"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/aionotel/aionotel/eventstore"
)

const (
	qReadFrom = `SELECT seq, run_id, body FROM {events} WHERE workflow_id = $1 AND seq >= $2 ORDER BY seq`
	qRunChain = `SELECT run_id, pos, workflow_type, status, started_at, closed_at, first_seq, last_seq
FROM {runs} WHERE workflow_id = $1 ORDER BY pos`
	// The enumerating reads: $1 is the scope (NULL: every shard).
	qListIDs    = `SELECT workflow_id FROM {workflows} WHERE head > 0 AND ($1::int[] IS NULL OR shard = ANY($1)) ORDER BY workflow_id`
	qListActive = `SELECT workflow_id FROM {workflows} WHERE head > 0 AND ($1::int[] IS NULL OR shard = ANY($1))
AND status IN ('running', 'continued_as_new') ORDER BY workflow_id`
	qListPaused = `SELECT workflow_id FROM {workflows} WHERE head > 0 AND ($1::int[] IS NULL OR shard = ANY($1))
AND status = 'paused' ORDER BY workflow_id`
	qStreamHeads = `SELECT workflow_id, head FROM {workflows} WHERE head > 0 AND ($1::int[] IS NULL OR shard = ANY($1)) ORDER BY workflow_id`
	// $1 type, $2 status, $3/$4 started after (inclusive), $5/$6 started
	// before (exclusive), NULL for no bound; $7 limit, NULL for none.
	qQuery = `SELECT workflow_id, current_run, workflow_type, status, started_at, closed_at, head FROM {workflows}
WHERE head > 0
AND ($1::bytea IS NULL OR workflow_type = $1)
AND ($2::text IS NULL OR status = $2)
AND ($3::bigint IS NULL OR (started_s, started_ns) >= ($3, $4::int))
AND ($5::bigint IS NULL OR (started_s, started_ns) < ($5, $6::int))
ORDER BY started_s, started_ns, workflow_id
LIMIT $7`
)

// ReadHistory returns the workflow's events in Seq order, decoded into fresh
// values. An unknown workflow has an empty history and no error. A row that
// cannot be decoded fails the read with [ErrCorruptRecord].
func (s *Store) ReadHistory(ctx context.Context, workflowID eventstore.WorkflowID) ([]eventstore.Event, error) {
	return s.ReadHistoryFrom(ctx, workflowID, 1)
}

// ReadHistoryFrom returns the events with Seq >= fromSeq, in order; fromSeq
// 0 reads from the start, and a fromSeq past the head returns an empty
// slice. It is one range scan of the events' primary key, so it costs what
// it returns.
func (s *Store) ReadHistoryFrom(ctx context.Context, workflowID eventstore.WorkflowID, fromSeq uint64) ([]eventstore.Event, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	out := []eventstore.Event{}
	if fromSeq > math.MaxInt64 {
		return out, nil // past every head: seqs are bigints
	}
	rows, err := s.pool.Query(ctx, s.q.readFrom, uuidArg(workflowID), int64(fromSeq))
	if err != nil {
		return nil, s.dbErr("read history", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			seq  int64
			run  pgtype.UUID
			body []byte
		)
		if err := rows.Scan(&seq, &run, &body); err != nil {
			return nil, s.dbErr("read history", err)
		}
		ev, err := decodeEvent(workflowID, eventstore.RunID(run.Bytes), uint64(seq), body)
		if err != nil {
			return nil, fmt.Errorf("%w: workflow %s event %d: %w", ErrCorruptRecord, workflowID, seq, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("read history", err)
	}
	return out, nil
}

// ReadRunChain returns the workflow's runs in the order they first appeared
// in its history. An unknown workflow has no runs and no error.
func (s *Store) ReadRunChain(ctx context.Context, workflowID eventstore.WorkflowID) ([]eventstore.RunSummary, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.runChain, uuidArg(workflowID))
	if err != nil {
		return nil, s.dbErr("read run chain", err)
	}
	defer rows.Close()
	out := []eventstore.RunSummary{}
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, s.dbErr("read run chain", err)
		}
		out = append(out, r.RunSummary)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("read run chain", err)
	}
	return out, nil
}

// ListWorkflowIDs returns every workflow with a history, in ID order (the
// order of the IDs' canonical strings), limited to the enumeration scope
// when one is set (see [Store.SetOwnedShards]).
func (s *Store) ListWorkflowIDs(ctx context.Context) ([]eventstore.WorkflowID, error) {
	return s.listIDs(ctx, func(q *queries) string { return q.listIDs }, "list workflow IDs")
}

// ListActive returns, in ID order and within the enumeration scope, the
// workflows whose current run is running, counting one whose current run
// was closed by continue-as-new (its next run is still to start), as
// [eventstore.Memory.ListActive] does.
func (s *Store) ListActive(ctx context.Context) ([]eventstore.WorkflowID, error) {
	return s.listIDs(ctx, func(q *queries) string { return q.listActive }, "list active")
}

// ListPaused returns, in ID order and within the enumeration scope, the
// workflows whose current run is paused.
func (s *Store) ListPaused(ctx context.Context) ([]eventstore.WorkflowID, error) {
	return s.listIDs(ctx, func(q *queries) string { return q.listPaused }, "list paused")
}

// listIDs runs the listing that query picks, once enter has found the
// Store usable (a nil Store has no queries to pick from).
func (s *Store) listIDs(ctx context.Context, query func(*queries) string, op string) ([]eventstore.WorkflowID, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, query(&s.q), s.scopeArg())
	if err != nil {
		return nil, s.dbErr(op, err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (eventstore.WorkflowID, error) {
		var id pgtype.UUID
		err := r.Scan(&id)
		return eventstore.WorkflowID(id.Bytes), err
	})
	if err != nil {
		return nil, s.dbErr(op, err)
	}
	if ids == nil {
		ids = []eventstore.WorkflowID{}
	}
	return ids, nil
}

// StreamHeads returns each workflow's history length, in ID order and within
// the enumeration scope.
func (s *Store) StreamHeads(ctx context.Context) ([]eventstore.StreamHead, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.streamHeads, s.scopeArg())
	if err != nil {
		return nil, s.dbErr("stream heads", err)
	}
	heads, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (eventstore.StreamHead, error) {
		var id pgtype.UUID
		var head int64
		err := r.Scan(&id, &head)
		return eventstore.StreamHead{WorkflowID: eventstore.WorkflowID(id.Bytes), Head: uint64(head)}, err
	})
	if err != nil {
		return nil, s.dbErr("stream heads", err)
	}
	if heads == nil {
		heads = []eventstore.StreamHead{}
	}
	return heads, nil
}

// Query returns a summary of each workflow whose current run matches filter,
// as [eventstore.Memory.Query] does: WorkflowType and Status compare with the
// current run's, literally; StartedAfter (inclusive) and StartedBefore
// (exclusive) bound its StartedAt to the nanosecond; results are ordered by
// StartedAt, then ID, and a positive Limit keeps the first Limit. Query
// ignores the enumeration scope. It is one statement, served by the index on
// the start time when the filter names no type or status.
func (s *Store) Query(ctx context.Context, filter eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	var (
		typ        []byte
		status     *string
		afterS     *int64
		afterNS    *int32
		beforeS    *int64
		beforeNS   *int32
		limit      *int64
		statusText = string(filter.Status)
	)
	if filter.WorkflowType != "" {
		typ = []byte(filter.WorkflowType)
	}
	if filter.Status != "" {
		if !knownStatus(filter.Status) {
			return []eventstore.WorkflowSummary{}, nil // no run has it
		}
		status = &statusText
	}
	if !filter.StartedAfter.IsZero() {
		in := instantOf(filter.StartedAfter)
		afterS, afterNS = &in.sec, &in.nsec
	}
	if !filter.StartedBefore.IsZero() {
		in := instantOf(filter.StartedBefore)
		beforeS, beforeNS = &in.sec, &in.nsec
	}
	if filter.Limit > 0 {
		l := int64(filter.Limit)
		limit = &l
	}
	rows, err := s.pool.Query(ctx, s.q.query, typ, status, afterS, afterNS, beforeS, beforeNS, limit)
	if err != nil {
		return nil, s.dbErr("query", err)
	}
	defer rows.Close()
	out := []eventstore.WorkflowSummary{}
	for rows.Next() {
		var (
			id, run          pgtype.UUID
			typ, started, cl []byte
			st               string
			head             int64
		)
		if err := rows.Scan(&id, &run, &typ, &st, &started, &cl, &head); err != nil {
			return nil, s.dbErr("query", err)
		}
		sum := eventstore.WorkflowSummary{WorkflowID: eventstore.WorkflowID(id.Bytes), RunID: eventstore.RunID(run.Bytes),
			WorkflowType: string(typ), Status: eventstore.WorkflowStatus(st), Head: uint64(head)}
		if sum.StartedAt, err = readTime(started); err != nil {
			return nil, err
		}
		if sum.ClosedAt, err = readTime(cl); err != nil {
			return nil, err
		}
		out = append(out, sum)
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("query", err)
	}
	return out, nil
}

// knownStatus reports whether st is one of the statuses a run can have (the
// only values of the status column).
func knownStatus(st eventstore.WorkflowStatus) bool {
	switch st {
	case eventstore.StatusRunning, eventstore.StatusPaused, eventstore.StatusCompleted, eventstore.StatusFailed,
		eventstore.StatusCancelled, eventstore.StatusTimedOut, eventstore.StatusContinuedAsNew:
		return true
	}
	return false
}
