package eventstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestSentinelsAreDistinct(t *testing.T) {
	sentinels := []error{ErrSequenceConflict, ErrInvalidToken, ErrNotFound, ErrNotOwner, ErrInvalidArgument, ErrUnsupported}
	for i, a := range sentinels {
		for j, b := range sentinels {
			if (i == j) != errors.Is(a, b) {
				t.Errorf("errors.Is(%v, %v) = %v", a, b, i != j)
			}
		}
	}
}

func TestSequenceConflictError(t *testing.T) {
	var err error = &SequenceConflictError{Expected: 3, Found: 5}
	testCases := []struct {
		name string
		err  error
	}{
		{name: "bare", err: err},
		{name: "wrapped", err: fmt.Errorf("append: %w", err)},
		{name: "joined", err: errors.Join(errors.New("other"), err)},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if !errors.Is(tc.err, ErrSequenceConflict) {
				t.Error("does not match ErrSequenceConflict")
			}
			for _, other := range []error{ErrInvalidToken, ErrNotFound, ErrInvalidArgument} {
				if errors.Is(tc.err, other) {
					t.Errorf("matches %v", other)
				}
			}
			var conflict *SequenceConflictError
			if !errors.As(tc.err, &conflict) || conflict.Expected != 3 || conflict.Found != 5 {
				t.Errorf("errors.As = %+v", conflict)
			}
			if msg := tc.err.Error(); !strings.Contains(msg, "3") || !strings.Contains(msg, "5") {
				t.Errorf("message %q does not name both sequences", msg)
			}
		})
	}
}

func TestInvalidf(t *testing.T) {
	err := invalidf("event %d is %s", 2, "nil")
	if !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("%v does not match ErrInvalidArgument", err)
	}
	if want := "eventstore: invalid argument: event 2 is nil"; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
}
