package otelstore_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/version"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
)

// The exported keys that the semantic conventions define are theirs, not
// look-alike strings.
func TestAttrKeysAreSemconv(t *testing.T) {
	testCases := []struct {
		name      string
		got, want attribute.Key
	}{
		{"operation", otelstore.AttrOperationName, semconv.DBOperationNameKey},
		{"system", otelstore.AttrDBSystemName, semconv.DBSystemNameKey},
		{"error type", otelstore.AttrErrorType, semconv.ErrorTypeKey},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Errorf("key %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	if otelstore.Version() != version.Version || otelstore.Version() == "" {
		t.Errorf("Version() = %q, want the module version %q", otelstore.Version(), version.Version)
	}
}

// decorateBoth wraps inner and a fresh keyspace on h, both with opts.
func decorateBoth(t *testing.T, h *harness, inner eventstore.Store, opts ...otelstore.SharedOption) (eventstore.Store, keyspace.Store) {
	t.Helper()
	storeOpts := h.options()
	keyspaceOpts := h.keyspaceOptions()
	for _, o := range opts {
		storeOpts = append(storeOpts, o)
		keyspaceOpts = append(keyspaceOpts, o)
	}
	s, err := otelstore.New(inner, storeOpts...)
	if err != nil {
		t.Fatal(err)
	}
	ks, err := otelstore.NewKeyspace(keyspace.NewMemory(), keyspaceOpts...)
	if err != nil {
		t.Fatal(err)
	}
	return s, ks
}

// callBoth makes one call through a decorated event store and one through a
// decorated keyspace, both on h.
func callBoth(t *testing.T, h *harness, opts ...otelstore.SharedOption) {
	t.Helper()
	s, ks := decorateBoth(t, h, eventstore.NewMemory(), opts...)
	ctx := context.Background()
	if _, err := s.ListActive(ctx); err != nil {
		t.Fatal(err)
	}
	wf, run := ids()
	if _, err := ks.ListStreams(ctx, wf, run); err != nil {
		t.Fatal(err)
	}
}

// Meters and tracers carry the package scope, the module version and the
// schema URL of the semantic conventions the keys come from.
func TestScopeHasSchemaURL(t *testing.T) {
	h := newHarness(t)
	callBoth(t, h)
	want := instrumentation.Scope{Name: otelstore.ScopeName, Version: otelstore.Version(), SchemaURL: semconv.SchemaURL}

	var rm metricdata.ResourceMetrics
	if err := h.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "aion.store.operation.duration" || m.Name == "aion.keyspace.operation.duration" {
				found++
				if sm.Scope != want {
					t.Errorf("metric %s has scope %+v, want %+v", m.Name, sm.Scope, want)
				}
			}
		}
	}
	if found != 2 {
		t.Errorf("found %d duration metrics, want 2", found)
	}
	spans := h.spans.Ended()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	for _, sp := range spans {
		if got := sp.InstrumentationScope(); got != want {
			t.Errorf("span %s has scope %+v, want %+v", sp.Name(), got, want)
		}
	}
}

// db.system.name is on every span and duration point: by default the
// interface the decorator wraps, else what WithDBSystem says.
func TestDBSystem(t *testing.T) {
	testCases := []struct {
		name                string
		opts                []otelstore.SharedOption
		wantStore, wantKeys string
	}{
		{"default", nil, "aion.eventstore", "aion.keyspace"},
		{"empty keeps the default", []otelstore.SharedOption{otelstore.WithDBSystem("")}, "aion.eventstore", "aion.keyspace"},
		{"postgresql", []otelstore.SharedOption{otelstore.WithDBSystem(semconv.DBSystemNamePostgreSQL.Value.AsString())}, "postgresql", "postgresql"},
		{"last wins", []otelstore.SharedOption{otelstore.WithDBSystem("sqlite"), otelstore.WithDBSystem("other_sql")}, "other_sql", "other_sql"},
		{"invalid UTF-8 cleaned", []otelstore.SharedOption{otelstore.WithDBSystem("pg\xff")}, "pg\uFFFD", "pg\uFFFD"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			callBoth(t, h, tc.opts...)
			spans := h.spans.Ended()
			storeSys := semconv.DBSystemNameKey.String(tc.wantStore)
			keysSys := semconv.DBSystemNameKey.String(tc.wantKeys)
			assertSpanAttr(t, spans[0], storeSys)
			assertSpanAttr(t, spans[1], keysSys)
			op := semconv.DBOperationNameKey
			if c := h.histogramCounts(t, "aion.store.operation.duration"); c[distinct(ns, storeSys, op.String("list_active"))] != 1 {
				t.Errorf("store duration points %v, want one with %v", c, storeSys)
			}
			if c := h.histogramCounts(t, "aion.keyspace.operation.duration"); c[distinct(ns, keysSys, op.String("list_streams"))] != 1 {
				t.Errorf("keyspace duration points %v, want one with %v", c, keysSys)
			}
		})
	}
}

