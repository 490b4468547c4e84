package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"testing"
	"time"
)

// Suite names, as they appear in [RuleError.Suite].
const (
	SuiteKeyspace   = "keyspace"
	SuiteEventStore = "eventstore"
	SuiteDecorator  = "decorator"
)

var (
	// ErrRuleTimedOut is matched by the error of a rule that was still running
	// when its watchdog fired (see [WithRuleTimeout]): the implementation hung,
	// or answered only once its context was cancelled.
	ErrRuleTimedOut = errors.New("conformance: rule timed out")

	// ErrRulePanicked is matched by the error of a rule during which the
	// implementation (or the factory, or the decorator) panicked. The panic
	// value and stack are in the message; the suite goes on with the next
	// rule.
	ErrRulePanicked = errors.New("conformance: rule panicked")

	// ErrRuleAborted is matched by the error of a rule whose goroutine ended
	// through runtime.Goexit: typically t.Fatal or t.FailNow called by the
	// implementation or by a decorator's wrap function, which run on the
	// rule's own goroutine (use t.Error there instead).
	ErrRuleAborted = errors.New("conformance: rule aborted by runtime.Goexit")
)

// RuleError is one broken rule. The error-returning cores ([CheckKeyspace],
// [CheckEventStore], [CheckDecorator]) return one per failed rule, joined
// with errors.Join; [RuleErrors] takes them apart again:
//
//	for _, re := range conformance.RuleErrors(err) {
//		fmt.Println(re.Suite, re.Rule)
//	}
//
// Err says what went wrong. It wraps the implementation's own error where
// there was one, so errors.Is(err, eventstore.ErrSequenceConflict) and
// friends still reach it, and it matches [ErrRuleTimedOut] or
// [ErrRulePanicked] when the watchdog or the panic guard stopped the rule.
type RuleError struct {
	Suite string // SuiteKeyspace, SuiteEventStore or SuiteDecorator
	Rule  string // the rule's name, equal to its subtest name in the Test* wrappers
	Err   error
}

func (e *RuleError) Error() string {
	return fmt.Sprintf("conformance: %s: rule %q: %v", e.Suite, e.Rule, e.Err)
}

// Unwrap returns Err.
func (e *RuleError) Unwrap() error { return e.Err }

// RuleErrors returns every *RuleError in err's tree, in order: the failed
// rules of a core's joined result. It returns nil for a nil error.
// errors.As would stop at the first one.
func RuleErrors(err error) []*RuleError {
	var out []*RuleError
	var walk func(error)
	walk = func(err error) {
		if err == nil {
			return
		}
		if re, ok := err.(*RuleError); ok {
			out = append(out, re)
			return // a rule's own error holds no further rule errors
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		}
	}
	walk(err)
	return out
}

// rule is one named check of a suite, run on a fresh subject (a store, or a
// decorator's wrap function).
type rule[S any] struct {
	name  string
	check func(ctx context.Context, subject S) error
}

// skipError is what a rule returns when the subject lacks the capability the
// rule needs. The cores count it as a pass; the Test* wrappers report the
// subtest as skipped with the reason.
type skipError struct{ reason string }

func (e *skipError) Error() string { return "skipped: " + e.reason }

func skip(reason string) error { return &skipError{reason: reason} }

// runBounded runs fn under a watchdog and a guard against panics and
// runtime.Goexit. fn gets a context with the rule's deadline, cancelled
// when the watchdog fires; if fn has not returned by then, runBounded
// returns without waiting for it (the goroutine is left to finish whenever
// the implementation lets it).
func runBounded(ctx context.Context, cfg config, fn func(ctx context.Context) error) error {
	rctx, cancel := context.WithTimeout(ctx, cfg.ruleTimeout)
	defer cancel()
	var fire <-chan time.Time // nil: the deadline of rctx is the watchdog
	if cfg.watchdog != nil {
		fire = cfg.watchdog(cfg.ruleTimeout)
	}
	done := make(chan error, 1)
	go func() {
		returned := false
		defer func() {
			if p := recover(); p != nil {
				done <- fmt.Errorf("%w: %v\n%s", ErrRulePanicked, p, debug.Stack())
			} else if !returned {
				done <- ErrRuleAborted
			}
		}()
		err := fn(rctx)
		returned = true
		done <- err
	}()
	timedOut := fmt.Errorf("%w after %v: the implementation did not return", ErrRuleTimedOut, cfg.ruleTimeout)
	select {
	case err := <-done:
		if err != nil && rctx.Err() != nil && ctx.Err() == nil {
			// The implementation gave up only because the deadline passed:
			// that is a hang, not an answer.
			return fmt.Errorf("%w after %v: %w", ErrRuleTimedOut, cfg.ruleTimeout, err)
		}
		return err
	case <-fire:
		return timedOut
	case <-rctx.Done():
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("conformance: suite context done: %w", err)
		}
		return timedOut
	}
}

// suite is a named rule table shared by a core and its *testing.T wrapper,
// so no rule is written twice.
type suite[S any] struct {
	name  string
	rules []rule[S]
}

// check runs every rule on a fresh subject from newSubject and joins one
// *RuleError per failed rule. It stops early only when ctx is done.
func (s suite[S]) check(ctx context.Context, cfg config, newSubject func() (S, error)) error {
	var errs []error
	for _, r := range s.rules {
		err := runBounded(ctx, cfg, func(ctx context.Context) error {
			subject, err := newSubject()
			if err != nil {
				return fmt.Errorf("conformance: factory: %w", err)
			}
			if any(subject) == nil {
				return errors.New("conformance: factory returned nil")
			}
			return r.check(ctx, subject)
		})
		var sk *skipError
		if err == nil || errors.As(err, &sk) {
			continue
		}
		errs = append(errs, &RuleError{Suite: s.name, Rule: r.name, Err: err})
		if ctx.Err() != nil {
			break
		}
	}
	return errors.Join(errs...)
}

// test runs every rule as a named subtest of t on a fresh subject from
// newSubject, which is called on the subtest's own *testing.T (so it may call
// t.Fatal and register t.Cleanup).
func (s suite[S]) test(t *testing.T, cfg config, newSubject func(t *testing.T) S) {
	t.Helper()
	for _, r := range s.rules {
		t.Run(r.name, func(t *testing.T) {
			t.Helper()
			subject := newSubject(t)
			if any(subject) == nil {
				t.Fatal("conformance: factory returned nil")
			}
			err := runBounded(t.Context(), cfg, func(ctx context.Context) error {
				return r.check(ctx, subject)
			})
			var sk *skipError
			if errors.As(err, &sk) {
				t.Skip(sk.reason)
			}
			if err != nil {
				t.Error(&RuleError{Suite: s.name, Rule: r.name, Err: err})
			}
		})
	}
}
