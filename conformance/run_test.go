package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// Test-only options. withoutShrinking is the self-tests' run: no
// minimiser, and the race rules only their minimum rounds.
func withoutShrinking() Option {
	return optionFunc(func(c *config) { c.noShrink, c.raceFor = true, 0 })
}

// onlyRules runs only the named rules.
func onlyRules(names ...string) Option {
	return optionFunc(func(c *config) {
		c.only = map[string]bool{}
		for _, n := range names {
			c.only[n] = true
		}
	})
}

// fixedRulesOnly leaves the seeded rules out.
func fixedRulesOnly() Option { return optionFunc(func(c *config) { c.noSeeded = true }) }

// fireNow is a watchdog that has already fired.
func fireNow() Option {
	return optionFunc(func(c *config) {
		c.watchdog = func(time.Duration) <-chan time.Time {
			ch := make(chan time.Time)
			close(ch)
			return ch
		}
	})
}

// failedRules maps the failed rules of err by name.
func failedRules(t *testing.T, err error, suite string) map[string]*RuleError {
	t.Helper()
	out := map[string]*RuleError{}
	for _, re := range RuleErrors(err) {
		if re.Suite != suite {
			t.Errorf("RuleError from suite %q, want %q: %v", re.Suite, suite, re)
		}
		out[re.Rule] = re
	}
	return out
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		return strings.Join(lines[:n], "\n") + " ..."
	}
	return s
}

func memKS() (keyspace.Store, func(), error)   { return keyspace.NewMemory(), nil, nil }
func memES() (eventstore.Store, func(), error) { return eventstore.NewMemory(), nil, nil }

// storeOnly hides Memory's optional capabilities.
type storeOnly struct{ eventstore.Store }

func TestOptions(t *testing.T) {
	testCases := []struct {
		name  string
		opts  []Option
		want  time.Duration
		scale int
	}{
		{"default", nil, DefaultRuleTimeout, 1},
		{"set", []Option{WithRuleTimeout(time.Second)}, time.Second, 1},
		{"last wins", []Option{WithRuleTimeout(time.Second), WithRuleTimeout(2 * time.Second)}, 2 * time.Second, 1},
		{"zero ignored", []Option{WithRuleTimeout(time.Second), WithRuleTimeout(0)}, time.Second, 1},
		{"negative ignored", []Option{WithRuleTimeout(-time.Second), WithScale(0)}, DefaultRuleTimeout, 1},
		{"nil option ignored", []Option{nil, WithRuleTimeout(3 * time.Second), nil, WithScale(3)}, 3 * time.Second, 3},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			c := newConfig(tc.opts)
			if c.ruleTimeout != tc.want || c.scale != tc.scale {
				t.Errorf("rule timeout, scale = %v, %d; want %v, %d", c.ruleTimeout, c.scale, tc.want, tc.scale)
			}
			if c.watchdog != nil || c.seed == 0 {
				t.Error("the public options must leave the wall-clock watchdog in place and draw a seed")
			}
		})
	}
	if c := newConfig([]Option{WithSeed(42), WithSeed(0)}); c.seed != 42 {
		t.Errorf("seed = %d, want 42", c.seed)
	}
}

// hangingKS blocks every append until release is closed, ignoring its
// context; ctxHangingKS until its context is done; panickingKS panics;
// goexitKS ends the calling goroutine, as t.Fatal off the test goroutine.
type (
	hangingKS struct {
		keyspace.Store
		release <-chan struct{}
	}
	ctxHangingKS struct{ keyspace.Store }
	panickingKS  struct{ keyspace.Store }
	goexitKS     struct{ keyspace.Store }
)

func (s hangingKS) AppendEvents(context.Context, uint64, []keyspace.ActivityEvent) (uint64, error) {
	<-s.release
	return 0, errors.New("released")
}

