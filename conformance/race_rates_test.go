package conformance

// How often the race rules catch a window of a few instructions: the
// non-atomic stores of heldout_ks_test.go without the runtime.Gosched in
// their window, so that only two calls on two processors at once expose
// them. Whether one run catches them depends on the machine's timing, so
// they are measured over many runs (TestRaceRates), not held to one.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// ksIndexNoLockTight is ksIndexNoLock without the yield: the run index is
// replaced by load, copy and store, a window of a few instructions.
func ksIndexNoLockTight() keyspace.Store {
	m := &ksW{Memory: keyspace.NewMemory()}
	var mu sync.Mutex
	index := map[[2]string]*atomic.Pointer[[]keyspace.StreamKey]{}
	slot := func(wf eventstore.WorkflowID, run eventstore.RunID) *atomic.Pointer[[]keyspace.StreamKey] {
		mu.Lock()
		defer mu.Unlock()
		k := [2]string{fmt.Sprint(wf), fmt.Sprint(run)}
		if index[k] == nil {
			index[k] = &atomic.Pointer[[]keyspace.StreamKey]{}
			index[k].Store(&[]keyspace.StreamKey{})
		}
		return index[k]
	}
	m.appendEvents = func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
		head, err := m.Memory.AppendEvents(ctx, exp, evs)
		if err != nil || exp != 0 || len(evs) == 0 {
			return head, err
		}
		k := keyspace.KeyOf(evs[0])
		p := slot(k.WorkflowID, k.RunID)
		next := append(slices.Clone(*p.Load()), k)
		p.Store(&next)
		return head, nil
	}
	m.listStreams = func(ctx context.Context, wf eventstore.WorkflowID, run eventstore.RunID) ([]keyspace.StreamSummary, error) {
		all, err := m.Memory.ListStreams(ctx, wf, run)
		if err != nil {
			return nil, err
		}
		known := *slot(wf, run).Load()
		return slices.DeleteFunc(all, func(s keyspace.StreamSummary) bool { return !slices.Contains(known, s.Key) }), nil
	}
	return m
}

// ksTwoSectionsTight is ksTwoSections without the yield.
func ksTwoSectionsTight() keyspace.Store {
	m := &ksW{Memory: keyspace.NewMemory()}
	var check, write sync.Mutex
	m.appendEvents = func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
		if len(evs) == 0 || keyspace.ValidateBatch(evs) != nil || ctx.Err() != nil {
			return m.Memory.AppendEvents(ctx, exp, evs)
		}
		k := keyspace.KeyOf(evs[0])
		check.Lock()
		h, err := m.Memory.Head(ctx, k)
		check.Unlock()
		if err != nil {
			return 0, err
		}
		if h != exp {
			return 0, &eventstore.SequenceConflictError{Expected: exp, Found: h}
		}
		write.Lock()
		defer write.Unlock()
		h, _ = m.Memory.Head(ctx, k)
		if _, err := m.Memory.AppendEvents(ctx, h, evs); err != nil {
			return 0, err
		}
		return exp + uint64(len(evs)), nil
	}
	return m
}

// esClaimWindowTight is esClaimWindow without the yield: read pending under
// the lock, unlock, relock, mark claimed.
func esClaimWindowTight() eventstore.Store {
	s := newESW()
	var mu sync.Mutex
	var window []eventstore.OutboxRow // read, not marked yet
	s.claim = func(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
		if limit <= 0 || ctx.Err() != nil {
			return s.Memory.ClaimOutboxRows(ctx, limit)
		}
		mu.Lock()
		seen := slices.Clone(window[:min(len(window), limit)])
		if len(seen) < limit {
			more, err := s.Memory.ClaimOutboxRows(ctx, limit-len(seen))
			if err != nil {
				mu.Unlock()
				return nil, err
			}
			seen = append(seen, more...)
			window = append(window, more...)
		}
		mu.Unlock()
		mu.Lock()
		window = slices.DeleteFunc(window, func(r eventstore.OutboxRow) bool {
			return slices.ContainsFunc(seen, func(x eventstore.OutboxRow) bool { return x.DispatchKey == r.DispatchKey })
		})
		mu.Unlock()
		return seen, nil
	}
	return s
}

// esTwoSectionsTight is esTwoSections without the yield.
func esTwoSectionsTight() eventstore.Store {
	s := newESW()
	var check, write sync.Mutex
	s.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow, outbox bool) error {
		do := func(at uint64) error {
			if outbox {
				return s.Memory.AppendWithOutbox(ctx, tok, wf, evs, at, rows)
			}
			return s.Memory.Append(ctx, tok, wf, evs, at)
		}
		if len(evs) == 0 || !tok.Valid() || eventstore.ValidateAppend(wf, evs) != nil || ctx.Err() != nil {
			return do(exp)
		}
		check.Lock()
		h, err := esHead(ctx, s.Memory, wf)
		check.Unlock()
		if err != nil {
			return err
		}
		if h != exp {
			return &eventstore.SequenceConflictError{Expected: exp, Found: h}
		}
		write.Lock()
		defer write.Unlock()
		h, _ = esHead(ctx, s.Memory, wf)
		return do(h)
	}
	return s
}

// raceCases are the tight broken stores, each with the suite that must
// catch it; seed is the suite's options besides the store.
func raceCases(ctx context.Context, opts ...Option) []struct {
	name  string
	check func() error
} {
	ks := func(f func() keyspace.Store) func() error {
		return func() error {
			return CheckKeyspace(ctx, func() (keyspace.Store, func(), error) { return f(), nil, nil }, opts...)
		}
	}
	es := func(f func() eventstore.Store) func() error {
		return func() error {
			return CheckEventStore(ctx, func() (eventstore.Store, func(), error) { return f(), nil, nil },
				append([]Option{WithRequiredCapabilities(CapOutbox | CapShardOwner)}, opts...)...)
		}
	}
	return []struct {
		name  string
		check func() error
	}{
		{"keyspace/run-index-load-copy-store-tight", ks(ksIndexNoLockTight)},
		{"keyspace/seq-check-and-write-two-sections-tight", ks(ksTwoSectionsTight)},
		{"eventstore/claim-read-then-mark-tight", es(esClaimWindowTight)},
		{"eventstore/append-seq-check-and-write-two-sections-tight", es(esTwoSectionsTight)},
	}
}

// TestRaceRates (AIONOTEL_RACE_RATES=N) runs the race rules alone (the
// whole suite with AIONOTEL_RACE_FULL=1) N times, each with a fresh seed,
// on each tight broken store, logs how often they catch it and fails under
// half.
func TestRaceRates(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("AIONOTEL_RACE_RATES"))
	if n <= 0 {
		t.Skip("set AIONOTEL_RACE_RATES=N to measure")
	}
	only := optionFunc(func(c *config) {
		c.noShrink, c.stopAtFirst = true, true
		if os.Getenv("AIONOTEL_RACE_FULL") != "" {
			return
		}
		c.only = map[string]bool{RuleKSConcurrentAppends: true, RuleKSConcurrentBatches: true, RuleKSConcurrentStreams: true,
			RuleOutboxConcurrentClaims: true} // RuleESConcurrentAppends is RuleKSConcurrentAppends
	})
	for _, tc := range raceCases(context.Background(), only) {
		caught := 0
		for range n {
			if tc.check() != nil {
				caught++
			}
		}
		t.Logf("%s: caught %d/%d", tc.name, caught, n)
		if 2*caught < n {
			t.Errorf("%s: caught in %d of %d runs, fewer than half", tc.name, caught, n)
		}
	}
}
