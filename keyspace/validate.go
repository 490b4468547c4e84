package keyspace

import (
	"fmt"
	"reflect"

	"github.com/aionotel/aionotel/eventstore"
)

// ValidateBatch checks a batch for [Store.AppendEvents] and returns the error
// every implementation gives for it, so that [Memory] and the durable
// backends refuse exactly the same batches with the same errors, before
// anything is written. The checks run in this order and the first failure
// decides the error:
//
//   - the first event's key: a zero workflow or run ID is an error wrapping
//     [eventstore.ErrInvalidArgument];
//   - every event in that stream: [ErrMixedStreams], naming the first index
//     that differs;
//   - no ephemeral event: [ErrEphemeral], naming the first one;
//   - every Content is nil or one of the five kinds ([Message], [ToolCall],
//     [ToolResult], [Status], [Usage]) as a value or a non-nil pointer: an
//     error wrapping [eventstore.ErrInvalidArgument] naming the first event
//     that is not, for a nil pointer or any other type.
//
// An empty batch is valid. A batch that passes is one every implementation
// can store: nothing else about an event is refused. In particular a
// [Usage]'s token counts are not checked: the transcript keeps whatever the
// agent wrote (math.MaxUint64 for a -1 included), and it is telemetry that
// refuses counts no model call reaches (otelstore.MaxTokenCount), so that a
// bad count never costs the batch's other events.
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
	for i := range events {
		if err := checkContent(i, events[i].Content); err != nil {
			return err
		}
	}
	return nil
}

// checkContent returns nil when c is storable (see [ValidateBatch]), else an
// error wrapping [eventstore.ErrInvalidArgument] naming event i. It never
// calls a method of c: a foreign type's ContentKind may panic.
func checkContent(i int, c Content) error {
	if _, ok := contentValue(c); ok {
		return nil
	}
	if c != nil && reflect.ValueOf(c).Kind() == reflect.Pointer && reflect.ValueOf(c).IsNil() {
		return fmt.Errorf("%w: keyspace: event %d: content is a nil %T", eventstore.ErrInvalidArgument, i, c)
	}
	return fmt.Errorf("%w: keyspace: event %d: content type %T is not one of the keyspace content kinds",
		eventstore.ErrInvalidArgument, i, c)
}

// contentValue returns c as a value kind and true: a non-nil pointer to one
// of the five kinds is dereferenced, a value kind or nil is returned as is.
// For any other type, and a nil pointer, it returns false. A value kind holds
// no pointer or slice, so a copy of it shares nothing with the caller.
func contentValue(c Content) (Content, bool) {
	switch c := c.(type) {
	case nil, Message, ToolCall, ToolResult, Status, Usage:
		return c, true
	case *Message:
		if c != nil {
			return *c, true
		}
	case *ToolCall:
		if c != nil {
			return *c, true
		}
	case *ToolResult:
		if c != nil {
			return *c, true
		}
	case *Status:
		if c != nil {
			return *c, true
		}
	case *Usage:
		if c != nil {
			return *c, true
		}
	}
	return nil, false
}
