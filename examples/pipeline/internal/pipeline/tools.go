package pipeline

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// toolAction is what a test does about an external program it needs.
type toolAction int

const (
	toolRun  toolAction = iota // the program is on PATH
	toolSkip                   // missing, outside CI: skip with install advice
	toolFail                   // missing in CI: fail, so CI never passes by skipping
)

// installHint is how to get Prometheus and promtool on Debian and Ubuntu.
const installHint = "install Prometheus: apt-get install -y --no-install-recommends prometheus"

// toolPolicy decides what a test does when the program it needs was found or
// not, given the value of the CI environment variable. CI counts as set when
// it parses as true (CI=true, CI=1), as on the common CI services.
func toolPolicy(found bool, ci string) toolAction {
	if found {
		return toolRun
	}
	if on, err := strconv.ParseBool(ci); err == nil && on {
		return toolFail
	}
	return toolSkip
}

// requireTool returns the path of the program name, or ends the test: a skip
// naming the package to install when CI is unset, a failure when CI=true.
func requireTool(t testing.TB, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	switch toolPolicy(err == nil, os.Getenv("CI")) {
	case toolFail:
		t.Fatalf("%s not found on PATH (CI is set, so this is a failure): %s", name, installHint)
	case toolSkip:
		t.Skipf("%s not found on PATH; %s", name, installHint)
	}
	return path
}
