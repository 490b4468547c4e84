package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
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
	// ErrRuleTimedOut is matched by the error of a rule that made no
	// progress for the whole rule timeout (see [WithRuleTimeout]): a call
	// into the implementation did not return in that time, or returned only
	// once the watchdog cancelled its context. It reports a hang (or a
	// machine far slower than the timeout allows), not a wrong answer: the
	// message says so, apart from the failures of the rules themselves.
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

	// ErrCapabilityMissing is matched by the error of a rule whose capability
	// the store lacks although [WithRequiredCapabilities] requires it.
	ErrCapabilityMissing = errors.New("conformance: required capability missing")
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
		switch u := err.(type) {
		case nil:
		case *RuleError:
			out = append(out, u)
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

// rule is one named check of a suite, run on a fresh subject (a store, a
// pair of nodes, or a decorator's wrap function). A seeded rule draws from
// the seed and may ask env for more fresh subjects, which the minimiser
// replays a failing sequence on.
type rule[S any] struct {
	name   string
	seeded bool
	run    func(ctx context.Context, env *ruleEnv[S], subject S) error
}

// fixed makes a rule that does not draw from the seed.
func fixed[S any](name string, check func(ctx context.Context, subject S) error) rule[S] {
	return rule[S]{name: name, run: func(ctx context.Context, _ *ruleEnv[S], s S) error { return check(ctx, s) }}
}

// seeded makes a rule that draws from the seed.
func seeded[S any](name string, run func(ctx context.Context, env *ruleEnv[S], subject S) error) rule[S] {
	return rule[S]{name: name, seeded: true, run: run}
}

// ruleEnv is what a rule gets besides its subject.
type ruleEnv[S any] struct {
	cfg   config
	fresh func() (S, error) // another fresh subject, closed with the rule's own
}

// skipError is what a rule returns when the subject lacks what the rule
// needs. It passes unless the capability is required
// ([WithRequiredCapabilities]); the Test* wrappers report it as a skip.
type skipError struct {
	reason string
	caps   Capabilities
}

func (e *skipError) Error() string { return "skipped: " + e.reason }

func skipf(caps Capabilities, format string, args ...any) error {
	return &skipError{reason: fmt.Sprintf(format, args...), caps: caps}
}

// suite is a named rule table shared by a core and its *testing.T wrapper.
type suite[S any] struct {
	name  string
	rules []rule[S]
}

// progress counts what a rule has got done: every step of a script or a
// model, every generated append, every round of a race. The watchdog
// reads it: a rule that makes progress is slow, not hung.
type progress struct{ n atomic.Int64 }

type progressKey struct{}

// tick records progress for the rule whose context ctx is (a no-op outside
// a rule).
func tick(ctx context.Context) {
	if p, ok := ctx.Value(progressKey{}).(*progress); ok {
		p.n.Add(1)
	}
}

// errNoProgress is the cause of a rule context the watchdog cancelled.
var errNoProgress = errors.New("conformance: no progress")

// runRule is the one runner: it runs r, on the subject first returns,
// under the watchdog and the panic guard, and returns the skip reason (""
// for none) and the rule's failure as a *RuleError (nil when it held).
//
// The watchdog is progress-based: it fires when the rule made no progress
// (see tick) for a whole timeout, so a busy machine that slows every call
// makes a rule slow, never a failure, and only a call that does not
// return for the whole timeout is reported, as a timeout.
func (s suite[S]) runRule(ctx context.Context, cfg config, r rule[S], first, fresh func() (S, error)) (string, error) {
	timeout := cfg.ruleTimeout * time.Duration(cfg.scale)
	if raceDetector {
		timeout *= 2
	}
	prog := &progress{}
	rctx, cancel := context.WithCancelCause(context.WithValue(ctx, progressKey{}, prog))
	defer cancel(nil)
	stuck := make(chan struct{}) // closed when the watchdog fires
	stopWatch := make(chan struct{})
	defer close(stopWatch)
	go watch(cfg, timeout, prog, stopWatch, func() {
		close(stuck)
		cancel(errNoProgress)
	})
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
		subject, err := first()
		if tick(rctx); err == nil {
			err = r.run(rctx, &ruleEnv[S]{cfg: cfg, fresh: fresh}, subject)
		}
		returned = true
		done <- err
	}()
	timedOut := fmt.Errorf("%w: no progress for %v: a call into the implementation did not return (a hang, or a machine far slower than the timeout allows: raise it with WithRuleTimeout)", ErrRuleTimedOut, timeout)
	var err error
	select {
	case err = <-done:
		if err != nil && context.Cause(rctx) == errNoProgress {
			// The implementation gave up only because the watchdog
			// cancelled its context: that is a hang, not an answer.
			err = fmt.Errorf("%w: %w", timedOut, err)
		}
	case <-stuck:
		err = timedOut
	case <-ctx.Done():
		err = fmt.Errorf("conformance: suite context done: %w", ctx.Err())
	}
	var sk *skipError
	switch {
	case err == nil:
		return "", nil
	case errors.As(err, &sk) && sk.caps&cfg.require != 0:
		err = fmt.Errorf("%w: %s", ErrCapabilityMissing, sk.reason)
	case errors.As(err, &sk):
		return sk.reason, nil
	}
	re := &RuleError{Suite: s.name, Rule: r.name, Err: err}
	if r.seeded {
		re.Seed = cfg.seed
	}
	return "", re
}

