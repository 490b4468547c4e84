// Package boltstore is a durable [keyspace.Store] in one embedded bbolt file:
// the transcript keyspace for a single node that must keep its transcripts
// when the process dies, kill -9 included.
//
// It lives in its own Go module (github.com/aionotel/aionotel/keyspace/boltstore),
// so go.etcd.io/bbolt enters a build only when this package is imported.
//
//	s, err := boltstore.Open("/var/lib/myserver/keyspace.db")
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	seq := keyspace.NewSequencer(s)
//
// The Store keeps the keyspace contract exactly as [keyspace.Memory] does,
// same checks in the same order, same error values; the conformance
// package's TestKeyspace checks it. What is particular to this store is on
// its methods: durability and cost on [Store.AppendEvents], the file check
// and damage handling on [Open] and [ErrCorrupt], the key layout on
// [RegionTag], the encoding on [FormatVersion].
//
// # Durability
//
// An AppendEvents that returns nil has committed its whole batch in one bbolt
// transaction and, unless [WithNoSync], fsynced it; a batch interrupted by a
// crash is wholly there or wholly absent when the file is opened again. A
// commit costs an fsync whatever it holds, so feed the store through a
// [keyspace.Sequencer], which makes one call per stream per batch.
//
// # Concurrency
//
// A [Store] is safe for concurrent use. bbolt runs one read-write
// transaction at a time per file, so appends to all streams are serialised,
// each with its fsync; reads ([Store.Head], [Store.ReadFrom],
// [Store.ListStreams]) run in parallel with each other and with the writer,
// each on a consistent snapshot. [Store.Close] waits for the transactions in
// progress and is idempotent. A nil or zero Store is not usable: its methods
// fail with an error wrapping [eventstore.ErrInvalidArgument], and its Close
// returns nil. A Store must not be copied.
//
// # Limits
//
// bbolt locks the file, so only one process (and one Store) has it open: this
// is a single-node store, and several server processes writing one keyspace
// need package pgstore. The keyspace is append-only and bbolt never returns
// freed pages to the file system, so the file only grows; it is
// memory-mapped whole, so its size counts against the address space. A
// record's value is bounded by bbolt's largest value, a batch by what one
// transaction can hold in memory. bbolt has no page checksums: bytes changed
// inside a record's value are found only when the record no longer decodes
// ([ErrCorruptRecord]).
package boltstore
