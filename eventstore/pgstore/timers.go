package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/aionotel/aionotel/eventstore"
)

// fenceCTE is the shard fence of a one-statement write: $1 the shard, $2
// the epoch this Store was granted for it (-1: none), $3 the lease clock
// (NULL: the database's). ok is true when the shard was never acquired
// (epoch 0) or its current epoch is $2 with the lease live; the lease row
// stays locked FOR KEY SHARE until the statement's transaction ends, so no
// takeover commits between the check and the write.
const fenceCTE = `fence AS MATERIALIZED (
	SELECT owner, life, epoch, epoch > 0 AND expires > coalesce($3::timestamptz, clock_timestamp()) AS live
	FROM {shards} WHERE shard = $1 FOR KEY SHARE
), ok AS (
	SELECT NOT EXISTS (SELECT 1 FROM fence WHERE epoch > 0 AND NOT (live AND epoch = $2)) AS ok
)`

// fenceCols returns what the fence read, for the error: ok, owner, life,
// epoch, live (NULL when the row is missing).
const fenceCols = `(SELECT ok FROM ok), (SELECT owner FROM fence), (SELECT life FROM fence), (SELECT epoch FROM fence), (SELECT live FROM fence)`

const (
	// $4 workflow, $5 timer key, $6 timer id, $7 fire_s, $8 fire_ns, $9
	// fire_at, $10 armed seq.
	qScheduleTimer = `WITH ` + fenceCTE + `, ins AS (
	INSERT INTO {timers} (workflow_id, timer_key, timer_id, shard, fire_s, fire_ns, fire_at, armed_seq)
	SELECT $4, $5, $6, $1, $7, $8, $9, $10 FROM ok WHERE ok.ok
	ON CONFLICT (workflow_id, timer_key) DO UPDATE SET fire_s = EXCLUDED.fire_s, fire_ns = EXCLUDED.fire_ns,
		fire_at = EXCLUDED.fire_at, armed_seq = EXCLUDED.armed_seq
	RETURNING 1
)
SELECT ` + fenceCols
	// $4 workflow, $5 timer key, $6 fire_s, $7 fire_ns, $8 armed seq. The
	// EXISTS reads the statement's snapshot, before the delete.
	qRetireTimer = `WITH ` + fenceCTE + `, del AS (
	DELETE FROM {timers} WHERE workflow_id = $4 AND timer_key = $5 AND fire_s = $6 AND fire_ns = $7 AND armed_seq = $8
	AND (SELECT ok FROM ok)
	RETURNING 1
)
SELECT ` + fenceCols + `, (SELECT count(*) FROM del),
	EXISTS (SELECT 1 FROM {timers} WHERE workflow_id = $4 AND timer_key = $5)`
	qExpiredTimers = `SELECT workflow_id, timer_id, fire_at, armed_seq FROM {timers}
WHERE (fire_s, fire_ns) <= ($1, $2) AND ($3::int[] IS NULL OR shard = ANY($3))
ORDER BY fire_s, fire_ns, workflow_id, timer_id`
)

// checkTimer refuses a zero workflow ID or an empty timer ID, as Memory does.
func checkTimer(workflowID eventstore.WorkflowID, timerID eventstore.TimerID) error {
	if workflowID.IsZero() {
		return fmt.Errorf("%w: zero workflow ID", eventstore.ErrInvalidArgument)
	}
	if timerID == "" {
		return fmt.Errorf("%w: empty timer ID", eventstore.ErrInvalidArgument)
	}
	return nil
}

// fenceErr turns what fenceCols read into the fence's error, nil when the
// write was allowed.
func (s *Store) fenceErr(shard int32, wf eventstore.WorkflowID, ok bool, fr fenceRead) error {
	if ok {
		return nil
	}
	var f fenceResult
	if fr.owner != nil {
		f = fenceResult{owner: *fr.owner, life: *fr.life, epoch: *fr.epoch, live: *fr.live}
	}
	if err := f.check(s, shard, wf); err != nil {
		return err
	}
	// The statement refused and the map says otherwise: the grant changed
	// meanwhile (this Store re-acquired the shard). Refuse all the same.
	return fmt.Errorf("%w: pgstore: workflow %s is in shard %d, whose epoch changed during the write", eventstore.ErrNotOwner, wf, shard)
}

// fenceRead receives fenceCols but ok.
type fenceRead struct {
	owner *string
	life  *int64
	epoch *int64
	live  *bool
}

