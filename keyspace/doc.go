// Package keyspace is the append-only transcript keyspace: the record of what
// agents said and did while running inside workflow activities. It holds the
// [Store] contract, [Memory] (an in-memory Store) and [Sequencer] (the single
// writer that gives each stream its store seqs). Durable Stores live in the
// nested modules keyspace/boltstore and keyspace/pgstore; the conformance
// package's TestKeyspace checks any implementation against the contract.
//
// A transcript is an observability record: no workflow is replayed from it,
// and losing one changes no workflow's outcome. Its numbering is its own:
// store seqs start at 0, workflow history seqs (package eventstore) at 1.
//
// # Streams
//
// Each [ActivityEvent] belongs to one stream, named by a [StreamKey] of
// workflow, run, activity and attempt ([KeyOf] computes it). A stream's
// records have store seqs 0, 1, 2, ... without gaps; its head is the next
// one. Events are committed in batches of one stream, all or nothing, at the
// head the writer expects ([Store.AppendEvents]); a stale expectation is a
// [*eventstore.SequenceConflictError] and writes nothing, even for a batch
// identical to the one already committed there: stores do not deduplicate
// retries (the [Sequencer] drops re-deliveries before it appends).
//
// # Use
//
// A server writes through one [Sequencer] per store. It takes events of any
// streams in arrival order, sets ephemeral ones aside for live forwarding,
// drops re-deliveries, and commits each stream's events as one AppendEvents
// call, retrying when another writer got there first:
//
//	store := keyspace.NewMemory() // or a boltstore or pgstore Store
//	seq := keyspace.NewSequencer(store)
//	res, err := seq.Append(ctx, events)
//	// res.Ephemeral: forward live; res.Streams: what each stream committed
//
// Readers find a run's streams with [Store.ListStreams] and read one with
// [Store.ReadFrom], resuming from the store seq after the last one read.
//
// # Choosing a backend
//
// [Memory] is for tests and demos: it keeps a run's streams until
// [Memory.DeleteRun], and nothing across a restart. boltstore is one file
// for one server process (a second Open of the file fails): every
// AppendEvents is one fsynced transaction, so feed it through a
// [Sequencer], which makes one call per stream per batch. pgstore is for
// several processes sharing one keyspace: each runs its own Sequencer on
// its own Store, and the table's primary key turns two writers claiming
// one store seq into a sequence conflict, which the Sequencers resolve
// without losing or duplicating an event. Both durable backends keep every
// string's bytes exactly, share one versioned binary encoding, and are
// modules of their own, so bbolt or pgx enter a build only when imported.
//
// # Concurrency
//
// Every Store is safe for concurrent use, and so is a Sequencer. A Sequencer
// serialises the appends to one stream, so goroutines sharing it never
// conflict with each other; conflicts come only from other writers of the
// same store, and a call waiting for a busy stream gives up when its context
// ends. Memory and Sequencer must not be copied after first use; the zero
// Memory is ready, the zero Sequencer is not ([NewSequencer]).
//
// # Limits
//
// Every implementation refuses the same batches with the same errors
// ([ValidateBatch]), all matching [eventstore.ErrInvalidArgument]: zero IDs,
// a batch mixing streams ([ErrMixedStreams]), an ephemeral event
// ([ErrEphemeral]), a Content outside the five kinds or a nil pointer to one.
// There is no atomicity across streams: one Sequencer call over several
// streams is several commits. The Sequencer's deduplication assumes each
// agent's WorkerSeq grows with every new event (see [Sequencer]). Memory keeps
// every record for its life and nothing across a restart.
package keyspace