func (ctxHangingKS) AppendEvents(ctx context.Context, _ uint64, _ []keyspace.ActivityEvent) (uint64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (panickingKS) AppendEvents(context.Context, uint64, []keyspace.ActivityEvent) (uint64, error) {
	panic("broken store")
}

func (goexitKS) AppendEvents(context.Context, uint64, []keyspace.ActivityEvent) (uint64, error) {
	runtime.Goexit()
	return 0, nil
}

// Every keyspace rule appends, so each of these stores fails every rule,
// each with the right error, and the suite does not stop at the first.
func TestRunnerGuards(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	neverFires := optionFunc(func(c *config) { c.watchdog = func(time.Duration) <-chan time.Time { return nil } })
	testCases := []struct {
		name  string
		store keyspace.Store
		opts  []Option
		want  error
		text  string
	}{
		{"ignores its context", hangingKS{keyspace.NewMemory(), release}, []Option{fireNow()}, ErrRuleTimedOut, ""},
		{"waits for its context", ctxHangingKS{keyspace.NewMemory()}, []Option{fireNow()}, ErrRuleTimedOut, ""},
		{"answers once the deadline passed", ctxHangingKS{keyspace.NewMemory()}, []Option{WithRuleTimeout(time.Millisecond)}, ErrRuleTimedOut, ""},
		{"panics", panickingKS{keyspace.NewMemory()}, nil, ErrRulePanicked, "broken store"},
		{"goexit", goexitKS{keyspace.NewMemory()}, []Option{neverFires, WithRuleTimeout(time.Hour)}, ErrRuleAborted, ""},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) { return tc.store, nil, nil }, append(tc.opts, withoutShrinking())...)
			failed := RuleErrors(err)
			if len(failed) != len(keyspaceSuite.rules) {
				t.Fatalf("%d rules failed, want all %d: %v", len(failed), len(keyspaceSuite.rules), err)
			}
			for _, re := range failed {
				if !errors.Is(re, tc.want) || !strings.Contains(re.Error(), tc.text) {
					t.Errorf("rule %q failed with %v, want %v", re.Rule, re.Err, tc.want)
				}
			}
		})
	}
}

func TestFactoryFailures(t *testing.T) {
	boom := errors.New("cannot open store")
	testCases := []struct {
		name    string
		factory func() (eventstore.Store, func(), error)
		is      error
	}{
		{"error", func() (eventstore.Store, func(), error) { return nil, nil, boom }, boom},
		{"nil store", func() (eventstore.Store, func(), error) { return nil, nil, nil }, nil},
		{"panic", func() (eventstore.Store, func(), error) { panic("factory") }, ErrRulePanicked},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			failed := RuleErrors(CheckEventStore(t.Context(), tc.factory))
			if len(failed) != len(eventStoreSuite.rules) {
				t.Fatalf("%d rules failed, want all %d", len(failed), len(eventStoreSuite.rules))
			}
			for _, re := range failed {
				if tc.is != nil && !errors.Is(re, tc.is) {
					t.Errorf("rule %q failed with %v, want an error matching %v", re.Rule, re, tc.is)
				}
			}
		})
	}
}

// A done suite context stops the run after the rule it interrupted.
func TestCheckStopsWhenContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	failed := RuleErrors(CheckKeyspace(ctx, memKS))
	if len(failed) != 1 || !errors.Is(failed[0], context.Canceled) {
		t.Fatalf("failures %v, want one matching context.Canceled", failed)
	}
}

// Every cleanup a factory returns runs, once per fresh store.
func TestCheckRunsCleanups(t *testing.T) {
	made, closed := 0, 0
	err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) {
		made++
		return keyspace.NewMemory(), func() { closed++ }, nil
	}, fixedRulesOnly())
	if err != nil {
		t.Fatal(err)
	}
	if made == 0 || closed != made {
		t.Errorf("%d stores made, %d closed", made, closed)
	}
}

// A store without a capability the caller requires fails that
// capability's rules instead of skipping them.
func TestRequiredCapabilityMissingFails(t *testing.T) {
	newStore := func() (eventstore.Store, func(), error) { return storeOnly{eventstore.NewMemory()}, nil, nil }
	if err := CheckEventStore(t.Context(), newStore, fixedRulesOnly()); err != nil {
		t.Fatalf("without the requirement: %v, want nil (skipped)", err)
	}
	err := CheckEventStore(t.Context(), newStore, WithRequiredCapabilities(CapOutbox), fixedRulesOnly())
	failed := failedRules(t, err, SuiteEventStore)
	if re := failed[RuleOutboxClaim]; re == nil || !errors.Is(re, ErrCapabilityMissing) {
		t.Errorf("rule %q = %v, want a failure matching ErrCapabilityMissing", RuleOutboxClaim, re)
	}
	if re := failed[RuleShardAcquireOne]; re != nil {
		t.Errorf("rule %q failed (%v), but ShardOwner was not required", RuleShardAcquireOne, re)
	}
}

