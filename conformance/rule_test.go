package conformance

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// fireNow is a watchdog that has already fired: with it, a rule that has
// not returned by the time the runner looks is timed out, without any wall
// clock involved.
func fireNow() Option {
	return optionFunc(func(c *config) {
		c.watchdog = func(time.Duration) <-chan time.Time {
			ch := make(chan time.Time)
			close(ch)
			return ch
		}
	})
}

// hangingKS blocks every append until release is closed, ignoring its
// context.
type hangingKS struct {
	keyspace.Store
	release <-chan struct{}
}

func (s hangingKS) AppendEvents(context.Context, uint64, []keyspace.ActivityEvent) (uint64, error) {
	<-s.release
	return 0, errors.New("released")
}

// ctxHangingKS blocks every append until its context is done.
type ctxHangingKS struct{ keyspace.Store }

func (ctxHangingKS) AppendEvents(ctx context.Context, _ uint64, _ []keyspace.ActivityEvent) (uint64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

// panickingKS panics on every append.
type panickingKS struct{ keyspace.Store }

func (panickingKS) AppendEvents(context.Context, uint64, []keyspace.ActivityEvent) (uint64, error) {
	panic("broken store")
}

func TestWatchdogReportsHangingRules(t *testing.T) {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	testCases := []struct {
		name  string
		store keyspace.Store
	}{
		{"ignores its context", hangingKS{keyspace.NewMemory(), release}},
		{"waits for its context", ctxHangingKS{keyspace.NewMemory()}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) { return tc.store, nil, nil }, fireNow())
			failed := RuleErrors(err)
			// Every keyspace rule appends, so every rule hangs; none may be
			// lost, and the suite must not stop at the first.
			if len(failed) != len(keyspaceSuite.rules) {
				t.Fatalf("%d rules failed, want all %d: %v", len(failed), len(keyspaceSuite.rules), err)
			}
			for _, re := range failed {
				if !errors.Is(re, ErrRuleTimedOut) {
					t.Errorf("rule %q failed with %v, want ErrRuleTimedOut", re.Rule, re.Err)
				}
			}
		})
	}
}

// A store that answers only once the rule's deadline passed is reported as
// timed out (with its own error kept), not as having answered.
func TestWatchdogDeadlineReachesTheStore(t *testing.T) {
	err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) { return ctxHangingKS{keyspace.NewMemory()}, nil, nil },
		WithRuleTimeout(time.Millisecond))
	failed := RuleErrors(err)
	if len(failed) != len(keyspaceSuite.rules) {
		t.Fatalf("%d rules failed, want all %d: %v", len(failed), len(keyspaceSuite.rules), err)
	}
	for _, re := range failed {
		if !errors.Is(re, ErrRuleTimedOut) {
			t.Errorf("rule %q failed with %v, want ErrRuleTimedOut", re.Rule, re.Err)
		}
	}
}

func TestPanicsAreRuleFailures(t *testing.T) {
	err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) { return panickingKS{keyspace.NewMemory()}, nil, nil })
	failed := RuleErrors(err)
	if len(failed) != len(keyspaceSuite.rules) {
		t.Fatalf("%d rules failed, want all %d", len(failed), len(keyspaceSuite.rules))
	}
	for _, re := range failed {
		if !errors.Is(re, ErrRulePanicked) || !strings.Contains(re.Error(), "broken store") {
			t.Errorf("rule %q failed with %v, want ErrRulePanicked with the panic value", re.Rule, re.Err)
		}
	}
}

// goexitKS ends the calling goroutine, as t.Fatal called off the test
// goroutine does.
type goexitKS struct{ keyspace.Store }

func (goexitKS) AppendEvents(context.Context, uint64, []keyspace.ActivityEvent) (uint64, error) {
	runtime.Goexit()
	return 0, nil
}

// A rule whose goroutine is ended by runtime.Goexit fails at once with
// ErrRuleAborted instead of waiting for the watchdog.
func TestGoexitIsARuleFailure(t *testing.T) {
	neverFires := optionFunc(func(c *config) {
		c.watchdog = func(time.Duration) <-chan time.Time { return nil }
	})
	err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) { return goexitKS{keyspace.NewMemory()}, nil, nil },
		neverFires, WithRuleTimeout(time.Hour))
	failed := RuleErrors(err)
	if len(failed) != len(keyspaceSuite.rules) {
		t.Fatalf("%d rules failed, want all %d", len(failed), len(keyspaceSuite.rules))
	}
	for _, re := range failed {
		if !errors.Is(re, ErrRuleAborted) {
			t.Errorf("rule %q failed with %v, want ErrRuleAborted", re.Rule, re.Err)
		}
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

// A done suite context stops the run after the rule it interrupted, with
// one failure saying so, instead of failing every remaining rule.
func TestCheckStopsWhenContextDone(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	failed := RuleErrors(CheckKeyspace(ctx, func() (keyspace.Store, func(), error) { return keyspace.NewMemory(), nil, nil }))
	if len(failed) != 1 {
		t.Fatalf("%d failures, want 1", len(failed))
	}
	if !errors.Is(failed[0], context.Canceled) {
		t.Errorf("failure %v does not match context.Canceled", failed[0])
	}
}

func TestRuleErrors(t *testing.T) {
	a := &RuleError{Suite: SuiteKeyspace, Rule: "a", Err: errors.New("x")}
	b := &RuleError{Suite: SuiteKeyspace, Rule: "b", Err: &RuleError{Suite: "inner", Rule: "hidden", Err: errors.New("y")}}
	c := &RuleError{Suite: SuiteDecorator, Rule: "c", Err: errors.New("z")}
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
			if len(got) != len(tc.want) {
				t.Fatalf("RuleErrors = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("RuleErrors[%d] = %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}

func TestRuleErrorMessageAndUnwrap(t *testing.T) {
	inner := fmt.Errorf("stale: %w", eventstore.ErrSequenceConflict)
	re := &RuleError{Suite: SuiteEventStore, Rule: "append-conflict-writes-nothing", Err: inner}
	if got, want := re.Error(), `conformance: eventstore: rule "append-conflict-writes-nothing": stale: eventstore: sequence conflict`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(re, eventstore.ErrSequenceConflict) || re.Unwrap() != inner {
		t.Error("a RuleError does not unwrap to its Err")
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
			t.Errorf("helper output lacks %q; output:\n%s", want, text)
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
		TestKeyspace(t, func(*testing.T) keyspace.Store { return offByOneKS{keyspace.NewMemory()} })
	})
	t.Run("eventstore", func(t *testing.T) {
		TestEventStore(t, func(*testing.T) eventstore.Store { return storeOnly{eventstore.NewMemory()} })
	})
	t.Run("decorator", func(t *testing.T) {
		TestDecorator(t, passWrap(faults{hideOutbox: true}))
	})
}
