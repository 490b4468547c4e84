// Package keyspace is the append-only transcript keyspace: agent transcripts
// stored per (workflow, run, activity, attempt) stream with optimistic
// concurrency, the [Store] contract, [Memory], its in-memory reference
// implementation, and [Sequencer], the server's single writer.
package keyspace
