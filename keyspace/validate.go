package keyspace

import "fmt"

// ValidateBatch checks a non-empty batch for [Store.AppendEvents] and returns
// the error every implementation gives for it: the first event's key must be
// valid (zero IDs: an error wrapping [eventstore.ErrInvalidArgument]), every
// event must be in that stream ([ErrMixedStreams], naming the first index
// that differs) and none may be ephemeral ([ErrEphemeral], naming the first
// one). Durable backends call it before they open a transaction, so that all
// implementations refuse the same batches with the same errors.
func ValidateBatch(events []ActivityEvent) error {
	if len(events) == 0 {
		return nil
	}
	key := KeyOf(events[0])
	if err := key.Validate(); err != nil {
		return err
	}
	for i := 1; i < len(events); i++ {
		if k := KeyOf(events[i]); k != key {
			return fmt.Errorf("%w: event %d is in stream %s, event 0 in %s", ErrMixedStreams, i, k, key)
		}
	}
	for i := range events {
		if events[i].Ephemeral {
			return fmt.Errorf("%w: event %d is ephemeral", ErrEphemeral, i)
		}
	}
	return nil
}
