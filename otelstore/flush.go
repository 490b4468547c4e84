package otelstore

import (
	"context"

	"github.com/aionotel/aionotel/eventstore"
)

// Flush waits until the histories the decorator s reads in the background
// have been read and recorded: the resumes of the shards it started serving
// (over a [eventstore.ShardOwner]; see New), including any queued while it
// waits, and then the gap fills (after a restart or a handoff; see New).
// It returns ctx's error if ctx ends first. Call it before shutting the
// providers down, as a process that exits right after its last write would
// otherwise lose what a pending resume or fill was to record. s must be a
// store New returned (else ErrNotDecorated); with WithPairing, it waits for
// every fill of the shared tracker.
func Flush(ctx context.Context, s eventstore.Store) error {
	c, ok := s.(interface{ decorated() *core })
	if !ok {
		return ErrNotDecorated
	}
	d := c.decorated()
	if err := d.handoff.waitResumed(ctx); err != nil {
		return err
	}
	return d.life.tracker.WaitFilled(ctx)
}
