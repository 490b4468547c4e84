package otelworkflows_test

import (
	"testing"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/backend/test"
	"go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/instrumentation/github.com/cschleiden/go-workflows/otelworkflows"
)

// decoratedSQLite is the setup go-workflows' own SQLite tests use (an
// in-memory database, no sticky workflows), wrapped, with recording
// providers, so that the suites run through the decorator and its
// telemetry path.
func decoratedSQLite(t *testing.T) func(options ...backend.BackendOption) test.TestBackend {
	return func(options ...backend.BackendOption) test.TestBackend {
		inner := sqlite.NewInMemoryBackend(sqlite.WithBackendOptions(append(options, backend.WithStickyTimeout(0))...))
		mp := metric.NewMeterProvider(metric.WithReader(metric.NewManualReader()))
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
		b := otelworkflows.New(inner, otelworkflows.WithMeterProvider(mp), otelworkflows.WithTracerProvider(tp))
		tb, ok := b.(test.TestBackend)
		if !ok {
			t.Fatalf("the decorated SQLite backend (%T) lost GetFutureEvents", b)
		}
		return tb
	}
}

// TestGoWorkflowsBackendSuite runs go-workflows' backend test suite,
// unchanged, against the decorated SQLite backend.
func TestGoWorkflowsBackendSuite(t *testing.T) {
	test.BackendTest(t, decoratedSQLite(t), func(b test.TestBackend) {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
}

// TestGoWorkflowsEndToEndSuite runs go-workflows' end-to-end suite
// (workers, activities, sub-workflows, timers, continue-as-new, signals,
// cancellation, removal, diag), unchanged, against the decorated SQLite
// backend.
func TestGoWorkflowsEndToEndSuite(t *testing.T) {
	test.EndToEndBackendTest(t, decoratedSQLite(t), func(b test.TestBackend) {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	})
}
