package pairing

import (
	"context"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/livetracer"
	"github.com/aionotel/aionotel/internal/pairinghook"
)

// otelstore reaches a tracker through pairinghook, so that the tracker
// uses the store call's look at the global tracer provider.
func init() {
	pairinghook.For = func(tracker, history any) pairinghook.Calls {
		t := tracker.(*Tracker)
		h, _ := history.(HistoryReader)
		return pairinghook.Calls{
			ObserveFrom: func(ctx context.Context, lk livetracer.Lookup, namespace string, workflowID eventstore.WorkflowID, firstSeq uint64, events []eventstore.Event) {
				t.observeFrom(ctx, lk, h, namespace, workflowID, firstSeq, events)
			},
			Staged: func(ctx context.Context, lk livetracer.Lookup, namespace string, workflowID eventstore.WorkflowID, rows []eventstore.OutboxRow) int {
				return t.staged(ctx, lk, namespace, workflowID, rows)
			},
			Claimed: func(ctx context.Context, lk livetracer.Lookup, namespace string, rows []eventstore.OutboxRow, at time.Time) int {
				return t.claimed(ctx, lk, namespace, rows, at)
			},
		}
	}
}
