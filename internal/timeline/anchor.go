// Package timeline derives the trace identity of a workflow run, so that
// every process that observes a run's history puts its spans and log records
// in the same trace without sharing state.
//
// A run's trace ID and its root span ID are a hash of (namespace, workflow
// ID, run ID), and an activity's span ID a hash of the same plus the
// activity's position. [Root] is the span context of the run span when the
// span's IDs are derived (the pairing package's ID generator derives them);
// otherwise it is an anchor that is never exported, the parent of the run
// span and of any span that joins the run without holding its run span.
package timeline

import (
	"crypto/sha256"
	"encoding/binary"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// The domains separate these hashes from each other and from any other use
// of the same IDs. The run's is unchanged since v1, so traces keep their IDs.
const (
	runDomain      = "aionotel/timeline/v1\x00"
	activityDomain = "aionotel/timeline/activity/v1\x00"
)

// Root returns the remote, sampled span context of the run (namespace,
// workflowID, runID): its trace ID is the run's trace, its span ID that of
// the run span when IDs are derived, else the anchor the run span hangs
// under. The empty namespace is hashed as given: callers normalise it first.
func Root(namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID) trace.SpanContext {
	sum := runHash(runDomain, namespace, workflowID, runID, nil)
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

// Anchor is [Root]: the name the run's derived parent had before IDs could
// be derived.
func Anchor(namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID) trace.SpanContext {
	return Root(namespace, workflowID, runID)
}

// ActivitySpanID returns the derived span ID of the activity at position
// activityID of the run.
func ActivitySpanID(namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID, activityID eventstore.ActivityID) trace.SpanID {
	var pos [8]byte
	binary.BigEndian.PutUint64(pos[:], uint64(activityID))
	sum := runHash(activityDomain, namespace, workflowID, runID, pos[:])
	var sid trace.SpanID
	copy(sid[:], sum[:8])
	if !sid.IsValid() {
		sid[7] = 1
	}
	return sid
}

// runHash hashes domain, the run's identity and extra.
func runHash(domain, namespace string, workflowID eventstore.WorkflowID, runID eventstore.RunID, extra []byte) [sha256.Size]byte {
	// One buffer on the stack for the usual namespace lengths: no
	// allocation per span.
	var buf [160]byte
	in := append(buf[:0], domain...)
	in = append(in, namespace...)
	in = append(in, 0)
	in = append(in, workflowID[:]...)
	in = append(in, runID[:]...)
	in = append(in, extra...)
	return sha256.Sum256(in)
}
