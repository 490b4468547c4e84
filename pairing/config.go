package pairing

import (
	"fmt"
	"math"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/aionotel/aionotel/internal/catalog"
)

// Defaults applied by [New] before any option.
const (
	// DefaultMaxInFlight is the number of live entries a [Tracker] keeps
	// without [WithMaxInFlight].
	DefaultMaxInFlight = 1 << 20
	// DefaultTypeCardinalityLimit is the number of distinct activity types a
	// [Tracker] records without [WithTypeCardinalityLimit].
	DefaultTypeCardinalityLimit = 512
)

// maxSlots is the largest live-entry bound a Tracker honours: entries are
// addressed by int32 slot numbers.
const maxSlots = math.MaxInt32

// config is what the options set; New fills in the defaults first.
type config struct {
	meterProvider metric.MeterProvider
	maxInFlight   int
	attrs         []attribute.KeyValue
	typeLimit     int
	// handle receives telemetry errors (instrument creation, invalid
	// outcomes). It is otel.Handle outside tests.
	handle func(error)
}

func newConfig(opts []Option) (config, error) {
	c := config{
		meterProvider: otel.GetMeterProvider(),
		maxInFlight:   DefaultMaxInFlight,
		typeLimit:     DefaultTypeCardinalityLimit,
		handle:        otel.Handle,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if err := validateAttributes(c.attrs); err != nil {
		return config{}, err
	}
	return c, nil
}

// validateAttributes refuses extra attributes that are malformed or that would
// collide with a key the tracker sets on each measurement itself.
func validateAttributes(attrs []attribute.KeyValue) error {
	for _, kv := range attrs {
		if !kv.Valid() {
			return fmt.Errorf("%w: WithAttributes: an attribute has an empty key", ErrInvalidOption)
		}
		switch kv.Key {
		case catalog.Namespace, catalog.ActivityType, catalog.ActivityOutcome:
			return fmt.Errorf("%w: WithAttributes: key %q is set by the tracker on every measurement", ErrInvalidOption, kv.Key)
		}
	}
	return nil
}

// Option configures a [Tracker]. Options are applied in order by [New]; a
// later option overrides an earlier one of the same kind, except
// [WithAttributes], which accumulates.
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithMeterProvider sets the MeterProvider the tracker creates its instruments
// from. Without it (or with nil), the global provider returned by
// otel.GetMeterProvider at the time [New] runs is used.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if mp != nil {
			c.meterProvider = mp
		}
	})
}

// WithMaxInFlight bounds the number of live (dispatched, not yet terminated)
// entries the tracker keeps. Once the bound is reached, each new dispatch
// evicts the oldest live entry (see "Memory bound" in the package
// documentation). Without it, or with n <= 0, the bound is
// [DefaultMaxInFlight]. Values above math.MaxInt32 are lowered to it.
func WithMaxInFlight(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.maxInFlight = min(n, maxSlots)
		}
	})
}

// WithAttributes adds attributes to every measurement of every pairing
// instrument (for example a deployment or cell name). Without it, the
// measurements carry only the attributes the telemetry catalog lists.
//
// The keys aion.namespace, aion.activity.type and aion.activity.outcome are
// reserved: passing one of them, or an attribute with an empty key, makes
// [New] return an error matching [ErrInvalidOption]. Repeated calls
// accumulate; for a key given twice the last value wins.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return optionFunc(func(c *config) {
		c.attrs = append(c.attrs, attrs...)
	})
}

// WithTypeCardinalityLimit bounds the number of distinct aion.activity.type
// values the tracker records: the first n distinct types are recorded as
// they are, later new ones as "_other". The empty type, recorded as
// "_unknown", does not count against the limit. Without it, or with n <= 0,
// the limit is [DefaultTypeCardinalityLimit].
func WithTypeCardinalityLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.typeLimit = n
		}
	})
}

// withErrorHandler replaces otel.Handle as the sink of telemetry errors, so
// tests can observe them without touching global state.
func withErrorHandler(h func(error)) Option {
	return optionFunc(func(c *config) {
		if h != nil {
			c.handle = h
		}
	})
}
