package pipeline

import "testing"

func TestToolPolicy(t *testing.T) {
	testCases := []struct {
		name  string
		found bool
		ci    string
		want  toolAction
	}{
		{name: "found outside CI", found: true, ci: "", want: toolRun},
		{name: "found in CI", found: true, ci: "true", want: toolRun},
		{name: "missing outside CI", found: false, ci: "", want: toolSkip},
		{name: "missing with CI=false", found: false, ci: "false", want: toolSkip},
		{name: "missing with CI=true", found: false, ci: "true", want: toolFail},
		{name: "missing with CI=1", found: false, ci: "1", want: toolFail},
		{name: "missing with CI=TRUE", found: false, ci: "TRUE", want: toolFail},
		{name: "missing with CI=garbage", found: false, ci: "maybe", want: toolSkip},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if got := toolPolicy(tc.found, tc.ci); got != tc.want {
				t.Errorf("toolPolicy(%v, %q) = %v, want %v", tc.found, tc.ci, got, tc.want)
			}
		})
	}
}
