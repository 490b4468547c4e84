package otelstore

import (
	"context"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/livetracer"
)

// outboxMethods forwards [eventstore.Outbox]; only the shapes New returns for
// an inner store with that capability embed it.
type outboxMethods struct {
	c     *core
	inner eventstore.Outbox
}

// AppendWithOutbox forwards to the inner store and observes what committed
// as Append does; after a commit that staged at least one row, the
// WithOutboxWake channel gets one non-blocking send, and the tracker learns
// that the activities the rows dispatch wait for a worker until a claim
// returns their rows (see ClaimOutboxRows).
func (o outboxMethods) AppendWithOutbox(ctx context.Context, token eventstore.WriteToken, workflowID eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64, rows []eventstore.OutboxRow) error {
	return o.c.observedAppend(ctx, opAppendWithOutbox, workflowID, events, expectedSeq, rows, true, func(ctx context.Context) error {
		return o.inner.AppendWithOutbox(ctx, token, workflowID, events, expectedSeq, rows)
	})
}

// RearmOutboxPending forwards. Rows are named by dispatch key only, so the
// tracker does not learn which activities wait again: a re-armed row's
// activity is not back in aion.activity.oldest_waiting_age, and its next
// claim adds a claim event to its span but no second wait.
func (o outboxMethods) RearmOutboxPending(ctx context.Context, rows []eventstore.OutboxRow) (err error) {
	c := o.c.t.begin(ctx, opRearmOutboxPending)
	defer c.end(&err)
	if c.recording() {
		c.annotate(catalog.OutboxRowCount.Int(len(rows)))
	}
	return o.inner.RearmOutboxPending(c.ctx, rows)
}

// ClaimOutboxRows forwards to the inner store; its span carries
// aion.store.outbox_row_count, the rows claimed. Once the claim succeeded,
// each row returned is a claim of its activity at the time the inner call
// returned: the activity stops waiting for a worker, the first claim of its
// dispatch records aion.activity.wait.duration (with this call's span as
// the exemplar), and every claim becomes an aion.activity.claim event on
// the activity span (see [pairing.Tracker.Claimed]). The rows are returned
// unchanged, and nothing of them is kept.
func (o outboxMethods) ClaimOutboxRows(ctx context.Context, limit int) (rows []eventstore.OutboxRow, err error) {
	c := o.c.t.begin(ctx, opClaimOutboxRows)
	defer c.end(&err)
	rows, err = o.inner.ClaimOutboxRows(c.ctx, limit)
	if c.recording() && err == nil {
		c.annotate(catalog.OutboxRowCount.Int(len(rows)))
	}
	c.finish(err)
	if err == nil && len(rows) > 0 {
		o.c.claimed(c.ctx, c.lookup, rows, o.c.t.clock())
	}
	return rows, err
}

func (o outboxMethods) CountClaimedOutboxRows(ctx context.Context) (_ int, err error) {
	c := o.c.t.begin(ctx, opCountClaimedOutboxRows)
	defer c.end(&err)
	return o.inner.CountClaimedOutboxRows(c.ctx)
}

func (o outboxMethods) SettleOutboxRowCancelled(ctx context.Context, dispatchKey string) (err error) {
	c := o.c.t.begin(ctx, opSettleOutboxRowCancelled)
	defer c.end(&err)
	return o.inner.SettleOutboxRowCancelled(c.ctx, dispatchKey)
}

func (o outboxMethods) SettleWorkflowOutboxRowsCancelled(ctx context.Context, workflowID eventstore.WorkflowID) (_ []string, err error) {
	c := o.c.t.begin(ctx, opSettleWorkflowOutboxRowsCancelled)
	defer c.end(&err)
	c.workflow(workflowID)
	return o.inner.SettleWorkflowOutboxRowsCancelled(c.ctx, workflowID)
}

// clock is the time now: the test seam's, or the wall clock's.
func (t *telemetry) clock() time.Time {
	if t.now != nil {
		return t.now()
	}
	return time.Now()
}

// staged and claimed hand the tracker the outbox facts, but those of
// workflows in shards lost to another node (see handoff) and claims of
// rows in shards this node does not serve, which their node claims again.
// A panic there is reported to the error handler: the rows are committed,
// or claimed.
func (s *core) staged(ctx context.Context, lk livetracer.Lookup, workflowID eventstore.WorkflowID, rows []eventstore.OutboxRow) {
	defer s.life.recovered()
	if s.handoff.observes(workflowID) {
		s.life.calls.Staged(ctx, lk, s.life.namespace, workflowID, rows)
	}
}

func (s *core) claimed(ctx context.Context, lk livetracer.Lookup, rows []eventstore.OutboxRow, at time.Time) {
	defer s.life.recovered()
	if h := s.handoff; h != nil {
		rows = h.claimable(rows)
	}
	s.life.calls.Claimed(ctx, lk, s.life.namespace, rows, at)
}
