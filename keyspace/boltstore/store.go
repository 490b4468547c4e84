package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/codec"
)

// LayoutVersion is the version of the key layout and bucket set this package
// writes. [Open] records it in a new file and refuses a file recording a
// newer one with [ErrLayoutVersion].
const LayoutVersion byte = 1

// FormatVersion is the version of the record encoding this package writes,
// stored as the first byte of every record value. A record's value holds the
// event's fields but the stream key and store seq (which are its key), in the
// binary encoding package pgstore stores too: agent ID, agent role, emitted
// at, worker seq, the content kind by its ContentKind name and the kind's
// fields. Strings are kept as their exact bytes, valid UTF-8 or not; a
// read-back time is Equal to the written one, in a fixed zone of the same
// offset and name (the monotonic reading and the *time.Location are not
// kept); a pointer content (*keyspace.Message and so on) is read back as the
// value type. Ephemeral, StoreSeq and Persisted are not stored: ephemeral
// events are refused, the other two are set from the key on reading.
// Version 2 added a usage's provider, request model, response model and
// operation, version 3 its cache and reasoning counts and call times; a
// value of an older version is still read (a usage then has the fields it
// lacks zero), so existing data needs no migration. Reading a value of any
// other version fails with [ErrCorruptRecord] naming the version.
const FormatVersion = codec.Version

// Bucket names. Records live in dataBucket under keys starting with
// [RegionTag]; metaBucket holds the layout version under layoutKey.
var (
	dataBucket = []byte("aionotel.keyspace")
	metaBucket = []byte("aionotel.keyspace.meta")
	layoutKey  = []byte("layout")
)

// Store is a [keyspace.Store] kept in one bbolt file. Every AppendEvents is
// one bbolt read-write transaction, so a batch is on disk (fsynced, unless
// [WithNoSync]) when the call returns, or not at all.
//
// A Store is safe for concurrent use: reads run in parallel with each other
// and with the one write transaction bbolt allows at a time; appends, to any
// stream, are serialised by that writer lock. The zero value is not usable:
// [Open] makes a Store. After [Store.Close] every method returns [ErrClosed].
// Once a call has met damage that made bbolt panic or fault, that call and
// every later one return an error wrapping [ErrCorrupt].
type Store struct {
	db   *bolt.DB
	path string
	file *os.File // bbolt's file, which Open opened and locked

	// fault is the first ErrCorrupt error recovered from bbolt, after
	// which every call fails with it.
	fault   atomic.Pointer[error]
	faulted chan struct{} // closed when fault is set
	// writer admits one AppendEvents at a time into bbolt. Waiting here
	// rather than on bbolt's writer lock ends with the context, and with
	// ErrCorrupt once a panic may have left bbolt's lock held.
	writer chan struct{}

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var _ keyspace.Store = (*Store)(nil)

// Open opens the bbolt file at path, creating it (and its buckets) if it does
// not exist, and returns a Store on it. bbolt locks the file: while one Store
// has it open, another Open of the same path, in this process or another,
// waits up to the open timeout ([WithOpenTimeout], one second by default) and
// then fails with [ErrLocked]. A file written by a newer layout of this
// package fails with [ErrLayoutVersion] and is left as it is.
//
// Before bbolt maps the file, Open checks it, holding the lock, by reading
// every page bbolt would use: the meta pages, the freelist and every page
// of every bucket (the checks of bbolt's own consistency check, done with
// bounded reads instead of the memory map). A damaged file fails with an
// error wrapping [ErrCorrupt] that names the damaged page; the file is not
// changed. A zero-length file is a new, empty store, as bbolt treats it.
// The check reads the whole file once, so Open takes time in proportion to
// the file's size.
//
// Of the two meta pages bbolt uses the valid one of the later commit. When
// that one is lost, the store opens at the commit before: the last batch is
// gone, all earlier ones are intact, and the next commit rewrites the page.
// Losing the older meta page loses nothing.
func Open(path string, opts ...Option) (*Store, error) {
	cfg := newConfig(opts)
	timeout := max(cfg.openTimeout, 0)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, cfg.fileMode)
	if err != nil {
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	if err := lockFile(f, timeout); err != nil {
		_ = f.Close()
		if errors.Is(err, errLockTimeout) {
			return nil, fmt.Errorf("%w: %s: gave up after %v", ErrLocked, path, timeout)
		}
		return nil, fmt.Errorf("boltstore: open %s: locking: %w", path, err)
	}
	if err := checkFile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	s := &Store{path: path, file: f, writer: make(chan struct{}, 1), faulted: make(chan struct{})}
	if err := s.openBolt(cfg, timeout); err != nil {
		// bbolt unlocked and closed f on an error it returned, but not on
		// a panic, after which its memory map (which keeps the lock) may
		// be left behind.
		_ = unlockFile(f)
		_ = f.Close()
		return nil, fmt.Errorf("boltstore: open %s: %w", path, err)
	}
	return s, nil
}

// openBolt opens bbolt on s.file, already locked and checked, and sets up
// the buckets. A panic inside bbolt (possible only if the check missed
// damage) is returned as an error wrapping ErrCorrupt.
func (s *Store) openBolt(cfg config, timeout time.Duration) (err error) {
	var db *bolt.DB
	defer func() {
		// After a panic bbolt may hold its locks: unmap off this goroutine.
		if err != nil && db != nil {
			go func() { _ = db.Close() }()
		}
	}()
	defer recoverCorrupt(&err, "open", debug.SetPanicOnFault(true))
	db, err = bolt.Open(s.path, cfg.fileMode, &bolt.Options{
		Timeout:      timeout,
		NoSync:       cfg.noSync,
		FreelistType: bolt.FreelistMapType,
		OpenFile:     func(string, int, os.FileMode) (*os.File, error) { return s.file, nil },
	})
	if err != nil {
		switch {
		case errors.Is(err, berrors.ErrTimeout):
			return fmt.Errorf("%w: gave up after %v", ErrLocked, timeout)
		case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum), errors.Is(err, berrors.ErrVersionMismatch):
			return fmt.Errorf("%w: %w", ErrCorrupt, err)
		}
		return err
	}
	if err := db.Update(initLayout); err != nil {
		_ = db.Close()
		db = nil
		if errors.Is(err, berrors.ErrIncompatibleValue) {
			return fmt.Errorf("%w: a bucket of the keyspace is a plain key: %w", ErrCorrupt, err)
		}
		return err
	}
	s.db = db
	return nil
}

