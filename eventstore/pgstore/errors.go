package pgstore

import "errors"

var (
	// ErrClosed is returned by every method of a [Store] called after
	// [Store.Close]. Nothing is written.
	ErrClosed = errors.New("pgstore: store is closed")

	// ErrCorruptRecord is returned by the reads when a stored row cannot be
	// decoded: a body written in a format version this build does not know
	// (see [FormatVersion]), an unknown event kind, damaged bytes. The
	// message names the workflow and the row.
	ErrCorruptRecord = errors.New("pgstore: corrupt record")

	// ErrSchemaVersion is returned by [New] and [Open] when the tables were
	// created by a newer version of this package (see [SchemaVersion]).
	// Nothing is changed.
	ErrSchemaVersion = errors.New("pgstore: unsupported schema version")

	// ErrLeaseBusy is wrapped, with [eventstore.ErrNotOwner], by the error of
	// an acquisition that would take over a lease whose row another
	// transaction holds locked: a write of the previous holder that passed
	// its fence and has not committed yet (or a concurrent takeover). The
	// acquisition does not wait for it and acquires nothing; try again later
	// (the server ends a writer idle in its transaction after
	// [WithIdleInTransactionTimeout]).
	ErrLeaseBusy = errors.New("pgstore: the lease row is locked by another transaction")
)
