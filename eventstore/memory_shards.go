package eventstore

import (
	"context"
	"fmt"
)

// SetOwnedShards sets the enumeration scope: ListWorkflowIDs, ListActive,
// ListPaused, StreamHeads and ExpiredTimers then return only workflows whose
// shard is listed. nil clears the scope (every shard); an empty, non-nil
// slice scopes to no shard at all. Shard numbers outside [0, shardCount)
// match no workflow. With a done context, or on a Memory not made by
// [NewMemory], it does nothing.
func (m *Memory) SetOwnedShards(ctx context.Context, shards []int) {
	if m.enter(ctx) != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if shards == nil {
		m.scope = nil
		return
	}
	m.scope = make(map[int]struct{}, len(shards))
	for _, s := range shards {
		m.scope[s] = struct{}{}
	}
}

// ExtendOwnedShards adds shards to the enumeration scope (failover adoption).
// When no scope is set every shard is already in it, and the call changes
// nothing. With a done context it does nothing.
func (m *Memory) ExtendOwnedShards(ctx context.Context, shards []int) {
	if m.enter(ctx) != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.scope == nil {
		return
	}
	for _, s := range shards {
		m.scope[s] = struct{}{}
	}
}

// AcquireOwnedShards wins the ownership election for every listed shard. A
// single node has no rival, so the election always succeeds; each acquisition
// starts a new ownership epoch for its shard. A shard outside [0, shardCount)
// returns an error wrapping [ErrInvalidArgument] and no shard of the call is
// acquired.
func (m *Memory) AcquireOwnedShards(ctx context.Context, shards []int) error {
	if err := m.enter(ctx); err != nil {
		return err
	}
	for _, s := range shards {
		if err := m.checkShard(s); err != nil {
			return err
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, s := range shards {
		m.owned[s]++
	}
	return nil
}

// AcquireOwnedShard is [Memory.AcquireOwnedShards] for one shard.
func (m *Memory) AcquireOwnedShard(ctx context.Context, shard int) error {
	return m.AcquireOwnedShards(ctx, []int{shard})
}

// IsCurrentOwner reports whether this store has acquired the shard. It
// reports false for a shard out of range and, conservatively, when the
// context is done.
func (m *Memory) IsCurrentOwner(ctx context.Context, shard int) bool {
	if m.enter(ctx) != nil {
		return false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.owned[shard]
	return ok
}

// PublishShardOwner records this store, at its current epoch, as the shard's
// owner in the owner directory. A shard this store has not acquired returns
// [ErrNotOwner]; a shard outside [0, shardCount) returns an error wrapping
// [ErrInvalidArgument].
func (m *Memory) PublishShardOwner(ctx context.Context, shard int) error {
	if err := m.enter(ctx); err != nil {
		return err
	}
	if err := m.checkShard(shard); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	epoch, ok := m.owned[shard]
	if !ok {
		return fmt.Errorf("%w: shard %d was not acquired by this store", ErrNotOwner, shard)
	}
	m.directory[shard] = epoch
	return nil
}

func (m *Memory) checkShard(s int) error {
	if s < 0 || s >= m.cfg.shardCount {
		return invalidf("shard %d is outside [0, %d)", s, m.cfg.shardCount)
	}
	return nil
}

// inScopeLocked reports whether a workflow's shard is in the enumeration
// scope. m.mu must be held.
func (m *Memory) inScopeLocked(id WorkflowID) bool {
	if m.scope == nil {
		return true
	}
	_, ok := m.scope[ShardOf(id, m.cfg.shardCount)]
	return ok
}
