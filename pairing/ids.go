package pairing

import (
	"context"
	"encoding/binary"
	"math/rand/v2"

	"go.opentelemetry.io/otel/trace"
)

// IDGenerator is the method set of the OpenTelemetry SDK's
// go.opentelemetry.io/otel/sdk/trace.IDGenerator, so that this package
// offers one without depending on the SDK.
type IDGenerator interface {
	// NewIDs returns a new trace ID and span ID, for a root span.
	NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID)
	// NewSpanID returns a new span ID for a span in the trace traceID.
	NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID
}

// NewIDGenerator returns an ID generator for the SDK's TracerProvider
// (sdktrace.WithIDGenerator) that gives the timeline's spans IDs derived
// from the run, and asks inner for every other span's (nil: random IDs, as
// the SDK's default generator gives). With it installed:
//
//	tp := sdktrace.NewTracerProvider(
//		sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)),
//		sdktrace.WithBatcher(exporter))
//
// a run span is a true root whose trace and span IDs are derived from
// (namespace, workflow, run), and every activity span is its child with an
// ID derived from the activity, whichever process or tracker makes each
// span and in whatever order their facts arrive; the trace has no missing
// parent. Without it a run span is the child of a derived anchor that is
// never exported, as before.
//
// The generator derives IDs only for spans that ask for them through their
// context (the trackers' own); it is safe for concurrent use if inner is.
func NewIDGenerator(inner IDGenerator) IDGenerator {
	if inner == nil {
		inner = randomIDs{}
	}
	return derivedIDs{inner: inner}
}

type derivedIDs struct{ inner IDGenerator }

func (g derivedIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if r, ok := ctx.Value(idRequestKey{}).(idRequest); ok && r.run {
		return r.trace, r.span
	}
	return g.inner.NewIDs(ctx)
}

func (g derivedIDs) NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID {
	if r, ok := ctx.Value(idRequestKey{}).(idRequest); ok && !r.run && r.trace == traceID {
		return r.span
	}
	return g.inner.NewSpanID(ctx, traceID)
}

// randomIDs gives random, valid IDs from math/rand/v2, which is safe for
// concurrent use.
type randomIDs struct{}

func (randomIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	var tid trace.TraceID
	for !tid.IsValid() {
		binary.NativeEndian.PutUint64(tid[:8], rand.Uint64())
		binary.NativeEndian.PutUint64(tid[8:], rand.Uint64())
	}
	return tid, randomIDs{}.NewSpanID(ctx, tid)
}

func (randomIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.NativeEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}
