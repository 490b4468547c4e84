package pgstore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/aionotel/aionotel/eventstore"
)

// The statements of an append. The first batch takes the locks and reads;
// Go decides; the second batch writes and commits.
const (
	// The lease row of the workflow's shard, locked FOR KEY SHARE until the
	// transaction ends: a takeover (FOR UPDATE NOWAIT) is refused while
	// it runs, a renewal (an update of expires alone) does not conflict
	// with it, and this transaction sees a takeover that committed first.
	// Epoch 0: never acquired.
	qFenceRow = `SELECT owner, life, epoch, epoch > 0 AND expires > coalesce($2::timestamptz, clock_timestamp())
FROM {shards} WHERE shard = $1 FOR KEY SHARE`
	// A first append creates the workflow's row, or waits for a concurrent
	// creator and then does nothing.
	qCreateWorkflow = `INSERT INTO {workflows} (workflow_id, shard, head, run_count) VALUES ($1, $2, 0, 0)
ON CONFLICT (workflow_id) DO NOTHING`
	qLockWorkflow = `SELECT head, run_count FROM {workflows} WHERE workflow_id = $1 FOR UPDATE`
	// The runs the batch names, and the current run.
	qLoadRuns = `SELECT run_id, pos, workflow_type, status, started_at, closed_at, first_seq, last_seq
FROM {runs} WHERE workflow_id = $1
AND (run_id = ANY($2) OR run_id = (SELECT current_run FROM {workflows} WHERE workflow_id = $1))`
	qStagedKeys = `SELECT dispatch_key FROM {outbox} WHERE key_hash = ANY($1)`

	qInsertEvents = `INSERT INTO {events} (workflow_id, seq, run_id, kind, body)
SELECT $1, * FROM unnest($2::bigint[], $3::uuid[], $4::text[], $5::bytea[])`
	qUpsertRuns = `INSERT INTO {runs} AS r (workflow_id, run_id, pos, workflow_type, status, started_at, closed_at, first_seq, last_seq)
SELECT $1, * FROM unnest($2::uuid[], $3::int[], $4::bytea[], $5::text[], $6::bytea[], $7::bytea[], $8::bigint[], $9::bigint[])
ON CONFLICT (workflow_id, run_id) DO UPDATE SET workflow_type = EXCLUDED.workflow_type, status = EXCLUDED.status,
	started_at = EXCLUDED.started_at, closed_at = EXCLUDED.closed_at, last_seq = EXCLUDED.last_seq`
	qUpdateWorkflow = `UPDATE {workflows} SET head = $2, run_count = $3, current_run = $4, workflow_type = $5, status = $6,
	started_at = $7, started_s = $8, started_ns = $9, closed_at = $10, closed_s = $11, closed_ns = $12
WHERE workflow_id = $1`
	qStageRows = `INSERT INTO {outbox} (key_hash, dispatch_key, workflow_id, run_id, ordinal, activity_type, input_type, input_data, created_at, state, shard)
SELECT k, d, $1, r, o, a, it, idata, c, 1, $10
FROM unnest($2::bytea[], $3::bytea[], $4::uuid[], $5::bigint[], $6::bytea[], $7::bytea[], $8::bytea[], $9::bytea[])
	WITH ORDINALITY AS u(k, d, r, o, a, it, idata, c, ord)
ORDER BY ord`
	qSettleActivities = `UPDATE {outbox} SET state = 3
WHERE workflow_id = $1 AND state IN (1, 2) AND (run_id, ordinal) IN (SELECT * FROM unnest($2::uuid[], $3::bigint[]))`
)

