package otelstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

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

// db.system.name has its own option: WithAttributes drops it (and reports
// that), so that one decorator cannot say two systems.
func TestWithAttributesDropsDBSystem(t *testing.T) {
	kv := semconv.DBSystemNamePostgreSQL
	var reported []error
	handler := otelstore.WithHandler(func(err error) { reported = append(reported, err) })
	if _, err := otelstore.New(eventstore.NewMemory(), handler, otelstore.WithAttributes(kv)); err != nil {
		t.Errorf("New = %v, want the key dropped", err)
	}
	if _, err := otelstore.NewKeyspace(keyspace.NewMemory(), handler, otelstore.WithAttributes(kv)); err != nil {
		t.Errorf("NewKeyspace = %v, want the key dropped", err)
	}
	if len(reported) != 2 || !errors.Is(reported[0], otelstore.ErrInvalidOption) || !errors.Is(reported[1], otelstore.ErrInvalidOption) {
		t.Errorf("reported %v, want one ErrInvalidOption per constructor", reported)
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

// recordingSampler keeps what the SDK shows a sampler at each span's
// creation, and samples every span.
type recordingSampler struct {
	mu     sync.Mutex
	params []sdktrace.SamplingParameters
}

func (s *recordingSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Attributes = slices.Clone(p.Attributes)
	s.params = append(s.params, p)
	return sdktrace.SamplingResult{Decision: sdktrace.RecordAndSample}
}

func (s *recordingSampler) Description() string { return "recording" }

// keyspaceCalls makes one call of each keyspace method.
func keyspaceCalls(t *testing.T, ks keyspace.Store) []otelstore.Operation {
	t.Helper()
	ctx := context.Background()
	wf, run := ids()
	events := transcript(wf, run, 2)
	if _, err := ks.AppendEvents(ctx, 0, events); err != nil {
		t.Fatal(err)
	}
	_, _ = ks.Head(ctx, keyspace.KeyOf(events[0]))
	_, _ = ks.ReadFrom(ctx, keyspace.KeyOf(events[0]), 0, 0)
	_, _ = ks.ListStreams(ctx, wf, run)
	return []otelstore.Operation{otelstore.OpKeyspaceAppendEvents, otelstore.OpKeyspaceHead, otelstore.OpKeyspaceReadFrom, otelstore.OpKeyspaceListStreams}
}

// Every store and keyspace span is created with the attributes the
// semantic conventions want a sampler to see (db.operation.name,
// db.system.name), with the decorator's namespace and the WithAttributes
// attributes, under its final name and kind client.
func TestSamplerSeesConventionsAtStart(t *testing.T) {
	sampler := &recordingSampler{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	mp := newHarness(t).mp
	target := semconv.DBCollectionName("history")
	opts := []otelstore.SharedOption{otelstore.WithTracerProvider(tp), otelstore.WithMeterProvider(mp),
		otelstore.WithDBSystem("postgresql"), otelstore.WithAttributes(target)}
	var storeOpts []otelstore.Option
	var keyspaceOpts []otelstore.KeyspaceOption
	for _, o := range opts {
		storeOpts, keyspaceOpts = append(storeOpts, o), append(keyspaceOpts, o)
	}
	storeOpts = append(storeOpts, otelstore.WithTimelineSpans(false), otelstore.WithNamespace("payments"))
	keyspaceOpts = append(keyspaceOpts, otelstore.WithKeyspaceNamespace("agents"))

	var want []otelstore.Operation
	for _, tc := range timedMethods() {
		s, err := otelstore.New(eventstore.NewMemory(), storeOpts...)
		if err != nil {
			t.Fatal(err)
		}
		_ = tc.call(context.Background(), s)
		want = append(want, tc.op)
	}
	ks, err := otelstore.NewKeyspace(keyspace.NewMemory(), keyspaceOpts...)
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, keyspaceCalls(t, ks)...)

	var got []sdktrace.SamplingParameters
	for _, p := range sampler.params {
		if p.Kind == trace.SpanKindClient { // the GenAI spans of the keyspace are not the calls'
			got = append(got, p)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("the sampler saw %d client spans, want %d", len(got), len(want))
	}
	for i, p := range got {
		op := string(want[i])
		namespace := "payments"
		if i >= len(want)-4 {
			namespace = "agents"
		}
		if p.Name != op+" history" {
			t.Errorf("span %d created as %q, want %q", i, p.Name, op+" history")
		}
		set := attribute.NewSet(p.Attributes...)
		for _, kv := range []attribute.KeyValue{semconv.DBOperationName(op), semconv.DBSystemNameKey.String("postgresql"),
			otelstore.AttrNamespace.String(namespace), target} {
			if v, ok := set.Value(kv.Key); !ok || v != kv.Value {
				t.Errorf("%s: the sampler saw %s = %v at start, want %v", op, kv.Key, v.String(), kv.Value.String())
			}
		}
	}
}

// A failed call's span follows the semantic conventions' guidance on
// recording errors: status Error with the error text as description and
// error.type, and no exception event, which only WithExceptionEvents
// adds.
func TestFailedCallSpan(t *testing.T) {
	testCases := []struct {
		name       string
		opts       []otelstore.Option
		wantEvents int
	}{
		{"default", nil, 0},
		{"exception events off", []otelstore.Option{otelstore.WithExceptionEvents(false)}, 0},
		{"exception events on", []otelstore.Option{otelstore.WithExceptionEvents(true)}, 1},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			s := h.wrap(t, failing{Store: eventstore.NewMemory(), err: &customError{"disk on fire"}}, tc.opts...)
			if _, err := s.ReadHistory(context.Background(), eventstore.NewWorkflowID()); err == nil {
				t.Fatal("ReadHistory did not fail")
			}
			sp := h.spans.Ended()[0]
			if got := sp.Status(); got.Code != codes.Error || got.Description != "disk on fire" {
				t.Errorf("status %+v, want Error with the error text", got)
			}
			assertSpanAttr(t, sp, semconv.ErrorTypeKey.String("_OTHER"))
			events := sp.Events()
			if len(events) != tc.wantEvents {
				t.Fatalf("span events %v, want %d", events, tc.wantEvents)
			}
			if tc.wantEvents == 1 {
				set := attribute.NewSet(events[0].Attributes...)
				msg, _ := set.Value(semconv.ExceptionMessageKey)
				typ, _ := set.Value(semconv.ExceptionTypeKey)
				if events[0].Name != "exception" || msg.AsString() != "disk on fire" || !strings.HasSuffix(typ.AsString(), "customError") {
					t.Errorf("event %s %v, want the exception with the error's type and text", events[0].Name, events[0].Attributes)
				}
			}
		})
	}
}

// A span name formatter is asked once per operation, when the decorator is
// made: whatever it returns, span names stay as few as the operations
// called, never one per call. It sees the target; "" keeps the default
// name, and a hostile name is cleaned.
func TestSpanNameFormatter(t *testing.T) {
	var asked []string
	n := 0
	unique := func(op otelstore.Operation, target string) string {
		n++ // a different name every time it is asked
		asked = append(asked, string(op)+"|"+target)
		return fmt.Sprintf("%s.%s.%d.%d", target, op, n, rand.Int())
	}
	h := newHarness(t)
	s, ks := decorateBoth(t, h, eventstore.NewMemory(), otelstore.WithSpanNameFormatter(unique),
		otelstore.WithAttributes(semconv.DBNamespace("aion")))
	if len(asked) != 28+4 {
		t.Errorf("the formatter was asked %d times by New and NewKeyspace, want once per operation (32)", len(asked))
	}
	if !slices.Contains(asked, "append|aion") || !slices.Contains(asked, "append_events|aion") {
		t.Errorf("the formatter was asked %v, want each operation with the target", asked)
	}
	asked = nil
	ctx := context.Background()
	for i := range 50 {
		wf, run := ids()
		ev := []eventstore.Event{eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: fmt.Sprint("type", i)}}
		if err := s.Append(ctx, eventstore.RecorderToken(), wf, ev, 0); err != nil {
			t.Fatal(err)
		}
		_, _ = s.ReadHistory(ctx, wf)
		_, _ = s.ReadHistory(ctx, eventstore.NewWorkflowID()) // not found: a failed call
		keyspaceCalls(t, ks)
	}
	if len(asked) != 0 {
		t.Errorf("the formatter was asked %d times by calls, want never", len(asked))
	}
	names := map[string]int{}
	for _, sp := range h.spans.Ended() {
		if sp.SpanKind() == trace.SpanKindClient {
			names[sp.Name()]++
		}
	}
	if len(names) != 6 { // append, read_history and the four keyspace methods
		t.Errorf("%d span names over 300 calls of 6 operations: %v", len(names), names)
	}

	for _, tc := range []struct {
		name   string
		format func(otelstore.Operation, string) string
		want   string
	}{
		{"empty keeps the default", func(otelstore.Operation, string) string { return "" }, "list_active"},
		{"panic keeps the default", func(otelstore.Operation, string) string { panic("formatter") }, "list_active"},
		{"hostile is cleaned", func(otelstore.Operation, string) string { return "db\xff" + strings.Repeat("x", 1000) },
			"db\uFFFD" + strings.Repeat("x", 256-len("db\uFFFD"))},
		{"constant", func(op otelstore.Operation, _ string) string { return "store." + string(op) }, "store.list_active"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			s := h.wrap(t, eventstore.NewMemory(), otelstore.WithSpanNameFormatter(tc.format))
			if _, err := s.ListActive(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := h.spans.Ended()[0].Name(); got != tc.want {
				t.Errorf("span name %q, want %q", got, tc.want)
			}
		})
	}
}

