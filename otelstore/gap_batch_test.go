package otelstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
)

// batchInner is a Memory that reads histories in batches (as pgstore
// does), counting its batch and single reads.
type batchInner struct {
	*eventstore.Memory
	mu              sync.Mutex
	batches, single int
	workflows       int
}

func (b *batchInner) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	b.mu.Lock()
	b.single++
	b.mu.Unlock()
	return b.Memory.ReadHistory(ctx, wf)
}

func (b *batchInner) ReadHistoryFrom(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
	b.mu.Lock()
	b.single++
	b.mu.Unlock()
	return b.Memory.ReadHistoryFrom(ctx, wf, from)
}

func (b *batchInner) ReadHistories(ctx context.Context, wfs []eventstore.WorkflowID) ([][]eventstore.Event, error) {
	b.mu.Lock()
	b.batches++
	b.workflows += len(wfs)
	b.mu.Unlock()
	out := make([][]eventstore.Event, len(wfs))
	for i, wf := range wfs {
		h, err := b.Memory.ReadHistory(ctx, wf)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// Over an inner store that reads histories in batches, the gaps of an
// adoption are filled through ReadHistories, never one history at a time
// (the first gaps may each be a batch of one; a burst shares calls), and
// Flush waits for them all: every orphaned run's completion is recorded.
func TestGapFillsUseTheInnerBatchRead(t *testing.T) {
	const n = 300
	ctx, tok := context.Background(), eventstore.RecorderToken()
	inner := &batchInner{Memory: eventstore.NewMemory()}
	predecessor := newHarness(t)
	before := predecessor.wrap(t, inner.Memory)
	wfs := make([]eventstore.WorkflowID, n)
	runs := make([]eventstore.RunID, n)
	for i := range wfs {
		wfs[i], runs[i] = ids()
		if err := before.Append(ctx, tok, wfs[i], []eventstore.Event{
			eventstore.WorkflowStarted{Envelope: env(runs[i], 0), WorkflowType: "flow"},
			eventstore.ActivityScheduled{Envelope: env(runs[i], time.Second), ActivityID: 0, ActivityType: "charge"},
		}, 0); err != nil {
			t.Fatal(err)
		}
	}
	h := newHarness(t)
	after := h.wrap(t, inner)
	for i, wf := range wfs {
		if err := after.Append(ctx, tok, wf, []eventstore.Event{
			eventstore.ActivityCompleted{Envelope: env(runs[i], 4*time.Second), ActivityID: 0},
			eventstore.WorkflowCompleted{Envelope: env(runs[i], 6*time.Second)},
		}, 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := otelstore.Flush(ctx, after); err != nil {
		t.Fatal(err)
	}
	inner.mu.Lock()
	batches, single, read := inner.batches, inner.single, inner.workflows
	inner.mu.Unlock()
	if single != 0 || read != n || batches == 0 || batches > n {
		t.Errorf("%d ReadHistories calls for %d workflows and %d single reads; want the %d gaps read in batches only", batches, read, single, n)
	}
	h.assertSum(t, "aion.activities.completed", true, point(n, ns, charge, succeeded))
}
