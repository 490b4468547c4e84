package boltstore

import "errors"

var (
	// ErrClosed is returned by every method of a [Store] called after
	// [Store.Close]. Nothing is written.
	ErrClosed = errors.New("boltstore: store is closed")

	// ErrLocked is returned by [Open] when another process, or another Store
	// of this process, holds the file open and did not release it within the
	// open timeout (see [WithOpenTimeout]).
	ErrLocked = errors.New("boltstore: file is locked by another open store")

	// ErrCorrupt is returned, wrapped with what was found where, when the
	// bbolt file is damaged: by [Open] when its check of the file fails
	// (the error names the page), and by any method that meets damage
	// bbolt cannot read past (a bbolt panic or a memory fault, recovered
	// on the calling goroutine). After such a failure every method returns
	// an error wrapping ErrCorrupt; [Store.Close] still releases the
	// file. An [ErrCorruptRecord] error also matches ErrCorrupt.
	ErrCorrupt = errors.New("boltstore: damaged file")

	// ErrCorruptRecord is returned by the read methods when a stored key or
	// value cannot be decoded: a record written in a format version this
	// build does not know (see [FormatVersion]), an unknown content kind, or
	// damaged bytes. The message names the stream and store seq. It is a
	// kind of [ErrCorrupt]: errors.Is(err, ErrCorrupt) holds for it too. It
	// concerns that record only: the Store stays usable.
	ErrCorruptRecord error = &kindError{msg: "boltstore: corrupt record", kind: ErrCorrupt}

	// ErrLayoutVersion is returned by [Open] for a file whose keyspace was
	// laid out by a newer version of this package (see [LayoutVersion]).
	// The file is not changed.
	ErrLayoutVersion = errors.New("boltstore: unsupported keyspace layout version")
)

// kindError is a sentinel error that is also a kind of a more general one.
type kindError struct {
	msg  string
	kind error
}

func (e *kindError) Error() string { return e.msg }
func (e *kindError) Unwrap() error { return e.kind }
