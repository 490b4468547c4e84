package pairing

import "testing"

func TestOutcomeIndex(t *testing.T) {
	testCases := []struct {
		outcome Outcome
		valid   bool
	}{
		{OutcomeSucceeded, true},
		{OutcomeFailed, true},
		{OutcomeCancelled, true},
		{OutcomeTimedOut, true},
		{OutcomeAbandoned, true},
		{"", false},
		{"SUCCEEDED", false},
		{"timed out", false},
	}
	seen := map[int]bool{}
	for _, tc := range testCases {
		t.Run(string(tc.outcome), func(t *testing.T) {
			i := tc.outcome.index()
			if (i >= 0) != tc.valid {
				t.Fatalf("index(%q) = %d, want valid=%v", tc.outcome, i, tc.valid)
			}
			if tc.valid {
				if seen[i] || outcomes[i] != tc.outcome {
					t.Errorf("index(%q) = %d, a slot of %q", tc.outcome, i, outcomes[i])
				}
				seen[i] = true
			}
		})
	}
}

func TestKeyNormalize(t *testing.T) {
	k := key("", 1, 2, 3)
	n := k
	n.normalize()
	if n.Namespace != "default" || n.WorkflowID != k.WorkflowID || n.RunID != k.RunID || n.ActivityID != k.ActivityID {
		t.Errorf("normalize(%+v) = %+v", k, n)
	}
	x := key("x", 1, 2, 3)
	if x.normalize(); x.Namespace != "x" {
		t.Error("a non-empty namespace was changed")
	}
	if namespaceOf("") != "default" || namespaceOf("x") != "x" {
		t.Error("namespaceOf disagrees with normalize")
	}
}