func TestRuleErrors(t *testing.T) {
	a := &RuleError{Suite: SuiteKeyspace, Rule: "a", Err: errors.New("x")}
	b := &RuleError{Suite: SuiteKeyspace, Rule: "b", Err: &RuleError{Suite: "inner", Rule: "hidden", Err: errors.New("y")}}
	c := &RuleError{Suite: SuiteDecorator, Rule: "c", Err: errors.New("z"), Seed: 9}
	testCases := []struct {
		name string
		err  error
		want []*RuleError
	}{
		{"nil", nil, nil},
		{"plain error", errors.New("plain"), nil},
		{"one", a, []*RuleError{a}},
		{"joined in order", errors.Join(a, b, c), []*RuleError{a, b, c}},
		{"nested joins and wraps", fmt.Errorf("suite: %w", errors.Join(errors.Join(a), fmt.Errorf("w: %w", b), errors.New("other"), c)), []*RuleError{a, b, c}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got := RuleErrors(tc.err)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("RuleErrors = %v, want %v", got, tc.want)
			}
		})
	}
	inner := fmt.Errorf("stale: %w", eventstore.ErrSequenceConflict)
	re := &RuleError{Suite: SuiteEventStore, Rule: "r", Err: inner}
	if got, want := re.Error(), `conformance: eventstore: rule "r": stale: eventstore: sequence conflict`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(re, eventstore.ErrSequenceConflict) || re.Unwrap() != inner {
		t.Error("a RuleError does not unwrap to its Err")
	}
	if !strings.Contains(c.Error(), "-conformance.seed=9") {
		t.Errorf("a seeded rule's error %q does not say how to replay it", c.Error())
	}
}

// offByOneKS reads one record late; chunkEndKS loses the last record of
// every read of more than 300 records.
type (
	offByOneKS  struct{ keyspace.Store }
	chunkEndKS  struct{ keyspace.Store }
	errorRunsKS struct{ keyspace.Store }
)

func (s offByOneKS) ReadFrom(ctx context.Context, key keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
	return s.Store.ReadFrom(ctx, key, from+1, limit)
}

func (s chunkEndKS) ReadFrom(ctx context.Context, key keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
	recs, err := s.Store.ReadFrom(ctx, key, from, limit)
	if len(recs) > 300 {
		recs = recs[:len(recs)-1]
	}
	return recs, err
}

func (errorRunsKS) ListStreams(context.Context, eventstore.WorkflowID, eventstore.RunID) ([]keyspace.StreamSummary, error) {
	return nil, fmt.Errorf("listing: %w", eventstore.ErrUnsupported)
}

// A failure shrinks to a short sequence that still fails on a fresh store,
// and the same seed replays the same failure.
func TestModelFailureShrinksAndReplays(t *testing.T) {
	run := func() *opError {
		err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) { return chunkEndKS{keyspace.NewMemory()}, nil, nil },
			WithSeed(7), onlyRules(RuleKSModel))
		re := failedRules(t, err, SuiteKeyspace)[RuleKSModel]
		var oe *opError
		if !errors.As(re, &oe) {
			t.Fatalf("rule %q failed with %v, want an *opError", RuleKSModel, err)
		}
		return oe
	}
	first, again := run(), run()
	if len(first.repro) == 0 || len(first.repro) >= first.index+1 {
		t.Errorf("shrunk to %d operations from a failing prefix of %d, want a shorter one", len(first.repro), first.index+1)
	}
	if first.index != again.index || first.op != again.op {
		t.Errorf("the same seed failed at operation %d (%s), then at %d (%s)", first.index, first.op, again.index, again.op)
	}
	t.Log(firstLines(first.Error(), 12))
}

// A store's own error reaches the RuleError through errors.Is.
func TestFailureWrapsStoreError(t *testing.T) {
	err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) { return errorRunsKS{keyspace.NewMemory()}, nil, nil },
		onlyRules(RuleKSListOrder))
	if re := failedRules(t, err, SuiteKeyspace)[RuleKSListOrder]; re == nil || !errors.Is(re, eventstore.ErrUnsupported) {
		t.Errorf("rule %q = %v, want a failure matching the store's ErrUnsupported", RuleKSListOrder, re)
	}
}

// The *testing.T wrappers report through t: every rule a named subtest, a
// broken rule a failed subtest carrying the RuleError, a missing capability
// a skipped subtest. A failing test cannot be observed from inside, so this
// runs the helper test below in a child process of the test binary.
func TestWrappersReportThroughT(t *testing.T) {
	if os.Getenv("CONFORMANCE_WRAPPER_HELPER") != "" {
		t.Skip("in the helper process")
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestWrapperHelper$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "CONFORMANCE_WRAPPER_HELPER=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("the helper process should fail its test; err = %v, output:\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{
		"--- PASS: TestWrapperHelper/keyspace/head ",
		"--- FAIL: TestWrapperHelper/keyspace/read-from-resume ",
		`conformance: keyspace: rule "read-from-resume": ReadFrom(`,
		"--- PASS: TestWrapperHelper/eventstore/append-conflict-writes-nothing ",
		"--- SKIP: TestWrapperHelper/eventstore/outbox/claim ",
		"does not implement eventstore.Outbox",
		"--- SKIP: TestWrapperHelper/eventstore/shardowner/acquire-one ",
		"--- FAIL: TestWrapperHelper/decorator/outbox/capabilities ",
		"--- PASS: TestWrapperHelper/decorator/store/forward/Append ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("helper output lacks %q; output:\n%s", want, firstLines(text, 80))
		}
	}
	if strings.Contains(text, "--- FAIL: TestWrapperHelper/keyspace/head ") {
		t.Error("a rule the store keeps was reported as failed")
	}
}