// watchSamples is how many samples of the progress count the watchdog
// takes per timeout: it fires after that many in a row saw no progress, so
// a rule is stopped between timeout and 5/4 of it after its last progress.
const watchSamples = 4

// watch calls fire once the rule made no progress for watchSamples samples
// in a row, unless stop closes first. The samples come every
// timeout/watchSamples from the wall clock, or from the injected watchdog
// of the package's tests (each delivery one sample).
func watch(cfg config, timeout time.Duration, p *progress, stop <-chan struct{}, fire func()) {
	var samples <-chan time.Time
	if cfg.watchdog != nil {
		samples = cfg.watchdog(timeout)
	} else {
		t := time.NewTicker(max(timeout/watchSamples, time.Millisecond/watchSamples))
		defer t.Stop()
		samples = t.C
	}
	last, idle := p.n.Load(), 0
	for {
		select {
		case <-stop:
			return
		case <-samples:
		}
		if n := p.n.Load(); n != last {
			last, idle = n, 0
			continue
		}
		if idle++; idle >= watchSamples {
			fire()
			return
		}
	}
}

// check runs every selected rule on a fresh subject from newSubject and
// joins their failures. The cleanups newSubject returned for a rule run
// when the rule is over, also when it timed out. It stops early only when
// ctx is done.
func (s suite[S]) check(ctx context.Context, cfg config, newSubject func() (S, func(), error)) error {
	var errs []error
	for _, r := range s.rules {
		if !cfg.selected(r.name, r.seeded) {
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
			if err == nil && isNil(subject) {
				err = errors.New("returned nil")
			}
			if err != nil {
				return subject, fmt.Errorf("conformance: factory: %w", err)
			}
			return subject, nil
		}
		_, err := s.runRule(ctx, cfg, r, fresh, fresh)
		mu.Lock()
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
		mu.Unlock()
		if err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil || (err != nil && cfg.stopAtFirst) {
			break
		}
	}
	return errors.Join(errs...)
}

// test runs every rule as a named subtest of t on a fresh subject from
// newSubject, called on the subtest's *testing.T (so it may call t.Fatal
// and register t.Cleanup).
func (s suite[S]) test(t *testing.T, cfg config, newSubject func(t *testing.T) S) {
	t.Helper()
	for _, r := range s.rules {
		if !cfg.selected(r.name, r.seeded) {
			continue
		}
		t.Run(r.name, func(t *testing.T) {
			t.Helper()
			subject := newSubject(t)
			if isNil(subject) {
				t.Fatal("conformance: factory returned nil")
			}
			fresh := func() (S, error) {
				s := newSubject(t)
				if isNil(s) {
					return s, errors.New("conformance: factory returned nil")
				}
				return s, nil
			}
			skip, err := s.runRule(t.Context(), cfg, r, func() (S, error) { return subject, nil }, fresh)
			if err != nil {
				t.Error(err)
			}
			if skip != "" {
				t.Skip(skip)
			}
		})
	}
}

// given is the factory of a suite whose subject is one function given
// once: an error for a nil one.
func given[W any](wrap W) func() (W, func(), error) {
	return func() (W, func(), error) {
		if isNil(wrap) {
			return wrap, nil, errors.New("nil wrap function")
		}
		return wrap, nil, nil
	}
}

// isNil reports whether v is a nil interface, pointer or function.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func, reflect.Interface:
		return rv.IsNil()
	}
	return false
}

