package otelstore

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// withClock and withHandler reach the config's test seams.
func withClock(now func() time.Time) SharedOption {
	return sharedFunc(func(c *config) { c.now = now })
}
func withHandler(h func(error)) SharedOption { return sharedFunc(func(c *config) { c.handle = h }) }

// brokenMeterProvider fails every instrument creation, as a misconfigured SDK
// might.
type brokenMeterProvider struct{ noop.MeterProvider }

func (brokenMeterProvider) Meter(string, ...metric.MeterOption) metric.Meter { return brokenMeter{} }

type brokenMeter struct{ noop.Meter }

var errInstrument = errors.New("instrument refused")

func (brokenMeter) Float64Histogram(string, ...metric.Float64HistogramOption) (metric.Float64Histogram, error) {
	return nil, errInstrument
}

func (brokenMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errInstrument
}

func (brokenMeter) Int64Histogram(string, ...metric.Int64HistogramOption) (metric.Int64Histogram, error) {
	return nil, errInstrument
}

// Instrument creation failures go to the error handler, and the decorator
// still forwards every call.
func TestInstrumentFailureIsHandledAndStoreForwards(t *testing.T) {
	var handled []error
	s, err := New(eventstore.NewMemory(), WithMeterProvider(brokenMeterProvider{}), withHandler(func(err error) { handled = append(handled, err) }))
	if err != nil {
		t.Fatalf("New failed because of telemetry: %v", err)
	}
	if len(handled) == 0 || !errors.Is(handled[0], errInstrument) {
		t.Fatalf("handled %v, want the instrument errors", handled)
	}
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	ev := []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: run}, WorkflowType: "checkout"},
		eventstore.ActivityScheduled{Envelope: eventstore.Envelope{RunID: run}, ActivityType: "charge"},
	}
	if err := s.Append(context.Background(), eventstore.RecorderToken(), wf, ev, 0); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadHistory(context.Background(), wf)
	if err != nil || len(got) != 2 {
		t.Fatalf("ReadHistory = %d events, %v; want the 2 appended", len(got), err)
	}
}

// The duration is the clock difference around the inner call alone.
func TestDurationIsInnerCallTime(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	clock := time.Unix(0, 0)
	tick := func() time.Time { clock = clock.Add(250 * time.Millisecond); return clock }
	s, err := New(eventstore.NewMemory(), WithMeterProvider(mp), withClock(tick))
	if err != nil {
		t.Fatal(err)
	}
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	// The append's lifecycle work reads the clock too (the events have no
	// RecordedAt); it must not be inside the timed window.
	ev := []eventstore.Event{eventstore.ActivityScheduled{Envelope: eventstore.Envelope{RunID: run}, ActivityType: "charge"}}
	if err := s.Append(context.Background(), eventstore.RecorderToken(), wf, ev, 0); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "aion.store.operation.duration" {
				continue
			}
			dp := m.Data.(metricdata.Histogram[float64]).DataPoints[0]
			if dp.Count != 1 || dp.Sum != 0.25 {
				t.Fatalf("duration count %d sum %g, want one sample of 0.25s", dp.Count, dp.Sum)
			}
			return
		}
	}
	t.Fatal("no duration recorded")
}

// hung is a store whose Append at one expected seq commits and then does not
// return until released: an inner call that hangs.
type hung struct {
	*eventstore.Memory
	at      uint64
	reached chan struct{}
	release chan struct{}
}

func (h *hung) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	err := h.Memory.Append(ctx, tok, wf, events, expectedSeq)
	if expectedSeq == h.at {
		close(h.reached)
		<-h.release
	}
	return err
}

