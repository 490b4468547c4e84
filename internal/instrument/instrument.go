// Package instrument creates the instruments of the telemetry catalog so
// that telemetry trouble never reaches a store call: an error from the meter
// is reported to the error handler (otel.Handle outside tests), an
// instrument the meter returned together with an error is kept, and a
// missing one is replaced by a no-op instrument.
//
// A [Meter] is safe for concurrent use.
package instrument

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Meter wraps a metric.Meter with the fallback rules of the package doc.
type Meter struct {
	meter  metric.Meter
	scope  string
	handle func(error)
}

// New returns a Meter creating instruments from m (a no-op meter if m is
// nil), reporting errors to handle prefixed with scope.
func New(m metric.Meter, scope string, handle func(error)) *Meter {
	if m == nil {
		handle(fmt.Errorf("%s: the meter provider returned a nil meter", scope))
		m = noop.Meter{}
	}
	return &Meter{meter: m, scope: scope, handle: handle}
}

// Int64Counter creates a counter.
func (m *Meter) Int64Counter(name, unit, desc string) metric.Int64Counter {
	c, err := m.meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return check(m, name, c, err, metric.Int64Counter(noop.Int64Counter{}))
}

// Int64UpDownCounter creates an up-down counter.
func (m *Meter) Int64UpDownCounter(name, unit, desc string) metric.Int64UpDownCounter {
	c, err := m.meter.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
	return check(m, name, c, err, metric.Int64UpDownCounter(noop.Int64UpDownCounter{}))
}

// Float64Histogram creates a histogram with explicit bucket boundaries
// (nil: the SDK's default ones).
func (m *Meter) Float64Histogram(name, unit, desc string, bounds []float64) metric.Float64Histogram {
	opts := []metric.Float64HistogramOption{metric.WithUnit(unit), metric.WithDescription(desc)}
	if bounds != nil {
		opts = append(opts, metric.WithExplicitBucketBoundaries(bounds...))
	}
	h, err := m.meter.Float64Histogram(name, opts...)
	return check(m, name, h, err, metric.Float64Histogram(noop.Float64Histogram{}))
}

// Int64Histogram creates a histogram with explicit bucket boundaries (nil:
// the SDK's default ones).
func (m *Meter) Int64Histogram(name, unit, desc string, bounds []float64) metric.Int64Histogram {
	opts := []metric.Int64HistogramOption{metric.WithUnit(unit), metric.WithDescription(desc)}
	if bounds != nil {
		opts = append(opts, metric.WithExplicitBucketBoundaries(bounds...))
	}
	h, err := m.meter.Int64Histogram(name, opts...)
	return check(m, name, h, err, metric.Int64Histogram(noop.Int64Histogram{}))
}

// Meter returns the wrapped meter, for instruments this package does not
// create (observable ones with callbacks).
func (m *Meter) Meter() metric.Meter { return m.meter }

// Report sends err to the handler with the scope prefix, for the errors of
// instruments created through [Meter.Meter].
func (m *Meter) Report(name string, err error) {
	if err != nil {
		m.handle(fmt.Errorf("%s: creating %s: %w", m.scope, name, err))
	}
}

// check applies the fallback rules to one created instrument.
func check[I comparable](m *Meter, name string, inst I, err error, fallback I) I {
	var zero I
	if err != nil {
		m.Report(name, err)
	}
	if inst == zero {
		if err == nil {
			m.Report(name, fmt.Errorf("the meter returned a nil instrument"))
		}
		return fallback
	}
	return inst
}
