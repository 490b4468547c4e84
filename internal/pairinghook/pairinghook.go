// Package pairinghook is how otelstore hands a pairing.Tracker the look
// at the global tracer provider that its call already took (a
// livetracer.Lookup), so that a decorated call looks the provider up once:
// pairing's exported methods each take a look of their own. Package
// pairing sets For when it is initialised; only this module reaches it.
package pairinghook

import (
	"context"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/livetracer"
)

// Calls are the methods of one tracker that a decorated write calls, each
// with the write's Lookup.
type Calls struct {
	// ObserveFrom is Tracker.ObserveFrom, with the history reader given
	// to For.
	ObserveFrom func(ctx context.Context, lk livetracer.Lookup, namespace string, workflowID eventstore.WorkflowID, firstSeq uint64, events []eventstore.Event)
	// Staged is Tracker.Staged.
	Staged func(ctx context.Context, lk livetracer.Lookup, namespace string, workflowID eventstore.WorkflowID, rows []eventstore.OutboxRow) int
	// Claimed is Tracker.Claimed.
	Claimed func(ctx context.Context, lk livetracer.Lookup, namespace string, rows []eventstore.OutboxRow, at time.Time) int
}

// For returns the Calls of tracker, a *pairing.Tracker, whose gaps
// ObserveFrom fills from history, a pairing.HistoryReader or nil. Set by
// package pairing.
var For func(tracker, history any) Calls
