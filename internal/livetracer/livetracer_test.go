package livetracer

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// A fixed provider gives the same tracer at every lookup, or none if it is
// a no-op one; nil or the global default make a Source follow the global
// provider, which records nothing while nothing is installed (this test
// binary installs nothing: internal/globaltest covers installing one).
func TestSource(t *testing.T) {
	sdk := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	noop := tracenoop.NewTracerProvider()
	testCases := []struct {
		name       string
		tp         trace.TracerProvider
		wantGlobal bool
		wantTracer bool
	}{
		{"sdk", sdk, false, true},
		{"noop", noop, false, false},
		{"noop pointer", &noop, false, false},
		{"nil", nil, true, false},
		{"global default", otel.GetTracerProvider(), true, false},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s := New(tc.tp, "scope")
			if s.Global() != tc.wantGlobal {
				t.Errorf("Global() = %v, want %v", s.Global(), tc.wantGlobal)
			}
			tr := s.Tracer()
			if (tr != nil) != tc.wantTracer {
				t.Fatalf("Tracer() = %v, want a tracer: %v", tr, tc.wantTracer)
			}
			if again := s.Tracer(); again != tr {
				t.Errorf("a second lookup gave another tracer")
			}
			if tr != nil {
				if _, span := tr.Start(context.Background(), "x"); !span.IsRecording() {
					t.Error("the SDK tracer's span does not record")
				}
			}
		})
	}
	if !IsGlobalDefault(otel.GetTracerProvider()) || IsGlobalDefault(sdk) || IsGlobalDefault(noop) {
		t.Error("IsGlobalDefault does not tell the global default from other providers")
	}
	if GlobalRecords() {
		t.Error("GlobalRecords() with nothing installed = true, want false")
	}
}

// A lookup of the global provider allocates nothing once it was seen.
func TestTracerDoesNotAllocate(t *testing.T) {
	s := New(nil, "scope")
	s.Tracer()
	if n := testing.AllocsPerRun(100, func() { _ = s.Tracer(); _ = GlobalRecords() }); n != 0 {
		t.Errorf("%v allocations per lookup, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() {
		var l Lookup
		_, _ = s.TracerAt(&l), GlobalRecordsAt(&l)
	}); n != 0 {
		t.Errorf("%v allocations per call's Lookup, want 0", n)
	}
}

// A Lookup keeps what its call learned: the provider it first saw, and
// whether that records once a Source asked it for a tracer.
func TestLookup(t *testing.T) {
	s := New(nil, "scope")
	var l Lookup
	if tr := s.TracerAt(&l); tr != nil {
		t.Fatalf("TracerAt with nothing installed = %v, want nil", tr)
	}
	if !l.looked || l.records != recordsNo || l.src != s {
		t.Errorf("after TracerAt the Lookup is %+v, want it to know the provider records nothing", l)
	}
	if GlobalRecordsAt(&l) {
		t.Error("GlobalRecordsAt = true with nothing installed")
	}
	sdk := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = sdk.Shutdown(context.Background()) })
	// A Lookup that saw a provider keeps it: a Source asks that one.
	seen := Lookup{tp: sdk, looked: true}
	if tr := s.TracerAt(&seen); tr == nil || !GlobalRecordsAt(&seen) {
		t.Errorf("with a Lookup that saw an SDK provider: tracer %v, records %v; want a tracer that records", tr, GlobalRecordsAt(&seen))
	}
	if !s.Changed() {
		t.Error("the Source learned of another provider and Changed() = false")
	}
	if tr := s.Tracer(); tr != nil {
		t.Errorf("a fresh look with nothing installed gave tracer %v, want nil", tr)
	}
}
