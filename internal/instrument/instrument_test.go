package instrument

import (
	"errors"
	"testing"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// failingMeter returns nil instruments and an error for every creation.
type failingMeter struct {
	noop.Meter
}

var errBroken = errors.New("broken meter")

func (failingMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errBroken
}

func (failingMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return nil, errBroken
}

func TestFallbackToNoop(t *testing.T) {
	var got []error
	m := New(failingMeter{}, "test", func(err error) { got = append(got, err) })
	c := m.Int64Counter("c", "{x}", "")
	h := m.Float64Histogram("h", "s", "", []float64{1})
	if c == nil || h == nil {
		t.Fatal("a failed creation returned a nil instrument")
	}
	c.Add(t.Context(), 1) // must not panic
	h.Record(t.Context(), 1)
	if len(got) != 2 || !errors.Is(got[0], errBroken) {
		t.Errorf("errors reported = %v, want two wrapping errBroken", got)
	}
}

func TestNilMeter(t *testing.T) {
	var got []error
	m := New(nil, "test", func(err error) { got = append(got, err) })
	m.Int64UpDownCounter("u", "{x}", "").Add(t.Context(), 1)
	if len(got) != 1 {
		t.Errorf("errors reported = %v, want one", got)
	}
}

// An SDK instrument created with an invalid name comes with an error and
// still works; it is kept.
func TestKeepsInstrumentReturnedWithError(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var got []error
	m := New(mp.Meter("x"), "test", func(err error) { got = append(got, err) })
	if _, isNoop := m.Int64Counter("bad name!", "{x}", "").(noop.Int64Counter); isNoop {
		t.Error("the SDK's instrument was replaced by a no-op")
	}
	if len(got) != 1 {
		t.Errorf("errors reported = %v, want one", got)
	}
}
