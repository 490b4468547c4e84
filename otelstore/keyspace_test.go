package otelstore_test

import (
	"context"
	"errors"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
)

func newKeyspace(t *testing.T, h *harness) keyspace.Store {
	t.Helper()
	ks, err := otelstore.NewKeyspace(keyspace.NewMemory(), h.keyspaceOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

func transcript(wf eventstore.WorkflowID, run eventstore.RunID, n int) []keyspace.ActivityEvent {
	out := make([]keyspace.ActivityEvent, n)
	for i := range out {
		out[i] = keyspace.ActivityEvent{WorkflowID: wf, RunID: run, Attempt: 1, AgentID: "agent", WorkerSeq: uint64(i),
			Content: keyspace.Message{Role: "assistant", Text: "hello"}}
	}
	return out
}

// Every keyspace method makes one span named after its operation and one duration
// point; a committed batch records its size.
func TestKeyspaceCalls(t *testing.T) {
	h := newHarness(t)
	ks := newKeyspace(t, h)
	ctx := context.Background()
	wf, run := ids()
	events := transcript(wf, run, 3)
	key := keyspace.KeyOf(events[0])
	if _, err := ks.AppendEvents(ctx, 0, events); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.Head(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.ReadFrom(ctx, key, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.ListStreams(ctx, wf, run); err != nil {
		t.Fatal(err)
	}
	ops := []string{"append_events", "head", "read_from", "list_streams"}
	spans := h.spans.Ended()
	if len(spans) != len(ops) {
		t.Fatalf("got %d spans, want %d", len(spans), len(ops))
	}
	counts := h.histogramCounts(t, "aion.keyspace.operation.duration")
	for i, op := range ops {
		if spans[i].Name() != op {
			t.Errorf("span %d is %q, want %q", i, spans[i].Name(), op)
		}
		assertSpanAttr(t, spans[i], keyspaceSystem)
		assertSpanAttr(t, spans[i], otelstore.AttrWorkflowID.String(wf.String()))
		assertSpanAttr(t, spans[i], otelstore.AttrRunID.String(run.String()))
		if counts[distinct(ns, keyspaceSystem, semconv.DBOperationNameKey.String(op))] != 1 {
			t.Errorf("no duration point for %s: %v", op, counts)
		}
	}
	assertSpanAttr(t, spans[0], otelstore.AttrEventCount.Int(3))

	m := h.metrics(t)["aion.keyspace.append.batch_size"]
	hist, ok := m.Data.(metricdata.Histogram[int64])
	if !ok || len(hist.DataPoints) != 1 || hist.DataPoints[0].Count != 1 || hist.DataPoints[0].Sum != 3 {
		t.Fatalf("batch size %+v, want one sample of 3", m.Data)
	}
	if m.Unit != "{event}" {
		t.Errorf("batch size unit %q, want {event}", m.Unit)
	}
}

// A conflict is classified, and a failed batch records no size.
func TestKeyspaceConflict(t *testing.T) {
	h := newHarness(t)
	ks := newKeyspace(t, h)
	wf, run := ids()
	_, err := ks.AppendEvents(context.Background(), 5, transcript(wf, run, 2))
	var conflict *eventstore.SequenceConflictError
	if !errors.As(err, &conflict) || conflict.Found != 0 {
		t.Fatalf("got %v, want a conflict with Found=0", err)
	}
	assertSpanAttr(t, h.spans.Ended()[0], semconv.ErrorTypeKey.String("sequence_conflict"))
	assertSpanAttr(t, h.spans.Ended()[0], otelstore.AttrFoundSeq.Int64(0))
	counts := h.histogramCounts(t, "aion.keyspace.operation.duration")
	if counts[distinct(ns, keyspaceSystem, semconv.DBOperationNameKey.String("append_events"), semconv.ErrorTypeKey.String("sequence_conflict"))] != 1 {
		t.Errorf("duration points %v, want one sequence_conflict", counts)
	}
	if _, ok := h.metrics(t)["aion.keyspace.append.batch_size"]; ok {
		t.Error("a refused batch recorded a batch size")
	}
}

// The keyspace call metrics carry the keyspace's namespace
// (WithKeyspaceNamespace), so that every dashboard query can filter by it;
// two keyspaces of two namespaces on one meter provider make two series.
func TestKeyspaceCallMetricsCarryTheNamespace(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	for _, namespace := range []string{"payments", "search"} {
		ks, err := otelstore.NewKeyspace(keyspace.NewMemory(), h.keyspaceOptions(otelstore.WithKeyspaceNamespace(namespace))...)
		if err != nil {
			t.Fatal(err)
		}
		wf, run := ids()
		if _, err := ks.AppendEvents(ctx, 0, transcript(wf, run, 2)); err != nil {
			t.Fatal(err)
		}
	}
	op := semconv.DBOperationNameKey.String("append_events")
	counts := h.histogramCounts(t, "aion.keyspace.operation.duration")
	batches := histogramPoints[int64](t, h, "aion.keyspace.append.batch_size", nil)
	for _, namespace := range []string{"payments", "search"} {
		nsAttr := otelstore.AttrNamespace.String(namespace)
		if counts[distinct(nsAttr, keyspaceSystem, op)] != 1 {
			t.Errorf("duration points %v, want one for namespace %s", counts, namespace)
		}
		if p := batches[distinct(nsAttr)]; p.count != 1 || p.sum != 2 {
			t.Errorf("batch size of namespace %s = %+v, want one sample of 2", namespace, p)
		}
	}
	if len(counts) != 2 || len(batches) != 2 {
		t.Errorf("%d duration and %d batch-size series, want 2 each (one per namespace)", len(counts), len(batches))
	}
	for _, sp := range h.spans.Ended() {
		if v, ok := attrOf(sp.Attributes(), otelstore.AttrNamespace); !ok || (v != "payments" && v != "search") {
			t.Errorf("span %s: aion.namespace %q (present %v), want the keyspace's", sp.Name(), v, ok)
		}
	}
}

// attrOf returns the string value of key among attrs.
func attrOf(attrs []attribute.KeyValue, key attribute.Key) (string, bool) {
	for _, kv := range attrs {
		if kv.Key == key {
			return kv.Value.String(), true
		}
	}
	return "", false
}

func TestKeyspaceUnwrap(t *testing.T) {
	inner := keyspace.NewMemory()
	ks, err := otelstore.NewKeyspace(inner)
	if err != nil {
		t.Fatal(err)
	}
	if u, ok := ks.(interface{ Unwrap() keyspace.Store }); !ok || u.Unwrap() != keyspace.Store(inner) {
		t.Fatal("Unwrap does not return the inner keyspace")
	}
}
