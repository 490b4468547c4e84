// Package guard holds the defensive checks the decorators and the Sequencer
// share for values a caller or a store hands them: a typed-nil store behind
// an interface, and an error chain that may hold a typed-nil conflict or an
// Unwrap that panics. The functions are pure and safe for concurrent use.
package guard

import (
	"errors"
	"reflect"

	"github.com/aionotel/aionotel/eventstore"
)

// IsNil reports whether v is nil or a nil pointer, map, slice, func, channel
// or interface behind an interface: a value that would panic or fail on
// first use.
func IsNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// Conflict returns the *eventstore.SequenceConflictError in err's chain, or
// nil: also for a typed nil one (it has no Found) and for a chain whose
// Unwrap panics (a typed nil *fs.PathError reads its receiver).
func Conflict(err error) (conflict *eventstore.SequenceConflictError) {
	defer func() {
		if recover() != nil {
			conflict = nil
		}
	}()
	if !errors.As(err, &conflict) {
		return nil
	}
	return conflict
}
