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
// # Durability
//
// Every [Store.AppendEvents] call is one bbolt read-write transaction: the
// head check and the puts of all the batch's records commit together or not
// at all. When AppendEvents returns without error, the commit is complete and,
// by default, fsynced: the batch survives the process being killed at any
// point and a crash of the machine. A batch whose call was interrupted (the
// process killed mid-commit) is either wholly there or wholly absent after
// [Open]; bbolt's copy-on-write pages and its two alternating meta pages make
// that so without a recovery step. TestSurvivesKill9 kills a writing child
// process with SIGKILL more than twenty times and checks exactly this:
// acknowledged batches present, no batch in part, store seqs without a gap.
//
// [WithNoSync] drops the fsync. Commits then still reach the operating
// system before AppendEvents returns, so they survive kill -9, but not a
// power loss or kernel crash. The benchmarks run with fsync on.
//
// One commit per call is the reason AppendEvents takes a slice: a commit costs
// an fsync (milliseconds on most disks) whatever it holds, so N events in one
// call cost about one commit and N events in N calls cost N. Feed the store
// through a [keyspace.Sequencer], which makes one call per stream per batch.
//
// # Key layout
//
// All records live in the bucket "aionotel.keyspace" of the file, one bbolt
// key per record, 53 bytes:
//
//	offset  size  field
//	0       1     region tag, [RegionTag] 'O' (0x4F)
//	1       16    workflow ID (UUID bytes)
//	17      16    run ID (UUID bytes)
//	33      8     activity ID, big-endian uint64
//	41      4     attempt, big-endian uint32
//	45      8     store seq, big-endian uint64
//
// bbolt keeps keys in byte order, which is therefore the order (workflow,
// run, activity, attempt, store seq), the numbers compared as unsigned. So:
//
//   - a stream's records are contiguous and in store seq order, and
//     [Store.ReadFrom] is one seek to (stream, fromSeq) followed by a walk
//     over exactly the records it returns;
//   - a stream's head is found with one seek to the end of its 45-byte prefix
//     and one step back (the last record's seq plus one); no separate head
//     key is kept, so there is nothing that could disagree with the records;
//   - a run's streams are contiguous under its 33-byte prefix, in (activity,
//     attempt) order, and [Store.ListStreams] walks them by jumping: seek to
//     the run's prefix, then for each stream one seek-and-step for its head
//     and one seek past its prefix to the next stream. The cost grows with
//     the number of the run's streams (three seeks each, each O(log keys)),
//     not with their lengths, and no other run's key is visited.
//
// The region tag makes the keyspace disjoint, byte for byte, from any other
// data sharing the bucket: every key this package writes begins with 'O', it
// never reads or lists a key that does not, and a record can never be read as
// something else's (or the other way round) because the first byte differs.
// The bucket "aionotel.keyspace.meta" holds the layout version
// ([LayoutVersion]); [Open] refuses a file with a newer one
// ([ErrLayoutVersion]).
//
// # Encoding
//
// A record's value holds the event's remaining fields; the stream key and the
// store seq are the key. The value is the versioned binary encoding shared by
// the durable backends, written once in the internal package
// github.com/aionotel/aionotel/keyspace/internal/codec, whose documentation
// describes it field by field and whose tests pin its golden bytes; the
// PostgreSQL backend (package pgstore) stores the very same bytes. The first
// byte is the format version ([FormatVersion], 1), then agent ID, agent role,
// emitted at (Unix seconds, nanoseconds, zone offset and name), worker seq,
// the content kind by its ContentKind name and the kind's fields.
//
// Strings are kept as their exact bytes, valid UTF-8 or not. A read-back time
// is Equal to the written one, in a fixed zone of the same offset and name (the
// monotonic clock reading and the *time.Location are not kept). A pointer
// content (*keyspace.Message and so on) is read back as the value type.
// Ephemeral, StoreSeq and Persisted are not stored: ephemeral events are
// refused, and the other two are set from the key on reading.
//
// A Content of another type cannot be stored: AppendEvents refuses the batch
// with an error wrapping [eventstore.ErrInvalidArgument], and writes nothing.
// A value that does not decode (another format version, an unknown kind,
// damaged bytes) fails the read with [ErrCorruptRecord], naming the stream,
// the store seq and the problem.
//
// # Errors
//
// AppendEvents validates exactly as [keyspace.Memory] does, in the same order
// and with the same error values (the context, an empty batch as a no-op, zero
// IDs, [keyspace.ErrMixedStreams], [keyspace.ErrEphemeral], then the head
// inside the transaction: [*eventstore.SequenceConflictError] with the head
// found). Every refusal writes nothing. Calls after [Store.Close] return
// [ErrClosed]; [Open] of a file another Store holds returns [ErrLocked] after
// the open timeout; a damaged file gives [ErrCorrupt] (see Damaged files).
//
// # Damaged files
//
// bbolt trusts its memory-mapped pages: damage makes it panic or fault, in
// part on goroutines of its own. So [Open] first checks, under the file's
// lock and with bounded reads, every structure bbolt would trust (see Open
// for what); damage fails Open with [ErrCorrupt] naming the page, and the
// file is left as it is. A zero-length file is a new, empty store.
//
// Of the two meta pages bbolt uses the valid one of the later commit. When
// that one is lost, the store opens at the commit before: the last batch is
// gone, all earlier ones are intact, and the next commit rewrites the page.
// Losing the older meta page loses nothing.
//
// Damage that appears while the Store is open fails the call that meets it
// with ErrCorrupt (panics and faults are recovered on the calling
// goroutine), and every later call too; [Store.Close] still releases the
// file. bbolt has no page checksums: bytes changed inside a record's value
// are found only if the record no longer decodes ([ErrCorruptRecord]).
//
// # Concurrency
//
// A [Store] is safe for concurrent use. bbolt runs one read-write
// transaction at a time per file, so appends to all streams are serialised,
// each including its fsync; reads ([Store.Head], [Store.ReadFrom],
// [Store.ListStreams]) run in parallel with each other and with the writer,
// each on a consistent snapshot. bbolt locks the file, so only one process
// (and one Store) can have it open: this is a single-node store. Several
// server processes writing one keyspace need the PostgreSQL backend.
//
// [Store.Close] waits for the transactions in progress and is idempotent.
// The zero Store is not usable; a Store must not be copied.
//
// # Limits
//
// A record's value is limited by bbolt to about 2 GiB; a batch to what one
// transaction can hold in memory. bbolt never returns freed pages to the
// file system, and this keyspace is append-only: the file only grows. The
// whole file is memory-mapped, so its size counts against the address space.
// Records are decoded into fresh values on every read: what a read returns
// is the caller's.
package boltstore