// Append commits events after the workflow's current last event, all or
// nothing, as [eventstore.Memory.Append] does, with the same checks in the
// same order: the token ([eventstore.ErrInvalidToken], even for an empty
// batch), the context, the store ([ErrClosed]), [eventstore.ValidateAppend];
// then an empty batch is a no-op. Then, in one transaction: the shard fence
// (see [Store.AcquireOwnedShards]: a shard some node has acquired takes
// writes only from its holder while the lease lasts, else
// [eventstore.ErrNotOwner]), then the expected sequence (a stale one returns
// a *[eventstore.SequenceConflictError] whose Found is the history length).
// Nothing is written on any error.
//
// The transaction locks the shard's lease row FOR KEY SHARE and the
// workflow's row exclusively: appends to one workflow run one at a time,
// appends to different workflows in parallel, a takeover of the shard is
// refused while appends are in progress (it does not wait: see
// [ErrLeaseBusy]) and renewals go on. The fence compares the shard's
// current epoch with the one this Store was granted, inside the
// transaction that writes, so an append of a Store whose epoch is no longer
// current, whatever its node name, writes nothing. A transaction left idle
// (its process paused) is ended by the server after
// [WithIdleInTransactionTimeout]. It costs two round trips (reads and locks, then
// writes and commit) whatever the batch holds. A zero RecordedAt is set to
// the [WithClock] clock, one reading per append. An append that returned
// nil is committed (durable as far as the server's settings make a commit
// durable); one that returned an error, a lost connection included, may
// have committed only when the error came from the COMMIT itself, and a
// caller that must know reads the history's head.
func (s *Store) Append(ctx context.Context, token eventstore.WriteToken, workflowID eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	return s.AppendWithOutbox(ctx, token, workflowID, events, expectedSeq, nil)
}

