package pgstore

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/codec"
)

// FormatVersion is the version of the payload encoding this package writes,
// stored as the first byte of every payload. The payload holds the event's
// fields but the stream key and store seq (which are columns), in the
// binary encoding package boltstore stores too: agent ID, agent role,
// emitted at, worker seq, the content kind by its ContentKind name and the
// kind's fields. It is bytea rather than jsonb so every string is kept
// exactly: jsonb refuses NUL characters, and JSON text cannot carry invalid
// UTF-8.
// Version 2 added a usage's provider, request model, response model and
// operation, version 3 its cache and reasoning counts and call times; a
// payload of an older version is still read (a usage then has the fields
// it lacks zero), so existing data needs no migration. Reading a payload of any
// other version fails with [ErrCorruptRecord] naming the version.
const FormatVersion = codec.Version

// Store is a [keyspace.Store] in a PostgreSQL table. Every AppendEvents is
// one INSERT statement, and so one transaction, whose rows the primary key
// keeps unique: several processes can write one keyspace, each through its
// own Store and [keyspace.Sequencer], and no store seq is ever given twice.
//
// A Store is safe for concurrent use; its calls run on the pool's
// connections. The zero value is not usable: [New] or [Open] makes a Store;
// every method of a zero or nil Store returns an error wrapping
// [eventstore.ErrInvalidArgument] (its Close returns nil), as a nil
// [keyspace.Memory]'s do. After [Store.Close] every method returns
// [ErrClosed].
type Store struct {
	pool    *pgxpool.Pool
	ownPool bool
	n       names
	q       queries

	closed    atomic.Bool
	closeOnce sync.Once
}

var _ keyspace.Store = (*Store)(nil)

// queries are the statements of the four methods, built once from the table
// name.
type queries struct {
	appendEvents string
	head         string
	readFrom     string
	listStreams  string
}

func newQueries(t string) queries {
	const stream = `workflow_id = $1 AND run_id = $2 AND activity_id = $3 AND attempt = $4`
	return queries{
		// One statement: h reads the stream's head on the statement's
		// snapshot; ins inserts the rows, at store seqs $5, $5+1, ..., only
		// if that head is $5; the result is the head seen and the number of
		// rows inserted, so a stale expected seq costs no second round trip.
		// A concurrent writer that took the same seqs first makes the
		// statement fail on the primary key (23505) instead.
		appendEvents: `WITH h AS (
	SELECT coalesce(max(store_seq) + 1, 0) AS head FROM ` + t + ` WHERE ` + stream + `
), ins AS (
	INSERT INTO ` + t + ` (workflow_id, run_id, activity_id, attempt, store_seq, payload)
	SELECT $1, $2, $3, $4, $5::bigint + u.ord - 1, u.payload
	FROM unnest($6::bytea[]) WITH ORDINALITY AS u(payload, ord), h
	WHERE h.head = $5::bigint
	RETURNING 1
)
SELECT h.head, (SELECT count(*) FROM ins) FROM h`,

		head: `SELECT coalesce(max(store_seq) + 1, 0) FROM ` + t + ` WHERE ` + stream,

		readFrom: `SELECT store_seq, payload FROM ` + t + ` WHERE ` + stream + ` AND store_seq >= $5
ORDER BY store_seq LIMIT $6`,

		// A loose index scan: each step of the recursion finds the next
		// (activity, attempt) of the run with one descent of the primary
		// key index, skipping the records in between, and each stream's head
		// is one more descent. The cost follows the run's streams, not their
		// lengths. The index orders activity_id as a signed number; the final
		// ORDER BY puts the IDs stored as negative numbers (2^63 and up) last,
		// which is the unsigned order.
		listStreams: `WITH RECURSIVE streams (activity_id, attempt) AS (
	(SELECT activity_id, attempt FROM ` + t + `
	 WHERE workflow_id = $1 AND run_id = $2
	 ORDER BY activity_id, attempt LIMIT 1)
	UNION ALL
	SELECT nxt.activity_id, nxt.attempt
	FROM streams s CROSS JOIN LATERAL (
		SELECT activity_id, attempt FROM ` + t + `
		WHERE workflow_id = $1 AND run_id = $2 AND (activity_id, attempt) > (s.activity_id, s.attempt)
		ORDER BY activity_id, attempt LIMIT 1) nxt
)
SELECT s.activity_id, s.attempt,
	(SELECT max(store_seq) + 1 FROM ` + t + ` h
	 WHERE h.workflow_id = $1 AND h.run_id = $2 AND h.activity_id = s.activity_id AND h.attempt = s.attempt)
FROM streams s
ORDER BY s.activity_id < 0, s.activity_id, s.attempt`,
	}
}

