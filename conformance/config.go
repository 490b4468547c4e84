package conformance

import (
	"flag"
	"testing"
	"time"
)

// DefaultRuleTimeout is how long a rule may go without progress unless
// [WithRuleTimeout] sets another timeout.
const DefaultRuleTimeout = 30 * time.Second

// The flags replay a failure, or ask for a longer run, without editing the
// test that calls the suite:
//
//	go test -run TestConformance -conformance.seed=12345
//	go test -run TestConformance -conformance.long
var (
	flagSeed = flag.Int64("conformance.seed", 0, "conformance: seed of the generated operations (0: a fresh one per run, printed on failure)")
	flagLong = flag.Bool("conformance.long", false, "conformance: run the seeded rules 8 times longer (WithScale(8))")
)

// config is what the options set; newConfig applies the defaults first.
type config struct {
	ruleTimeout time.Duration
	// watchdog, set by tests, replaces the watchdog's wall clock (see watch).
	watchdog func(time.Duration) <-chan time.Time
	seed     int64
	scale    int
	raceFor  time.Duration // see raceBudget; the self-tests set 0
	require  Capabilities
	nodes    func(t *testing.T) Nodes
	// The package's own tests turn the minimiser off and select rules.
	noShrink    bool
	only        map[string]bool
	noSeeded    bool
	stopAtFirst bool // the check cores stop at the first failed rule
	timeline    bool // the telemetry suite checks the timeline spans
}

// selected reports whether a rule runs under c.
func (c config) selected(name string, seeded bool) bool {
	if c.only != nil {
		return c.only[name]
	}
	return !(c.noSeeded && seeded)
}

// Option configures a suite run ([CheckKeyspace], [TestKeyspace],
// [CheckEventStore], [TestEventStore], [CheckDecorator], [TestDecorator]).
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithRuleTimeout sets how long a rule may go without progress (no step,
// a call or a short batch of calls, returning) to d times the scale
// ([WithScale]), doubled under the race detector: then the context the
// rule passes to the store is cancelled and the rule fails with an error
// matching [ErrRuleTimedOut]. A rule that keeps making progress, however
// slowly, is never stopped. A d <= 0 is ignored.
func WithRuleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.ruleTimeout = d
		}
	})
}

// WithSeed fixes the seed of the generated operations, so that a failure
// reported with "seed N" replays; -conformance.seed overrides it. Without
// either each run draws a fresh seed. A seed of 0 is ignored.
func WithSeed(seed int64) Option {
	return optionFunc(func(c *config) {
		if seed != 0 {
			c.seed = seed
		}
	})
}

// WithScale multiplies the length of the generated sequences, and the rule
// timeout, by n (default 1; -conformance.long: at least 8). An n < 1 is
// ignored.
func WithScale(n int) Option {
	return optionFunc(func(c *config) {
		if n >= 1 {
			c.scale = n
		}
	})
}

// WithRequiredCapabilities makes the event store suite fail, instead of
// skip, the rules of a capability in caps that the store lacks, so that
// losing one (a wrapper hiding it, say) cannot go unnoticed.
func WithRequiredCapabilities(caps Capabilities) Option {
	return optionFunc(func(c *config) { c.require |= caps & capAll })
}

func newConfig(opts []Option) config {
	c := config{ruleTimeout: DefaultRuleTimeout, scale: 1, raceFor: raceBudget}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	// The flags win over the options.
	if *flagSeed != 0 {
		c.seed = *flagSeed
	}
	if *flagLong {
		c.scale = max(c.scale, 8)
	}
	if c.seed == 0 {
		c.seed = time.Now().UnixNano()&(1<<62-1) | 1
	}
	return c
}