// Regression (issue 12.2): behind an append that does not return, a
// workflow holds at most maxWaiting facts waiting; past that the waiting
// batches are observed out of order and counted on
// aion.store.lifecycle.unordered, and nothing is lost once the hung append
// returns.
func TestWaitingBoundedBehindHungAppend(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	inner := &hung{Memory: eventstore.NewMemory(), at: 1, reached: make(chan struct{}), release: make(chan struct{})}
	s, err := New(struct{ eventstore.Store }{inner}, WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	ctx, tok := context.Background(), eventstore.RecorderToken()
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	signal := []eventstore.Event{eventstore.SignalReceived{Envelope: eventstore.Envelope{RunID: run, RecordedAt: time.Unix(1, 0)}}}
	if err := s.Append(ctx, tok, wf, signal, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- s.Append(ctx, tok, wf, signal, 1) }()
	<-inner.reached
	const later = 3 * maxWaiting
	for i := range uint64(later) {
		if err := s.Append(ctx, tok, wf, signal, 2+i); err != nil {
			t.Fatal(err)
		}
	}
	life := s.(*plainStore).life
	sh := life.shard(wf)
	sh.mu.Lock()
	waiting := sh.workflows[wf].facts
	sh.mu.Unlock()
	if waiting > maxWaiting {
		t.Errorf("%d facts waiting behind the hung append, want at most %d", waiting, maxWaiting)
	}
	observedEarly := int64(later - waiting)
	counters := func() (signals, unordered int64) {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if sum, ok := m.Data.(metricdata.Sum[int64]); ok && len(sum.DataPoints) == 1 {
					switch m.Name {
					case "aion.signals.delivered":
						signals = sum.DataPoints[0].Value
					case "aion.store.lifecycle.unordered":
						unordered = sum.DataPoints[0].Value
					}
				}
			}
		}
		return signals, unordered
	}
	signals, unordered := counters()
	if signals != 1+observedEarly || unordered == 0 || unordered != observedEarly {
		t.Errorf("before the hung append returned: %d signals, %d unordered; want %d and %d", signals, unordered, 1+observedEarly, observedEarly)
	}
	close(inner.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	signals, unordered = counters()
	if signals != 2+later || unordered != observedEarly {
		t.Errorf("after: %d signals, %d unordered; want %d and %d", signals, unordered, 2+later, observedEarly)
	}
	if len(sh.workflows) != 0 {
		t.Errorf("%d workflows still tracked after every append returned", len(sh.workflows))
	}
}

// seqSet against a model (a plain slice), through sizes past its inline
// part, in seeded random order.
func TestSeqSetModel(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, seed))
		var s seqSet
		var model []uint64
		for step := range 500 {
			if len(model) > 0 && rng.IntN(2) == 0 {
				v := model[rng.IntN(len(model))]
				s.remove(v)
				model = slices.Delete(model, slices.Index(model, v), slices.Index(model, v)+1)
			} else {
				v := uint64(rng.IntN(8)) // repeats: it is a multiset
				s.add(v)
				model = append(model, v)
			}
			want := ^uint64(0)
			if len(model) > 0 {
				want = slices.Min(model)
			}
			if s.min() != want || s.empty() != (len(model) == 0) || s.n != len(model) {
				t.Fatalf("seed %d step %d: min %d empty %v n %d; model %v", seed, step, s.min(), s.empty(), s.n, model)
			}
		}
	}
}

// Regression: a wake channel the caller closed made AppendWithOutbox panic
// after the events and rows had committed, so the caller took a committed
// append for a failed one. The append now returns nil, the rows are there,
// and the closed channel is reported to the error handler.
func TestOutboxWakeOnClosedChannelReportsInsteadOfPanicking(t *testing.T) {
	var handled []error
	wake := make(chan struct{}, 1)
	close(wake)
	s, err := New(eventstore.NewMemory(), WithMeterProvider(noop.NewMeterProvider()), WithOutboxWake(wake),
		withHandler(func(err error) { handled = append(handled, err) }))
	if err != nil {
		t.Fatal(err)
	}
	ob := s.(eventstore.Outbox)
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	ev := []eventstore.Event{eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: run}, WorkflowType: "checkout"}}
	rows := []eventstore.OutboxRow{{WorkflowID: wf, RunID: run, ActivityType: "charge"}}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("AppendWithOutbox panicked: %v", r)
			}
		}()
		err = ob.AppendWithOutbox(context.Background(), eventstore.RecorderToken(), wf, ev, 0, rows)
	}()
	if err != nil {
		t.Fatalf("AppendWithOutbox = %v, want nil: it committed", err)
	}
	if claimed, err := ob.ClaimOutboxRows(context.Background(), 10); err != nil || len(claimed) != 1 {
		t.Fatalf("ClaimOutboxRows = %d rows, %v; want the staged row", len(claimed), err)
	}
	if len(handled) != 1 {
		t.Fatalf("handled %v, want one report of the closed channel", handled)
	}
}

