package otelstore

import (
	"context"
	"sync"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/pairing"
)

// appending counts this decorator's appends in progress per workflow, so
// that a gap fill reads a workflow's history only once they have returned
// and been observed. Appends to one workflow from one process often return
// out of order (a dispatch's call still returning while its terminal's
// already did): the later batch looks like a gap, but the missing positions
// are this process's own and are about to be observed with their store
// calls. Reading history first would record the activity from read-back
// facts, and its span would lose the link to the call that wrote its
// dispatch. Waiting here makes such a fill find its gap closed (pairing
// counts it skipped, with no read); a real gap (a restart, another node's
// writes) is read once the local appends drain.
//
// The cost is one mutex and one map update at the start and end of each
// append; a fill waiting here holds one of the tracker's fill slots.
type appending struct {
	mu   sync.Mutex
	n    map[eventstore.WorkflowID]int
	idle map[eventstore.WorkflowID]chan struct{}
}

func newAppending() *appending {
	return &appending{n: map[eventstore.WorkflowID]int{}, idle: map[eventstore.WorkflowID]chan struct{}{}}
}

// begin counts an append to wf in progress; the caller defers end.
func (a *appending) begin(wf eventstore.WorkflowID) {
	a.mu.Lock()
	a.n[wf]++
	a.mu.Unlock()
}

// end counts it returned (and observed), waking the fills of wf when it was
// the last one.
func (a *appending) end(wf eventstore.WorkflowID) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n[wf]--; a.n[wf] > 0 {
		return
	}
	delete(a.n, wf)
	if ch, ok := a.idle[wf]; ok {
		close(ch)
		delete(a.idle, wf)
	}
}

// wait returns once no append to wf is in progress, or ctx is done.
func (a *appending) wait(ctx context.Context, wf eventstore.WorkflowID) error {
	a.mu.Lock()
	if a.n[wf] == 0 {
		a.mu.Unlock()
		return nil
	}
	ch, ok := a.idle[wf]
	if !ok {
		ch = make(chan struct{})
		a.idle[wf] = ch
	}
	a.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gatedHistory is the inner store as the tracker's gap fills read it: each
// read waits for this decorator's appends to the workflow first.
type gatedHistory struct {
	inner eventstore.Store
	gate  *appending
}

func (g gatedHistory) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	if err := g.gate.wait(ctx, wf); err != nil {
		return nil, err
	}
	return g.inner.ReadHistory(ctx, wf)
}

func (g gatedHistory) ReadHistoryFrom(ctx context.Context, wf eventstore.WorkflowID, fromSeq uint64) ([]eventstore.Event, error) {
	if err := g.gate.wait(ctx, wf); err != nil {
		return nil, err
	}
	return g.inner.ReadHistoryFrom(ctx, wf, fromSeq)
}

// gatedHistories is gatedHistory over an inner store that reads histories
// in batches ([eventstore.HistoriesReader]), so that the tracker reads the
// gaps of many workflows in one call: the call waits for this decorator's
// appends to each of its workflows first.
type gatedHistories struct {
	gatedHistory
	batch eventstore.HistoriesReader
}

func (g gatedHistories) ReadHistories(ctx context.Context, wfs []eventstore.WorkflowID) ([][]eventstore.Event, error) {
	for _, wf := range wfs {
		if err := g.gate.wait(ctx, wf); err != nil {
			return nil, err
		}
	}
	return g.batch.ReadHistories(ctx, wfs)
}

// fillReader is the reader the tracker's gap fills use: inner, gated by
// this decorator's appends, with ReadHistories when inner has it.
func fillReader(inner eventstore.Store, gate *appending) pairing.HistoryReader {
	g := gatedHistory{inner: inner, gate: gate}
	if b, ok := inner.(eventstore.HistoriesReader); ok {
		return gatedHistories{gatedHistory: g, batch: b}
	}
	return g
}
