package otelstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// methodCase calls one timed method of a store that has every capability.
type methodCase struct {
	op   otelstore.Operation
	call func(ctx context.Context, s eventstore.Store) error
}

func outbox(s eventstore.Store) eventstore.Outbox { return s.(eventstore.Outbox) }
func shards(s eventstore.Store) eventstore.ShardOwner {
	return s.(eventstore.ShardOwner)
}

// timedMethods covers every method that returns an error, in interface order.
func timedMethods() []methodCase {
	wf, run := ids()
	tok := eventstore.RecorderToken()
	started := []eventstore.Event{eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "checkout"}}
	return []methodCase{
		{otelstore.OpAppend, func(ctx context.Context, s eventstore.Store) error {
			return s.Append(ctx, tok, wf, started, 0)
		}},
		{otelstore.OpReadHistory, func(ctx context.Context, s eventstore.Store) error {
			_, err := s.ReadHistory(ctx, wf)
			return err
		}},
		{otelstore.OpReadHistoryFrom, func(ctx context.Context, s eventstore.Store) error {
			_, err := s.ReadHistoryFrom(ctx, wf, 1)
			return err
		}},
		{otelstore.OpReadRunChain, func(ctx context.Context, s eventstore.Store) error {
			_, err := s.ReadRunChain(ctx, wf)
			return err
		}},
		{otelstore.OpListWorkflowIDs, func(ctx context.Context, s eventstore.Store) error {
			_, err := s.ListWorkflowIDs(ctx)
			return err
		}},
		{otelstore.OpListActive, func(ctx context.Context, s eventstore.Store) error {
			_, err := s.ListActive(ctx)
			return err
		}},
		{otelstore.OpListPaused, func(ctx context.Context, s eventstore.Store) error {
			_, err := s.ListPaused(ctx)
			return err
		}},
		{otelstore.OpStreamHeads, func(ctx context.Context, s eventstore.Store) error {
			_, err := s.StreamHeads(ctx)
			return err
		}},
		{otelstore.OpQuery, func(ctx context.Context, s eventstore.Store) error {
			_, err := s.Query(ctx, eventstore.WorkflowFilter{WorkflowType: "checkout"})
			return err
		}},
		{otelstore.OpScheduleTimer, func(ctx context.Context, s eventstore.Store) error {
			return s.ScheduleTimer(ctx, wf, "t", t0, 1)
		}},
		{otelstore.OpExpiredTimers, func(ctx context.Context, s eventstore.Store) error {
			_, err := s.ExpiredTimers(ctx, t0)
			return err
		}},
		{otelstore.OpRetireTimer, func(ctx context.Context, s eventstore.Store) error {
			_, err := s.RetireTimer(ctx, wf, "t", t0, 1)
			return err
		}},
		{otelstore.OpPutPackage, func(ctx context.Context, s eventstore.Store) error {
			return s.PutPackage(ctx, eventstore.PackageRecord{WorkflowType: "checkout", ContentHash: "h1"})
		}},
		{otelstore.OpPutPackageWithRoutes, func(ctx context.Context, s eventstore.Store) error {
			return s.PutPackageWithRoutes(ctx, eventstore.PackageRecord{WorkflowType: "checkout", ContentHash: "h2"}, []string{"checkout"})
		}},
		{otelstore.OpListPackages, func(ctx context.Context, s eventstore.Store) error {
			_, err := s.ListPackages(ctx)
			return err
		}},
		{otelstore.OpDeletePackage, func(ctx context.Context, s eventstore.Store) error {
			return s.DeletePackage(ctx, "checkout", "h1")
		}},
		{otelstore.OpPutPackageRoute, func(ctx context.Context, s eventstore.Store) error {
			return s.PutPackageRoute(ctx, "checkout", "h1")
		}},
		{otelstore.OpListPackageRoutes, func(ctx context.Context, s eventstore.Store) error {
			_, err := s.ListPackageRoutes(ctx)
			return err
		}},
		{otelstore.OpAppendWithOutbox, func(ctx context.Context, s eventstore.Store) error {
			return outbox(s).AppendWithOutbox(ctx, tok, wf, started, 0, nil)
		}},
		{otelstore.OpRearmOutboxPending, func(ctx context.Context, s eventstore.Store) error {
			return outbox(s).RearmOutboxPending(ctx, nil)
		}},
		{otelstore.OpClaimOutboxRows, func(ctx context.Context, s eventstore.Store) error {
			_, err := outbox(s).ClaimOutboxRows(ctx, 10)
			return err
		}},
		{otelstore.OpCountClaimedOutboxRows, func(ctx context.Context, s eventstore.Store) error {
			_, err := outbox(s).CountClaimedOutboxRows(ctx)
			return err
		}},
		{otelstore.OpSettleOutboxRowCancelled, func(ctx context.Context, s eventstore.Store) error {
			return outbox(s).SettleOutboxRowCancelled(ctx, "no-such-row")
		}},
		{otelstore.OpSettleWorkflowOutboxRowsCancelled, func(ctx context.Context, s eventstore.Store) error {
			_, err := outbox(s).SettleWorkflowOutboxRowsCancelled(ctx, wf)
			return err
		}},
		{otelstore.OpAcquireOwnedShards, func(ctx context.Context, s eventstore.Store) error {
			return shards(s).AcquireOwnedShards(ctx, []int{0, 1})
		}},
		{otelstore.OpAcquireOwnedShard, func(ctx context.Context, s eventstore.Store) error {
			return shards(s).AcquireOwnedShard(ctx, 2)
		}},
		{otelstore.OpPublishShardOwner, func(ctx context.Context, s eventstore.Store) error {
			return shards(s).PublishShardOwner(ctx, 3)
		}},
	}
}

