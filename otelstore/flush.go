package otelstore

import (
	"context"

	"github.com/aionotel/aionotel/eventstore"
)

// Flush waits until the gap fills the decorator s started (histories read
// in the background after a restart or a handoff; see New) have been read
// and recorded, or until ctx ends, whose error it then returns. Call it
// before shutting the providers down, as a process that exits right after
// its last write would otherwise lose what a pending fill was to record. s
// must be a store New returned (else ErrNotDecorated); with WithPairing,
// it waits for every fill of the shared tracker.
func Flush(ctx context.Context, s eventstore.Store) error {
	c, ok := s.(interface{ decorated() *core })
	if !ok {
		return ErrNotDecorated
	}
	return c.decorated().life.tracker.WaitFilled(ctx)
}
