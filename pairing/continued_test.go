package pairing

import (
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// TestContinuedAsNewOtherWorkflow: a ContinuedAsNew observed in one
// workflow's history closes its run as continued_as_new, and the run
// span's next_run link goes to the run (NewWorkflowID, NewRunID): the
// trace of that run's span, observed in its own workflow. A zero
// NewWorkflowID is the closing run's workflow, as the eventstore event
// alone; a next run that is the closing run itself gets no link.
func TestContinuedAsNewOtherWorkflow(t *testing.T) {
	env := func(wf eventstore.WorkflowID, run eventstore.RunID, seq uint64, ms int) eventstore.Envelope {
		return eventstore.Envelope{WorkflowID: wf, RunID: run, Seq: seq, RecordedAt: ts(ms)}
	}
	testCases := []struct {
		name     string
		close    eventstore.Event
		nextWF   eventstore.WorkflowID // where the next run is observed
		nextRun  eventstore.RunID
		wantLink bool
	}{
		{"another workflow", ContinuedAsNew{
			WorkflowContinuedAsNew: eventstore.WorkflowContinuedAsNew{Envelope: env(wfID(1), runID(1), 2, 40), NewRunID: runID(2)},
			NewWorkflowID:          wfID(2)}, wfID(2), runID(2), true},
		{"zero workflow: the same one", ContinuedAsNew{
			WorkflowContinuedAsNew: eventstore.WorkflowContinuedAsNew{Envelope: env(wfID(1), runID(1), 2, 40), NewRunID: runID(2)}}, wfID(1), runID(2), true},
		{"the eventstore event", eventstore.WorkflowContinuedAsNew{Envelope: env(wfID(1), runID(1), 2, 40), NewRunID: runID(2)}, wfID(1), runID(2), true},
		{"the run itself", ContinuedAsNew{
			WorkflowContinuedAsNew: eventstore.WorkflowContinuedAsNew{Envelope: env(wfID(1), runID(1), 2, 40), NewRunID: runID(1)},
			NewWorkflowID:          wfID(1)}, wfID(3), runID(3), false},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.tr.Observe(bg, "n", wfID(1), 0, []eventstore.Event{
				eventstore.WorkflowStarted{Envelope: env(wfID(1), runID(1), 1, 0), WorkflowType: "first"},
				tc.close,
			})
			// The next run, in its workflow's history: its own positions.
			seq := uint64(1)
			if tc.nextWF == wfID(1) {
				seq = 3
			}
			h.tr.Observe(bg, "n", tc.nextWF, 0, []eventstore.Event{
				eventstore.WorkflowStarted{Envelope: env(tc.nextWF, tc.nextRun, seq, 40), WorkflowType: "next"},
				eventstore.WorkflowCompleted{Envelope: env(tc.nextWF, tc.nextRun, seq+1, 90)},
			})
			var first, next sdktrace.ReadOnlySpan
			for _, s := range h.spans.Ended() {
				switch s.Name() {
				case "workflow first":
					first = s
				case "workflow next":
					next = s
				}
			}
			if first == nil || next == nil {
				t.Fatalf("run spans: first %v, next %v", first != nil, next != nil)
			}
			wantAttr(t, first, catalog.WorkflowStatus.String("continued_as_new"))
			link, ok := linkRoles(t, first)[catalog.LinkNextRun]
			if ok != tc.wantLink {
				t.Fatalf("next_run link %v (%v), want one: %v", link, ok, tc.wantLink)
			}
			if ok && link.TraceID() != next.SpanContext().TraceID() {
				t.Errorf("next_run link to trace %v, the next run's span is in trace %v", link.TraceID(), next.SpanContext().TraceID())
			}
		})
	}
}
