package conformance

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
)

// The generator knows every parameter type of every method of the
// interfaces, in both modes, and gives values of exactly those types.
func TestArgGenCoversEveryMethod(t *testing.T) {
	for _, valid := range []bool{false, true} {
		gen := newArgGen(valid)
		for _, iface := range storeInterfaces {
			for m := range iface.typ.Methods() {
				args, err := gen.args(m, t.Context())
				if err != nil {
					t.Fatalf("valid=%v: %v", valid, err)
				}
				if len(args) != m.Type.NumIn() {
					t.Fatalf("%s: %d args, want %d", m.Name, len(args), m.Type.NumIn())
				}
				for i, a := range args {
					if !a.Type().AssignableTo(m.Type.In(i)) {
						t.Errorf("%s: arg %d is a %v, want %v", m.Name, i, a.Type(), m.Type.In(i))
					}
				}
			}
		}
	}
}

// Distinctive arguments are never zero and never repeat within a method, so
// a decorator that zeroes, drops or swaps one is caught.
func TestArgGenDistinctive(t *testing.T) {
	gen := newArgGen(false)
	for _, iface := range storeInterfaces {
		for m := range iface.typ.Methods() {
			args, err := gen.args(m, t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for i := 1; i < len(args); i++ {
				if args[i].IsZero() {
					t.Errorf("%s: arg %d is the zero %v", m.Name, i, args[i].Type())
				}
				for j := 1; j < i; j++ {
					if args[i].Type() == args[j].Type() && reflect.DeepEqual(args[i].Interface(), args[j].Interface()) {
						t.Errorf("%s: args %d and %d are equal; swapping them would go unnoticed", m.Name, j, i)
					}
				}
			}
		}
	}
}

// A method with a parameter type the generator does not know, as a method
// added to the interfaces later might have, fails loudly and by name.
func TestArgGenFailsLoudlyOnUnknownTypes(t *testing.T) {
	testCases := []struct {
		name string
		fn   reflect.Type
		want []string
	}{
		{"unknown parameter", reflect.TypeFor[func(context.Context, eventstore.WorkflowID, chan int) error](), []string{"FutureMethod", "chan int", "parameter 2"}},
		{"no context first", reflect.TypeFor[func(eventstore.WorkflowID) error](), []string{"FutureMethod", "context"}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newArgGen(false).args(reflect.Method{Name: "FutureMethod", Type: tc.fn}, t.Context())
			if err == nil {
				t.Fatal("args accepted a method it cannot generate arguments for")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

type panicker struct{}

func (panicker) Boom() { panic("kaboom") }

func TestCallMethod(t *testing.T) {
	if _, err := callMethod(panicker{}, "Missing", nil); err == nil || !strings.Contains(err.Error(), "no method Missing") {
		t.Errorf("callMethod of a missing method = %v", err)
	}
	if _, err := callMethod(panicker{}, "Boom", nil); !errors.Is(err, ErrRulePanicked) || !strings.Contains(err.Error(), "kaboom") {
		t.Errorf("callMethod of a panicking method = %v, want ErrRulePanicked with the value", err)
	}
}