// initLayout creates the buckets of a new file and checks the layout version
// of an existing one. A file that records a layout but lacks the data
// bucket lost it to damage: refused with ErrCorrupt rather than silently
// started afresh.
func initLayout(tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(metaBucket)
	if err != nil {
		return err
	}
	switch v := meta.Get(layoutKey); {
	case v == nil:
		if err := meta.Put(layoutKey, []byte{LayoutVersion}); err != nil {
			return err
		}
	case len(v) != 1 || v[0] != LayoutVersion:
		return fmt.Errorf("%w: the file records layout %x, this build writes layout %d", ErrLayoutVersion, v, LayoutVersion)
	case tx.Bucket(dataBucket) == nil:
		return fmt.Errorf("%w: the file records layout %d but has no bucket %q", ErrCorrupt, v[0], dataBucket)
	}
	_, err = tx.CreateBucketIfNotExists(dataBucket)
	return err
}

// Path returns the path of the bbolt file.
func (s *Store) Path() string {
	if s == nil {
		return ""
	}
	return s.path
}

// errNotOpened is what every method of a nil or zero Store returns.
var errNotOpened = fmt.Errorf("boltstore: the Store was not made by Open: %w", eventstore.ErrInvalidArgument)

// Close waits for the transactions in progress to finish and closes the file,
// releasing its lock. It is idempotent: later calls return nil.
//
// On a Store that met damage (its calls fail with [ErrCorrupt]) bbolt's
// own state cannot be trusted: a panic inside it may have left its
// internal locks held. Close then closes the file at once, which releases
// and unlocks the file, so that it can be reopened (or repaired) by this
// process or another, and leaves bbolt's shutdown, which unmaps the file
// once no transaction holds the map, to a goroutine.
func (s *Store) Close() error {
	if s == nil || s.db == nil {
		return nil // nothing was opened
	}
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.fault.Load() != nil {
			if err := errors.Join(unlockFile(s.file), s.file.Close()); err != nil {
				s.closeErr = fmt.Errorf("boltstore: close %s: %w", s.path, err)
			}
			db := s.db
			go func() { _ = db.Close() }()
			return
		}
		if err := s.db.Close(); err != nil {
			s.closeErr = fmt.Errorf("boltstore: close %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

// begin checks what every call checks first: the context, then the store
// being open and undamaged.
func (s *Store) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s == nil || s.db == nil {
		return errNotOpened
	}
	if s.closed.Load() {
		return ErrClosed
	}
	if err := s.fault.Load(); err != nil {
		return *err
	}
	return nil
}

// recoverCorrupt is deferred, with the result of debug.SetPanicOnFault(true),
// around a call into bbolt. bbolt reads its pages from a memory map and
// trusts them: damage makes it panic, or fault on an address the map does
// not back (a file cut short), which SetPanicOnFault turns into a panic on
// this goroutine. recoverCorrupt restores the fault setting and turns such
// a panic into an error wrapping ErrCorrupt.
func recoverCorrupt(err *error, op string, panicOnFault bool) {
	debug.SetPanicOnFault(panicOnFault)
	if r := recover(); r != nil {
		*err = panicError(op, r)
	}
}

// panicError describes a panic recovered from bbolt during op: what bbolt
// said (its messages name the page), or the faulting address.
func panicError(op string, r any) error {
	if f, ok := r.(interface{ Addr() uintptr }); ok {
		return fmt.Errorf("%w: %s: memory fault at %#x reading the mapped file (cut short or changed while open?): %v", ErrCorrupt, op, f.Addr(), r)
	}
	return fmt.Errorf("%w: %s: panic inside the bbolt transaction: %v", ErrCorrupt, op, r)
}

// guard is deferred by every method, after begin, with the result of
// debug.SetPanicOnFault(true): it recovers a panic as recoverCorrupt does
// and records the error, so that every later call fails with the first
// one. A writer passes writing, set once it holds the writer slot: guard
// releases the slot only after the fault is recorded, since a panic inside
// bbolt can leave bbolt's own writer lock held for good, and the next
// writer must see the fault before it reaches that lock.
func (s *Store) guard(err *error, op string, panicOnFault bool, writing *bool) {
	debug.SetPanicOnFault(panicOnFault)
	if r := recover(); r != nil {
		e := fmt.Errorf("%w; every later call fails with this error, close the store", panicError(s.path+": "+op, r))
		if s.fault.CompareAndSwap(nil, &e) {
			close(s.faulted)
		}
		*err = e
	}
	if writing != nil && *writing {
		s.unlockWriter()
	}
}

// lockWriter waits for the writer slot: until it is free, the context ends,
// or the store met damage.
func (s *Store) lockWriter(ctx context.Context) error {
	select {
	case s.writer <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	case <-s.faulted:
		return *s.fault.Load()
	}
	if err := s.fault.Load(); err != nil {
		<-s.writer
		return *err
	}
	return nil
}

func (s *Store) unlockWriter() { <-s.writer }

// data returns the data bucket, which only damage can remove from a file
// Open accepted.
func data(tx *bolt.Tx) (*bolt.Bucket, error) {
	if b := tx.Bucket(dataBucket); b != nil {
		return b, nil
	}
	return nil, fmt.Errorf("%w: the bucket %q is gone", ErrCorrupt, dataBucket)
}

// txErr maps bbolt's "database not open", met by a call racing Close, to
// ErrClosed.
func txErr(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return ErrClosed
	}
	return err
}

// AppendEvents implements [keyspace.Store.AppendEvents] as one bbolt
// read-write transaction: the head check and the puts of all the batch's
// records commit together or not at all. When it returns nil the commit is
// complete and, unless [WithNoSync], fsynced: the batch survives the process
// being killed at any point and a crash of the machine. A batch whose commit
// was interrupted is either wholly there or wholly absent after [Open];
// bbolt's copy-on-write pages and its two alternating meta pages make that so
// without a recovery step (TestSurvivesKill9 kills a writing child process
// with SIGKILL, again and again, and checks it). One commit per call is why
// AppendEvents takes a slice: N events in one call cost about one commit, N
// calls cost N.
//
// The checks run in the order [keyspace.Memory] runs them, with the same
// error values: the context; the store being open ([ErrClosed]); an empty
// batch (a no-op returning expectedSeq, with no transaction); a zero workflow
// or run ID ([eventstore.ErrInvalidArgument]); one stream
// ([keyspace.ErrMixedStreams]); no ephemeral event ([keyspace.ErrEphemeral]).
// Then the events are encoded (a Content that is not one of the keyspace
// kinds wraps [eventstore.ErrInvalidArgument]), and inside the transaction the
// stream's head is read and compared with expectedSeq
// ([*eventstore.SequenceConflictError] with the head found). The records are
// put and committed only when every check passed; on any error the
// transaction is rolled back and nothing is written. Appends run one at a
// time; waiting for the one before ends with the context's error when ctx
// ends first, and with [ErrCorrupt] when that one met damage.
func (s *Store) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (_ uint64, err error) {
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
	prefix := streamPrefix(key)

	// Keys and values are built before the transaction, so the writer lock
	// is held only for the seek and the puts. bbolt needs both to stay valid
	// until the commit; one buffer each holds all of them.
	keys := make([]byte, 0, len(events)*recordKeyLen)
	var values []byte
	ends := make([]int, len(events))
	for i := range events {
		var err error
		if values, err = codec.AppendEvent(values, &events[i]); err != nil {
			return 0, fmt.Errorf("boltstore: event %d: %w", i, err)
		}
		ends[i] = len(values)
		keys = appendRecordKey(keys, prefix, expectedSeq+uint64(i))
	}

	writing := false
	defer s.guard(&err, "append_events", debug.SetPanicOnFault(true), &writing)
	if err := s.lockWriter(ctx); err != nil {
		return 0, err
	}
	writing = true
	err = s.db.Update(func(tx *bolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := data(tx)
		if err != nil {
			return err
		}
		head, err := headOf(b.Cursor(), prefix)
		if err != nil {
			return err
		}
		if head != expectedSeq {
			return &eventstore.SequenceConflictError{Expected: expectedSeq, Found: head}
		}
		start := 0
		for i, end := range ends {
			k := keys[i*recordKeyLen : (i+1)*recordKeyLen]
			if err := b.Put(k, values[start:end]); err != nil {
				return fmt.Errorf("boltstore: event %d: %w", i, err)
			}
			start = end
		}
		return nil
	})
	if err != nil {
		return 0, txErr(err)
	}
	return expectedSeq + uint64(len(events)), nil
}

// Head implements [keyspace.Store.Head] with one seek past the stream's
// prefix and one step back. A zero workflow or run ID returns an error
// wrapping [eventstore.ErrInvalidArgument].
func (s *Store) Head(ctx context.Context, key keyspace.StreamKey) (_ uint64, err error) {
	if err := s.begin(ctx); err != nil {
		return 0, err
	}
	if err := key.Validate(); err != nil {
		return 0, err
	}
	defer s.guard(&err, "head", debug.SetPanicOnFault(true), nil)
	var head uint64
	err = s.db.View(func(tx *bolt.Tx) error {
		b, err := data(tx)
		if err != nil {
			return err
		}
		head, err = headOf(b.Cursor(), streamPrefix(key))
		return err
	})
	if err != nil {
		return 0, txErr(err)
	}
	return head, nil
}

// ReadFrom implements [keyspace.Store.ReadFrom]: one seek to the first record
// wanted, then a walk over the records returned, each decoded into a fresh
// value. A zero workflow or run ID returns an error wrapping
// [eventstore.ErrInvalidArgument]; a record that cannot be decoded fails the
// call with [ErrCorruptRecord].
func (s *Store) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) (_ []keyspace.Record, err error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := key.Validate(); err != nil {
		return nil, err
	}
	prefix := streamPrefix(key)
	defer s.guard(&err, "read_from", debug.SetPanicOnFault(true), nil)
	var out []keyspace.Record
	err = s.db.View(func(tx *bolt.Tx) error {
		b, err := data(tx)
		if err != nil {
			return err
		}
		c := b.Cursor()
		head, err := headOf(c, prefix)
		if err != nil || fromSeq >= head {
			return err
		}
		n := head - fromSeq
		if limit > 0 && uint64(limit) < n {
			n = uint64(limit)
		}
		// The head comes from the last key, which damage may have made
		// huge: allocate for what the walk can find, not for what the
		// key claims. A missing record ends the walk with an error.
		out = make([]keyspace.Record, 0, min(n, maxPrealloc))
		k, v := c.Seek(appendRecordKey(make([]byte, 0, recordKeyLen), prefix, fromSeq))
		for seq := fromSeq; seq < fromSeq+n; seq++ {
			rec, err := decodeRecord(key, seq, prefix, k, v)
			if err != nil {
				return err
			}
			out = append(out, rec)
			k, v = c.Next()
		}
		return nil
	})
	if err != nil {
		return nil, txErr(err)
	}
	return out, nil
}

