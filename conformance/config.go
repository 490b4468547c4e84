package conformance

import (
	"flag"
	"testing"
	"time"
)

// DefaultRuleTimeout is how long one rule may go without progress, at
// scale 1, before the watchdog reports it as timed out, unless
// [WithRuleTimeout] says otherwise; twice that under the race detector.
// Progress is every step of a rule (one call, or one short batch of calls,
// into the implementation) returning: the watchdog fires only when no step
// returned for the whole timeout, so a busy machine makes a rule slower,
// never a failure, however long the rule runs in total.
const DefaultRuleTimeout = 30 * time.Second

// The command-line flags the package registers, read when a suite starts:
// replay a failure, or ask for a longer run, without editing the test that
// calls the suite:
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
	// watchdog, when set, replaces the wall clock of the watchdog: each
	// delivery of the returned channel is one sample of the rule's
	// progress (see watch). Tests set it.
	watchdog func(time.Duration) <-chan time.Time
	seed     int64
	scale    int
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

// WithRuleTimeout sets how long a rule (one subtest) may go without
// progress (a step returning) to d times the scale (see [WithScale]),
// doubled under the race detector: a rule stuck in one step for that long
// is reported as failed with an error matching [ErrRuleTimedOut], saying
// that it timed out, and the context the rule passes to the store is
// cancelled at that moment. A rule that keeps making progress is never
// stopped. Without this option d is [DefaultRuleTimeout]. A d <= 0 is
// ignored.
func WithRuleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.ruleTimeout = d
		}
	})
}

// WithSeed fixes the seed of the generated operations, so a failure
// reported with "seed N" replays exactly; the -conformance.seed flag, when
// set, overrides it. Without either a fresh seed is drawn per run and
// printed with every failure. A seed of 0 is ignored.
func WithSeed(seed int64) Option {
	return optionFunc(func(c *config) {
		if seed != 0 {
			c.seed = seed
		}
	})
}

// WithScale multiplies the length of the generated sequences by n, and the
// rule timeout with them, for a longer soak than the default run;
// -conformance.long raises it to at least 8. Without either the scale is
// 1. An n < 1 is ignored.
func WithScale(n int) Option {
	return optionFunc(func(c *config) {
		if n >= 1 {
			c.scale = n
		}
	})
}

// WithRequiredCapabilities makes the event store suite fail, instead of
// skip, the rules of a capability in caps that the store lacks: use it when
// your store is meant to be an [eventstore.Outbox] or a
// [eventstore.ShardOwner], so that losing the capability (a wrapper hiding
// it, say) cannot go unnoticed. Without it a missing capability skips its
// rules.
func WithRequiredCapabilities(caps Capabilities) Option {
	return optionFunc(func(c *config) { c.require |= caps & capAll })
}

func newConfig(opts []Option) config {
	c := config{ruleTimeout: DefaultRuleTimeout, scale: 1}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	// The flags win over the options: they are how a failure is replayed
	// without editing the test that calls the suite.
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