func TestNewRefusesNilStore(t *testing.T) {
	if _, err := otelstore.New(nil); !errors.Is(err, otelstore.ErrNilStore) {
		t.Fatalf("New(nil) = %v, want ErrNilStore", err)
	}
	if _, err := otelstore.NewKeyspace(nil); !errors.Is(err, otelstore.ErrNilStore) {
		t.Fatalf("NewKeyspace(nil) = %v, want ErrNilStore", err)
	}
}

// A typed nil behind the interface is refused at construction too, rather
// than panicking (or failing) on first use.
func TestNewRefusesTypedNilStore(t *testing.T) {
	testCases := []struct {
		name string
		new  func() error
	}{
		{"nil *eventstore.Memory", func() error { _, err := otelstore.New((*eventstore.Memory)(nil)); return err }},
		{"nil *keyspace.Memory", func() error { _, err := otelstore.NewKeyspace((*keyspace.Memory)(nil)); return err }},
		{"nil func keyspace", func() error { _, err := otelstore.NewKeyspace(funcKeyspace(nil)); return err }},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.new(); !errors.Is(err, otelstore.ErrNilStore) {
				t.Fatalf("got %v, want ErrNilStore", err)
			}
		})
	}
}

// funcKeyspace is a keyspace.Store whose underlying type is a func, so that
// a nil one is a typed nil that is not a pointer.
type funcKeyspace func()

func (funcKeyspace) AppendEvents(context.Context, uint64, []keyspace.ActivityEvent) (uint64, error) {
	return 0, nil
}
func (funcKeyspace) Head(context.Context, keyspace.StreamKey) (uint64, error) { return 0, nil }
func (funcKeyspace) ReadFrom(context.Context, keyspace.StreamKey, uint64, int) ([]keyspace.Record, error) {
	return nil, nil
}
func (funcKeyspace) ListStreams(context.Context, eventstore.WorkflowID, eventstore.RunID) ([]keyspace.StreamSummary, error) {
	return nil, nil
}

