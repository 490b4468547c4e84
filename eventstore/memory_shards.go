package eventstore

import (
	"context"
	"fmt"
)

// SetOwnedShards sets this node's enumeration scope: ListWorkflowIDs,
// ListActive, ListPaused, StreamHeads and ExpiredTimers then return only
// workflows whose shard is listed. nil clears the scope (every shard); an
// empty, non-nil slice scopes to no shard at all. Shard numbers outside
// [0, shardCount) match no workflow. With a done context, on a killed node
// or on a Memory not made by [NewMemory], it does nothing.
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

// ExtendOwnedShards adds shards to this node's enumeration scope (failover
// adoption). When no scope is set every shard is already in it, and the call
// changes nothing. With a done context, or on a killed node, it does
// nothing.
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

// AcquireOwnedShards runs the election for every listed shard, all or none.
// A shard that is free (never acquired, released, or its holder killed) is
// won, starting a new epoch; a shard this node holds is renewed (same
// epoch). A shard outside [0, shardCount) returns an error wrapping
// [ErrInvalidArgument], and a shard another live node holds one wrapping
// [ErrNotOwner]; then no shard of the call is acquired. An empty list
// succeeds and acquires nothing.
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
		if st := m.shards[s]; st != nil && st.holder != nil && st.holder != m {
			return fmt.Errorf("%w: shard %d is held by node %q", ErrNotOwner, s, st.holder.name)
		}
	}
	for _, s := range shards {
		st := m.shards[s]
		if st == nil {
			st = &shardState{}
			m.shards[s] = st
		}
		if st.holder != m {
			st.holder = m
			st.epoch++
		}
	}
	return nil
}

// AcquireOwnedShard is [Memory.AcquireOwnedShards] for one shard.
func (m *Memory) AcquireOwnedShard(ctx context.Context, shard int) error {
	return m.AcquireOwnedShards(ctx, []int{shard})
}

// ReleaseShards gives up the listed shards this node holds, so that another
// node can acquire them. A released shard stays fenced: no node may append
// to its workflows until a node acquires it again. Listed shards this node
// does not hold are left as they are. A shard outside [0, shardCount)
// returns an error wrapping [ErrInvalidArgument] and releases none.
func (m *Memory) ReleaseShards(ctx context.Context, shards []int) error {
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
		if st := m.shards[s]; st != nil && st.holder == m {
			st.holder = nil
		}
	}
	return nil
}

// IsCurrentOwner reports whether this node holds the shard now: true from a
// successful acquisition until the node releases the shard or is killed. It
// reports false for a shard out of range and, conservatively, when the
// context is done.
func (m *Memory) IsCurrentOwner(ctx context.Context, shard int) bool {
	if m.enter(ctx) != nil {
		return false
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	st := m.shards[shard]
	return st != nil && st.holder == m
}

// PublishShardOwner records this node, at its current epoch, as the shard's
// owner in the owner directory. A shard this node does not hold returns
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
	st := m.shards[shard]
	if st == nil || st.holder != m {
		return fmt.Errorf("%w: shard %d is not held by node %q", ErrNotOwner, shard, m.name)
	}
	m.directory[shard] = ownerRecord{node: m.name, epoch: st.epoch}
	return nil
}

func (m *Memory) checkShard(s int) error {
	if s < 0 || s >= m.cfg.shardCount {
		return invalidf("shard %d is outside [0, %d)", s, m.cfg.shardCount)
	}
	return nil
}

// fenceLocked refuses an append by this node to a workflow whose shard has
// been acquired and is not held by this node now. m.mu must be held.
func (m *Memory) fenceLocked(id WorkflowID) error {
	shard := ShardOf(id, m.cfg.shardCount)
	st := m.shards[shard]
	switch {
	case st == nil || st.holder == m:
		return nil
	case st.holder == nil:
		return fmt.Errorf("%w: shard %d of workflow %s has no holder since its last one left; acquire it first", ErrNotOwner, shard, id)
	default:
		return fmt.Errorf("%w: shard %d of workflow %s is held by node %q", ErrNotOwner, shard, id, st.holder.name)
	}
}

// inScopeLocked reports whether a workflow's shard is in this node's
// enumeration scope. m.mu must be held.
func (m *Memory) inScopeLocked(id WorkflowID) bool {
	if m.scope == nil {
		return true
	}
	_, ok := m.scope[ShardOf(id, m.cfg.shardCount)]
	return ok
}

// ShardCount returns the number of shards workflows are partitioned into
// ([WithShardCount]), so that a caller (a decorator releasing the
// workflows of a lost shard) can compute [ShardOf] as this store does.
func (m *Memory) ShardCount() int { return m.cfg.shardCount }
