package eventstore

import (
	"errors"
	"slices"
	"testing"
)

func TestMemoryShardOwnership(t *testing.T) {
	testCases := []struct {
		name        string
		acquire     func(m *Memory) error
		wantErr     error
		wantOwned   []int
		wantEpoch   map[int]uint64
		publish     int
		wantPublish error
	}{
		{name: "one shard", acquire: func(m *Memory) error { return m.AcquireOwnedShard(t.Context(), 2) },
			wantOwned: []int{2}, wantEpoch: map[int]uint64{2: 1}, publish: 2},
		{name: "several", acquire: func(m *Memory) error { return m.AcquireOwnedShards(t.Context(), []int{0, 3}) },
			wantOwned: []int{0, 3}, wantEpoch: map[int]uint64{0: 1, 3: 1}, publish: 3},
		{name: "re-acquiring renews in the same epoch", acquire: func(m *Memory) error {
			_ = m.AcquireOwnedShard(t.Context(), 1)
			return m.AcquireOwnedShard(t.Context(), 1)
		}, wantOwned: []int{1}, wantEpoch: map[int]uint64{1: 1}, publish: 1},
		{name: "released and acquired again starts a new epoch", acquire: func(m *Memory) error {
			_ = m.AcquireOwnedShard(t.Context(), 1)
			_ = m.ReleaseShards(t.Context(), []int{1})
			return m.AcquireOwnedShard(t.Context(), 1)
		}, wantOwned: []int{1}, wantEpoch: map[int]uint64{1: 2}, publish: 1},
		{name: "released", acquire: func(m *Memory) error {
			_ = m.AcquireOwnedShards(t.Context(), []int{1, 2})
			return m.ReleaseShards(t.Context(), []int{1, 3})
		}, wantOwned: []int{2}, wantEpoch: map[int]uint64{1: 1, 2: 1}, publish: 1, wantPublish: ErrNotOwner},
		{name: "publish not acquired", acquire: func(m *Memory) error { return m.AcquireOwnedShard(t.Context(), 1) },
			wantOwned: []int{1}, wantEpoch: map[int]uint64{1: 1}, publish: 2, wantPublish: ErrNotOwner},
		{name: "publish out of range", acquire: func(m *Memory) error { return nil },
			wantEpoch: map[int]uint64{}, publish: 4, wantPublish: ErrInvalidArgument},
		{name: "negative shard", acquire: func(m *Memory) error { return m.AcquireOwnedShard(t.Context(), -1) },
			wantErr: ErrInvalidArgument, wantEpoch: map[int]uint64{}, publish: 0, wantPublish: ErrNotOwner},
		{name: "one bad shard acquires none", acquire: func(m *Memory) error { return m.AcquireOwnedShards(t.Context(), []int{0, 1, 4}) },
			wantErr: ErrInvalidArgument, wantEpoch: map[int]uint64{}, publish: 0, wantPublish: ErrNotOwner},
		{name: "empty list", acquire: func(m *Memory) error { return m.AcquireOwnedShards(t.Context(), nil) },
			wantEpoch: map[int]uint64{}, publish: 0, wantPublish: ErrNotOwner},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestMemory(t, WithShardCount(4))
			if err := tc.acquire(m); !errors.Is(err, tc.wantErr) {
				t.Fatalf("acquire = %v, want %v", err, tc.wantErr)
			}
			for s := -1; s <= 4; s++ {
				if got, want := m.IsCurrentOwner(t.Context(), s), slices.Contains(tc.wantOwned, s); got != want {
					t.Errorf("IsCurrentOwner(%d) = %v, want %v", s, got, want)
				}
			}
			m.mu.RLock()
			epochs := map[int]uint64{}
			for s, st := range m.shards {
				epochs[s] = st.epoch
			}
			m.mu.RUnlock()
			if len(epochs) != len(tc.wantEpoch) {
				t.Errorf("epochs = %v, want %v", epochs, tc.wantEpoch)
			}
			for s, e := range tc.wantEpoch {
				if epochs[s] != e {
					t.Errorf("epoch of shard %d = %d, want %d", s, epochs[s], e)
				}
			}
			err := m.PublishShardOwner(t.Context(), tc.publish)
			if !errors.Is(err, tc.wantPublish) {
				t.Fatalf("PublishShardOwner(%d) = %v, want %v", tc.publish, err, tc.wantPublish)
			}
			m.mu.RLock()
			published, ok := m.directory[tc.publish]
			m.mu.RUnlock()
			if ok != (tc.wantPublish == nil) || (ok && published != ownerRecord{node: "memory", epoch: tc.wantEpoch[tc.publish]}) {
				t.Errorf("directory entry for shard %d = %+v, %v; want node memory at epoch %d, published %v",
					tc.publish, published, ok, tc.wantEpoch[tc.publish], tc.wantPublish == nil)
			}
		})
	}
}