// WithAttributes is validated once, the same way whatever else is given: a
// key the decorators or the tracker set themselves, an empty key or an
// invalid UTF-8 key is dropped and reported to the error handler with
// ErrInvalidOption; the constructor succeeds and the other attributes stay.
func TestWithAttributesValidated(t *testing.T) {
	testCases := []struct {
		name string
		kv   attribute.KeyValue
	}{
		{"store key", otelstore.AttrNamespace.String("x")},
		{"operation key", semconv.DBOperationNameKey.String("x")},
		{"tracker key", otelstore.AttrActivityType.String("x")},
		{"empty key", attribute.String("", "x")},
		{"invalid key", attribute.String("bad\xff", "x")},
		// Regression: keys no Prometheus exporter can make a label of, or
		// that share a label with a catalog key, failed every scrape or
		// merged into a catalog label.
		{"key of underscores only as a label", attribute.String("ключ", "x")},
		{"Prometheus reserved label", attribute.String("__name__", "x")},
		{"exporter's scope label", attribute.String("otel_scope_name", "x")},
		{"exporter's scope label spelt with dots", attribute.String("otel.scope.version", "x")},
		{"catalog key spelt as its label", attribute.String("error_type", "x")},
		{"histogram bucket label", attribute.String("le", "x")},
		{"summary quantile label", attribute.String("quantile", "x")},
		{"huge key", attribute.String(strings.Repeat("k", 257), "x")},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, shared := range []bool{false, true} {
				h := newHarness(t)
				var reported []error
				opts := h.options(otelstore.WithHandler(func(err error) { reported = append(reported, err) }),
					otelstore.WithAttributes(tc.kv, keptAttr))
				if shared {
					opts = append(opts, otelstore.WithPairing(newTracker(t, h)))
				}
				s, err := otelstore.New(eventstore.NewMemory(), opts...)
				if err != nil {
					t.Fatalf("New (shared tracker %v) = %v, want the bad key dropped", shared, err)
				}
				assertDropped(t, reported, fmt.Sprintf("New (shared tracker %v)", shared))
				if _, err := s.ReadHistory(context.Background(), eventstore.NewWorkflowID()); err != nil {
					t.Fatal(err)
				}
				assertKeptNotBad(t, h, tc.kv.Key)
			}
			h := newHarness(t)
			var reported []error
			ks, err := otelstore.NewKeyspace(keyspace.NewMemory(), h.keyspaceOptions(
				otelstore.WithHandler(func(err error) { reported = append(reported, err) }), otelstore.WithAttributes(tc.kv, keptAttr))...)
			if err != nil {
				t.Fatalf("NewKeyspace = %v, want the bad key dropped", err)
			}
			assertDropped(t, reported, "NewKeyspace")
			if _, err := ks.Head(context.Background(), keyspace.StreamKey{WorkflowID: eventstore.NewWorkflowID(), RunID: eventstore.NewRunID()}); err != nil {
				t.Fatal(err)
			}
			assertKeptNotBad(t, h, tc.kv.Key)
		})
	}
}

// keptAttr is a valid WithAttributes attribute given beside a bad one: it
// stays when the bad one is dropped.
var keptAttr = attribute.String("deployment", "blue")

// assertDropped checks that exactly one error, wrapping ErrInvalidOption,
// was reported.
func assertDropped(t *testing.T, reported []error, who string) {
	t.Helper()
	if len(reported) != 1 || !errors.Is(reported[0], otelstore.ErrInvalidOption) {
		t.Errorf("%s reported %v, want one error wrapping ErrInvalidOption", who, reported)
	}
}

// assertKeptNotBad checks that every metric point carries keptAttr and
// none the bad key, and that some point was read.
func assertKeptNotBad(t *testing.T, h *harness, bad attribute.Key) {
	t.Helper()
	points := 0
	for name, m := range h.metrics(t) {
		h, ok := m.Data.(metricdata.Histogram[float64])
		if !ok {
			continue
		}
		for _, dp := range h.DataPoints {
			points++
			if v, ok := dp.Attributes.Value(keptAttr.Key); !ok || v != keptAttr.Value {
				t.Errorf("%s point %v lacks %s", name, dp.Attributes.ToSlice(), keptAttr.Key)
			}
			if bad != keptAttr.Key {
				if v, ok := dp.Attributes.Value(bad); ok && v.AsString() == "x" {
					t.Errorf("%s point %v carries the dropped key %q", name, dp.Attributes.ToSlice(), bad)
				}
			}
		}
	}
	if points == 0 {
		t.Error("no duration point read")
	}
}

