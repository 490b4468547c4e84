package server

import (
	"math"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/aionotel/aionotel/keyspace"
)

func TestOptions(t *testing.T) {
	clock := func() time.Time { return time.Unix(1, 0) }
	mp := sdkmetric.NewMeterProvider()
	keys := keyspace.NewMemory()
	testCases := []struct {
		name  string
		opts  []Option
		check func(c config) bool
	}{
		{"defaults", nil, func(c config) bool {
			return c.workers == DefaultWorkers && c.rate == DefaultRate && c.seed == DefaultSeed && c.drainGrace == DefaultDrainGrace &&
				c.maxInFlight == 0 && c.namespace == "" && c.meterProvider != nil && c.tracerProvider != nil && c.now != nil && c.keys != nil
		}},
		{"set", []Option{WithWorkers(9), WithRate(3.5), WithSeed(11), WithDrainGrace(0), WithMaxInFlight(7), WithNamespace("ns"), WithClock(clock), WithMeterProvider(mp), WithKeyspace(keys)},
			func(c config) bool {
				return c.workers == 9 && c.rate == 3.5 && c.seed == 11 && c.drainGrace == 0 && c.maxInFlight == 7 && c.namespace == "ns" &&
					c.now().Equal(time.Unix(1, 0)) && c.meterProvider == mp && c.keys == keys
			}},
		{"invalid values are ignored", []Option{nil, WithWorkers(0), WithRate(-1), WithRate(math.Inf(1)), WithRate(math.NaN()), WithDrainGrace(-time.Second),
			WithMaxInFlight(-3), WithClock(nil), WithMeterProvider(nil), WithTracerProvider(nil), WithKeyspace(nil)},
			func(c config) bool {
				return c.workers == DefaultWorkers && c.rate == DefaultRate && c.drainGrace == DefaultDrainGrace && c.maxInFlight == 0 &&
					c.now != nil && c.meterProvider != nil && c.tracerProvider != nil && c.keys != nil
			}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if c := newConfig(tc.opts); !tc.check(c) {
				t.Errorf("config %+v", c)
			}
		})
	}
}
