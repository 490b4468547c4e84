package otelworkflows

import (
	"context"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/core"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/pairing"
)

// observeTask feeds what a completed workflow task committed to the
// instance's history: the workflow counters, then the batch, at its
// sequence IDs, to the tracker; the activities it scheduled are staged
// (waiting for a worker's GetActivityTask).
func (d *decorated) observeTask(ctx context.Context, wi *core.WorkflowInstance, wf eventstore.WorkflowID, executed, activityEvents []*history.Event) {
	if len(executed) == 0 {
		return
	}
	if d.names != nil {
		d.names.remember(wf, wi.InstanceID, wi.ExecutionID)
	}
	events := make([]eventstore.Event, 0, len(executed))
	for _, e := range executed {
		if e == nil {
			continue
		}
		tr := translate(wf, wi.InstanceID, e)
		events = append(events, tr.ev)
		switch {
		case tr.started:
			d.tel.workflowStarted(ctx, tr.start)
		case tr.status >= 0:
			d.tel.workflowClosed(ctx, tr.status)
		case tr.signal:
			d.tel.signalDelivered(ctx)
		case tr.retry:
			// A later attempt is its own dispatch (its own schedule event
			// ID); the retry is counted on it before it is observed, so
			// that it counts whatever happens to it next.
			d.tracker.Retried(ctx, pairing.Key{Namespace: d.ns, WorkflowID: wf, RunID: eventstore.RunID(wf), ActivityID: activityID(e)}, e.Timestamp.Round(0))
		}
	}
	d.tracker.Observe(ctx, d.ns, wf, 0, events)
	if len(activityEvents) > 0 {
		rows := make([]eventstore.OutboxRow, 0, len(activityEvents))
		for _, e := range activityEvents {
			if e != nil {
				rows = append(rows, eventstore.OutboxRow{WorkflowID: wf, RunID: eventstore.RunID(wf), Ordinal: activityID(e)})
			}
		}
		d.tracker.Staged(ctx, d.ns, wf, rows)
	}
}

// observeClaim records that a worker claimed an activity task at at: its
// wait ends (aion.activity.wait.duration from the ActivityScheduled), and
// an instance this process has not seen from its start is read.
func (d *decorated) observeClaim(ctx context.Context, t *backend.ActivityTask, at time.Time) {
	wf := keyOf(t.WorkflowInstance)
	if !d.known.has(wf) {
		d.reads.request(t.WorkflowInstance, wf)
	}
	if t.Event == nil {
		return
	}
	d.tracker.Claimed(ctx, d.ns, []eventstore.OutboxRow{{WorkflowID: wf, RunID: eventstore.RunID(wf), Ordinal: activityID(t.Event)}}, at)
}
