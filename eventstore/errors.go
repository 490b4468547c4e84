package eventstore

import (
	"errors"
	"fmt"
)

// Sentinel errors. Stores return them, or errors wrapping them with %w, so
// callers test with errors.Is. Decorators return the very value the inner store
// returned.
var (
	// ErrSequenceConflict is matched by every *SequenceConflictError: an append
	// named an expected sequence that is not the current head. Nothing of that
	// append was written; re-read the head and retry.
	ErrSequenceConflict = errors.New("eventstore: sequence conflict")

	// ErrInvalidToken is returned by every write given a WriteToken that did not
	// come from [RecorderToken] (the zero token, above all). Nothing is written.
	ErrInvalidToken = errors.New("eventstore: invalid write token")

	// ErrNotFound is returned when a call names something the store does not
	// hold: a package to delete or route to, an outbox row to settle or re-arm.
	// Reads of an unknown workflow are not an error: they return nothing.
	ErrNotFound = errors.New("eventstore: not found")

	// ErrNotOwner is returned by the ShardOwner methods when this store does not
	// own the shard it is asked to act for (publishing an owner for a shard it
	// never acquired, for example).
	ErrNotOwner = errors.New("eventstore: not the shard owner")

	// ErrInvalidArgument is returned for malformed input: a zero workflow or run
	// ID, a nil or foreign event in a batch, an out-of-range shard, a
	// non-positive claim limit, an empty package name. Nothing is written.
	ErrInvalidArgument = errors.New("eventstore: invalid argument")

	// ErrUnsupported is returned by a store, or by a layer in front of one, for an
	// operation it cannot perform: a capability method reached on a store
	// that lacks the capability, for example.
	ErrUnsupported = errors.New("eventstore: unsupported operation")
)

// SequenceConflictError is returned by an append whose expected sequence is not
// the current head. Expected is what the caller named, Found the actual head
// (the number of events in the history, or the stream's next sequence for the
// keyspace). It matches [ErrSequenceConflict]:
//
//	var conflict *eventstore.SequenceConflictError
//	if errors.As(err, &conflict) {
//		expected = conflict.Found // retry from the real head
//	}
type SequenceConflictError struct {
	Expected uint64
	Found    uint64
}

func (e *SequenceConflictError) Error() string {
	return fmt.Sprintf("eventstore: sequence conflict: expected head %d, found %d", e.Expected, e.Found)
}

// Is makes every *SequenceConflictError match [ErrSequenceConflict].
func (e *SequenceConflictError) Is(target error) bool { return target == ErrSequenceConflict }

// invalidf returns an error that wraps [ErrInvalidArgument] with a message.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}
