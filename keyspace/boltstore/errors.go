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

	// ErrCorruptRecord is returned by the read methods when a stored key or
	// value cannot be decoded: a record written in a format version this
	// build does not know (see [FormatVersion]), an unknown content kind, or
	// damaged bytes. The message names the stream and store seq.
	ErrCorruptRecord = errors.New("boltstore: corrupt record")

	// ErrLayoutVersion is returned by [Open] for a file whose keyspace was
	// laid out by a newer version of this package (see [LayoutVersion]).
	// The file is not changed.
	ErrLayoutVersion = errors.New("boltstore: unsupported keyspace layout version")
)
