package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// -cpuprofile leaves a CPU profile of the whole run, which cpushare reads;
// a path that cannot be created fails the start before anything runs.
func TestCPUProfile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "run.pprof")
	cfg := config{db: filepath.Join(dir, "shop.sqlite"), duration: 500 * time.Millisecond, rate: 4, exporter: "prometheus"}
	if code := start(cfg, path); code != 0 {
		t.Fatalf("start = %d, want 0", code)
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
	if len(p.SampleType) == 0 || p.SampleType[len(p.SampleType)-1].Type != "cpu" {
		t.Errorf("sample types %v, want CPU samples", p.SampleType)
	}
	cfg.db = filepath.Join(dir, "other.sqlite")
	if code := start(cfg, filepath.Join(dir, "missing", "run.pprof")); code != 1 {
		t.Errorf("start with a profile path in a missing directory = %d, want 1", code)
	}
	if _, err := os.Stat(cfg.db); err == nil {
		t.Error("the service ran although its profile could not be created")
	}
}

// OTEL_TRACES_SAMPLER=always_off gives the wrapper a no-op provider, so it
// starts no span; any other value, the SDK's.
func TestTracesOf(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	t.Setenv("OTEL_TRACES_SAMPLER", "always_off")
	if _, ok := tracesOf(tp).(tracenoop.TracerProvider); !ok {
		t.Errorf("always_off: tracesOf = %T, want a no-op provider", tracesOf(tp))
	}
	t.Setenv("OTEL_TRACES_SAMPLER", "parentbased_always_on")
	if got := tracesOf(tp); got != tp {
		t.Errorf("parentbased_always_on: tracesOf = %T, want the SDK provider", got)
	}
}
