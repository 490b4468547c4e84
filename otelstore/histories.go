package otelstore

import (
	"context"

	"github.com/aionotel/aionotel/eventstore"
)

// historiesMethods are the [eventstore.HistoriesReader] method of the
// shapes whose inner store has it.
type historiesMethods struct {
	c     *core
	inner eventstore.HistoriesReader
}

// ReadHistories forwards; its span and duration point are those of one
// call (read_histories), however many workflows it reads.
func (h historiesMethods) ReadHistories(ctx context.Context, workflowIDs []eventstore.WorkflowID) (_ [][]eventstore.Event, err error) {
	c := h.c.t.begin(ctx, opReadHistories)
	defer c.end(&err)
	return h.inner.ReadHistories(c.ctx, workflowIDs)
}
