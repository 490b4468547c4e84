package timeline

import (
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// The anchor is a pure function of (namespace, workflow, run): valid,
// sampled, remote, the same on every call, and different when any part
// differs, including a namespace whose bytes could run into the IDs.
func TestAnchorDerivedFromTheRun(t *testing.T) {
	wf, run := eventstore.WorkflowID{1}, eventstore.RunID{2}
	a := Anchor("shop", wf, run)
	if !a.IsValid() || !a.IsSampled() || !a.IsRemote() {
		t.Fatalf("anchor %v: want valid, sampled and remote", a)
	}
	if b := Anchor("shop", wf, run); !b.Equal(a) {
		t.Errorf("anchor changed between calls: %v, %v", a, b)
	}
	seen := map[trace.TraceID]string{a.TraceID(): "shop"}
	for name, other := range map[string]trace.SpanContext{
		"namespace":     Anchor("shop2", wf, run),
		"empty ns":      Anchor("", wf, run),
		"workflow":      Anchor("shop", eventstore.WorkflowID{3}, run),
		"run":           Anchor("shop", wf, eventstore.RunID{3}),
		"shifted bytes": Anchor("shop\x00", eventstore.WorkflowID{}, run),
		"long ns":       Anchor(strings.Repeat("n", 1000), wf, run),
	} {
		if prev, dup := seen[other.TraceID()]; dup {
			t.Errorf("%s: same trace as %s", name, prev)
		}
		seen[other.TraceID()] = name
	}
}

// Hashing on the stack: an anchor costs no allocation for usual namespaces.
func TestAnchorDoesNotAllocate(t *testing.T) {
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	if n := testing.AllocsPerRun(100, func() { _ = Anchor("payments", wf, run) }); n != 0 {
		t.Errorf("%v allocations per anchor, want 0", n)
	}
}
