package keyspacetest

import (
	"fmt"
	"testing"
)

// recordingTB notes how a helper ended the test instead of ending it.
type recordingTB struct {
	testing.TB
	skipped, failed string
}

func (r *recordingTB) Helper()                   {}
func (r *recordingTB) Skip(args ...any)          { r.skipped = fmt.Sprint(args...) }
func (r *recordingTB) Fatalf(f string, a ...any) { r.failed = fmt.Sprintf(f, a...) }

func TestPostgresDSN(t *testing.T) {
	testCases := []struct {
		name, dsn, ci  string
		want           string
		skips, failsCI bool
	}{
		{name: "set", dsn: "postgres://x", want: "postgres://x"},
		{name: "unset outside CI skips", skips: true},
		{name: "unset with CI=false skips", ci: "false", skips: true},
		{name: "unset in CI fails", ci: "true", failsCI: true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(PostgresDSNEnv, tc.dsn)
			t.Setenv("CI", tc.ci)
			r := &recordingTB{TB: t}
			got := PostgresDSN(r)
			// The stub does not stop the test, so after Fatalf the helper
			// goes on to Skip: a failure is what matters in that case.
			if got != tc.want || (r.failed != "") != tc.failsCI || (!tc.failsCI && (r.skipped != "") != tc.skips) {
				t.Errorf("got %q, skipped %q, failed %q", got, r.skipped, r.failed)
			}
		})
	}
}
