// Package timeline derives the trace identity of a workflow run, so that
// every process that observes a run's history puts its spans and log records
// in the same trace without sharing state.
//
// A run's trace ID and its anchor span ID are a hash of (namespace,
// workflow ID, run ID). The anchor is the parent of the run span and of any
// activity span whose run span this process does not hold; it is never
// exported itself, so trace backends show the run span as the trace's root
// with a parent they did not receive.
package timeline

import (
	"crypto/sha256"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// domain separates these hashes from any other use of the same IDs.
const domain = "aionotel/timeline/v1\x00"

// Anchor returns the remote, sampled span context that anchors the run
// (namespace, workflowID, runID): its trace ID is the run's trace, its span
// ID the parent of the run span. The empty namespace is hashed as given:
// callers normalise it first.
func Anchor(namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID) trace.SpanContext {
	// One buffer on the stack for the usual namespace lengths: no
	// allocation per span.
	var buf [128]byte
	in := append(buf[:0], domain...)
	in = append(in, namespace...)
	in = append(in, 0)
	in = append(in, workflowID[:]...)
	in = append(in, runID[:]...)
	sum := sha256.Sum256(in)
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], sum[:16])
	copy(sid[:], sum[16:24])
	// A hash is all zeros with negligible probability; W3C forbids it, so
	// make sure.
	if !tid.IsValid() {
		tid[15] = 1
	}
	if !sid.IsValid() {
		sid[7] = 1
	}
	return trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    tid,
		SpanID:     sid,
		TraceFlags: trace.FlagsSampled,
		Remote:     true,
	})
}
