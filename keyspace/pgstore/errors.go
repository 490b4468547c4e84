package pgstore

import "errors"

var (
	// ErrClosed is returned by every method of a [Store] called after
	// [Store.Close]. Nothing is written.
	ErrClosed = errors.New("pgstore: store is closed")

	// ErrCorruptRecord is returned by the read methods when a stored row
	// cannot be decoded: a payload written in a format version this build
	// does not know (see [FormatVersion]), an unknown content kind, damaged
	// bytes, a key column out of range, or a gap in a stream's store seqs.
	// The message names the stream and store seq.
	ErrCorruptRecord = errors.New("pgstore: corrupt record")

	// ErrSchemaVersion is returned by [New] and [Open] when the table was
	// created by a newer version of this package (see [SchemaVersion]). The
	// schema is not changed.
	ErrSchemaVersion = errors.New("pgstore: unsupported schema version")
)
