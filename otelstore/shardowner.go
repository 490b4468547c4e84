package otelstore

import (
	"context"

	"github.com/aionotel/aionotel/eventstore"
)

// shardMethods forwards [eventstore.ShardOwner]; only the shapes New returns
// for an inner store with that capability embed it. The three methods that
// cannot fail are forwarded without telemetry: they are bookkeeping, and a
// span per scope change would be noise.
type shardMethods struct {
	c     *core
	inner eventstore.ShardOwner
}

func (s shardMethods) SetOwnedShards(ctx context.Context, shards []int) {
	s.inner.SetOwnedShards(ctx, shards)
}

func (s shardMethods) ExtendOwnedShards(ctx context.Context, shards []int) {
	s.inner.ExtendOwnedShards(ctx, shards)
}

func (s shardMethods) IsCurrentOwner(ctx context.Context, shard int) bool {
	return s.inner.IsCurrentOwner(ctx, shard)
}

func (s shardMethods) AcquireOwnedShards(ctx context.Context, shards []int) (err error) {
	c := s.c.t.begin(ctx, opAcquireOwnedShards)
	defer c.end(&err)
	return s.inner.AcquireOwnedShards(c.ctx, shards)
}

func (s shardMethods) AcquireOwnedShard(ctx context.Context, shard int) (err error) {
	c := s.c.t.begin(ctx, opAcquireOwnedShard)
	defer c.end(&err)
	return s.inner.AcquireOwnedShard(c.ctx, shard)
}

func (s shardMethods) PublishShardOwner(ctx context.Context, shard int) (err error) {
	c := s.c.t.begin(ctx, opPublishShardOwner)
	defer c.end(&err)
	return s.inner.PublishShardOwner(c.ctx, shard)
}