// Every timed method makes exactly one client span named after its
// operation (the semantic conventions' "{db.operation.name}": no target is
// known) and one
// duration point with its db.operation.name; the inner store sees the span.
func TestEveryMethodOneSpanOnePoint(t *testing.T) {
	cases := timedMethods()
	if len(cases) != 27 {
		t.Fatalf("method table has %d cases, want 27 (18 Store + 6 Outbox + 3 ShardOwner)", len(cases))
	}
	for _, tc := range cases {
		t.Run(string(tc.op), func(t *testing.T) {
			h := newHarness(t)
			s := h.wrap(t, eventstore.NewMemory())
			err := tc.call(context.Background(), s)

			spans := h.spans.Ended()
			if len(spans) != 1 {
				t.Fatalf("got %d spans, want 1", len(spans))
			}
			sp := spans[0]
			if want := string(tc.op); sp.Name() != want {
				t.Errorf("span name %q, want %q", sp.Name(), want)
			}
			if sp.SpanKind() != trace.SpanKindClient {
				t.Errorf("span kind %v, want client", sp.SpanKind())
			}
			assertSpanAttr(t, sp, semconv.DBOperationNameKey.String(string(tc.op)))
			assertSpanAttr(t, sp, ns)
			assertSpanAttr(t, sp, storeSystem)

			counts := h.histogramCounts(t, "aion.store.operation.duration")
			wantAttrs := []attribute.KeyValue{ns, storeSystem, semconv.DBOperationNameKey.String(string(tc.op))}
			if err != nil {
				wantAttrs = append(wantAttrs, semconv.ErrorTypeKey.String(errorTypeOf(err)))
			}
			if len(counts) != 1 || counts[distinct(wantAttrs...)] != 1 {
				t.Fatalf("duration points %v, want one sample with %v", counts, wantAttrs)
			}
		})
	}
}

// errorTypeOf is the expected error.type of the sentinel errors Memory returns.
func errorTypeOf(err error) string {
	switch {
	case errors.Is(err, eventstore.ErrNotFound):
		return "not_found"
	case errors.Is(err, eventstore.ErrNotOwner):
		return "not_owner"
	case errors.Is(err, eventstore.ErrInvalidArgument):
		return "invalid_argument"
	}
	return "_OTHER"
}

func assertSpanAttr(t *testing.T, sp sdktrace.ReadOnlySpan, want attribute.KeyValue) {
	t.Helper()
	for _, kv := range sp.Attributes() {
		if kv.Key == want.Key {
			if kv.Value != want.Value {
				t.Errorf("span %s: %s = %v, want %v", sp.Name(), kv.Key, kv.Value.String(), want.Value.String())
			}
			return
		}
	}
	t.Errorf("span %s has no %s attribute; has %v", sp.Name(), want.Key, sp.Attributes())
}

// The infallible shard-scope methods are forwarded without telemetry.
func TestInfallibleShardMethodsAreNotTimed(t *testing.T) {
	h := newHarness(t)
	s := shards(h.wrap(t, eventstore.NewMemory()))
	ctx := context.Background()
	s.SetOwnedShards(ctx, []int{1})
	s.ExtendOwnedShards(ctx, []int{2})
	_ = s.IsCurrentOwner(ctx, 1)
	if n := len(h.spans.Ended()); n != 0 {
		t.Errorf("got %d spans, want none", n)
	}
	if counts := h.histogramCounts(t, "aion.store.operation.duration"); len(counts) != 0 {
		t.Errorf("got duration points %v, want none", counts)
	}
}