func TestMemoryShardScope(t *testing.T) {
	ctx := t.Context()
	m, _ := newTestMemory(t, WithShardCount(4))
	// Four workflows, one per shard; shard 2's is paused.
	ids := []WorkflowID{testID(1, 0), testID(1, 1), testID(1, 2), testID(1, 3)}
	for i, id := range ids {
		if got := ShardOf(id, 4); got != i {
			t.Fatalf("ShardOf(%v, 4) = %d, want %d", id, got, i)
		}
		mustAppend(t, m, id, started(runA, "t"))
		if err := m.ScheduleTimer(ctx, id, "t", t0, 1); err != nil {
			t.Fatal(err)
		}
	}
	mustAppend(t, m, ids[2], WorkflowPaused{Envelope: env(runA)})

	check := func(step string, want ...int) {
		t.Helper()
		wantIDs := []WorkflowID{}
		wantActive := []WorkflowID{}
		wantPaused := []WorkflowID{}
		for _, s := range want {
			wantIDs = append(wantIDs, ids[s])
			if s == 2 {
				wantPaused = append(wantPaused, ids[s])
			} else {
				wantActive = append(wantActive, ids[s])
			}
		}
		if got, _ := m.ListWorkflowIDs(ctx); !slices.Equal(got, wantIDs) {
			t.Errorf("%s: ListWorkflowIDs = %v, want %v", step, got, wantIDs)
		}
		if got, _ := m.ListActive(ctx); !slices.Equal(got, wantActive) {
			t.Errorf("%s: ListActive = %v, want %v", step, got, wantActive)
		}
		if got, _ := m.ListPaused(ctx); !slices.Equal(got, wantPaused) {
			t.Errorf("%s: ListPaused = %v, want %v", step, got, wantPaused)
		}
		heads, _ := m.StreamHeads(ctx)
		var headIDs []WorkflowID
		for _, h := range heads {
			headIDs = append(headIDs, h.WorkflowID)
		}
		if !slices.Equal(headIDs, wantIDs) {
			t.Errorf("%s: StreamHeads = %v, want %v", step, headIDs, wantIDs)
		}
		timers, _ := m.ExpiredTimers(ctx, t0)
		var timerIDs []WorkflowID
		for _, tm := range timers {
			timerIDs = append(timerIDs, tm.WorkflowID)
		}
		if !slices.Equal(timerIDs, wantIDs) {
			t.Errorf("%s: ExpiredTimers = %v, want %v", step, timerIDs, wantIDs)
		}
		// Query is an operator view across every shard.
		if q, _ := m.Query(ctx, WorkflowFilter{}); len(q) != 4 {
			t.Errorf("%s: Query returned %d workflows, want 4", step, len(q))
		}
	}

	check("no scope", 0, 1, 2, 3)
	m.ExtendOwnedShards(ctx, []int{1})
	check("extend without a scope", 0, 1, 2, 3)
	m.SetOwnedShards(ctx, []int{1, 2, 9, -1})
	check("scoped", 1, 2)
	m.ExtendOwnedShards(ctx, []int{3})
	check("extended", 1, 2, 3)
	m.SetOwnedShards(ctx, []int{})
	check("empty scope")
	m.SetOwnedShards(ctx, nil)
	check("scope cleared", 0, 1, 2, 3)

	t.Run("the scope is a copy", func(t *testing.T) {
		shards := []int{0}
		m.SetOwnedShards(ctx, shards)
		shards[0] = 3
		if got, _ := m.ListWorkflowIDs(ctx); !slices.Equal(got, ids[:1]) {
			t.Errorf("ListWorkflowIDs = %v after the caller changed its slice", got)
		}
		m.SetOwnedShards(ctx, nil)
	})
	t.Run("acquiring does not scope", func(t *testing.T) {
		if err := m.AcquireOwnedShard(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if got, _ := m.ListWorkflowIDs(ctx); len(got) != 4 {
			t.Errorf("ListWorkflowIDs = %v after an acquire", got)
		}
	})
}
