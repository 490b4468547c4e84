package pairing

import (
	"fmt"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/guard"
)

// Defaults applied by [New] before any option.
const (
	// DefaultMaxInFlight is the number of activities in flight and open
	// runs a [Tracker] keeps without [WithMaxInFlight]: 131,072. Full,
	// in the worst case (every activity of its own workflow), it holds
	// about 58 MiB of heap (466 bytes per entry: the activity, its run
	// and its workflow, and their places in the tracker's index, queue
	// and age heap), the timeline off or, when the SDK has
	// [NewIDGenerator], on; with sampled timeline spans and random IDs
	// each entry also keeps its SDK span open, about 242 MiB (1.9 KiB
	// each); activities that share runs or workflows cost less
	// (BenchmarkHeapPerEntry measures the worst case). The default is
	// kept: it bounds a backlog that large, and a process that must stay
	// smaller sets a lower bound, past which evictions are counted.
	DefaultMaxInFlight = 1 << 17
	// DefaultMaxRemembered is the number of settled activities, closed
	// runs and unpaired facts a [Tracker] remembers without
	// [WithMaxRemembered].
	DefaultMaxRemembered = 1 << 16
	// DefaultTypeCardinalityLimit is the number of distinct activity types a
	// [Tracker] records without [WithTypeCardinalityLimit].
	DefaultTypeCardinalityLimit = 512
	// DefaultNamespaceCardinalityLimit is the number of distinct namespaces
	// a [Tracker] records without [WithNamespaceCardinalityLimit].
	DefaultNamespaceCardinalityLimit = 64
)

// config is what the options set; New fills in the defaults first.
type config struct {
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	timeline       bool
	maxInFlight    int
	maxRemembered  int
	attrs          []attribute.KeyValue
	typeLimit      int
	nsLimit        int
	// history and fillConcurrency: gap filling (fill.go).
	history         HistoryReader
	fillConcurrency int
	// handle receives telemetry errors (instrument creation, invalid
	// outcomes). It is otel.Handle outside tests.
	handle func(error)
}

func newConfig(opts []Option) (config, error) {
	c := config{
		meterProvider:   otel.GetMeterProvider(),
		timeline:        true,
		maxInFlight:     DefaultMaxInFlight,
		maxRemembered:   DefaultMaxRemembered,
		typeLimit:       DefaultTypeCardinalityLimit,
		nsLimit:         DefaultNamespaceCardinalityLimit,
		fillConcurrency: DefaultFillConcurrency,
		handle:          otel.Handle,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	attrs, err := cleanAttributes(c.attrs)
	if err != nil {
		return config{}, err
	}
	c.attrs = attrs
	return c, nil
}

// cleanAttributes refuses extra attributes that are malformed or that would
// collide with a key the tracker sets on each measurement itself, and returns
// a copy of the others with their string values cleaned by
// attrvalue.KeyValue.
func cleanAttributes(attrs []attribute.KeyValue) ([]attribute.KeyValue, error) {
	clean := make([]attribute.KeyValue, 0, len(attrs))
	for _, kv := range attrs {
		if !attrvalue.ValidKey(kv.Key) {
			return nil, fmt.Errorf("%w: WithAttributes: key %q cannot be an attribute key of every exporter (empty, not valid UTF-8, over 256 bytes, or a reserved Prometheus label)", ErrInvalidOption, kv.Key)
		}
		label := attrvalue.LabelName(string(kv.Key))
		for _, own := range []attribute.Key{catalog.Namespace, catalog.ActivityType, catalog.ActivityOutcome, catalog.WorkflowType, catalog.WorkflowStatus} {
			if label == attrvalue.LabelName(string(own)) {
				return nil, fmt.Errorf("%w: WithAttributes: key %q is (or shares a Prometheus label with) %q, which the tracker sets on every measurement", ErrInvalidOption, kv.Key, own)
			}
		}
		clean = append(clean, attrvalue.KeyValue(kv))
	}
	return clean, nil
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
// from. Without it (or with nil, also a nil pointer in the interface), the
// global provider returned by
// otel.GetMeterProvider at the time [New] runs is used.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if !guard.IsNil(mp) {
			c.meterProvider = mp
		}
	})
}

