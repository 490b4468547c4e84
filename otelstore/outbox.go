package otelstore

import (
	"context"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// outboxMethods forwards [eventstore.Outbox]; only the shapes New returns for
// an inner store with that capability embed it.
type outboxMethods struct {
	c     *core
	inner eventstore.Outbox
}

// AppendWithOutbox forwards to the inner store and observes what committed
// as Append does; after a commit that staged at least one row, the
// WithOutboxWake channel gets one non-blocking send.
func (o outboxMethods) AppendWithOutbox(ctx context.Context, token eventstore.WriteToken, workflowID eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64, rows []eventstore.OutboxRow) error {
	return o.c.observedAppend(ctx, opAppendWithOutbox, workflowID, events, expectedSeq, len(rows), func(ctx context.Context) error {
		return o.inner.AppendWithOutbox(ctx, token, workflowID, events, expectedSeq, rows)
	})
}

func (o outboxMethods) RearmOutboxPending(ctx context.Context, rows []eventstore.OutboxRow) (err error) {
	c := o.c.t.begin(ctx, opRearmOutboxPending)
	defer c.end(&err)
	if c.recording() {
		c.annotate(catalog.OutboxRowCount.Int(len(rows)))
	}
	return o.inner.RearmOutboxPending(c.ctx, rows)
}

func (o outboxMethods) ClaimOutboxRows(ctx context.Context, limit int) (_ []eventstore.OutboxRow, err error) {
	c := o.c.t.begin(ctx, opClaimOutboxRows)
	defer c.end(&err)
	return o.inner.ClaimOutboxRows(c.ctx, limit)
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