// heldStore commits an Append at seq holdAt, then holds its return until
// released.
type heldStore struct {
	*eventstore.Memory
	holdAt           uint64
	reached, release chan struct{}
}

func (g *heldStore) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	err := g.Memory.Append(ctx, tok, wf, events, expectedSeq)
	if expectedSeq == g.holdAt {
		close(g.reached)
		<-g.release
	}
	return err
}

type ctxKey struct{}

// Regression: a batch waiting behind an earlier in-flight append kept the
// caller's context (its values, however large or secret, and its
// cancellation) after Append returned, for as long as the earlier append
// hung. It now keeps only the span context.
func TestWaitingBatchKeepsNoCallerContext(t *testing.T) {
	g := &heldStore{Memory: eventstore.NewMemory(), holdAt: 1, reached: make(chan struct{}), release: make(chan struct{})}
	s, err := New(struct{ eventstore.Store }{g}, WithMeterProvider(noop.NewMeterProvider()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, tok, wf, run := context.Background(), eventstore.RecorderToken(), eventstore.NewWorkflowID(), eventstore.NewRunID()
	env := eventstore.Envelope{RunID: run}
	if err := s.Append(ctx, tok, wf, []eventstore.Event{eventstore.WorkflowStarted{Envelope: env, WorkflowType: "checkout"}}, 0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() {
		done <- s.Append(ctx, tok, wf, []eventstore.Event{eventstore.SignalReceived{Envelope: env}}, 1)
	}()
	<-g.reached
	released := false
	defer func() {
		if !released {
			close(g.release)
			<-done
		}
	}()
	callerCtx, cancel := context.WithCancel(context.WithValue(ctx, ctxKey{}, "the caller's secret"))
	defer cancel()
	if err := s.Append(callerCtx, tok, wf, []eventstore.Event{eventstore.ActivityScheduled{Envelope: env, ActivityType: "charge"}}, 2); err != nil {
		t.Fatal(err)
	}
	life := s.(*plainStore).life
	sh := life.shard(wf)
	sh.mu.Lock()
	waiting := sh.workflows[wf].waiting
	if len(waiting) != 1 {
		sh.mu.Unlock()
		t.Fatalf("%d batches waiting, want 1", len(waiting))
	}
	kept := waiting[0].ctx
	sh.mu.Unlock()
	if kept.Value(ctxKey{}) != nil || kept.Done() != nil {
		t.Errorf("the waiting batch keeps the caller's context: value %v, cancellable %v", kept.Value(ctxKey{}), kept.Done() != nil)
	}
	released = true
	close(g.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// panicky makes every span processor step and the span filter panic.
type panicky struct{ sdktrace.SpanProcessor }

func (panicky) OnStart(context.Context, sdktrace.ReadWriteSpan) { panic("OnStart") }
func (panicky) OnEnd(sdktrace.ReadOnlySpan)                     { panic("OnEnd") }

// User code on the call path (the span filter, span processors) that panics
// never reaches the caller: the call is forwarded, returns the inner result,
// and the panic goes to the error handler.
func TestUserCodePanicNeverReachesTheCall(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts []Option
	}{
		{"span filter", []Option{WithSpanFilter(func(context.Context, Operation) bool { panic("filter") })}},
		{"span processor", []Option{WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(panicky{})))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var handled []error
			s, err := New(eventstore.NewMemory(), append(tc.opts, withHandler(func(err error) { handled = append(handled, err) }))...)
			if err != nil {
				t.Fatal(err)
			}
			wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
			ev := []eventstore.Event{eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: run}, WorkflowType: "checkout"}}
			if err := s.Append(context.Background(), eventstore.RecorderToken(), wf, ev, 0); err != nil {
				t.Fatalf("Append = %v", err)
			}
			if got, err := s.ReadHistory(context.Background(), wf); err != nil || len(got) != 1 {
				t.Fatalf("ReadHistory = %d events, %v; want the one appended", len(got), err)
			}
			if len(handled) == 0 {
				t.Error("the panics were not reported")
			}
		})
	}
}
