package sim

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// Cluster is the node a server runs on when several servers (processes)
// share one store, each serving the workflows of the shards its node holds
// (eventstore.ShardOf). The server then appends only to the workflows of
// those shards:
//
//   - it starts workflows only where NewWorkflowID places them;
//   - the outbox is shared and its claims are not scoped, so the rows it
//     claims for workflows it does not serve go back to pending at once
//     (RearmOutboxPending) for the node that serves them;
//   - a workflow whose goroutine runs on no node any more (its node died or
//     handed its shard over) is an orphan: its run is closed as timed out
//     by its durable run timeout, on whichever node holds the shard when
//     the timer fires, and Recover re-arms the outbox rows of its
//     activities in flight so that this node's workers finish them;
//   - when Run stops it cancels every workflow still open in its scope, its
//     own and the orphans, as it cancels its own on a single node.
//
// The store's enumeration scope (the ShardOwner methods, called by the
// node through Server.Store) says which timers fire here and which open
// workflows are listed. Both methods are called from many goroutines.
type Cluster interface {
	// NewWorkflowID returns the ID of a new workflow in a shard the node
	// serves and starts work in, or false when there is none.
	NewWorkflowID() (eventstore.WorkflowID, bool)
	// Serves reports whether the node holds the workflow's shard.
	Serves(eventstore.WorkflowID) bool
	// Append runs an append to the workflow (through the decorator, which
	// observes what it committed before it returns) and returns its error,
	// so that the node hands a shard over only between the appends to it.
	Append(wf eventstore.WorkflowID, append func() error) error
}

// Store returns the server's decorated store: the node of a Cluster calls
// the ShardOwner methods through it, so that the decorator resumes the
// shards the node acquires and releases those it loses.
func (s *Server) Store() eventstore.Store { return s.store }

func (s *Server) newWorkflowID() (eventstore.WorkflowID, bool) {
	if s.cfg.Cluster == nil {
		return eventstore.NewWorkflowID(), true
	}
	return s.cfg.Cluster.NewWorkflowID()
}

// serves reports whether this server serves the workflow.
func (s *Server) serves(wf eventstore.WorkflowID) bool {
	return s.cfg.Cluster == nil || s.cfg.Cluster.Serves(wf)
}

// append runs an append to the workflow, through the node on a cluster.
func (s *Server) append(wf eventstore.WorkflowID, append func() error) error {
	if s.cfg.Cluster == nil {
		return append()
	}
	return s.cfg.Cluster.Append(wf, append)
}

// served returns the claimed rows of workflows this server serves and puts
// the others back to pending, for the nodes that serve them.
func (s *Server) served(ctx context.Context, rows []eventstore.OutboxRow) []eventstore.OutboxRow {
	if s.cfg.Cluster == nil {
		return rows
	}
	var mine, others []eventstore.OutboxRow
	for _, row := range rows {
		if s.serves(row.WorkflowID) {
			mine = append(mine, row)
		} else {
			others = append(others, row)
		}
	}
	if len(others) > 0 {
		if err := s.outbox.RearmOutboxPending(ctx, others); err == nil {
			s.count("outbox.passed_on", int64(len(others)))
		}
	}
	return mine
}

// local reports whether the workflow's goroutine runs in this server.
func (s *Server) local(wf eventstore.WorkflowID) bool {
	_, ok := s.inboxes.Load(wf)
	return ok
}

// runTimeoutPrefix names the timers that bound a run (startRun).
const runTimeoutPrefix = "run-timeout-"

// orphanTimer closes an orphan's run as timed out when its run timeout
// fired (and TimerFired committed): no goroutine of this server waits for
// it.
func (s *Server) orphanTimer(ctx context.Context, t eventstore.TimerEntry) {
	if !strings.HasPrefix(string(t.TimerID), runTimeoutPrefix) || s.local(t.WorkflowID) {
		return
	}
	if s.closeOrphan(ctx, t.WorkflowID, eventstore.WorkflowTimedOut{}) {
		s.count("orphans.timed_out", 1)
	}
}

// closeOrphan appends the closing event (a WorkflowTimedOut or a
// WorkflowCancelled) to the workflow's current run if it is still open and
// cancels its outbox rows still waiting, as a workflow's goroutine does
// when it stops. It reports whether it closed the run.
func (s *Server) closeOrphan(ctx context.Context, wf eventstore.WorkflowID, closing eventstore.Event) bool {
	seq, err := s.commit(ctx, wf, nil, func(h history) *decision {
		if !h.started || h.closed {
			return nil
		}
		return &decision{events: []eventstore.Event{eventstore.WithEnvelope(closing, eventstore.Envelope{RunID: h.run})}}
	})
	if err != nil || seq == 0 {
		return false
	}
	_, _ = s.outbox.SettleWorkflowOutboxRowsCancelled(ctx, wf)
	return true
}

// Recover takes over the orphans among the open workflows of the store's
// scope that in selects (the workflows of shards the node just acquired):
// the outbox rows of their activities in flight, claimed by a worker that
// is gone, go back to pending, so that this server's workers run them and
// commit their results. It returns the orphans it found and the rows it
// re-armed; an error stops it (a later call may go on).
func (s *Server) Recover(ctx context.Context, in func(eventstore.WorkflowID) bool) (orphans, rows int, err error) {
	open, err := s.store.ListActive(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, wf := range open {
		if !in(wf) || s.local(wf) {
			continue
		}
		events, err := s.store.ReadHistory(ctx, wf)
		if err != nil {
			return orphans, rows, err
		}
		h := fold(events)
		if !h.started || h.closed {
			continue
		}
		orphans++
		var inFlight []eventstore.OutboxRow
		for act := range h.open {
			inFlight = append(inFlight, eventstore.OutboxRow{DispatchKey: eventstore.DispatchKey(wf, h.run, act)})
		}
		n, err := s.rearm(ctx, inFlight)
		rows += n
		if err != nil {
			return orphans, rows, err
		}
	}
	s.count("orphans.recovered", int64(orphans))
	s.count("orphans.rows_rearmed", int64(rows))
	return orphans, rows, nil
}

// rearm puts rows back to pending, one at a time if a row of the batch is
// unknown (an activity scheduled without one). It returns how many went
// back.
func (s *Server) rearm(ctx context.Context, rows []eventstore.OutboxRow) (int, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	err := s.outbox.RearmOutboxPending(ctx, rows)
	if !errors.Is(err, eventstore.ErrNotFound) {
		if err != nil {
			return 0, err
		}
		return len(rows), nil
	}
	n := 0
	for _, row := range rows {
		switch err := s.outbox.RearmOutboxPending(ctx, []eventstore.OutboxRow{row}); {
		case err == nil:
			n++
		case !errors.Is(err, eventstore.ErrNotFound):
			return n, err
		}
	}
	return n, nil
}

// orphanGrace bounds the cancellation of the orphans when Run stops.
const orphanGrace = 10 * time.Second

// cancelOrphans cancels every workflow still open in the store's scope
// once Run's own workflows are done: the orphans a cluster node adopted,
// and any workflow whose goroutine could not close it.
func (s *Server) cancelOrphans(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), orphanGrace)
	defer cancel()
	open, err := s.store.ListActive(ctx)
	if err != nil {
		return
	}
	for _, wf := range open {
		if s.serves(wf) && s.closeOrphan(ctx, wf, eventstore.WorkflowCancelled{}) {
			s.count("orphans.cancelled", 1)
		}
	}
}
