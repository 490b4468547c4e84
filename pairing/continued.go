package pairing

import "github.com/aionotel/aionotel/eventstore"

// ContinuedAsNew is a continue-as-new whose next run the tracker keys under
// another workflow ID: what an engine adapter gives [Tracker.Observe] (and
// a [Tracker.Resume] source) when the engine's run chain does not map onto
// one eventstore workflow. otelworkflows keys each go-workflows execution
// as a workflow of its own, since each execution's history is numbered
// from 1; its continue-as-new names the next execution's key as both
// NewWorkflowID and NewRunID.
//
// The tracker reads it as the embedded [eventstore.WorkflowContinuedAsNew]
// (a close with status continued_as_new at the envelope's position), and
// the closed run's span links (aion.timeline.link next_run) to the root of
// the run (NewWorkflowID, NewRunID), the trace that run gets in any
// process. A zero NewWorkflowID is the closing run's own workflow, as for
// the embedded event alone.
//
// It is an [eventstore.Event] by embedding, for the tracker only: a store
// keeps the embedded event (eventstore.WithEnvelope returns it), without
// NewWorkflowID.
type ContinuedAsNew struct {
	eventstore.WorkflowContinuedAsNew
	// NewWorkflowID is the workflow ID the next run (NewRunID) is keyed
	// under.
	NewWorkflowID eventstore.WorkflowID
}

// nextRun returns the run a closed run's span links to as its next one:
// the close's next run, in the close's next workflow or else in the run's
// own; none when the close names no next run or names the run itself.
func (w *spanWork) nextRun() (eventstore.WorkflowID, eventstore.RunID, bool) {
	if w.next == (eventstore.RunID{}) {
		return eventstore.WorkflowID{}, eventstore.RunID{}, false
	}
	wf := w.key.WorkflowID
	if w.nextWF != (eventstore.WorkflowID{}) {
		wf = w.nextWF
	}
	if wf == w.key.WorkflowID && w.next == w.key.RunID {
		return eventstore.WorkflowID{}, eventstore.RunID{}, false
	}
	return wf, w.next, true
}