// maxPrealloc bounds the records ReadFrom allocates room for up front.
const maxPrealloc = 1024

// decodeRecord decodes the record the cursor found where the record at seq of
// key should be.
func decodeRecord(key keyspace.StreamKey, seq uint64, prefix, k, v []byte) (keyspace.Record, error) {
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return keyspace.Record{}, fmt.Errorf("%w: stream %s: record %d is missing below the head", ErrCorruptRecord, key, seq)
	}
	_, got, err := parseRecordKey(k)
	if err != nil {
		return keyspace.Record{}, fmt.Errorf("stream %s: %w", key, err)
	}
	if got != seq {
		return keyspace.Record{}, fmt.Errorf("%w: stream %s: found record %d where record %d belongs", ErrCorruptRecord, key, got, seq)
	}
	// The decoded strings are fresh copies, so the event stays valid after
	// the bbolt transaction that produced v ends.
	ev, err := codec.DecodeEvent(v)
	if err != nil {
		return keyspace.Record{}, fmt.Errorf("%w: stream %s record %d: %w", ErrCorruptRecord, key, seq, err)
	}
	ev.WorkflowID, ev.RunID, ev.ActivityID, ev.Attempt = key.WorkflowID, key.RunID, key.ActivityID, key.Attempt
	ev.StoreSeq = seq
	ev.Persisted = true
	return keyspace.Record{StoreSeq: seq, Event: ev}, nil
}