// A sequence conflict is classified, recorded on the span with the found seq,
// and returned unchanged.
func TestSequenceConflictIsRecorded(t *testing.T) {
	h := newHarness(t)
	s := h.wrap(t, eventstore.NewMemory())
	wf, run := ids()
	ctx := context.Background()
	ev := []eventstore.Event{eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "checkout"}}
	if err := s.Append(ctx, eventstore.RecorderToken(), wf, ev, 0); err != nil {
		t.Fatal(err)
	}
	err := s.Append(ctx, eventstore.RecorderToken(), wf, ev, 0)
	var conflict *eventstore.SequenceConflictError
	if !errors.As(err, &conflict) || conflict.Found != 1 {
		t.Fatalf("second append: %v, want a conflict with Found=1", err)
	}

	spans := h.spans.Ended()
	sp := spans[len(spans)-1]
	if sp.Status().Code != codes.Error {
		t.Errorf("status %v, want Error", sp.Status())
	}
	assertSpanAttr(t, sp, semconv.ErrorTypeKey.String("sequence_conflict"))
	assertSpanAttr(t, sp, otelstore.AttrFoundSeq.Int64(1))
	assertSpanAttr(t, sp, otelstore.AttrExpectedSeq.Int64(0))
	assertSpanAttr(t, sp, otelstore.AttrEventCount.Int(1))
	assertSpanAttr(t, sp, otelstore.AttrWorkflowID.String(wf.String()))
	if len(sp.Events()) != 0 {
		t.Errorf("span events %v, want none: error.type and the status carry the error", sp.Events())
	}

	counts := h.histogramCounts(t, "aion.store.operation.duration")
	op := semconv.DBOperationNameKey.String("append")
	if counts[distinct(ns, storeSystem, op)] != 1 || counts[distinct(ns, storeSystem, op, semconv.ErrorTypeKey.String("sequence_conflict"))] != 1 {
		t.Errorf("duration points %v, want one success and one sequence_conflict", counts)
	}
}

// The inner store receives the caller's context, carrying the call's span.
func TestInnerSeesCallSpan(t *testing.T) {
	h := newHarness(t)
	probe := &ctxProbe{Store: eventstore.NewMemory()}
	s := h.wrap(t, probe)
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "caller")
	if _, err := s.ListActive(ctx); err != nil {
		t.Fatal(err)
	}
	if probe.ctx.Value(key{}) != "caller" {
		t.Error("inner context lost the caller's values")
	}
	got := trace.SpanFromContext(probe.ctx).SpanContext()
	if want := h.spans.Ended()[0].SpanContext(); !got.Equal(want) {
		t.Errorf("inner context span %v, want the call's span %v", got.SpanID(), want.SpanID())
	}
}

type ctxProbe struct {
	eventstore.Store
	ctx context.Context
}

func (p *ctxProbe) ListActive(ctx context.Context) ([]eventstore.WorkflowID, error) {
	p.ctx = ctx
	return p.Store.ListActive(ctx)
}

// Errors come back as the very value the inner store returned.
func TestErrorsReturnedUnchanged(t *testing.T) {
	sentinel := &customError{"backend down"}
	h := newHarness(t)
	s := h.wrap(t, failing{Store: eventstore.NewMemory(), err: sentinel})
	_, err := s.ReadHistory(context.Background(), eventstore.NewWorkflowID())
	if err != error(sentinel) {
		t.Fatalf("got %v (%T), want the identical inner error", err, err)
	}
	counts := h.histogramCounts(t, "aion.store.operation.duration")
	if counts[distinct(ns, storeSystem, semconv.DBOperationNameKey.String("read_history"), semconv.ErrorTypeKey.String("_OTHER"))] != 1 {
		t.Errorf("duration points %v, want one _OTHER failure", counts)
	}
}

type customError struct{ msg string }

func (e *customError) Error() string { return e.msg }

// failing is a store whose ReadHistory fails with err.
type failing struct {
	eventstore.Store
	err error
}

func (f failing) ReadHistory(context.Context, eventstore.WorkflowID) ([]eventstore.Event, error) {
	return nil, f.err
}

func TestErrorClassifier(t *testing.T) {
	sentinel := errors.New("throttled")
	testCases := []struct {
		name     string
		classify func(error) string
		want     string
	}{
		{"refines", func(err error) string {
			if err == sentinel {
				return "throttled"
			}
			return ""
		}, "throttled"},
		{"empty falls back to default", func(error) string { return "" }, "_OTHER"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			s := h.wrap(t, failing{Store: eventstore.NewMemory(), err: sentinel}, otelstore.WithErrorClassifier(tc.classify))
			_, _ = s.ReadHistory(context.Background(), eventstore.NewWorkflowID())
			assertSpanAttr(t, h.spans.Ended()[0], semconv.ErrorTypeKey.String(tc.want))
		})
	}
}

