package conformance

import (
	"os"
	"testing"
)

// selfTestEnv is the environment variable that turns on the expensive
// self-tests (the broken implementations of classes_test.go and
// adversary_test.go, which run the suites hundreds of times): CI sets it,
// and runs them without -race:
//
//	AIONOTEL_CONFORMANCE_SELFTEST=1 go test ./conformance
//
// Without it a plain `go test ./...` skips them, so that it stays within
// the default test timeout on a small, busy machine.
const selfTestEnv = "AIONOTEL_CONFORMANCE_SELFTEST"

// expensiveSelfTest skips t unless selfTestEnv is set (and not "0"), and
// under -short or the race detector, whose verdicts are the same and whose
// runs are several times longer.
func expensiveSelfTest(t *testing.T) {
	t.Helper()
	if v := os.Getenv(selfTestEnv); v == "" || v == "0" {
		t.Skipf("an expensive self-test: set %s=1 to run it (CI does)", selfTestEnv)
	}
	if testing.Short() || raceEnabled {
		t.Skip("an expensive self-test: it runs without -short and -race")
	}
}