func (f *fenceRead) dest() []any { return []any{&f.owner, &f.life, &f.epoch, &f.live} }

// ScheduleTimer arms the timer, replacing (re-arming) one already armed under
// the same workflow and timer ID; the workflow need not have a history yet.
// A zero workflow ID or an empty timer ID returns an error wrapping
// [eventstore.ErrInvalidArgument]. It is a write to the workflow, fenced as
// an append is ([eventstore.ErrNotOwner] when another node holds its shard),
// in one statement.
func (s *Store) ScheduleTimer(ctx context.Context, workflowID eventstore.WorkflowID, timerID eventstore.TimerID, fireAt time.Time, armedSeq uint64) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if err := checkTimer(workflowID, timerID); err != nil {
		return err
	}
	shard := s.shardOf(workflowID)
	in := instantOf(fireAt)
	var (
		ok bool
		fr fenceRead
	)
	err := s.pool.QueryRow(ctx, s.q.scheduleTimer, shard, s.epochOf(shard), s.leaseNow(),
		uuidArg(workflowID), digest(string(timerID)), []byte(timerID), in.sec, in.nsec, timeBytes(fireAt), int64(armedSeq),
	).Scan(append([]any{&ok}, fr.dest()...)...)
	if err != nil {
		return s.dbErr("schedule timer", err)
	}
	return s.fenceErr(shard, workflowID, ok, fr)
}

// ExpiredTimers returns the armed timers with FireAt <= asOf, within the
// enumeration scope, ordered by FireAt, then workflow ID, then timer ID
// (bytewise), as [eventstore.Memory.ExpiredTimers] does. It does not remove
// them: a timer stays armed until [Store.RetireTimer].
func (s *Store) ExpiredTimers(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	in := instantOf(asOf)
	rows, err := s.pool.Query(ctx, s.q.expiredTimers, in.sec, in.nsec, s.scopeArg())
	if err != nil {
		return nil, s.dbErr("expired timers", err)
	}
	defer rows.Close()
	out := []eventstore.TimerEntry{}
	for rows.Next() {
		var (
			wf        pgtype.UUID
			id, fire  []byte
			armedSeq  int64
			fireAt, e = time.Time{}, error(nil)
		)
		if err := rows.Scan(&wf, &id, &fire, &armedSeq); err != nil {
			return nil, s.dbErr("expired timers", err)
		}
		if fireAt, e = readTime(fire); e != nil {
			return nil, e
		}
		out = append(out, eventstore.TimerEntry{WorkflowID: eventstore.WorkflowID(wf.Bytes), TimerID: eventstore.TimerID(id),
			FireAt: fireAt, ArmedSeq: uint64(armedSeq)})
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("expired timers", err)
	}
	return out, nil
}

// RetireTimer removes the timer only if it is armed with this very fireAt
// (the same instant, to the nanosecond) and armedSeq, and returns
// [eventstore.TimerRetired]; a timer armed otherwise stays and the result is
// [eventstore.TimerSuperseded]; no armed timer gives
// [eventstore.TimerAbsent]. A zero workflow ID or an empty timer ID returns
// an error wrapping [eventstore.ErrInvalidArgument]. Fenced as
// [Store.ScheduleTimer] is; one statement.
func (s *Store) RetireTimer(ctx context.Context, workflowID eventstore.WorkflowID, timerID eventstore.TimerID, fireAt time.Time, armedSeq uint64) (eventstore.TimerRetirement, error) {
	if err := s.enter(ctx); err != nil {
		return 0, err
	}
	if err := checkTimer(workflowID, timerID); err != nil {
		return 0, err
	}
	shard := s.shardOf(workflowID)
	in := instantOf(fireAt)
	var (
		ok      bool
		fr      fenceRead
		deleted int64
		exists  bool
	)
	err := s.pool.QueryRow(ctx, s.q.retireTimer, shard, s.epochOf(shard), s.leaseNow(),
		uuidArg(workflowID), digest(string(timerID)), in.sec, in.nsec, int64(armedSeq),
	).Scan(append(append([]any{&ok}, fr.dest()...), &deleted, &exists)...)
	if err != nil {
		return 0, s.dbErr("retire timer", err)
	}
	if err := s.fenceErr(shard, workflowID, ok, fr); err != nil {
		return 0, err
	}
	switch {
	case deleted > 0:
		return eventstore.TimerRetired, nil
	case exists:
		return eventstore.TimerSuperseded, nil
	default:
		return eventstore.TimerAbsent, nil
	}
}