func TestDefaultErrorTypes(t *testing.T) {
	testCases := []struct {
		err  error
		want string
	}{
		{&eventstore.SequenceConflictError{Expected: 1, Found: 2}, "sequence_conflict"},
		{eventstore.ErrInvalidToken, "invalid_token"},
		{eventstore.ErrNotFound, "not_found"},
		{eventstore.ErrNotOwner, "not_owner"},
		{eventstore.ErrInvalidArgument, "invalid_argument"},
		{eventstore.ErrUnsupported, "unsupported"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "deadline_exceeded"},
		{errors.New("disk on fire"), "_OTHER"},
	}
	for _, tc := range testCases {
		t.Run(tc.want, func(t *testing.T) {
			h := newHarness(t)
			s := h.wrap(t, failing{Store: eventstore.NewMemory(), err: tc.err})
			_, _ = s.ReadHistory(context.Background(), eventstore.NewWorkflowID())
			assertSpanAttr(t, h.spans.Ended()[0], semconv.ErrorTypeKey.String(tc.want))
		})
	}
}

// A span filter suppresses spans, not metrics.
func TestSpanFilter(t *testing.T) {
	h := newHarness(t)
	var asked []otelstore.Operation
	s := h.wrap(t, eventstore.NewMemory(), otelstore.WithSpanFilter(func(_ context.Context, op otelstore.Operation) bool {
		asked = append(asked, op)
		return op != otelstore.OpListActive
	}))
	ctx := context.Background()
	if _, err := s.ListActive(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListPaused(ctx); err != nil {
		t.Fatal(err)
	}
	spans := h.spans.Ended()
	if len(spans) != 1 || spans[0].Name() != "list_paused" {
		t.Fatalf("spans %v, want only list_paused", spans)
	}
	counts := h.histogramCounts(t, "aion.store.operation.duration")
	if counts[distinct(ns, storeSystem, semconv.DBOperationNameKey.String("list_active"))] != 1 {
		t.Errorf("filtered call recorded no duration: %v", counts)
	}
	if len(asked) != 2 || asked[0] != otelstore.OpListActive {
		t.Errorf("filter asked about %v", asked)
	}
}

// WithAttributes and WithNamespace reach every span and metric point.
func TestAttributesAndNamespace(t *testing.T) {
	h := newHarness(t)
	region := attribute.String("deployment.region", "eu-1")
	s := h.wrap(t, eventstore.NewMemory(), otelstore.WithNamespace("payments"), otelstore.WithAttributes(region))
	if _, err := s.ListActive(context.Background()); err != nil {
		t.Fatal(err)
	}
	sp := h.spans.Ended()[0]
	assertSpanAttr(t, sp, region)
	assertSpanAttr(t, sp, otelstore.AttrNamespace.String("payments"))
	counts := h.histogramCounts(t, "aion.store.operation.duration")
	want := distinct(otelstore.AttrNamespace.String("payments"), storeSystem, semconv.DBOperationNameKey.String("list_active"), region)
	if counts[want] != 1 {
		t.Errorf("duration points %v, want one with namespace payments and the region", counts)
	}
}

// A panic in the inner store ends the span with an error and propagates.
func TestInnerPanicEndsSpanAndPropagates(t *testing.T) {
	h := newHarness(t)
	s := h.wrap(t, panicking{Store: eventstore.NewMemory()})
	func() {
		defer func() {
			if r := recover(); r != "boom" {
				t.Errorf("recovered %v, want the inner panic value", r)
			}
		}()
		_, _ = s.ListActive(context.Background())
		t.Error("the panic did not propagate")
	}()
	spans := h.spans.Ended()
	if len(spans) != 1 || spans[0].Status().Code != codes.Error {
		t.Fatalf("spans %v, want one ended with status Error", spans)
	}
	counts := h.histogramCounts(t, "aion.store.operation.duration")
	if counts[distinct(ns, storeSystem, semconv.DBOperationNameKey.String("list_active"), semconv.ErrorTypeKey.String("_OTHER"))] != 1 {
		t.Errorf("duration points %v, want one _OTHER failure", counts)
	}
}

type panicking struct{ eventstore.Store }

func (panicking) ListActive(context.Context) ([]eventstore.WorkflowID, error) { panic("boom") }

func TestUnwrap(t *testing.T) {
	inner := eventstore.NewMemory()
	s, err := otelstore.New(inner)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := s.(interface{ Unwrap() eventstore.Store })
	if !ok || u.Unwrap() != eventstore.Store(inner) {
		t.Fatal("Unwrap does not return the inner store")
	}
}

// Regression: a zero pairing.Tracker given to WithPairing was accepted, and
// the first Append that dispatched an activity panicked inside it. New now
// refuses it.
func TestNewRefusesZeroTracker(t *testing.T) {
	h := newHarness(t)
	s, err := otelstore.New(eventstore.NewMemory(), h.options(otelstore.WithPairing(&pairing.Tracker{}))...)
	if errors.Is(err, otelstore.ErrInvalidOption) {
		return
	}
	if err != nil {
		t.Fatalf("New = %v, want ErrInvalidOption", err)
	}
	t.Errorf("New accepted a zero tracker")
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("Append over the zero tracker panicked: %v", r)
		}
	}()
	run := eventstore.NewRunID()
	_ = s.Append(context.Background(), eventstore.RecorderToken(), eventstore.NewWorkflowID(), []eventstore.Event{
		eventstore.ActivityScheduled{Envelope: eventstore.Envelope{RunID: run}, ActivityType: "charge"},
	}, 0)
}

