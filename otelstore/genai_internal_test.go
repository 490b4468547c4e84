package otelstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/pairing"
)

// TestPendingToolCallsBounded: past the bound the oldest pending call is
// forgotten and counted; its result counts as an unknown tool without a
// duration, and memory stays at the bound however many calls never end.
func TestPendingToolCallsBounded(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	ks, err := NewKeyspace(keyspace.NewMemory(), WithMeterProvider(mp),
		keyspaceFunc(func(c *config) { c.maxPendingCalls = 4 }))
	if err != nil {
		t.Fatal(err)
	}
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var events []keyspace.ActivityEvent
	add := func(c keyspace.Content) {
		events = append(events, keyspace.ActivityEvent{WorkflowID: wf, RunID: run, EmittedAt: t0.Add(time.Duration(len(events)) * time.Second), Content: c})
	}
	for i := range 10 {
		add(keyspace.ToolCall{CallID: fmt.Sprint(i), Name: "t"})
	}
	add(keyspace.ToolResult{CallID: "0"}) // evicted: unknown, no duration
	add(keyspace.ToolResult{CallID: "9"}) // still pending: paired
	if _, err := ks.AppendEvents(context.Background(), 0, events); err != nil {
		t.Fatal(err)
	}
	if n := ks.(*keyspaceStore).genai.pending.len(); n != 3 {
		t.Errorf("%d calls pending, want 3 (the bound 4, less the one that ended)", n)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, m := range rm.ScopeMetrics[0].Metrics {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, dp := range d.DataPoints {
				v, _ := dp.Attributes.Value(attribute.Key("gen_ai.tool.name"))
				got[m.Name+"/"+v.String()] = dp.Value
			}
		case metricdata.Histogram[float64]:
			for _, dp := range d.DataPoints {
				v, _ := dp.Attributes.Value(attribute.Key("gen_ai.tool.name"))
				got[m.Name+"/"+v.String()] = dp.Count
			}
		}
	}
	want := map[string]any{
		"aion.gen_ai.tool.pairing.evicted/":  int64(6),
		"aion.gen_ai.tool.calls/t":           int64(1),
		"aion.gen_ai.tool.calls/_unknown":    int64(1),
		"gen_ai.client.operation.duration/t": uint64(1),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

type panickingSpans struct{}

func (panickingSpans) ActivitySpanContext(pairing.Key) trace.SpanContext { panic("boom") }

// TestGenAIPanicAfterCommitIsHandled: a panic inside the GenAI telemetry of
// a committed batch (here a panicking ActivitySpanSource) goes to the error
// handler; the caller gets the inner result.
func TestGenAIPanicAfterCommitIsHandled(t *testing.T) {
	var handled []error
	ks, err := NewKeyspace(keyspace.NewMemory(), WithLoggerProvider(noop.NewLoggerProvider()), WithTranscriptLogs(true),
		WithActivitySpans(panickingSpans{}), sharedFunc(func(c *config) { c.handle = func(err error) { handled = append(handled, err) } }))
	if err != nil {
		t.Fatal(err)
	}
	ev := keyspace.ActivityEvent{WorkflowID: eventstore.NewWorkflowID(), RunID: eventstore.NewRunID(), Content: keyspace.Message{Text: "x"}}
	head, err := ks.AppendEvents(context.Background(), 0, []keyspace.ActivityEvent{ev})
	if head != 1 || err != nil {
		t.Fatalf("AppendEvents = %d, %v; want 1, nil", head, err)
	}
	if len(handled) != 1 || !strings.Contains(handled[0].Error(), "boom") {
		t.Fatalf("handled %v, want the panic", handled)
	}
}
