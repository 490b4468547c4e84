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
	// progress for the whole rule timeout ([WithRuleTimeout]): a call into
	// the implementation hung, or returned only once the watchdog cancelled
	// its context.
	ErrRuleTimedOut = errors.New("conformance: rule timed out")

	// ErrRulePanicked is matched by the error of a rule during which the
	// implementation, factory or decorator panicked; the message holds the
	// panic value and stack.
	ErrRulePanicked = errors.New("conformance: rule panicked")

	// ErrRuleAborted is matched by the error of a rule whose goroutine ended
	// through runtime.Goexit: typically t.Fatal called by the implementation
	// or a wrap function, which run on the rule's goroutine (use t.Error).
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
// Err wraps the implementation's own error where there was one, and
// matches [ErrRuleTimedOut] or [ErrRulePanicked] when the watchdog or the
// panic guard stopped the rule.
type RuleError struct {
	Suite string // SuiteKeyspace, SuiteEventStore or SuiteDecorator
	Rule  string // the rule's name, equal to its subtest name in the Test* wrappers
	// Seed is the seed of a seeded rule ([WithSeed] replays it), 0 for a
	// fixed rule.
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

// RuleErrors returns every *RuleError in err's tree, in order (errors.As
// would stop at the first); nil for a nil error.
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

// rule is one named check of a suite, run on a fresh subject. A seeded
// rule draws from the seed and may ask env for more fresh subjects (for
// the minimiser).
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

// skipError is what a rule returns when the subject lacks what it needs: a
// skip, unless the capability is required.
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

// progress counts the steps of a rule that returned (see tick).
type progress struct{ n atomic.Int64 }

type progressKey struct{}

// tick records progress for the rule whose context ctx is: a call, or a
// short batch of calls, into the implementation returned.
func tick(ctx context.Context) {
	if p, ok := ctx.Value(progressKey{}).(*progress); ok {
		p.n.Add(1)
	}
}

// errNoProgress is the cause of a rule context the watchdog cancelled.
var errNoProgress = errors.New("conformance: no progress")

// runRule runs r on the subject first returns, under the watchdog (see
// watch) and the panic guard, and returns the skip reason ("" for none)
// and the rule's failure as a *RuleError.
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
		tick(rctx)
		if err == nil {
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
// takes per timeout.
const watchSamples = 4

// watch calls fire once the rule made no progress for watchSamples samples
// in a row (a timeout), unless stop closes first. The samples come from
// the wall clock, or from the tests' injected watchdog.
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

// check runs every selected rule on a fresh subject from newSubject, runs
// the rule's cleanups when it is over, and joins the failures.
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
// newSubject, called on the subtest's *testing.T.
func (s suite[S]) test(t *testing.T, cfg config, newSubject func(t *testing.T) S) {
	t.Helper()
	for _, r := range s.rules {
		if !cfg.selected(r.name, r.seeded) {
			continue
		}
		t.Run(r.name, func(t *testing.T) {
			t.Helper()
			fresh := func() (S, error) {
				s := newSubject(t)
				if isNil(s) {
					return s, errors.New("conformance: factory returned nil")
				}
				return s, nil
			}
			subject, err := fresh() // on the test goroutine: the factory may call t.Fatal
			if err != nil {
				t.Fatal(err)
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

// A step is one operation of a rule, resolved against the model when it
// runs, so that any subsequence is a valid sequence (for the minimiser).
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

// scripted makes a fixed rule of steps run against a model from start.
func scripted[S, M any](name string, steps []step[M], start func(ctx context.Context) func(S) (M, error)) rule[S] {
	return fixed(name, func(ctx context.Context, s S) error {
		_, err := runSteps(ctx, s, start(ctx), steps)
		return err
	})
}

// shrinkBudget bounds the minimiser's replays, each on a fresh store.
const shrinkBudget = 32

// maxReproLines bounds the reproduction printed with a failure.
const maxReproLines = 60

// opError is a model rule's failure and its shrunk reproduction.
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

// runSteps runs steps on a model made by start and returns the index of
// the first that fails.
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
// the failing prefix on fresh subjects.
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
	// Shrink for at most four times as long as the failing run took.
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
