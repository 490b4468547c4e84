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
// has, and [Store.Close] then leaves it open. Both create the tables that
// are missing before they return (the layout is on [SchemaVersion]), and
// running them again changes nothing.
//
// The Store keeps the keyspace contract exactly as [keyspace.Memory] does,
// same checks in the same order, same error values; the conformance
// package's TestKeyspace checks it. What is particular to this store is on
// its methods: how appends commit and conflict on [Store.AppendEvents], what
// each read costs on [Store.Head], [Store.ReadFrom] and [Store.ListStreams],
// the encoding on [FormatVersion].
//
// # Several writers
//
// A batch lands whole or not at all, and no store seq is ever given twice or
// skipped, however many processes write: each AppendEvents is one statement,
// and the primary key refuses a second writer of the same seqs. Several
// processes may write one stream, each through its own [keyspace.Sequencer]:
// a conflict sends a Sequencer to re-read what the others wrote, drop what
// it would duplicate and retry. Optimistic concurrency is not fair, though:
// under a sustained race the writer that just won tends to win again, and
// the other may exhaust its retries ([keyspace.RetryExhaustedError];
// retrying the Append is safe). The normal deployment has one Sequencer per
// stream, other processes writing a stream only when they take over its
// attempt.
//
// # Concurrency
//
// A [Store] is safe for concurrent use; its calls share the pool's
// connections. Appends to different streams do not block each other (each
// statement locks only the index entries it inserts). The zero Store is not
// usable (its methods, and a nil Store's, fail with an error wrapping
// eventstore.ErrInvalidArgument instead of panicking); a Store must not be
// copied. [Store.Close] is idempotent; after it
// every method returns [ErrClosed].
//
// # Limits
//
// A payload is bounded by PostgreSQL's largest bytea value, a batch by what
// one statement's parameters can carry; table and schema names by
// PostgreSQL's identifier length (see [WithTable]). Nothing is ever deleted:
// the keyspace is append-only, and retention is left to the operator (for
// example dropping a finished run's rows).
package pgstore