// A typed nil provider (a nil *sdkmetric.MeterProvider, say, in the
// interface) is no provider: the decorators fall back to the global ones
// instead of panicking on first use.
func TestTypedNilProvidersFallBack(t *testing.T) {
	var mp *sdkmetric.MeterProvider
	var tp *sdktrace.TracerProvider
	var lp *sdklog.LoggerProvider
	s, err := otelstore.New(eventstore.NewMemory(), otelstore.WithMeterProvider(mp), otelstore.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	wf, run := ids()
	if err := s.Append(context.Background(), eventstore.RecorderToken(), wf, []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "w"},
		eventstore.ActivityScheduled{Envelope: env(run, time.Second), ActivityType: "a"},
	}, 0); err != nil {
		t.Fatal(err)
	}
	ks, err := otelstore.NewKeyspace(keyspace.NewMemory(), otelstore.WithMeterProvider(mp), otelstore.WithTracerProvider(tp),
		otelstore.WithLoggerProvider(lp), otelstore.WithTranscriptLogs(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ks.AppendEvents(context.Background(), 0, agentEvents(wf, run, keyspace.Usage{InputTokens: 1})); err != nil {
		t.Fatal(err)
	}
}

// A tracker option given beside WithPairing cannot apply (the shared
// tracker has its own); it is reported, not silently dropped, and New
// still succeeds. Alone, it is simply applied.
func TestTrackerOptionBesideSharedTrackerIsReported(t *testing.T) {
	h := newHarness(t)
	for _, tc := range []struct {
		name    string
		opts    []otelstore.Option
		reports int
	}{
		{"beside WithPairing", []otelstore.Option{otelstore.WithPairing(newTracker(t, h)), otelstore.WithTimelineSpans(false)}, 1},
		{"WithPairing alone", []otelstore.Option{otelstore.WithPairing(newTracker(t, h))}, 0},
		{"alone", []otelstore.Option{otelstore.WithTimelineSpans(false)}, 0},
		{"type limit beside WithPairing", []otelstore.Option{otelstore.WithPairing(newTracker(t, h)), otelstore.WithTypeCardinalityLimit(3)}, 1},
		{"type limit alone", []otelstore.Option{otelstore.WithTypeCardinalityLimit(3)}, 0},
		{"both beside WithPairing", []otelstore.Option{otelstore.WithPairing(newTracker(t, h)), otelstore.WithTimelineSpans(true), otelstore.WithTypeCardinalityLimit(0)}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var reported []error
			opts := h.options(append(tc.opts, otelstore.WithHandler(func(err error) { reported = append(reported, err) }))...)
			if _, err := otelstore.New(eventstore.NewMemory(), opts...); err != nil {
				t.Fatalf("New = %v", err)
			}
			if len(reported) != tc.reports {
				t.Fatalf("reported %v, want %d report(s)", reported, tc.reports)
			}
			for _, err := range reported {
				if !errors.Is(err, otelstore.ErrInvalidOption) {
					t.Errorf("reported %v, want ErrInvalidOption", err)
				}
			}
		})
	}
}
