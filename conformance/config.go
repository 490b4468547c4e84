package conformance

import (
	"flag"
	"testing"
	"time"
)

// DefaultRuleTimeout is how long one rule may run before the watchdog reports
// it as timed out, unless [WithRuleTimeout] says otherwise. It is generous
// on purpose: a rule against an in-memory store takes milliseconds even under
// the race detector, and a slow but correct durable store must not fail.
const DefaultRuleTimeout = 30 * time.Second

// The command-line flags the package registers, read when a suite starts.
// They let a failure be replayed, or a longer run be asked for, without
// editing the test that calls the suite:
//
//	go test -run TestConformance -conformance.seed=12345
//	go test -run TestConformance -conformance.long
var (
	flagSeed  = flag.Int64("conformance.seed", 0, "conformance: seed of the model-based and differential rules (0: a fresh one per run, printed on failure)")
	flagLong  = flag.Bool("conformance.long", false, "conformance: run the model-based rules 8 times longer, at larger sizes")
	flagScale = flag.Int("conformance.scale", 0, "conformance: multiply the length of the model-based runs by n (overrides -conformance.long)")
)

// config is what the options set. The zero value is not used: newConfig
// applies the defaults first.
type config struct {
	ruleTimeout time.Duration
	// watchdog, when set, replaces the wall clock of the watchdog: the rule
	// times out when the returned channel delivers. Tests set it.
	watchdog func(time.Duration) <-chan time.Time
	// seed drives every generated operation; 0 means "draw one".
	seed int64
	// scale multiplies the number of generated operations (>= 1).
	scale int
	// require lists capabilities whose absence fails the suite.
	require Capabilities
	// noShrink turns the minimiser off; only and noSeeded select rules.
	// The package's own tests set them, to keep the self-tests short.
	noShrink bool
	only     map[string]bool
	noSeeded bool
	// nodes makes two nodes of one backend for the nodes/* rules.
	nodes func(t *testing.T) Nodes
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

// WithSeed fixes the seed of the generated operation sequences (the
// model-based and differential rules), so a failure reported with "seed N"
// replays exactly; the -conformance.seed flag, when set, overrides it.
// Without either a fresh seed is drawn per run and printed with every
// failure. A seed of 0 is ignored.
func WithSeed(seed int64) Option {
	return optionFunc(func(c *config) {
		if seed != 0 {
			c.seed = seed
		}
	})
}

// WithScale multiplies the length of the generated sequences and the sizes
// of the model-based rules by n, for a longer soak than the default few
// seconds per suite. The -conformance.scale flag overrides it and
// -conformance.long raises it to at least 8; without any of them the scale
// is 1. An n < 1 is ignored.
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
	c := config{ruleTimeout: DefaultRuleTimeout}
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
	switch {
	case *flagScale >= 1:
		c.scale = *flagScale
	case *flagLong:
		c.scale = max(c.scale, 8)
	}
	if c.scale < 1 {
		c.scale = 1
	}
	if c.seed == 0 {
		c.seed = time.Now().UnixNano()&(1<<62-1) | 1
	}
	return c
}
