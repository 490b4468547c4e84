package conformance

import "time"

// DefaultRuleTimeout is how long one rule may run before the watchdog reports
// it as timed out, unless [WithRuleTimeout] says otherwise. It is generous
// on purpose: a rule against an in-memory store takes milliseconds even under
// the race detector, and a slow but correct durable store must not fail.
const DefaultRuleTimeout = 30 * time.Second

// config is what the options set. The zero value is not used: newConfig
// applies the defaults first.
type config struct {
	ruleTimeout time.Duration
	// watchdog, when set, replaces the wall clock of the watchdog: the rule
	// times out when the returned channel delivers. Tests set it.
	watchdog func(time.Duration) <-chan time.Time
}

// Option configures a suite run ([CheckKeyspace], [TestKeyspace],
// [CheckEventStore], [TestEventStore], [CheckDecorator], [TestDecorator]).
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithRuleTimeout bounds each rule (one subtest) to d: a rule still running
// after d is reported as failed with an error matching [ErrRuleTimedOut], and
// the context the rule passes to the store is cancelled at that moment.
// Without this option the bound is [DefaultRuleTimeout]. A d <= 0 is ignored.
func WithRuleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.ruleTimeout = d
		}
	})
}

func newConfig(opts []Option) config {
	c := config{ruleTimeout: DefaultRuleTimeout}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}