// WithTracerProvider sets the TracerProvider the tracker creates its
// timeline spans from (see [WithTimelineSpans]). Without it (or with nil,
// also a nil pointer in the interface), the global provider is used, as
// otel.GetTracerProvider returns it at each call (one look per call, for
// all the spans the call makes; an otelstore decorator's tracker uses the
// store call's look): before a program installs one, the global default
// records nothing and the timeline costs nothing; once it does, spans
// start.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if !guard.IsNil(tp) {
			c.tracerProvider = tp
		}
	})
}

// WithTimelineSpans turns the timeline spans on or off: one span per run
// (from [Tracker.RunStarted] to its close) and one per activity (from its
// dispatch to its first terminal), with the times of history rather than of
// the clock. They are on by default; with false the tracker creates no
// tracer and holds no span, and only the metrics remain.
func WithTimelineSpans(on bool) Option {
	return optionFunc(func(c *config) { c.timeline = on })
}

// WithMaxInFlight bounds the number of live entries the tracker keeps:
// activities in flight and open runs (started and not yet closed, see
// [Tracker.RunStarted]). Past the bound, the oldest live entry is evicted
// (see [Tracker.Dispatched]). Without it, or with n <= 0, the bound is
// [DefaultMaxInFlight].
func WithMaxInFlight(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.maxInFlight = n
		}
	})
}

// WithMaxRemembered bounds the number of facts the tracker remembers beyond
// the live entries: settled activities and closed runs, kept so that a
// repeat is recognised and a late fact finds its partner (a dispatch that
// arrives after its run's close is settled by it), and facts still waiting
// for a partner (a terminal before its dispatch, a close before its run's
// start, a settlement waiting for history positions). Past the bound the
// oldest is dropped: one still waiting counts on aion.pairing.forgotten; a
// settled one goes silently, and a repeat of it arriving later counts as
// new. Without it, or with n <= 0, the bound is [DefaultMaxRemembered].
func WithMaxRemembered(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.maxRemembered = n
		}
	})
}

// WithAttributes adds attributes to every measurement of every pairing
// instrument (for example a deployment or cell name). Without it, the
// measurements carry only the attributes the telemetry catalog lists.
//
// String values (and string slice elements) are cleaned like activity types:
// invalid UTF-8 becomes U+FFFD and each value is cut to 256 bytes. The keys
// aion.namespace, aion.activity.type, aion.activity.outcome,
// aion.workflow.type and aion.workflow.status are reserved:
// passing one of them or a key sharing its Prometheus label name (such as
// aion_namespace), or a key that is empty, not valid UTF-8, over 256 bytes
// or one no Prometheus exporter can turn into a label (one without an ASCII
// letter or digit; one whose label name, each other character written as
// '_', starts with "__", such as __name__, or "otel_scope_", or is "le" or
// "quantile"), makes [New] return an error matching [ErrInvalidOption]. Repeated calls accumulate;
// for a key given twice the last value wins.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return optionFunc(func(c *config) {
		c.attrs = append(c.attrs, attrs...)
	})
}

// WithTypeCardinalityLimit bounds the number of distinct aion.activity.type
// values the tracker records in each recorded namespace: there, the first n
// distinct (cleaned) types are recorded as they are, later new ones as
// "_other". The empty type, recorded as "_unknown", and the literal values
// "_unknown" and "_other" do not count against the limit. The limit is per
// namespace, so one namespace's types never push another's into "_other".
// Without it, or with n <= 0, the limit is [DefaultTypeCardinalityLimit].
func WithTypeCardinalityLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.typeLimit = n
		}
	})
}

// WithNamespaceCardinalityLimit bounds the number of distinct aion.namespace
// values the tracker records: the first n distinct (cleaned) namespaces are
// recorded as they are, later new ones as "_other". "default" (and the empty
// namespace, which is "default") and the literal "_other" do not count
// against the limit. Only the attribute is folded: pairing keys keep the
// namespace as given, so entries of two namespaces recorded as "_other" stay
// distinct. Without it, or with n <= 0, the limit is
// [DefaultNamespaceCardinalityLimit].
func WithNamespaceCardinalityLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.nsLimit = n
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