// New returns a Store on pool, which it borrows: [Store.Close] does not close
// it. It first migrates the schema (creating what is missing; see the package
// doc) and fails with [ErrSchemaVersion] on a table of a newer layout. A nil
// pool or an invalid [WithTable] or [WithSchema] name returns an error
// wrapping [eventstore.ErrInvalidArgument].
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgstore: nil pool", eventstore.ErrInvalidArgument)
	}
	cfg := newConfig(opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := newNames(cfg)
	if err := migrate(ctx, pool, n); err != nil {
		return nil, fmt.Errorf("pgstore: migrating %s: %w", n.records, err)
	}
	return &Store{pool: pool, n: n, q: newQueries(n.records)}, nil
}

// Open connects a new pool to dsn (a PostgreSQL URL or key=value string, as
// pgxpool.ParseConfig reads it) and returns a Store that owns it:
// [Store.Close] closes the pool. Otherwise it is [New].
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: pgstore: %w", eventstore.ErrInvalidArgument, err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connecting: %w", err)
	}
	s, err := New(ctx, pool, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return s, nil
}

// Close ends the Store. A Store from [Open] closes its pool, waiting for the
// calls in progress to give their connections back; one from [New] leaves
// the caller's pool open. Close is idempotent and returns nil.
func (s *Store) Close() error {
	if s == nil || s.pool == nil {
		return nil
	}
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.ownPool {
			s.pool.Close()
		}
	})
	return nil
}

// errNotReady is what every method of a Store not made by New returns.
var errNotReady = fmt.Errorf("%w: pgstore.Store used without New or Open", eventstore.ErrInvalidArgument)

// begin checks what every call checks first: the context, then the store
// being made by New and open.
func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s == nil || s.pool == nil {
		return errNotReady
	}
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// dbErr wraps a driver error, mapping a call that met a pool closed by Close
// to ErrClosed.
func (s *Store) dbErr(op string, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("pgstore: %s: %w (%w)", op, ErrClosed, err)
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

func uuidArg(b [16]byte) pgtype.UUID { return pgtype.UUID{Bytes: b, Valid: true} }

// streamArgs returns the four key columns of a stream: activity_id is the
// activity ID's bits as a signed bigint (IDs of 2^63 and up are stored as
// negative numbers), attempt fits a bigint as it is.
func streamArgs(key keyspace.StreamKey) []any {
	return []any{uuidArg(key.WorkflowID), uuidArg(key.RunID), int64(key.ActivityID), int64(key.Attempt)}
}

// AppendEvents implements [keyspace.Store.AppendEvents] as one INSERT
// statement, which PostgreSQL runs as one transaction: the head check and all
// rows commit together or not at all.
//
// The checks run in the order [keyspace.Memory] runs them, with the same
// error values, before any round trip: the context; the store being open
// ([ErrClosed]); an empty batch (a no-op returning expectedSeq); then
// [keyspace.ValidateBatch] (zero IDs, mixed streams, an ephemeral event, a
// Content that is not one of the keyspace kinds or is a nil pointer). Then
// the events are encoded, and the statement inserts the rows only if the
// stream's head, read by the same statement, is expectedSeq; if it is not,
// the [*eventstore.SequenceConflictError] carries the head the statement
// read. If the statement fails on the primary key
// because a concurrent writer committed the same store seqs first (SQLSTATE
// 23505; the statement's transaction is rolled back, nothing of it stays),
// the head is read again and the conflict carries that.
//
// A batch is durable when AppendEvents returns, as far as the server's
// settings make a commit durable: with PostgreSQL's defaults (fsync on,
// synchronous_commit on) the commit has been flushed to the write-ahead log.
// Each call is one round trip and one commit, whatever the batch holds; a
// conflict costs a second round trip only after a unique violation.
//
// A context cancelled while the statement runs returns an error; PostgreSQL
// then either committed the whole batch or nothing, and a caller that must
// know which reads the head (a [keyspace.Sequencer] does so on its next
// conflict, and drops what is already stored).
func (s *Store) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	if err := s.begin(ctx); err != nil {
		return 0, err
	}
	if len(events) == 0 {
		return expectedSeq, nil
	}
	if err := keyspace.ValidateBatch(events); err != nil {
		return 0, err
	}
	key := keyspace.KeyOf(events[0])
	payloads := make([][]byte, len(events))
	for i := range events {
		p, err := codec.AppendEvent(nil, &events[i])
		if err != nil {
			return 0, fmt.Errorf("pgstore: event %d: %w", i, err)
		}
		payloads[i] = p
	}
	n := uint64(len(events))
	if expectedSeq > math.MaxInt64-n {
		// No stream reaches this head (a bigint holds the seqs); find the
		// real one for the conflict.
		head, err := s.Head(ctx, key)
		if err != nil {
			return 0, err
		}
		if head == expectedSeq {
			return 0, fmt.Errorf("%w: pgstore: stream %s: store seqs past 2^63-1", eventstore.ErrInvalidArgument, key)
		}
		return 0, &eventstore.SequenceConflictError{Expected: expectedSeq, Found: head}
	}

	args := append(streamArgs(key), int64(expectedSeq), payloads)
	var head, inserted int64
	err := s.pool.QueryRow(ctx, s.q.appendEvents, args...).Scan(&head, &inserted)
	switch {
	case err == nil && uint64(inserted) == n:
		return expectedSeq + n, nil
	case err == nil && inserted == 0:
		// The head was not expectedSeq; head is what the statement saw.
		return 0, &eventstore.SequenceConflictError{Expected: expectedSeq, Found: uint64(head)}
	case err == nil:
		return 0, fmt.Errorf("pgstore: append to %s inserted %d of %d rows", key, inserted, n)
	case !isUniqueViolation(err):
		return 0, s.dbErr("append", err)
	}
	// Another writer committed these seqs while the statement ran; it
	// failed and rolled back. Read the head that writer left.
	found, err := s.Head(ctx, key)
	if err != nil {
		return 0, err
	}
	return 0, &eventstore.SequenceConflictError{Expected: expectedSeq, Found: found}
}