// readAllocs returns the allocations of one ReadHistory of a short history
// through r, in steady state.
func readAllocs(t *testing.T, r historyReader, wf eventstore.WorkflowID) float64 {
	t.Helper()
	read := func() {
		if _, err := r.ReadHistory(context.Background(), wf); err != nil {
			t.Fatal(err)
		}
	}
	read()
	return testing.AllocsPerRun(1000, read)
}

// A call whose span records nothing allocates nothing of the decorator's
// own: with a no-op tracer, with the span filter saying no, and with an
// SDK whose sampler drops the span, no more than the SDK's own dropped
// start (a hand-written span with the same options) allocates. A sampled
// span costs no more allocations than a hand-written one with the same
// attributes.
func TestCallAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts mean nothing under the race detector")
	}
	noSpans := otelstore.WithSpanFilter(func(context.Context, otelstore.Operation) bool { return false })
	testCases := []struct {
		name string
		opts []otelstore.Option
		hand trace.TracerProvider // the hand-written equivalent's tracer; nil: metrics only
	}{
		{"noop tracer", []otelstore.Option{otelstore.WithTracerProvider(tracenoop.NewTracerProvider())}, nil},
		{"spans filtered", []otelstore.Option{otelstore.WithTracerProvider(sdkTracer(t, sdktrace.AlwaysSample())), noSpans}, nil},
		{"unsampled", []otelstore.Option{otelstore.WithTracerProvider(sdkTracer(t, sdktrace.NeverSample()))}, sdkTracer(t, sdktrace.NeverSample())},
		{"sampled", []otelstore.Option{otelstore.WithTracerProvider(sdkTracer(t, sdktrace.AlwaysSample()))}, sdkTracer(t, sdktrace.AlwaysSample())},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m, wf := shortHistory(t)
			bare := readAllocs(t, m, wf)
			s, err := otelstore.New(m, append([]otelstore.Option{otelstore.WithMeterProvider(sdkMeter(t))}, tc.opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			decorated := readAllocs(t, s, wf) - bare
			hand := readAllocs(t, newHandReader(t, m, sdkMeter(t), tc.hand), wf) - bare
			if decorated > hand {
				t.Errorf("the decorator adds %v allocations to a ReadHistory, the hand-written minimum %v", decorated, hand)
			}
		})
	}
}
