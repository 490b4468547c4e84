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
// bbolt trusts its pages and reads them through a memory map: a damaged file
// (a flipped byte, a page overwritten, the file cut short) makes it panic or
// fault, partly on goroutines of its own that no caller can recover. So
// [Open], holding the file's lock, checks the file before bbolt maps it,
// with bounded reads: both meta pages as bbolt chooses between them, the
// freelist, and every page of every bucket (ids, flags, sizes, key order,
// each page in use once or free). Damage fails Open with an error wrapping
// [ErrCorrupt] that names the page; the file is left as it is. The check
// reads the whole file, so Open takes time in proportion to its size. A
// zero-length file is a new, empty store, as bbolt treats it.
//
// Losing one meta page is survivable: bbolt keeps two and uses the valid
// one of the higher transaction. When the newer is lost (torn or zeroed),
// the store opens at the commit before it: the last committed batch is
// gone, everything earlier is intact, and the next commit rewrites the
// page. Losing the older one loses nothing.
//
// Damage that appears while the Store is open is met by the call that
// reads it: every method recovers bbolt's panics and memory faults on the
// calling goroutine and returns ErrCorrupt, and so does every later call;
// [Store.Close] then unlocks and closes the file at once, since the panic
// may have left bbolt's own locks held. bbolt keeps no page checksums:
// damage that leaves the structure valid (bytes inside a record's value)
// is found only when the record no longer decodes ([ErrCorruptRecord], a
// kind of ErrCorrupt that leaves the Store usable).
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
