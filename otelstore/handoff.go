package otelstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/pairing"
)

// ErrNotDecorated is returned by [Resume] and [Flush] for a store that [New] did not
// return.
var ErrNotDecorated = errors.New("otelstore: not a store returned by otelstore.New")

// Resume reads the open workflows of the store s wraps (s must be a store
// [New] returned) and resumes its pairing tracker from their histories:
// after a restart, the in-flight gauge and the oldest-in-flight age are
// what history says, and a terminal or close that commits later records
// its completion, duration and spans at history's times. See
// pairing.Tracker.Resume for what is resumed, what is not counted again and
// what it costs; the reads go to the inner store directly, without spans.
// Appends may go on meanwhile: Resume returns once the gap fills their
// first writes began for the workflows it read have ended, so that when
// it and they have returned the telemetry of those workflows is exact.
// It does not wait for what it did not read: the fills of runs closed
// before it listed them, or the resumes the decorator runs by itself when
// it adopts shards; [Flush] waits for those.
// For a [eventstore.ShardOwner] store the workflows are those of its
// enumeration scope; the decorator also resumes shards by itself as it
// adopts them (see [New]).
func Resume(ctx context.Context, s eventstore.Store, opts ...pairing.ResumeOption) (pairing.ResumeReport, error) {
	c, ok := s.(interface{ decorated() *core })
	if !ok {
		return pairing.ResumeReport{}, ErrNotDecorated
	}
	d := c.decorated()
	return d.life.tracker.Resume(ctx, d.life.namespace, d.inner, opts...)
}

func (s *core) decorated() *core { return s }

// handoff follows which shards this node serves, as its calls to the
// ShardOwner methods tell, and keeps the pairing tracker to them: a shard
// it starts serving is resumed from history (in the background), one it
// stops serving is released.
//
// A shard is served when it is in the enumeration scope (SetOwnedShards,
// ExtendOwnedShards; every shard before a scope is set) and, once the node
// has run an election, held: acquired (AcquireOwnedShard(s), or
// IsCurrentOwner said so) and not lost since (IsCurrentOwner said it is
// not, or a write to one of its workflows was refused with ErrNotOwner).
// Workflows of a shard lost that way are not observed until it is served
// again.
type handoff struct {
	inner   eventstore.Store
	tracker *pairing.Tracker
	ns      string
	shards  int // shard count
	report  func(pairing.ResumeReport, error)
	handle  func(error)

	mu        sync.Mutex
	scope     map[int]bool // nil: every shard
	elections bool         // a shard was ever acquired through this decorator
	held      map[int]bool
	resumed   map[int]bool // served and resumed (or being resumed)
	lost      map[int]bool // lost to another node: not observed
	queue     [][]int      // shard sets waiting to be resumed
	running   bool
	idle      chan struct{} // closed when the running drain stops; nil when none runs
	// anyLost is whether lost has a shard: the appends' fast path reads it
	// without the lock.
	anyLost atomic.Bool
}

// newHandoff returns the handoff of a ShardOwner store, or nil when the
// decorator cannot tell which shard a workflow is in: neither
// WithShardCount nor the store (a ShardCount method) says how many there
// are, and a guess would release the wrong workflows.
func newHandoff(c *config, inner eventstore.Store, life *lifecycle) *handoff {
	n := c.shardCount
	if n <= 0 {
		if sc, ok := inner.(interface{ ShardCount() int }); ok {
			n = sc.ShardCount()
		}
	}
	if n <= 0 {
		return nil
	}
	return &handoff{
		inner: inner, tracker: life.tracker, ns: life.namespace, shards: n,
		report: c.resumeReport, handle: c.handle,
		held: map[int]bool{}, resumed: map[int]bool{}, lost: map[int]bool{},
	}
}

// served reports whether shard s is served now; h.mu is held.
func (h *handoff) served(s int) bool {
	if h.scope != nil && !h.scope[s] {
		return false
	}
	return !h.elections || h.held[s]
}

// update applies a change of the node's shards (under h.mu, by change) and
// then resumes what is newly served and releases what no longer is.
//
// A shard served before the change and not after is released also when it
// was never resumed: before any scope or election every shard is served,
// and the tracker holds what this node wrote to it.
func (h *handoff) update(ctx context.Context, change func()) {
	h.mu.Lock()
	before := make([]bool, h.shards)
	for s := range h.shards {
		before[s] = h.served(s)
	}
	change()
	var resume, release []int
	for s := range h.shards {
		switch served := h.served(s); {
		case served && !h.resumed[s]:
			h.resumed[s] = true
			delete(h.lost, s)
			h.anyLost.Store(len(h.lost) > 0)
			resume = append(resume, s)
		case !served && (h.resumed[s] || before[s]):
			delete(h.resumed, s)
			release = append(release, s)
		}
	}
	if len(resume) > 0 {
		h.queue = append(h.queue, resume)
		if !h.running {
			h.running = true
			h.idle = make(chan struct{})
			go h.drain()
		}
	}
	h.mu.Unlock()
	if len(release) > 0 {
		h.tracker.ReleaseShards(ctx, h.ns, h.shards, release...)
	}
}

