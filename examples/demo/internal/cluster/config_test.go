package cluster

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// TestValidate: the leases and renewal intervals a node could not keep are
// refused with a *ConfigError matching ErrInvalidConfig, without overflow
// however large the values; the ones it can keep pass.
func TestValidate(t *testing.T) {
	testCases := []struct {
		name         string
		lease, renew time.Duration
		want         string // "" when valid
	}{
		{"defaults", DefaultLease, DefaultRenew, ""},
		{"renew exactly half", 4 * time.Second, 2 * time.Second, ""},
		{"smallest", MinLease, MinRenew, ""},
		{"largest", MaxLease, MaxLease / 2, ""},
		{"renew overflowing twice", 4 * time.Second, 2562047 * time.Hour, "renewing at least twice per lease"},
		{"renew max duration", 4 * time.Second, math.MaxInt64, "renewing at least twice per lease"},
		{"renew 1ns", 4 * time.Second, time.Nanosecond, "renewal interval of at least"},
		{"renew zero", 4 * time.Second, 0, "renewal interval of at least"},
		{"renew negative", 4 * time.Second, -time.Second, "renewal interval of at least"},
		{"renew more than half", 2 * time.Second, 1500 * time.Millisecond, "renewing at least twice per lease"},
		{"renew one past half", 4 * time.Second, 2*time.Second + 1, "renewing at least twice per lease"},
		{"lease zero", 0, DefaultRenew, "want a lease from"},
		{"lease negative", -time.Second, time.Millisecond, "want a lease from"},
		{"lease too short", 99 * time.Millisecond, MinRenew, "want a lease from"},
		{"lease too long", MaxLease + 1, time.Second, "want a lease from"},
		{"lease max duration", math.MaxInt64, time.Second, "want a lease from"},
		{"lease min duration", math.MinInt64, math.MinInt64, "want a lease from"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := Config{Lease: tc.lease, Renew: tc.renew}.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			var ce *ConfigError
			if !errors.Is(err, ErrInvalidConfig) || !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want a *ConfigError matching ErrInvalidConfig saying %q", err, tc.want)
			}
			if ce.Lease != tc.lease || ce.Renew != tc.renew {
				t.Fatalf("ConfigError names lease %s, renew %s; want %s, %s", ce.Lease, ce.Renew, tc.lease, tc.renew)
			}
		})
	}
}

// TestOpenRefusesAnInvalidConfig: Open validates (after putting the
// defaults in place of zeros) before it connects.
func TestOpenRefusesAnInvalidConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Lease: 4 * time.Second, Renew: 2562047 * time.Hour},
		{Lease: 4 * time.Second, Renew: time.Nanosecond},
		{Lease: time.Second}, // the default renewal (2s) is more than half of it
	} {
		n, err := Open(t.Context(), "postgres://nobody@127.0.0.1:1/none", cfg)
		if !errors.Is(err, ErrInvalidConfig) || n != nil {
			t.Errorf("Open(%+v) = %v, %v; want ErrInvalidConfig before connecting", cfg, n, err)
		}
	}
}
