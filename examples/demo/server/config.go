package server

import (
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/keyspace"
)

// Defaults of the options, which are also the demo's flag defaults.
const (
	DefaultWorkers    = 4
	DefaultRate       = 20.0
	DefaultSeed       = 1
	DefaultDrainGrace = 2 * time.Second
)

// config is what the options set; New applies the defaults first.
type config struct {
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	workers        int
	rate           float64
	seed           uint64
	now            func() time.Time
	namespace      string
	maxInFlight    int
	drainGrace     time.Duration
	keys           keyspace.Store
}

func newConfig(opts []Option) config {
	c := config{
		meterProvider:  otel.GetMeterProvider(),
		tracerProvider: otel.GetTracerProvider(),
		workers:        DefaultWorkers,
		rate:           DefaultRate,
		seed:           DefaultSeed,
		now:            time.Now,
		drainGrace:     DefaultDrainGrace,
		keys:           keyspace.NewMemory(),
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// Option configures [New].
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithMeterProvider sets the MeterProvider of the otelstore decorators and the
// pairing tracker. Without it, or given nil, the global provider is used.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if mp != nil {
			c.meterProvider = mp
		}
	})
}

// WithTracerProvider sets the TracerProvider of the otelstore decorators.
// Without it, or given nil, the global provider is used.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if tp != nil {
			c.tracerProvider = tp
		}
	})
}

// WithWorkers sets how many workflow workers and how many activity workers
// run (n of each). Without it, or given n < 1, there are [DefaultWorkers].
func WithWorkers(n int) Option {
	return optionFunc(func(c *config) {
		if n >= 1 {
			c.workers = n
		}
	})
}

// WithRate sets how many workflows are started per second. Without it, or
// given a rate that is not a positive finite number, it is [DefaultRate].
func WithRate(perSecond float64) Option {
	return optionFunc(func(c *config) {
		if perSecond > 0 && perSecond <= maxRate {
			c.rate = perSecond
		}
	})
}

// WithSeed seeds the server's random source (math/rand/v2 PCG). Without it
// the seed is [DefaultSeed]. The seed fixes the sequence of random draws;
// goroutine scheduling still makes every run differ in its details.
func WithSeed(seed uint64) Option {
	return optionFunc(func(c *config) { c.seed = seed })
}

// WithClock sets the clock that stamps every event's RecordedAt, every outbox
// row's CreatedAt and every timer's fire time, and against which timers
// expire. Waiting (simulated work, pacing, polling) still uses real time.
// Without it, or given nil, the clock is time.Now.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) {
		if now != nil {
			c.now = now
		}
	})
}

// WithNamespace sets the aion.namespace of the decorators. Without it, or
// given "", it is otelstore's default, "default".
func WithNamespace(ns string) Option {
	return optionFunc(func(c *config) { c.namespace = ns })
}

// WithMaxInFlight bounds the pairing tracker (pairing.WithMaxInFlight): past
// n in-flight activities the oldest is evicted and
// aion.activity.pairing.evicted counts it. Without it, or given n < 1, the
// tracker's default bound applies.
func WithMaxInFlight(n int) Option {
	return optionFunc(func(c *config) {
		if n >= 1 {
			c.maxInFlight = n
		}
	})
}

// WithDrainGrace sets how long, once Run is asked to stop, the workflows
// already started may go on to finish by themselves before the rest are
// cancelled. Without it, or given d < 0, it is [DefaultDrainGrace]; 0 cancels
// at once.
func WithDrainGrace(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d >= 0 {
			c.drainGrace = d
		}
	})
}

// WithKeyspace sets the transcript keyspace, where agent activities write
// their transcripts through the Sequencers of the two simulated nodes. The
// server wraps it with otelstore.NewKeyspace, as it does the default one. It
// does not close it: the caller does, once [Server.Run] has returned.
// Without it, or given nil, each server gets a fresh keyspace.Memory.
func WithKeyspace(store keyspace.Store) Option {
	return optionFunc(func(c *config) {
		if store != nil {
			c.keys = store
		}
	})
}

// maxRate bounds the start rate: far past it the in-memory stores, which
// keep everything, would exhaust memory in minutes.
const maxRate = 10000
