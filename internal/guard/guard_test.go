package guard

import (
	"fmt"
	"io/fs"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
)

type store struct{}

func TestIsNil(t *testing.T) {
	var nilMap map[string]int
	var nilFunc func()
	testCases := []struct {
		name string
		v    any
		want bool
	}{
		{"nil", nil, true},
		{"nil pointer", (*store)(nil), true},
		{"nil map", nilMap, true},
		{"nil func", nilFunc, true},
		{"value", store{}, false},
		{"pointer", &store{}, false},
	}
	for _, tc := range testCases {
		if got := IsNil(tc.v); got != tc.want {
			t.Errorf("%s: IsNil = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestConflict(t *testing.T) {
	real := &eventstore.SequenceConflictError{Expected: 1, Found: 2}
	testCases := []struct {
		name string
		err  error
		want *eventstore.SequenceConflictError
	}{
		{"nil", nil, nil},
		{"wrapped", fmt.Errorf("x: %w", real), real},
		{"typed nil", (*eventstore.SequenceConflictError)(nil), nil},
		{"panicking Unwrap", (*fs.PathError)(nil), nil},
		{"other", fs.ErrNotExist, nil},
	}
	for _, tc := range testCases {
		if got := Conflict(tc.err); got != tc.want {
			t.Errorf("%s: Conflict = %v, want %v", tc.name, got, tc.want)
		}
	}
}