// drain resumes the queued shard sets one after the other, then stops. A
// shard released while its resume ran is released again after it.
func (h *handoff) drain() {
	for {
		h.mu.Lock()
		if len(h.queue) == 0 {
			h.running = false
			close(h.idle)
			h.idle = nil
			h.mu.Unlock()
			return
		}
		shards := h.queue[0]
		h.queue = h.queue[1:]
		h.mu.Unlock()

		report, err := h.tracker.Resume(context.Background(), h.ns, h.inner, pairing.WithResumeShards(h.shards, shards...))
		h.mu.Lock()
		stale := slices.DeleteFunc(slices.Clone(shards), func(s int) bool { return h.resumed[s] })
		h.mu.Unlock()
		if len(stale) > 0 {
			h.tracker.ReleaseShards(context.Background(), h.ns, h.shards, stale...)
		}
		h.reportResume(report, err)
	}
}

// waitResumed waits until no resume of shards is queued or running (those
// queued meanwhile too), or until ctx ends, whose error it then returns.
func (h *handoff) waitResumed(ctx context.Context) error {
	if h == nil {
		return nil
	}
	for {
		h.mu.Lock()
		idle := h.idle
		h.mu.Unlock()
		if idle == nil {
			return nil
		}
		select {
		case <-idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// reportResume hands a report to WithResumeReports, or an error to the
// error handler.
func (h *handoff) reportResume(report pairing.ResumeReport, err error) {
	defer func() {
		if r := recover(); r != nil {
			h.handle(fmt.Errorf("otelstore: WithResumeReports: panic: %v", r))
		}
	}()
	switch {
	case h.report != nil:
		h.report(report, err)
	case err != nil:
		h.handle(err)
	}
}

func (h *handoff) setScope(ctx context.Context, shards []int) {
	if h == nil {
		return
	}
	h.update(ctx, func() {
		if shards == nil {
			h.scope = nil
			return
		}
		h.scope = make(map[int]bool, len(shards))
		for _, s := range shards {
			h.scope[s] = true
		}
	})
}

func (h *handoff) extendScope(ctx context.Context, shards []int) {
	if h == nil {
		return
	}
	h.update(ctx, func() {
		if h.scope == nil {
			return
		}
		for _, s := range shards {
			h.scope[s] = true
		}
	})
}

func (h *handoff) acquired(ctx context.Context, shards []int) {
	if h == nil {
		return
	}
	h.update(ctx, func() {
		h.elections = true
		for _, s := range shards {
			h.held[s] = true
		}
	})
}

// owner takes what IsCurrentOwner answered for shard s.
func (h *handoff) owner(ctx context.Context, s int, owns bool) {
	if h == nil {
		return
	}
	h.mu.Lock()
	known := h.held[s] == owns
	h.mu.Unlock()
	if known || s < 0 || s >= h.shards {
		return
	}
	h.update(ctx, func() {
		h.elections = true
		if owns {
			h.held[s] = true
		} else {
			h.loseLocked(s)
		}
	})
}

// refused takes a write to workflowID refused with ErrNotOwner: its shard
// is another node's.
func (h *handoff) refused(ctx context.Context, workflowID eventstore.WorkflowID) {
	if h == nil {
		return
	}
	s := eventstore.ShardOf(workflowID, h.shards)
	h.update(ctx, func() {
		h.elections = true
		h.loseLocked(s)
	})
}

func (h *handoff) loseLocked(s int) {
	delete(h.held, s)
	h.lost[s] = true
	h.anyLost.Store(true)
}

// observes reports whether the workflow's batches are to be observed: not
// when its shard was lost to another node.
func (h *handoff) observes(workflowID eventstore.WorkflowID) bool {
	if h == nil || !h.anyLost.Load() {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.lost[eventstore.ShardOf(workflowID, h.shards)]
}

// claimable returns the rows whose claims are this node's to observe: not
// those in shards the node does not serve (a claim across shards, which
// the shard's node claims again) or lost. It takes the lock once, and
// copies only when it drops a row (the caller's slice is theirs).
func (h *handoff) claimable(rows []eventstore.OutboxRow) []eventstore.OutboxRow {
	h.mu.Lock()
	defer h.mu.Unlock()
	mine := func(r *eventstore.OutboxRow) bool {
		s := eventstore.ShardOf(r.WorkflowID, h.shards)
		return !h.lost[s] && h.served(s)
	}
	for i := range rows {
		if mine(&rows[i]) {
			continue
		}
		kept := append(make([]eventstore.OutboxRow, 0, len(rows)-1), rows[:i]...)
		for j := i + 1; j < len(rows); j++ {
			if mine(&rows[j]) {
				kept = append(kept, rows[j])
			}
		}
		return kept
	}
	return rows
}
