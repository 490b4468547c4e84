package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// TestCPUProfile checks that -cpuprofile leaves a CPU profile of the run
// that pprof reads, with the program's code (the demo's or the library's)
// in it once the run did work.
func TestCPUProfile(t *testing.T) {
	isolateEnv(t)
	path := filepath.Join(t.TempDir(), "demo.pprof")
	code, stdout, stderr := runBounded(t, 30*time.Second, "-exporter", "none", "-rate", "500", "-duration", "2s",
		"-drain", "100ms", "-cpuprofile", path)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("the profile does not parse: %v", err)
	}
	if len(p.SampleType) != 2 || p.SampleType[1].Type != "cpu" || p.DurationNanos < int64(2*time.Second) {
		t.Fatalf("sample types %v over %v: want a CPU profile of at least the run's 2s", p.SampleType, time.Duration(p.DurationNanos))
	}
	ours := false
	for _, fn := range p.Function {
		ours = ours || strings.HasPrefix(fn.Name, "github.com/aionotel/aionotel/")
	}
	if !ours {
		t.Errorf("no function of the demo or the library among the profile's %d functions", len(p.Function))
	}
}

// TestCPUProfileUnwritable checks that a profile that cannot be created
// ends the demo with status 1 before it starts, naming the flag.
func TestCPUProfileUnwritable(t *testing.T) {
	isolateEnv(t)
	path := filepath.Join(t.TempDir(), "missing", "demo.pprof")
	code, stdout, stderr := runBounded(t, 10*time.Second, "-exporter", "none", "-duration", "1s", "-cpuprofile", path)
	if code != 1 || !strings.Contains(stderr, "-cpuprofile") || !strings.Contains(stderr, path) {
		t.Errorf("exit %d, stderr %q; want 1 naming -cpuprofile and the path", code, stderr)
	}
	if strings.Contains(stdout, "aionotel demo:") {
		t.Errorf("the demo started: %s", stdout)
	}
}