// TestWrapperHelper runs the three wrappers on deliberately faulty subjects.
// It does nothing unless TestWrappersReportThroughT runs it.
func TestWrapperHelper(t *testing.T) {
	if os.Getenv("CONFORMANCE_WRAPPER_HELPER") == "" {
		t.Skip("run by TestWrappersReportThroughT")
	}
	t.Run("keyspace", func(t *testing.T) {
		TestKeyspace(t, func(*testing.T) keyspace.Store { return offByOneKS{keyspace.NewMemory()} }, fixedRulesOnly())
	})
	t.Run("eventstore", func(t *testing.T) {
		TestEventStore(t, func(*testing.T) eventstore.Store { return storeOnly{eventstore.NewMemory()} }, fixedRulesOnly())
	})
	t.Run("decorator", func(t *testing.T) {
		TestDecorator(t, passWrap(faults{hideOutbox: true}), fixedRulesOnly())
	})
}

// Memory passes both store suites, with and without its capabilities, and
// the faithful decorator passes its suite.
func TestReferenceImplementationsPass(t *testing.T) {
	if err := CheckKeyspace(t.Context(), memKS); err != nil {
		t.Errorf("keyspace.Memory: %v", err)
	}
	if err := CheckEventStore(t.Context(), memES, WithRequiredCapabilities(capAll)); err != nil {
		t.Errorf("eventstore.Memory: %v", err)
	}
	if err := CheckEventStore(t.Context(), func() (eventstore.Store, func(), error) {
		return storeOnly{eventstore.NewMemory()}, nil, nil
	}); err != nil {
		t.Errorf("eventstore.Memory without capabilities: %v", err)
	}
	if err := CheckDecorator(t.Context(), passWrap(faults{})); err != nil {
		t.Errorf("a faithful decorator: %v", err)
	}
}

// samplingKS pushes n samples into the watchdog before each append: the
// rule's watchdog sees that much time pass inside the call.
type samplingKS struct {
	keyspace.Store
	samples chan<- time.Time
	n       int
	sent    *atomic.Int64
}

func (s samplingKS) AppendEvents(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
	for range s.n {
		select {
		case s.samples <- time.Time{}:
			s.sent.Add(1)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return s.Store.AppendEvents(ctx, exp, evs)
}

// The watchdog is progress-based: a rule whose every call returns within
// the timeout passes however long it runs in total (a slow machine), and
// one call that does not return for a whole timeout fails the rule as a
// timeout.
func TestWatchdogCountsProgress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		perCall int
		timeout bool
	}{{"slow calls pass", watchSamples / 2, false}, {"one call past the timeout", watchSamples + 1, true}} {
		t.Run(tc.name, func(t *testing.T) {
			samples := make(chan time.Time)
			var sent atomic.Int64
			watchdog := optionFunc(func(c *config) {
				c.watchdog = func(time.Duration) <-chan time.Time { return samples }
			})
			store := func() (keyspace.Store, func(), error) {
				return samplingKS{keyspace.NewMemory(), samples, tc.perCall, &sent}, nil, nil
			}
			err := CheckKeyspace(t.Context(), store, watchdog, fixedRulesOnly(), onlyRules(RuleKSContiguousSeqs, RuleKSBatch, RuleKSConflictWritesNone))
			failed := RuleErrors(err)
			if !tc.timeout {
				if err != nil {
					t.Fatalf("a store whose calls each take half the timeout failed: %v", err)
				}
				if n := sent.Load(); n < 3*watchSamples {
					t.Fatalf("the rules saw %d samples, want several timeouts' worth (a rule longer than its timeout)", n)
				}
				return
			}
			if len(failed) != 3 {
				t.Fatalf("%d rules failed, want 3: %v", len(failed), err)
			}
			for _, re := range failed {
				if !errors.Is(re, ErrRuleTimedOut) || !strings.Contains(re.Error(), "no progress") {
					t.Errorf("rule %q: %v, want a timeout", re.Rule, re)
				}
			}
		})
	}
}
