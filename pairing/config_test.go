package pairing

import (
	"errors"
	"math"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/aionotel/aionotel/internal/catalog"
)

func TestConfigDefaults(t *testing.T) {
	c, err := newConfig(nil)
	if err != nil {
		t.Fatalf("newConfig: %v", err)
	}
	if c.meterProvider != otel.GetMeterProvider() {
		t.Error("default meter provider is not the global one")
	}
	if c.maxInFlight != 1<<17 || DefaultMaxInFlight != 1<<17 {
		t.Errorf("default max in flight = %d, want %d", c.maxInFlight, 1<<17)
	}
	if c.typeLimit != 512 || DefaultTypeCardinalityLimit != 512 {
		t.Errorf("default type limit = %d, want 512", c.typeLimit)
	}
	if c.nsLimit != 64 || DefaultNamespaceCardinalityLimit != 64 {
		t.Errorf("default namespace limit = %d, want 64", c.nsLimit)
	}
	if len(c.attrs) != 0 {
		t.Errorf("default attributes = %v, want none", c.attrs)
	}
}

func TestOptions(t *testing.T) {
	mp := noop.NewMeterProvider()
	testCases := []struct {
		name  string
		opts  []Option
		check func(t *testing.T, c config)
	}{
		{"meter provider", []Option{WithMeterProvider(mp)}, func(t *testing.T, c config) {
			if c.meterProvider != mp {
				t.Error("WithMeterProvider was not applied")
			}
		}},
		{"nil meter provider ignored", []Option{WithMeterProvider(mp), WithMeterProvider(nil)}, func(t *testing.T, c config) {
			if c.meterProvider != mp {
				t.Error("WithMeterProvider(nil) replaced the provider")
			}
		}},
		{"max in flight", []Option{WithMaxInFlight(7)}, func(t *testing.T, c config) {
			if c.maxInFlight != 7 {
				t.Errorf("maxInFlight = %d, want 7", c.maxInFlight)
			}
		}},
		{"non-positive max in flight ignored", []Option{WithMaxInFlight(7), WithMaxInFlight(0), WithMaxInFlight(-1)}, func(t *testing.T, c config) {
			if c.maxInFlight != 7 {
				t.Errorf("maxInFlight = %d, want 7", c.maxInFlight)
			}
		}},
		{"huge max in flight", []Option{WithMaxInFlight(math.MaxInt)}, func(t *testing.T, c config) {
			if c.maxInFlight != math.MaxInt {
				t.Errorf("maxInFlight = %d, want MaxInt", c.maxInFlight)
			}
		}},
		{"namespace limit", []Option{WithNamespaceCardinalityLimit(5), WithNamespaceCardinalityLimit(-1)}, func(t *testing.T, c config) {
			if c.nsLimit != 5 {
				t.Errorf("nsLimit = %d, want 5", c.nsLimit)
			}
		}},
		{"type limit", []Option{WithTypeCardinalityLimit(3), WithTypeCardinalityLimit(0)}, func(t *testing.T, c config) {
			if c.typeLimit != 3 {
				t.Errorf("typeLimit = %d, want 3", c.typeLimit)
			}
		}},
		{"attributes accumulate", []Option{WithAttributes(attribute.String("a", "1")), WithAttributes(attribute.Int("b", 2))}, func(t *testing.T, c config) {
			if len(c.attrs) != 2 || c.attrs[0].Key != "a" || c.attrs[1].Key != "b" {
				t.Errorf("attrs = %v, want a and b", c.attrs)
			}
		}},
		{"nil option ignored", []Option{nil, WithMaxInFlight(2)}, func(t *testing.T, c config) {
			if c.maxInFlight != 2 {
				t.Errorf("maxInFlight = %d, want 2", c.maxInFlight)
			}
		}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := newConfig(tc.opts)
			if err != nil {
				t.Fatalf("newConfig: %v", err)
			}
			tc.check(t, c)
		})
	}
}

// New refuses attributes it cannot honour with an error matching
// ErrInvalidOption, and returns no tracker.
func TestNewRejectsInvalidAttributes(t *testing.T) {
	testCases := []struct {
		name string
		kv   attribute.KeyValue
	}{
		{"namespace key", catalog.Namespace.String("x")},
		{"activity type key", catalog.ActivityType.String("x")},
		{"outcome key", catalog.ActivityOutcome.String("x")},
		{"empty key", attribute.String("", "x")},
		{"invalid UTF-8 key", attribute.String("cell\xff", "x")},
		{"namespace label name", attribute.String("aion_namespace", "x")},
		{"outcome label name", attribute.String("aion-activity-outcome", "x")},
		{"reserved Prometheus label", attribute.String("__name__", "x")},
		{"histogram bucket label", attribute.String("le", "x")},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := New(WithMeterProvider(noop.NewMeterProvider()), WithAttributes(attribute.String("ok", "1"), tc.kv))
			if !errors.Is(err, ErrInvalidOption) {
				t.Errorf("New error = %v, want ErrInvalidOption", err)
			}
			if tr != nil {
				t.Error("New returned a tracker along with its error")
			}
		})
	}
	if _, err := New(WithMeterProvider(noop.NewMeterProvider()), WithAttributes(attribute.String("deployment.cell", "eu-1"))); err != nil {
		t.Errorf("New with a valid attribute: %v", err)
	}
}
