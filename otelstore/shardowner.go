package otelstore

import (
	"context"

	"github.com/aionotel/aionotel/eventstore"
)

// shardMethods forwards [eventstore.ShardOwner]; only the shapes New returns
// for an inner store with that capability embed it. The three methods that
// cannot fail are forwarded without telemetry: they are bookkeeping, and a
// span per scope change would be noise. Each keeps the decorator's view of
// the shards it serves (handoff.go) up to date.
type shardMethods struct {
	c     *core
	inner eventstore.ShardOwner
}

// SetOwnedShards forwards, then resumes the shards the node now serves and
// releases those it no longer does (see [New]).
func (s shardMethods) SetOwnedShards(ctx context.Context, shards []int) {
	s.inner.SetOwnedShards(ctx, shards)
	if ctxDone(ctx) {
		return // the inner store did nothing
	}
	s.c.handoff.setScope(ctx, shards)
}

// ExtendOwnedShards forwards, then resumes the shards the node now serves.
func (s shardMethods) ExtendOwnedShards(ctx context.Context, shards []int) {
	s.inner.ExtendOwnedShards(ctx, shards)
	if ctxDone(ctx) {
		return
	}
	s.c.handoff.extendScope(ctx, shards)
}

// IsCurrentOwner forwards; an answer that differs from what the decorator
// knew of the shard resumes or releases it.
func (s shardMethods) IsCurrentOwner(ctx context.Context, shard int) bool {
	owns := s.inner.IsCurrentOwner(ctx, shard)
	if !ctxDone(ctx) {
		s.c.handoff.owner(ctx, shard, owns)
	}
	return owns
}

// AcquireOwnedShards forwards; after a successful election the shards are
// held, and resumed once served.
func (s shardMethods) AcquireOwnedShards(ctx context.Context, shards []int) (err error) {
	c := s.c.t.begin(ctx, opAcquireOwnedShards)
	defer c.end(&err)
	if err = s.inner.AcquireOwnedShards(c.ctx, shards); err == nil {
		c.finish(nil)
		s.c.handoff.acquired(ctx, shards)
	}
	return err
}

// AcquireOwnedShard is AcquireOwnedShards for one shard.
func (s shardMethods) AcquireOwnedShard(ctx context.Context, shard int) (err error) {
	c := s.c.t.begin(ctx, opAcquireOwnedShard)
	defer c.end(&err)
	if err = s.inner.AcquireOwnedShard(c.ctx, shard); err == nil {
		c.finish(nil)
		s.c.handoff.acquired(ctx, []int{shard})
	}
	return err
}

// ctxDone reports whether ctx is done: a ShardOwner method given one does
// nothing, so neither does the decorator.
func ctxDone(ctx context.Context) bool { return ctx != nil && ctx.Err() != nil }

func (s shardMethods) PublishShardOwner(ctx context.Context, shard int) (err error) {
	c := s.c.t.begin(ctx, opPublishShardOwner)
	defer c.end(&err)
	return s.inner.PublishShardOwner(c.ctx, shard)
}
