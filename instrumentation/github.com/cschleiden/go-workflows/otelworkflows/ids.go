package otelworkflows

import (
	"context"
	"sync"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"

	"github.com/aionotel/aionotel/eventstore"
)

// idNames remembers, for the run and activity spans the tracker makes,
// which go-workflows instance and execution a derived key stands for, so
// that those spans carry go_workflows.instance.id and
// go_workflows.execution.id beside the derived aion.workflow.id. Bounded:
// at most max keys, the oldest forgotten first (a span of a forgotten key
// carries the derived ID only).
type idNames struct {
	mu   sync.RWMutex
	ids  map[string][2]string // derived key's text -> instance, execution
	ring []string
	next int
	max  int
}

func newIDNames(max int) *idNames {
	return &idNames{ids: make(map[string][2]string), max: max}
}

func (n *idNames) remember(wf eventstore.WorkflowID, instanceID, executionID string) {
	k := wf.String()
	n.mu.RLock()
	_, ok := n.ids[k]
	n.mu.RUnlock()
	if ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, ok := n.ids[k]; ok {
		return
	}
	n.ids[k] = [2]string{clean(instanceID), clean(executionID)}
	if len(n.ring) < n.max {
		n.ring = append(n.ring, k)
		return
	}
	delete(n.ids, n.ring[n.next])
	n.ring[n.next] = k
	n.next = (n.next + 1) % n.max
}

// extra returns the go-workflows IDs for the aion.workflow.id among attrs.
func (n *idNames) extra(attrs []attribute.KeyValue) []attribute.KeyValue {
	for _, kv := range attrs {
		if kv.Key == keyWorkflowID && kv.Value.Type() == attribute.STRING {
			n.mu.RLock()
			ids, ok := n.ids[kv.Value.AsString()]
			n.mu.RUnlock()
			if ok {
				return []attribute.KeyValue{attribute.String(keyInstanceID, ids[0]), attribute.String(keyExecutionID, ids[1])}
			}
		}
	}
	return nil
}

// namingProvider is the tracer provider the tracker New makes is given:
// its spans are the provider's, with the go-workflows IDs added where the
// tracker sets the derived one. nil inner: the global provider, at each
// Tracer call (as the tracker would use it).
type namingProvider struct {
	embedded.TracerProvider
	inner trace.TracerProvider
	names *idNames
}

func (p *namingProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	inner := p.inner
	if inner == nil {
		inner = otel.GetTracerProvider()
	}
	return &namingTracer{inner: inner.Tracer(name, opts...), names: p.names}
}

type namingTracer struct {
	embedded.Tracer
	inner trace.Tracer
	names *idNames
}

func (t *namingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, span := t.inner.Start(ctx, name, opts...)
	if !span.IsRecording() {
		return ctx, span
	}
	cfg := trace.NewSpanStartConfig(opts...)
	if extra := t.names.extra(cfg.Attributes()); extra != nil {
		span.SetAttributes(extra...)
	}
	return ctx, &namingSpan{Span: span, names: t.names}
}

// namingSpan adds the go-workflows IDs when the derived one is set.
type namingSpan struct {
	trace.Span
	names *idNames
}

func (s *namingSpan) SetAttributes(kv ...attribute.KeyValue) {
	if extra := s.names.extra(kv); extra != nil {
		kv = append(kv[:len(kv):len(kv)], extra...)
	}
	s.Span.SetAttributes(kv...)
}
