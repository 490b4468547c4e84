// Package pgstore is a durable [keyspace.Store] in PostgreSQL: the transcript
// keyspace for a deployment of several server processes (nodes) sharing one
// database.
//
// It lives in its own Go module (github.com/aionotel/aionotel/keyspace/pgstore),
// so github.com/jackc/pgx/v5 enters a build only when this package is
// imported.
//
//	s, err := pgstore.Open(ctx, os.Getenv("DATABASE_URL"))
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	seq := keyspace.NewSequencer(s)
//
// [Open] makes and owns a pool; [New] borrows one the application already
// has, and [Store.Close] then leaves it open.
//
// # Schema
//
// [New] and [Open] migrate before returning: in one transaction, under a
// transaction-scoped advisory lock (so processes starting together do not
// race each other's CREATE statements), they create what is missing and
// leave what exists. Running them again changes nothing. With the default
// names ([DefaultTable], no [WithSchema]):
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
// A table whose meta row records another version is refused with
// [ErrSchemaVersion] and left as it is. [WithTable] and [WithSchema] choose
// other (quoted) names, which is how tests keep apart; WithSchema also
// creates the schema.
//
// The primary key is the only index, and it does every job: its order is the
// stream key's order, so a stream's head (max(store_seq)+1) is one backward
// descent, [Store.ReadFrom] is a range scan that reads only the rows it
// returns, and its (workflow_id, run_id) prefix is the index
// [Store.ListStreams] walks. It is also what stops two writers from taking
// the same store seq.
//
// Column types: workflow and run IDs are uuid. attempt is a uint32, which a
// bigint holds exactly (an integer column could not hold attempts of 2^31 and
// up). activity_id is a uint64 stored bit for bit as a bigint, int64(id):
// IDs below 2^63 (all that a run will ever use in practice) read as
// themselves in SQL, and IDs from 2^63 up read as negative numbers. Because
// the index orders the column as signed, ListStreams sorts its result by
// (activity_id < 0, activity_id, attempt), which is unsigned order; the
// tests write activity IDs on both sides of 2^63 to hold it to that.
// store_seq is a bigint: a stream can hold 2^63 records.
//
// # Encoding
//
// payload holds the event's remaining fields in the versioned binary
// encoding shared by the durable backends, written once in the internal
// package github.com/aionotel/aionotel/keyspace/internal/codec, whose
// documentation describes it field by field and whose tests pin its golden
// bytes; package boltstore stores the very same bytes. The first byte is the
// format version ([FormatVersion], 1), then agent ID, agent role, emitted at
// (Unix seconds, nanoseconds, zone offset and name), worker seq, the content
// kind by its ContentKind name and the kind's fields. It is bytea rather than
// jsonb so every string is kept exactly: jsonb refuses NUL characters, and JSON
// text cannot carry invalid UTF-8. A Content that is not one of the five
// keyspace kinds is refused with an error wrapping
// [eventstore.ErrInvalidArgument]; a payload that does not decode fails the
// read with [ErrCorruptRecord], naming the stream and store seq.
//
// # Appends and conflicts
//
// [Store.AppendEvents] validates exactly as [keyspace.Memory] does (same
// order, same error values) and then runs one statement, which PostgreSQL
// runs as one transaction: it reads the stream's head and, only if the head
// is the expected seq, inserts all the batch's rows at the expected seq and
// up. A stale expected seq inserts nothing and returns a
// [*eventstore.SequenceConflictError] with the head the statement saw. Two
// writers that both saw the same head both try to insert the same store seq;
// the primary key makes the second wait for the first and, once the first
// commits, fail with unique_violation (SQLSTATE 23505). Its statement is
// rolled back whole, the head is read again, and the conflict carries it.
// A batch therefore lands whole or not at all, and no store seq is ever
// given twice or skipped, however many processes write.
//
// Several processes may write one stream, each through its own
// [keyspace.Sequencer]: the conflicts send each Sequencer to re-read what the
// others wrote, drop what it would duplicate and retry. The tests run two
// pools, two Stores and two Sequencers on one stream, 500 events each with
// re-deliveries, and find exactly 1,000 records, contiguous, each once.
// Optimistic concurrency is not fair, though: under a sustained race the
// writer that just won tends to win again, and the other may exhaust its
// retries ([keyspace.RetryExhaustedError]; retrying the Append is safe). The
// normal deployment has one Sequencer per stream, with other processes
// writing a stream only when they take over its attempt.
//
// # Durability
//
// A batch is durable when AppendEvents returns, as far as the server's
// settings make a commit durable: with PostgreSQL's defaults (fsync on,
// synchronous_commit on) the commit has been flushed to the write-ahead log.
// A context cancelled while the statement runs returns an error, and the
// batch may or may not have committed (it is never in part); read the head
// to know. A Sequencer does so by itself on its next conflict.
//
// # Costs
//
// Each AppendEvents is one round trip and one commit, whatever the batch
// holds; a conflict costs a second round trip only after a unique violation.
// Head is one index descent; ReadFrom one descent plus the rows returned;
// ListStreams, a loose index scan written as a recursive query, one descent
// to find each of the run's streams and one for its head, so its cost grows
// with the run's streams, not with their lengths or with other runs. The
// tests check the pages PostgreSQL visits, for both custom and generic
// plans.
//
// # Concurrency
//
// A [Store] is safe for concurrent use; its calls share the pool's
// connections. Appends to different streams do not block each other (each
// statement locks only the index entries it inserts). The zero Store is not
// usable; a Store must not be copied. [Store.Close] is idempotent; after it
// every method returns [ErrClosed].
//
// # Limits
//
// A payload is limited to PostgreSQL's 1 GB per value; a batch to what one
// statement's parameters can carry. Table names are up to 58 bytes (the
// "_meta" table needs the other 5 of PostgreSQL's 63), schema names up to 63.
// Nothing is ever deleted: the keyspace is append-only, and retention is left
// to the operator (for example dropping a finished run's rows).
package pgstore
