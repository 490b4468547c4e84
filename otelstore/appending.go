package otelstore

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"

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
// The counts are kept in appendingSlots atomic counters, a workflow's
// chosen by a hash of its ID: an append costs two atomic adds (and a lock
// only while a fill waits), where a mutex and a map update at each end
// cost about 400 ns under contention (BenchmarkAppendingGate). A fill
// waits for its slot to drain, so it may also wait for the appends in
// progress to another workflow whose ID shares its slot: they return as
// promptly as its own. A fill waiting here holds one of the tracker's
// fill slots.
type appending struct {
	slots [appendingSlots]atomic.Int64
	// waiting counts the fills registered in idle; the append path takes
	// mu only when it is not zero.
	waiting atomic.Int64
	mu      sync.Mutex
	idle    map[uint32]*drain // by slot
}

// drain is closed when its slot drains; n counts the fills waiting on it.
type drain struct {
	ch chan struct{}
	n  int
}

// appendingSlots is the number of counters: with 400 appends in progress
// at once, a slot is busy about one time in ten.
const appendingSlots = 4096

func newAppending() *appending {
	return &appending{idle: map[uint32]*drain{}}
}

// slot is the counter of wf's appends: the low bits of a mix of its ID
// (random UUIDs, but a caller may choose sequential ones).
func slot(wf eventstore.WorkflowID) uint32 {
	le := binary.LittleEndian
	h := (le.Uint64(wf[:8]) ^ le.Uint64(wf[8:])*0x9e3779b97f4a7c15) * 0xff51afd7ed558ccd
	return uint32(h>>40) % appendingSlots
}

// begin counts an append to wf in progress; the caller defers end.
func (a *appending) begin(wf eventstore.WorkflowID) {
	a.slots[slot(wf)].Add(1)
}

// end counts it returned (and observed), waking the fills waiting on wf's
// slot when it was the last one there. The add and the load of waiting
// pair with wait's add of waiting and load of the slot (sequentially
// consistent atomics): an end that finds no fill waiting is seen by the
// fill, which then does not wait.
func (a *appending) end(wf eventstore.WorkflowID) {
	i := slot(wf)
	if a.slots[i].Add(-1) > 0 || a.waiting.Load() == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if d, ok := a.idle[i]; ok && a.slots[i].Load() == 0 {
		close(d.ch)
		delete(a.idle, i)
	}
}

// wait returns once no append to wf (or to a workflow sharing its slot) is
// in progress, or ctx is done.
func (a *appending) wait(ctx context.Context, wf eventstore.WorkflowID) error {
	i := slot(wf)
	if a.slots[i].Load() == 0 {
		return nil
	}
	a.mu.Lock()
	a.waiting.Add(1)
	defer a.waiting.Add(-1)
	if a.slots[i].Load() == 0 {
		a.mu.Unlock()
		return nil
	}
	d, ok := a.idle[i]
	if !ok {
		d = &drain{ch: make(chan struct{})}
		a.idle[i] = d
	}
	d.n++
	a.mu.Unlock()
	select {
	case <-d.ch:
		return nil
	case <-ctx.Done():
		a.mu.Lock()
		defer a.mu.Unlock()
		if d.n--; d.n == 0 && a.idle[i] == d {
			delete(a.idle, i) // the last fill waiting on it gave up
		}
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
