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
}
