package otelstore

import (
	"context"
	"errors"
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

// An append that has committed and not returned holds nothing back: later
// appends of the workflow are observed when they return, and what the hung
// one says (here, the terminal of an activity whose run closed after it)
// still decides the outcome once it returns: succeeded, not abandoned.
func TestHungAppendHoldsNothingBack(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	inner := &hung{Memory: eventstore.NewMemory(), at: 2, reached: make(chan struct{}), release: make(chan struct{})}
	s, err := New(struct{ eventstore.Store }{inner}, WithMeterProvider(mp), WithTimelineSpans(false))
	if err != nil {
		t.Fatal(err)
	}
	ctx, tok := context.Background(), eventstore.RecorderToken()
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	env := func(sec int64) eventstore.Envelope {
		return eventstore.Envelope{RunID: run, RecordedAt: time.Unix(sec, 0)}
	}
	history := [][]eventstore.Event{
		{eventstore.WorkflowStarted{Envelope: env(1), WorkflowType: "w"}},
		{eventstore.ActivityScheduled{Envelope: env(2), ActivityID: 0, ActivityType: "a"}},
		{eventstore.ActivityCompleted{Envelope: env(5), ActivityID: 0}}, // hangs after committing
		{eventstore.SignalReceived{Envelope: env(6)}},
		{eventstore.WorkflowCompleted{Envelope: env(7)}},
	}
	for i, b := range history[:2] {
		if err := s.Append(ctx, tok, wf, b, uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error)
	go func() { done <- s.Append(ctx, tok, wf, history[2], 2) }()
	<-inner.reached
	for i, b := range history[3:] {
		if err := s.Append(ctx, tok, wf, b, uint64(3+i)); err != nil {
			t.Fatal(err)
		}
	}
	sums := func() map[string]int64 {
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		out := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if sum, ok := m.Data.(metricdata.Sum[int64]); ok {
					for _, dp := range sum.DataPoints {
						name := m.Name
						if o, ok := dp.Attributes.Value("aion.activity.outcome"); ok {
							name += "/" + o.AsString()
						}
						out[name] += dp.Value
					}
				}
			}
		}
		return out
	}
	got := sums()
	if got["aion.signals.delivered"] != 1 || got["aion.workflows.completed"] != 1 {
		t.Errorf("while an earlier append hangs, later ones are not observed: %v", got)
	}
	if got["aion.inflight_activities"] != 0 || got["aion.activities.completed/abandoned"] != 0 {
		t.Errorf("the close settled the activity before its terminal returned: %v", got)
	}
	close(inner.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got = sums()
	if got["aion.activities.completed/succeeded"] != 1 || got["aion.activities.completed/abandoned"] != 0 || got["aion.inflight_activities"] != 0 {
		t.Errorf("after the hung append returned: %v, want one succeeded, none abandoned, none in flight", got)
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
		{"span filter", []Option{WithTracerProvider(sdktrace.NewTracerProvider()),
			WithSpanFilter(func(context.Context, Operation) bool { panic("filter") })}},
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
