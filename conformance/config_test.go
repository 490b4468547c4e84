package conformance

import (
	"testing"
	"time"
)

func TestOptions(t *testing.T) {
	testCases := []struct {
		name string
		opts []Option
		want time.Duration
	}{
		{"default", nil, DefaultRuleTimeout},
		{"set", []Option{WithRuleTimeout(time.Second)}, time.Second},
		{"last wins", []Option{WithRuleTimeout(time.Second), WithRuleTimeout(2 * time.Second)}, 2 * time.Second},
		{"zero ignored", []Option{WithRuleTimeout(time.Second), WithRuleTimeout(0)}, time.Second},
		{"negative ignored", []Option{WithRuleTimeout(-time.Second)}, DefaultRuleTimeout},
		{"nil option ignored", []Option{nil, WithRuleTimeout(3 * time.Second), nil}, 3 * time.Second},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			c := newConfig(tc.opts)
			if c.ruleTimeout != tc.want {
				t.Errorf("rule timeout = %v, want %v", c.ruleTimeout, tc.want)
			}
			if c.watchdog != nil {
				t.Error("the public options must leave the wall-clock watchdog in place")
			}
		})
	}
}