// AppendWithOutbox is [Store.Append] that also stages outbox rows in the same
// transaction, with [eventstore.Memory.AppendWithOutbox]'s rules: after the
// Append checks, no events and no rows is a no-op; then the fence and the
// expected sequence (also when only rows are staged); then each row: a zero
// WorkflowID is set to workflowID, another workflow or a zero RunID is
// refused, an empty DispatchKey is set to [eventstore.DispatchKey], and a
// key repeated in the batch or already staged (in any state, by any
// workflow) is refused, all with errors wrapping
// [eventstore.ErrInvalidArgument]. Rows are staged (pending, CreatedAt set
// to the [WithClock] clock when zero) before the events are applied, so an
// activity terminal event of the same batch settles the row staged for it.
func (s *Store) AppendWithOutbox(ctx context.Context, token eventstore.WriteToken, workflowID eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64, rows []eventstore.OutboxRow) error {
	if !token.Valid() {
		return eventstore.ErrInvalidToken
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	if err := eventstore.ValidateAppend(workflowID, events); err != nil {
		return err
	}
	if len(events) == 0 && len(rows) == 0 {
		return nil
	}
	now := s.cfg.now()
	a := appendPlan{s: s, wf: workflowID, expected: expectedSeq, events: events, now: now}
	a.prepareRows(rows)
	if s.hooks != nil && s.hooks.beforeTx != nil {
		s.hooks.beforeTx()
	}
	p, err := s.acquire(ctx)
	if err != nil {
		return err
	}
	defer p.end()
	return a.run(ctx, p)
}

// appendPlan is one append on its way through the transaction.
type appendPlan struct {
	s        *Store
	wf       eventstore.WorkflowID
	expected uint64
	events   []eventstore.Event
	now      time.Time

	rows    []eventstore.OutboxRow // completed rows, up to the first bad one
	rowErr  error                  // the first in-batch refusal, checked after the sequence
	errAt   int                    // index of the row rowErr is about
	keyHash [][]byte               // digests of rows' dispatch keys

	// What the first batch read.
	head     uint64
	runCount int32
	runs     map[eventstore.RunID]*runState
	current  *runState
	staged   map[string]bool
}

// runState is a run as the append changes it.
type runState struct {
	eventstore.RunSummary
	pos int32
}

// prepareRows completes and checks the rows in Memory's order, up to the
// first refusal, whose reporting waits for the sequence check.
func (a *appendPlan) prepareRows(rows []eventstore.OutboxRow) {
	a.errAt = len(rows)
	seen := make(map[string]int, len(rows))
	for i, r := range rows {
		if r.WorkflowID.IsZero() {
			r.WorkflowID = a.wf
		}
		switch {
		case r.WorkflowID != a.wf:
			a.rowErr = fmt.Errorf("%w: outbox row %d names workflow %s, but the append is for workflow %s", eventstore.ErrInvalidArgument, i, r.WorkflowID, a.wf)
		case r.RunID.IsZero():
			a.rowErr = fmt.Errorf("%w: outbox row %d has a zero run ID", eventstore.ErrInvalidArgument, i)
		}
		if a.rowErr == nil {
			if r.DispatchKey == "" {
				r.DispatchKey = eventstore.DispatchKey(r.WorkflowID, r.RunID, r.Ordinal)
			}
			if j, dup := seen[r.DispatchKey]; dup {
				a.rowErr = fmt.Errorf("%w: outbox rows %d and %d share dispatch key %q", eventstore.ErrInvalidArgument, j, i, r.DispatchKey)
			}
		}
		if a.rowErr != nil {
			a.errAt = i
			return
		}
		seen[r.DispatchKey] = i
		if r.CreatedAt.IsZero() {
			r.CreatedAt = a.now
		}
		a.rows = append(a.rows, r)
		a.keyHash = append(a.keyHash, digest(r.DispatchKey))
	}
}

func (a *appendPlan) run(ctx context.Context, p *pipeline) error {
	s := a.s
	shard := s.shardOf(a.wf)
	wf := uuidArg(a.wf)
	var fence fenceResult
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(s.setIdle)
	b.Queue(s.q.fenceRow, shard, s.leaseNow())
	creates := len(a.events) > 0 && a.expected == 0
	if creates {
		b.Queue(s.q.createWorkflow, wf, shard)
	}
	b.Queue(s.q.lockWorkflow, wf)
	if len(a.events) > 0 {
		b.Queue(s.q.loadRuns, wf, a.runIDs())
	}
	if len(a.keyHash) > 0 {
		b.Queue(s.q.stagedKeys, a.keyHash)
	}
	err := p.send(ctx, b, func(br pgx.BatchResults) error {
		for range 2 { // BEGIN, SET LOCAL
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		if err := fence.read(br); err != nil {
			return err
		}
		if creates {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		var head int64
		switch err := br.QueryRow().Scan(&head, &a.runCount); {
		case isNoRows(err):
			head = 0
		case err != nil:
			return err
		}
		a.head = uint64(head)
		if len(a.events) > 0 {
			if err := a.readRuns(br); err != nil {
				return err
			}
		}
		if len(a.keyHash) > 0 {
			return a.readStaged(br)
		}
		return nil
	})
	if err != nil {
		return s.dbErr("append", err)
	}
	if err := fence.check(s, shard, a.wf); err != nil {
		return err
	}
	if a.head != a.expected {
		return &eventstore.SequenceConflictError{Expected: a.expected, Found: a.head}
	}
	for i, r := range a.rows {
		if a.staged[r.DispatchKey] {
			return fmt.Errorf("%w: outbox row %d: dispatch key %q is already staged", eventstore.ErrInvalidArgument, i, r.DispatchKey)
		}
	}
	if a.rowErr != nil {
		return a.rowErr
	}
	if a.expected > math.MaxInt64-uint64(len(a.events)) {
		return fmt.Errorf("%w: pgstore: workflow %s: seqs past 2^63-1", eventstore.ErrInvalidArgument, a.wf)
	}
	if s.hooks != nil && s.hooks.afterLock != nil {
		s.hooks.afterLock(p.conn.Conn().PgConn().PID())
	}

	w := &pgx.Batch{}
	if len(a.rows) > 0 {
		a.queueRows(w)
	}
	if len(a.events) > 0 {
		a.queueEvents(w)
	}
	w.Queue("COMMIT")
	err = p.send(ctx, w, func(br pgx.BatchResults) error {
		for range w.Len() {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if sqlState(err) == "23505" {
			// A concurrent append of another workflow staged one of these
			// dispatch keys first.
			return fmt.Errorf("%w: outbox rows: a dispatch key is already staged (%w)", eventstore.ErrInvalidArgument, err)
		}
		return s.dbErr("append", err)
	}
	return nil
}

// runIDs returns the run IDs the batch names.
func (a *appendPlan) runIDs() []pgtype.UUID {
	seen := make(map[eventstore.RunID]bool)
	var out []pgtype.UUID
	for _, ev := range a.events {
		if id := ev.EventEnvelope().RunID; !seen[id] {
			seen[id] = true
			out = append(out, uuidArg(id))
		}
	}
	return out
}

func (a *appendPlan) readRuns(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	a.runs = make(map[eventstore.RunID]*runState)
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return err
		}
		a.runs[r.RunID] = r
		if a.current == nil || r.pos > a.current.pos {
			a.current = r
		}
	}
	return rows.Err()
}

// scanRun reads a run row: run_id, pos, workflow_type, status, started_at,
// closed_at, first_seq, last_seq.
func scanRun(rows pgx.Rows) (*runState, error) {
	var (
		id               pgtype.UUID
		r                runState
		typ, started, cl []byte
		status           string
		first, last      int64
	)
	if err := rows.Scan(&id, &r.pos, &typ, &status, &started, &cl, &first, &last); err != nil {
		return nil, err
	}
	var err error
	r.RunID = eventstore.RunID(id.Bytes)
	r.WorkflowType = string(typ)
	r.Status = eventstore.WorkflowStatus(status)
	r.FirstSeq, r.LastSeq = uint64(first), uint64(last)
	if r.StartedAt, err = readTime(started); err != nil {
		return nil, err
	}
	if r.ClosedAt, err = readTime(cl); err != nil {
		return nil, err
	}
	return &r, nil
}

func (a *appendPlan) readStaged(br pgx.BatchResults) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	a.staged = make(map[string]bool)
	for rows.Next() {
		var key []byte
		if err := rows.Scan(&key); err != nil {
			return err
		}
		a.staged[string(key)] = true
	}
	return rows.Err()
}

func (a *appendPlan) queueRows(b *pgx.Batch) {
	n := len(a.rows)
	keys, runs, ords := make([][]byte, n), make([]pgtype.UUID, n), make([]int64, n)
	types, itypes, idata, created := make([][]byte, n), make([][]byte, n), make([][]byte, n), make([][]byte, n)
	for i, r := range a.rows {
		keys[i], runs[i], ords[i] = bs(r.DispatchKey), uuidArg(r.RunID), int64(r.Ordinal)
		types[i], itypes[i], idata[i], created[i] = bs(r.ActivityType), bs(r.Input.ContentType), nullBytes(r.Input.Data), timeBytes(r.CreatedAt)
	}
	b.Queue(a.s.q.stageRows, uuidArg(a.wf), a.keyHash, keys, runs, ords, types, itypes, idata, created, a.s.shardOf(a.wf))
}

// queueEvents stamps the events, applies them to their runs as
// eventstore.Memory does, and queues the writes of events, runs, the
// workflow row and the outbox rows they settle.
func (a *appendPlan) queueEvents(b *pgx.Batch) {
	n := len(a.events)
	seqs, runIDs, kinds, bodies := make([]int64, n), make([]pgtype.UUID, n), make([]string, n), make([][]byte, n)
	var touched []*runState
	var settleRuns []pgtype.UUID
	var settleOrds []int64
	for i, ev := range a.events {
		env := ev.EventEnvelope()
		env.WorkflowID = a.wf
		env.Seq = a.expected + 1 + uint64(i)
		if env.RecordedAt.IsZero() {
			env.RecordedAt = a.now
		}
		ev = eventstore.WithEnvelope(ev, env)
		body := encodeEvent(ev)
		seqs[i], runIDs[i], kinds[i], bodies[i] = int64(env.Seq), uuidArg(env.RunID), kindOf(body), body

		run := a.runs[env.RunID]
		if run == nil {
			run = &runState{pos: a.runCount, RunSummary: eventstore.RunSummary{
				RunID: env.RunID, Status: eventstore.StatusRunning, StartedAt: env.RecordedAt, FirstSeq: env.Seq,
			}}
			a.runCount++
			a.runs[env.RunID] = run
			a.current = run
		}
		if !containsRun(touched, run) {
			touched = append(touched, run)
		}
		if act, ok := applyEvent(run, ev); ok {
			settleRuns = append(settleRuns, uuidArg(env.RunID))
			settleOrds = append(settleOrds, int64(act))
		}
	}
	wf := uuidArg(a.wf)
	b.Queue(a.s.q.insertEvents, wf, seqs, runIDs, kinds, bodies)

	m := len(touched)
	ids, pos, types, statuses := make([]pgtype.UUID, m), make([]int32, m), make([][]byte, m), make([]string, m)
	started, closed, firsts, lasts := make([][]byte, m), make([][]byte, m), make([]int64, m), make([]int64, m)
	for i, r := range touched {
		ids[i], pos[i], types[i], statuses[i] = uuidArg(r.RunID), r.pos, bs(r.WorkflowType), string(r.Status)
		started[i], closed[i], firsts[i], lasts[i] = timeBytes(r.StartedAt), nullTime(r.ClosedAt), int64(r.FirstSeq), int64(r.LastSeq)
	}
	b.Queue(a.s.q.upsertRuns, wf, ids, pos, types, statuses, started, closed, firsts, lasts)

	cur := a.current
	st, cl := instantOf(cur.StartedAt), instantOf(cur.ClosedAt)
	var clS *int64
	var clNS *int32
	if !cur.ClosedAt.IsZero() {
		clS, clNS = &cl.sec, &cl.nsec
	}
	b.Queue(a.s.q.updateWorkflow, wf, int64(a.expected)+int64(n), a.runCount, uuidArg(cur.RunID), bs(cur.WorkflowType), string(cur.Status),
		timeBytes(cur.StartedAt), st.sec, st.nsec, nullTime(cur.ClosedAt), clS, clNS)
	if len(settleRuns) > 0 {
		b.Queue(a.s.q.settleActivities, wf, settleRuns, settleOrds)
	}
}

func containsRun(rs []*runState, r *runState) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}

// applyEvent updates a run for one stored event exactly as
// eventstore.Memory does (see its Runs section), and reports the activity an
// activity terminal event settles.
func applyEvent(run *runState, ev eventstore.Event) (eventstore.ActivityID, bool) {
	env := ev.EventEnvelope()
	run.LastSeq = env.Seq
	closeRun := func(st eventstore.WorkflowStatus) {
		run.Status = st
		run.ClosedAt = env.RecordedAt
	}
	switch e := ev.(type) {
	case eventstore.WorkflowStarted:
		run.WorkflowType = e.WorkflowType
		run.Status = eventstore.StatusRunning
		run.StartedAt = env.RecordedAt
		run.ClosedAt = time.Time{}
	case eventstore.WorkflowCompleted:
		closeRun(eventstore.StatusCompleted)
	case eventstore.WorkflowFailed:
		closeRun(eventstore.StatusFailed)
	case eventstore.WorkflowCancelled:
		closeRun(eventstore.StatusCancelled)
	case eventstore.WorkflowTimedOut:
		closeRun(eventstore.StatusTimedOut)
	case eventstore.WorkflowContinuedAsNew:
		closeRun(eventstore.StatusContinuedAsNew)
	case eventstore.WorkflowPaused:
		if run.Status == eventstore.StatusRunning {
			run.Status = eventstore.StatusPaused
		}
	case eventstore.WorkflowResumed:
		if run.Status == eventstore.StatusPaused {
			run.Status = eventstore.StatusRunning
		}
	case eventstore.WorkflowReopened:
		if run.Status.Closed() {
			run.Status = eventstore.StatusRunning
			run.ClosedAt = time.Time{}
		}
	case eventstore.ActivityCompleted:
		return e.ActivityID, true
	case eventstore.ActivityFailed:
		if e.Error.Kind == eventstore.Terminal {
			return e.ActivityID, true
		}
	case eventstore.ActivityCancelled:
		return e.ActivityID, true
	case eventstore.ActivityTimedOut:
		return e.ActivityID, true
	}
	return 0, false
}

// fenceResult is what the fence statement read: the lease row of a shard.
type fenceResult struct {
	owner string
	life  int64
	epoch int64 // 0: never acquired
	live  bool
}

func (f *fenceResult) read(br pgx.BatchResults) error {
	err := br.QueryRow().Scan(&f.owner, &f.life, &f.epoch, &f.live)
	if isNoRows(err) {
		return nil // a database migrated without the shard's row: never acquired
	}
	return err
}

// check returns nil when this Store may write to the shard: nobody ever
// acquired it, or the shard's current epoch is the one this Store was
// granted, with the lease live.
func (f *fenceResult) check(s *Store, shard int32, wf eventstore.WorkflowID) error {
	mine := s.epochOf(shard)
	switch {
	case f.epoch == 0 || (f.epoch == mine && f.live):
		return nil
	case f.epoch == mine:
		return fmt.Errorf("%w: pgstore: workflow %s is in shard %d, whose lease this Store (node %q, epoch %d) no longer holds: it expired or was released", eventstore.ErrNotOwner, wf, shard, s.cfg.node, f.epoch)
	case f.owner == s.cfg.node && f.life != s.life:
		return fmt.Errorf("%w: pgstore: workflow %s is in shard %d, now in epoch %d of another life (%d) of node %q; this Store is life %d, epoch %s", eventstore.ErrNotOwner, wf, shard, f.epoch, f.life, f.owner, s.life, epochText(mine))
	default:
		return fmt.Errorf("%w: pgstore: workflow %s is in shard %d, held by node %q in epoch %d, not by this Store (node %q, epoch %s)", eventstore.ErrNotOwner, wf, shard, f.owner, f.epoch, s.cfg.node, epochText(mine))
	}
}

func epochText(e int64) string {
	if e < 0 {
		return "none"
	}
	return fmt.Sprint(e)
}
