package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
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
	// Seed is the seed of the generated operations of a seeded rule (the
	// model-based, differential and concurrency rules), 0 for a fixed rule.
	// [WithSeed] or -conformance.seed replays the failure.
	Seed int64
	Err  error
}

func (e *RuleError) Error() string {
	if e.Seed != 0 {
		return fmt.Sprintf("conformance: %s: rule %q (seed %d; replay with -conformance.seed=%d): %v", e.Suite, e.Rule, e.Seed, e.Seed, e.Err)
	}
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
// decorator's wrap function). A seeded rule has run instead of check: it
// gets the configuration (seed, scale) and can ask for more fresh subjects,
// which the minimiser replays a failing sequence on.
type rule[S any] struct {
	name  string
	check func(ctx context.Context, subject S) error
	run   func(ctx context.Context, env *ruleEnv[S], subject S) error
}

// seeded reports whether the rule draws from the seed.
func (r rule[S]) seeded() bool { return r.run != nil }

// ruleEnv is what a seeded rule gets besides its subject.
type ruleEnv[S any] struct {
	cfg config
	// fresh returns another fresh subject; the suite closes it with the
	// rule's own.
	fresh func() (S, error)
}

// skipError is what a rule returns when the subject lacks the capability the
// rule needs. The cores count it as a pass unless the capability is required
// ([WithRequiredCapabilities]); the Test* wrappers report the subtest as
// skipped with the reason.
type skipError struct {
	reason string
	caps   Capabilities
}

func (e *skipError) Error() string { return "skipped: " + e.reason }

// skipCap is skip for a missing capability.
func skipCap(caps Capabilities, reason string) error { return &skipError{reason: reason, caps: caps} }

// ErrCapabilityMissing is matched by the error of a rule whose capability
// the store lacks although [WithRequiredCapabilities] requires it.
var ErrCapabilityMissing = errors.New("conformance: required capability missing")

// skipOutcome sorts a rule's error: a skip of a capability that is not
// required is a skip (ok true); a required one becomes a failure.
func skipOutcome(cfg config, err error) (sk *skipError, out error) {
	if !errors.As(err, &sk) {
		return nil, err
	}
	if sk.caps != 0 && cfg.require&sk.caps != 0 {
		return nil, fmt.Errorf("%w: %s", ErrCapabilityMissing, sk.reason)
	}
	return sk, nil
}

// invoke runs one rule on subject.
func (r rule[S]) invoke(ctx context.Context, env *ruleEnv[S], subject S) error {
	if r.run != nil {
		return r.run(ctx, env, subject)
	}
	return r.check(ctx, subject)
}

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
// *RuleError per failed rule. Every cleanup newSubject returned for a rule
// runs when the rule is over (also when it timed out, so that a hung call
// can be released). It stops early only when ctx is done.
func (s suite[S]) check(ctx context.Context, cfg config, newSubject func() (S, func(), error)) error {
	var errs []error
	for _, r := range s.rules {
		if !cfg.selected(r.name, r.seeded()) {
			continue
		}
		var mu sync.Mutex
		var cleanups []func()
		fresh := func() (S, error) {
			subject, cleanup, err := newSubject()
			if cleanup != nil {
				mu.Lock()
				cleanups = append(cleanups, cleanup)
				mu.Unlock()
			}
			if err != nil {
				return subject, fmt.Errorf("conformance: factory: %w", err)
			}
			if any(subject) == nil {
				return subject, errors.New("conformance: factory returned nil")
			}
			return subject, nil
		}
		err := runBounded(ctx, cfg, func(ctx context.Context) error {
			subject, err := fresh()
			if err != nil {
				return err
			}
			return r.invoke(ctx, &ruleEnv[S]{cfg: cfg, fresh: fresh}, subject)
		})
		mu.Lock()
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		mu.Unlock()
		_, err = skipOutcome(cfg, err)
		if err == nil {
			continue
		}
		re := &RuleError{Suite: s.name, Rule: r.name, Err: err}
		if r.seeded() {
			re.Seed = cfg.seed
		}
		errs = append(errs, re)
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
			env := &ruleEnv[S]{cfg: cfg, fresh: func() (S, error) {
				subject := newSubject(t)
				if any(subject) == nil {
					return subject, errors.New("conformance: factory returned nil")
				}
				return subject, nil
			}}
			err := runBounded(t.Context(), cfg, func(ctx context.Context) error {
				return r.invoke(ctx, env, subject)
			})
			sk, err := skipOutcome(cfg, err)
			if sk != nil {
				t.Skip(sk.reason)
			}
			if err != nil {
				re := &RuleError{Suite: s.name, Rule: r.name, Err: err}
				if r.seeded() {
					re.Seed = cfg.seed
				}
				t.Error(re)
			}
		})
	}
}