// A step is one generated operation of a model rule. Steps are resolved
// against the model when they run (an append "at the head" uses the
// model's head then), so any subsequence of a generated sequence is itself
// a valid sequence, which is what the minimiser needs.
type step[M any] struct {
	what string
	do   func(m M) error
}

func (s step[M]) String() string { return s.what }

// builder collects the steps of a rule's script; mode and trip apply to
// the next step only, which names them.
type builder[M any] struct {
	steps []step[M]
	rng   *rand.Rand
	mode  ctxMode
	trip  int
}

func (b *builder[M]) push(what string, do func(m M) error) {
	b.steps = append(b.steps, step[M]{what + modeString(b.mode, b.trip), do})
	b.mode, b.trip = ctxLive, 0
}

func modeString(m ctxMode, trip int) string {
	return []string{"", " (cancelled context)", " (expired context)", fmt.Sprintf(" (context cancelled at its probe %d)", trip+1)}[m]
}

// scripted makes a fixed rule of steps: the same whatever the seed, run
// against a model from start.
func scripted[S, M any](name string, steps []step[M], start func(ctx context.Context) func(S) (M, error)) rule[S] {
	return fixed(name, func(ctx context.Context, s S) error {
		_, err := runSteps(ctx, s, start(ctx), steps)
		return err
	})
}

// shrinkBudget bounds the replays of the minimiser: each runs on a fresh
// store, which for a durable backend can be slow.
const shrinkBudget = 32

// maxReproLines bounds the reproduction printed with a failure.
const maxReproLines = 60

// opError is a model rule's failure: the operation that went wrong, and the
// shrunk sequence that reproduces it.
type opError struct {
	index, total int
	op           string
	err          error
	repro        []string
}

func (e *opError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "operation %d of %d (%s): %v", e.index+1, e.total, e.op, e.err)
	switch {
	case len(e.repro) > maxReproLines:
		fmt.Fprintf(&b, "\n(the minimiser got it down to %d operations only; replay the seed to see them)", len(e.repro))
	case len(e.repro) > 0:
		fmt.Fprintf(&b, "\nshrunk to %d operations on a fresh store:", len(e.repro))
		for i, r := range e.repro {
			fmt.Fprintf(&b, "\n  %d. %s", i+1, r)
		}
	}
	return b.String()
}

func (e *opError) Unwrap() error { return e.err }

// runSteps runs steps on a fresh model made by start for subject, and
// returns the index of the first step that fails.
func runSteps[S, M any](ctx context.Context, subject S, start func(S) (M, error), steps []step[M]) (int, error) {
	m, err := start(subject)
	if err != nil {
		return 0, err
	}
	for i, st := range steps {
		if err := ctx.Err(); err != nil {
			return i, err
		}
		if err := st.do(m); err != nil {
			return i, err
		}
		tick(ctx)
	}
	return 0, nil
}

// runModel runs steps against a model of subject; on a failure it shrinks
// the failing prefix on fresh subjects (in at most half the time left), so
// the report names the failing step and a short reproduction.
func runModel[S, M any](ctx context.Context, env *ruleEnv[S], subject S, start func(S) (M, error), steps []step[M]) error {
	began := time.Now()
	at, err := runSteps(ctx, subject, start, steps)
	if err == nil || len(steps) == 0 {
		return err
	}
	oe := &opError{index: at, total: len(steps), op: steps[at].what, err: err}
	if env.cfg.noShrink || ctx.Err() != nil {
		return oe
	}
	// Shrink for at most four times as long as the failing run took, and
	// half the time the rule has left, so that the watchdog reports the
	// failure, not a timeout.
	limit := 4*time.Since(began) + time.Second
	if dl, ok := ctx.Deadline(); ok {
		limit = min(limit, time.Until(dl)/2)
	}
	sctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	ops := steps[:at+1]
	replays := shrinkBudget
	for chunk := len(ops) / 2; chunk >= 1 && replays > 0; chunk /= 2 {
		for i := 0; i < len(ops) && replays > 0 && sctx.Err() == nil; {
			end := min(i+chunk, len(ops))
			cand := append(append([]step[M](nil), ops[:i]...), ops[end:]...)
			replays--
			fresh, ferr := env.fresh()
			if ferr != nil {
				break
			}
			if _, e := runSteps(sctx, fresh, start, cand); e != nil && sctx.Err() == nil && len(cand) > 0 {
				ops = cand
				continue
			}
			i = end
		}
	}
	for _, o := range ops {
		oe.repro = append(oe.repro, o.what)
	}
	return oe
}
