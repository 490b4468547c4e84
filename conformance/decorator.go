package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
)

// TestDecorator tests a decorator of [eventstore.Store] (a function that
// wraps an inner store, as otelstore.New does) for faithful forwarding. For
// each of the four capability combinations of a [Spy] (none, Outbox,
// ShardOwner, both) it checks, each as a named subtest
// "<capabilities>/<rule>" on a fresh spy:
//
//   - capabilities: the wrapped store implements exactly the inner's
//     optional interfaces, no fewer and no more;
//   - unwrap: the wrapped store has Unwrap() eventstore.Store returning the
//     inner store;
//   - forward/<Method>, for every method of [eventstore.Store] and of the
//     inner's capabilities, found by reflection (so a method added later is
//     covered without touching the suite): one call on the wrapped store with
//     distinctive arguments reaches the inner exactly once, and no other
//     inner method is called; the arguments arrive unchanged
//     (reflect.DeepEqual); the context the inner sees carries the values of
//     the caller's context (a decorator may derive a context for its span,
//     but must not drop the caller's); and every result comes back unchanged
//     (reflect.DeepEqual with what the spy returned, identity for the error);
//   - differential: generated calls with nil, empty, zero, negative and
//     boundary arguments, cancelled, expired and deadline-bound contexts,
//     repeated calls, answered by the spy with fresh nil, empty or
//     multi-element results or an error: the inner sees the caller's
//     arguments, context values, Err() and Deadline(), and the caller gets
//     exactly the inner's answer (see [RuleDecDifferential]);
//   - error/<Method>, for every method that returns an error: with a
//     sentinel error set on the spy, the wrapped store returns that very
//     value (== and errors.Is), not a wrapped or replaced one, its other
//     results unchanged, still after exactly one inner call.
//
// wrap is called once per rule with the spy's store and must return the
// decorated store. It runs on the rule's goroutine, not the test's, so it
// must report trouble with t.Error (safe from any goroutine), never t.Fatal
// (a rule aborted that way fails with [ErrRuleAborted]). Typical usage:
//
//	func TestDecoratorConformance(t *testing.T) {
//		conformance.TestDecorator(t, func(inner eventstore.Store) eventstore.Store {
//			s, err := mydecorator.New(inner)
//			if err != nil {
//				t.Error(err)
//				return nil // fails the rule: wrap returned nil
//			}
//			return s
//		})
//	}
func TestDecorator(t *testing.T, wrap func(inner eventstore.Store) eventstore.Store, opts ...Option) {
	t.Helper()
	if wrap == nil {
		t.Fatal("conformance: TestDecorator: nil wrap function")
	}
	decoratorSuite.test(t, newConfig(opts), func(*testing.T) wrapFunc { return wrap })
}

// CheckDecorator is the error-returning core of [TestDecorator]: it runs
// every decorator rule and returns nil when all hold, or the errors.Join of
// one *[RuleError] per broken rule. It never stops at the first failure.
func CheckDecorator(ctx context.Context, wrap func(inner eventstore.Store) eventstore.Store, opts ...Option) error {
	return decoratorSuite.check(ctx, newConfig(opts), func() (wrapFunc, func(), error) {
		if wrap == nil {
			return nil, nil, errors.New("nil wrap function")
		}
		return wrap, nil, nil
	})
}

type wrapFunc = func(inner eventstore.Store) eventstore.Store

var decoratorSuite = newDecoratorSuite()

// newDecoratorSuite builds the rule table from the interfaces' method sets.
func newDecoratorSuite() suite[wrapFunc] {
	s := suite[wrapFunc]{name: SuiteDecorator}
	for _, caps := range capCombinations {
		s.rules = append(s.rules,
			rule[wrapFunc]{name: caps.String() + "/" + RuleDecCapabilities, check: func(ctx context.Context, wrap wrapFunc) error {
				return decCapabilities(wrap, caps)
			}},
			rule[wrapFunc]{name: caps.String() + "/" + RuleDecUnwrap, check: func(ctx context.Context, wrap wrapFunc) error {
				return decUnwrap(wrap, caps)
			}},
		)
		s.rules = append(s.rules, rule[wrapFunc]{name: caps.String() + "/" + RuleDecDifferential, run: func(ctx context.Context, env *ruleEnv[wrapFunc], wrap wrapFunc) error {
			return decDifferential(ctx, env, wrap, caps)
		}})
		var errorRules []rule[wrapFunc]
		for _, iface := range storeInterfaces {
			if iface.caps != 0 && caps&iface.caps == 0 {
				continue
			}
			for m := range iface.typ.Methods() {
				s.rules = append(s.rules, rule[wrapFunc]{
					name: fmt.Sprintf("%s/%s%s", caps, RuleDecForward, m.Name),
					check: func(ctx context.Context, wrap wrapFunc) error {
						return decForward(ctx, wrap, caps, iface, m, nil)
					},
				})
				if returnsError(m.Type) {
					errorRules = append(errorRules, rule[wrapFunc]{
						name: fmt.Sprintf("%s/%s%s", caps, RuleDecError, m.Name),
						check: func(ctx context.Context, wrap wrapFunc) error {
							return decForward(ctx, wrap, caps, iface, m, &sentinelError{method: m.Name})
						},
					})
				}
			}
		}
		s.rules = append(s.rules, errorRules...)
	}
	return s
}

// sentinelError is the error the error rules set on the spy: a fresh
// pointer per rule, so only the identical value compares equal.
type sentinelError struct{ method string }