// Span names follow the semantic conventions for database client spans:
// "{db.operation.name}", or "{db.operation.name} {target}" when the program
// names the target (db.collection.name before db.namespace).
func TestSpanNames(t *testing.T) {
	testCases := []struct {
		name                string
		attrs               []attribute.KeyValue
		wantStore, wantKeys string
	}{
		{"operation only", nil, "list_active", "list_streams"},
		{"namespace", []attribute.KeyValue{semconv.DBNamespace("aion_prod")}, "list_active aion_prod", "list_streams aion_prod"},
		{"collection first", []attribute.KeyValue{semconv.DBNamespace("aion_prod"), semconv.DBCollectionName("history")},
			"list_active history", "list_streams history"},
		{"other attributes", []attribute.KeyValue{attribute.String("deployment", "eu")}, "list_active", "list_streams"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			callBoth(t, h, otelstore.WithAttributes(tc.attrs...))
			spans := h.spans.Ended()
			if spans[0].Name() != tc.wantStore || spans[1].Name() != tc.wantKeys {
				t.Errorf("span names %q, %q, want %q, %q", spans[0].Name(), spans[1].Name(), tc.wantStore, tc.wantKeys)
			}
		})
	}
}

// db.system.name has its own option: WithAttributes refuses it, so that one
// decorator cannot say two systems.
func TestWithAttributesRefusesDBSystem(t *testing.T) {
	kv := semconv.DBSystemNamePostgreSQL
	if _, err := otelstore.New(eventstore.NewMemory(), otelstore.WithAttributes(kv)); !errors.Is(err, otelstore.ErrInvalidOption) {
		t.Errorf("New = %v, want ErrInvalidOption", err)
	}
	if _, err := otelstore.NewKeyspace(keyspace.NewMemory(), otelstore.WithAttributes(kv)); !errors.Is(err, otelstore.ErrInvalidOption) {
		t.Errorf("NewKeyspace = %v, want ErrInvalidOption", err)
	}
}

// A sequence conflict sets status Error (with an exception event only
// with WithExceptionEvents) unless WithConflictAsError(false) says it is
// expected; error.type is recorded either way, and other errors are not
// affected by the option.
func TestConflictStatus(t *testing.T) {
	testCases := []struct {
		name       string
		opts       []otelstore.SharedOption
		wantError  bool
		wantEvents int
	}{
		{"default", nil, true, 0},
		{"as error", []otelstore.SharedOption{otelstore.WithConflictAsError(true)}, true, 0},
		{"as error with exception events", []otelstore.SharedOption{otelstore.WithConflictAsError(true), otelstore.WithExceptionEvents(true)}, true, 1},
		{"expected", []otelstore.SharedOption{otelstore.WithConflictAsError(false)}, false, 0},
		{"expected with exception events", []otelstore.SharedOption{otelstore.WithConflictAsError(false), otelstore.WithExceptionEvents(true)}, false, 0},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			s, ks := decorateBoth(t, h, failing{Store: eventstore.NewMemory(), err: errors.New("disk on fire")}, tc.opts...)
			ctx := context.Background()
			wf, run := ids()
			ev := []eventstore.Event{eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "checkout"}}
			if err := s.Append(ctx, eventstore.RecorderToken(), wf, ev, 3); !errors.Is(err, eventstore.ErrSequenceConflict) {
				t.Fatalf("Append = %v, want a conflict", err)
			}
			if _, err := ks.AppendEvents(ctx, 3, transcript(wf, run, 1)); !errors.Is(err, eventstore.ErrSequenceConflict) {
				t.Fatalf("AppendEvents = %v, want a conflict", err)
			}
			if _, err := s.ReadHistory(ctx, wf); err == nil {
				t.Fatal("ReadHistory did not fail")
			}
			spans := h.spans.Ended()
			if len(spans) != 3 {
				t.Fatalf("got %d spans, want 3", len(spans))
			}
			for _, sp := range spans[:2] {
				assertConflictSpan(t, sp, tc.wantError, tc.wantEvents)
			}
			if spans[2].Status().Code != codes.Error {
				t.Errorf("non-conflict failure has status %v, want Error", spans[2].Status())
			}
			conflict := semconv.ErrorTypeKey.String("sequence_conflict")
			if c := h.histogramCounts(t, "aion.store.operation.duration"); c[distinct(ns, storeSystem, semconv.DBOperationNameKey.String("append"), conflict)] != 1 {
				t.Errorf("store duration points %v, want one sequence_conflict", c)
			}
			if c := h.histogramCounts(t, "aion.keyspace.operation.duration"); c[distinct(ns, keyspaceSystem, semconv.DBOperationNameKey.String("append_events"), conflict)] != 1 {
				t.Errorf("keyspace duration points %v, want one sequence_conflict", c)
			}
		})
	}
}

func assertConflictSpan(t *testing.T, sp sdktrace.ReadOnlySpan, wantError bool, wantEvents int) {
	t.Helper()
	assertSpanAttr(t, sp, semconv.ErrorTypeKey.String("sequence_conflict"))
	assertSpanAttr(t, sp, otelstore.AttrFoundSeq.Int64(0))
	wantCode := codes.Unset
	if wantError {
		wantCode = codes.Error
	}
	if sp.Status().Code != wantCode {
		t.Errorf("span %s status %v, want %v", sp.Name(), sp.Status(), wantCode)
	}
	if len(sp.Events()) != wantEvents {
		t.Errorf("span %s has %d events, want %d", sp.Name(), len(sp.Events()), wantEvents)
	}
}