// ListStreams implements [keyspace.Store.ListStreams]. It seeks to the run's
// prefix and walks the run's streams: for each, one seek finds its last
// record (its head), and one more seek jumps past its prefix to the next
// stream. The cost is O(streams of the run × log keys), whatever the length
// of the streams, and other runs' keys are never visited. The key order is
// the contract's order: activity, then attempt, both unsigned. All heads come
// from one read transaction, a consistent snapshot.
func (s *Store) ListStreams(ctx context.Context, workflowID eventstore.WorkflowID, runID eventstore.RunID) (_ []keyspace.StreamSummary, err error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if err := (keyspace.StreamKey{WorkflowID: workflowID, RunID: runID}).Validate(); err != nil {
		return nil, err
	}
	defer s.guard(&err, "list_streams", debug.SetPanicOnFault(true), nil)
	var out []keyspace.StreamSummary
	err = s.db.View(func(tx *bolt.Tx) error {
		b, err := data(tx)
		if err != nil {
			return err
		}
		out, err = listRun(b.Cursor(), runPrefix(workflowID, runID))
		return err
	})
	if err != nil {
		return nil, txErr(err)
	}
	return out, nil
}

// listRun walks the streams under a run's key prefix: a seek to the prefix
// finds the first stream; for each stream, [headOf] finds its head with one
// seek and one step back, and a seek to the end of its prefix lands on the
// next stream's first record. No record is visited between a stream's first
// and its last.
func listRun(c cursor, prefix []byte) ([]keyspace.StreamSummary, error) {
	var out []keyspace.StreamSummary
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); {
		key, _, err := parseRecordKey(k)
		if err != nil {
			return nil, err
		}
		sp := bytes.Clone(k[:streamPrefixLen])
		head, err := headOf(c, sp)
		if err != nil {
			return nil, err
		}
		out = append(out, keyspace.StreamSummary{Key: key, Head: head})
		end := prefixEnd(sp)
		if end == nil {
			break
		}
		k, _ = c.Seek(end)
	}
	return out, nil
}