func (e *sentinelError) Error() string {
	return "conformance: sentinel error for " + e.method
}

type ctxMarkerKey struct{}

// wrapSpy makes a fresh spy with caps and wraps its store; a panic or a nil
// result is an error.
func wrapSpy(wrap wrapFunc, caps Capabilities) (spy *Spy, wrapped eventstore.Store, err error) {
	spy = NewSpy(caps)
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: wrap panicked: %v", ErrRulePanicked, p)
		}
	}()
	wrapped = wrap(spy.Store())
	if wrapped == nil {
		return nil, nil, fmt.Errorf("wrap returned nil for a %s spy", caps)
	}
	return spy, wrapped, nil
}

func decCapabilities(wrap wrapFunc, caps Capabilities) error {
	_, w, err := wrapSpy(wrap, caps)
	if err != nil {
		return err
	}
	got := capabilitiesOf(w)
	if got == caps {
		return nil
	}
	var errs []error
	if hidden := caps &^ got; hidden != 0 {
		errs = append(errs, fmt.Errorf("the wrapped %T hides %s, which the inner store implements", w, hidden))
	}
	if invented := got &^ caps; invented != 0 {
		errs = append(errs, fmt.Errorf("the wrapped %T claims %s, which the inner store lacks", w, invented))
	}
	return errors.Join(errs...)
}

func decUnwrap(wrap wrapFunc, caps Capabilities) error {
	spy, w, err := wrapSpy(wrap, caps)
	if err != nil {
		return err
	}
	u, ok := w.(interface{ Unwrap() eventstore.Store })
	if !ok {
		return fmt.Errorf("the wrapped %T has no Unwrap() eventstore.Store method", w)
	}
	if got := u.Unwrap(); got != spy.Store() {
		return fmt.Errorf("Unwrap() returned %T(%v), not the inner store (a %T)", got, got, spy.Store())
	}
	return nil
}

// decForward calls method m on the wrapped store once and checks what the
// inner spy saw and what came back. With a non-nil sentinel the spy fails
// every call with it.
func decForward(ctx context.Context, wrap wrapFunc, caps Capabilities, iface storeInterface, m reflect.Method, sentinel error) error {
	spy, w, err := wrapSpy(wrap, caps)
	if err != nil {
		return err
	}
	if !reflect.TypeOf(w).Implements(iface.typ) {
		return fmt.Errorf("the wrapped %T does not implement %s, so %s cannot be called", w, iface.name, m.Name)
	}
	if sentinel != nil {
		spy.SetError(sentinel)
	}
	marker := new(int)
	ctx = context.WithValue(ctx, ctxMarkerKey{}, marker)
	args, err := newArgGen(false).args(m, ctx)
	if err != nil {
		return err
	}
	before := len(spy.Calls())
	out, err := callMethod(w, m.Name, args)
	if err != nil {
		return err
	}
	calls := spy.Calls()[before:]
	var mine []Call
	var others []string
	for _, c := range calls {
		if c.Method == m.Name {
			mine = append(mine, c)
		} else {
			others = append(others, c.Method)
		}
	}
	switch {
	case len(mine) == 0:
		return fmt.Errorf("%s on the wrapped store never reached the inner store (not forwarded)", m.Name)
	case len(mine) > 1:
		return fmt.Errorf("%s on the wrapped store reached the inner store %d times, want exactly once", m.Name, len(mine))
	case len(others) > 0:
		return fmt.Errorf("%s on the wrapped store also called %v on the inner store", m.Name, others)
	}
	call := mine[0]
	if len(call.Args) != len(args)-1 {
		return fmt.Errorf("%s reached the inner store with %d arguments, want %d", m.Name, len(call.Args), len(args)-1)
	}
	for i, a := range args[1:] {
		if want := a.Interface(); !reflect.DeepEqual(call.Args[i], want) {
			return fmt.Errorf("%s reached the inner store with argument %d = %+v, want the caller's %+v", m.Name, i+1, call.Args[i], want)
		}
	}
	if call.Ctx == nil || call.Ctx.Value(ctxMarkerKey{}) != marker {
		return fmt.Errorf("%s reached the inner store with a context that does not carry the caller's context values", m.Name)
	}
	if len(out) != len(call.Results) {
		return fmt.Errorf("%s returned %d values, the inner store %d", m.Name, len(out), len(call.Results))
	}
	for i, o := range out {
		got, want := o.Interface(), call.Results[i]
		if i == len(out)-1 && returnsError(m.Type) {
			ge, _ := got.(error)
			we, _ := want.(error)
			if err := sameError(ge, we); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			continue
		}
		if !reflect.DeepEqual(got, want) {
			return fmt.Errorf("%s returned result %d = %+v, the inner store returned %+v", m.Name, i, got, want)
		}
	}
	return nil
}

// sameError checks that a decorator returned the inner store's very error.
func sameError(got, want error) error {
	switch {
	case want == nil && got == nil:
		return nil
	case want == nil:
		return fmt.Errorf("returned error %q, the inner store returned nil", got)
	case got == nil:
		return fmt.Errorf("returned nil, swallowing the inner store's error %q", want)
	case !reflect.TypeOf(got).Comparable() || got != want:
		return fmt.Errorf("returned error %q (%T), not the inner store's error value %q (%T): a decorator must return the very value", got, got, want, want)
	case !errors.Is(got, want):
		return fmt.Errorf("returned error %q does not match the inner store's %q with errors.Is", got, want)
	}
	return nil
}