// Head implements [keyspace.Store.Head]: max(store_seq)+1 of the stream, one
// backward descent of the primary key index. A zero workflow or run ID
// returns an error wrapping [eventstore.ErrInvalidArgument].
func (s *Store) Head(ctx context.Context, key keyspace.StreamKey) (uint64, error) {
	if err := s.begin(ctx); err != nil {
		return 0, err
	}
	if err := key.Validate(); err != nil {
		return 0, err
	}
	var head int64
	if err := s.pool.QueryRow(ctx, s.q.head, streamArgs(key)...).Scan(&head); err != nil {
		return 0, s.dbErr("head", err)
	}
	return uint64(head), nil
}

// ReadFrom implements [keyspace.Store.ReadFrom] as a range scan of the
// primary key index from (stream, fromSeq), limited to what is returned.
// Each payload is decoded into a fresh value. A zero workflow or run ID
// returns an error wrapping [eventstore.ErrInvalidArgument]; a row that
// cannot be decoded, or a gap in the seqs, fails the call with
// [ErrCorruptRecord].
func (s *Store) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := key.Validate(); err != nil {
		return nil, err
	}
	if fromSeq > math.MaxInt64 {
		// Past every head: seqs are bigints.
		return nil, nil
	}
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	rows, err := s.pool.Query(ctx, s.q.readFrom, append(streamArgs(key), int64(fromSeq), lim)...)
	if err != nil {
		return nil, s.dbErr("read", err)
	}
	defer rows.Close()
	var out []keyspace.Record
	next := fromSeq
	for rows.Next() {
		var seq int64
		var payload []byte
		if err := rows.Scan(&seq, &payload); err != nil {
			return nil, s.dbErr("read", err)
		}
		if uint64(seq) != next {
			return nil, fmt.Errorf("%w: stream %s: found record %d where record %d belongs", ErrCorruptRecord, key, seq, next)
		}
		ev, err := codec.DecodeEvent(payload)
		if err != nil {
			return nil, fmt.Errorf("%w: stream %s record %d: %w", ErrCorruptRecord, key, seq, err)
		}
		ev.WorkflowID, ev.RunID, ev.ActivityID, ev.Attempt = key.WorkflowID, key.RunID, key.ActivityID, key.Attempt
		ev.StoreSeq, ev.Persisted = next, true
		out = append(out, keyspace.Record{StoreSeq: next, Event: ev})
		next++
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("read", err)
	}
	return out, nil
}

// ListStreams implements [keyspace.Store.ListStreams] with a loose index scan
// over the primary key's (workflow_id, run_id) prefix: one index descent per
// stream to find it and one for its head, so the cost grows with the run's
// streams, not with their lengths, and never touches other runs. All heads
// come from one statement, a consistent snapshot. The order is (activity,
// attempt) as unsigned numbers.
func (s *Store) ListStreams(ctx context.Context, workflowID eventstore.WorkflowID, runID eventstore.RunID) ([]keyspace.StreamSummary, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := (keyspace.StreamKey{WorkflowID: workflowID, RunID: runID}).Validate(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.listStreams, uuidArg(workflowID), uuidArg(runID))
	if err != nil {
		return nil, s.dbErr("list streams", err)
	}
	defer rows.Close()
	var out []keyspace.StreamSummary
	for rows.Next() {
		var activity, attempt, head int64
		if err := rows.Scan(&activity, &attempt, &head); err != nil {
			return nil, s.dbErr("list streams", err)
		}
		if attempt < 0 || attempt > math.MaxUint32 || head <= 0 {
			return nil, fmt.Errorf("%w: run %s/%s: stream (activity %d, attempt %d) has head %d", ErrCorruptRecord, workflowID, runID, uint64(activity), attempt, head)
		}
		out = append(out, keyspace.StreamSummary{
			Key:  keyspace.NewStreamKey(workflowID, runID, eventstore.ActivityID(uint64(activity)), uint32(attempt)),
			Head: uint64(head),
		})
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("list streams", err)
	}
	return out, nil
}
