package conformance

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// The deliberately broken keyspaces: thin wrappers around keyspace.Memory,
// each with one bug a real implementation could have.

// partialConflictKS writes the first event of a conflicting batch at the
// real head before it reports the conflict.
type partialConflictKS struct{ keyspace.Store }

func (s partialConflictKS) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	if len(events) > 0 {
		if head, err := s.Store.Head(ctx, keyspace.KeyOf(events[0])); err == nil && head != expectedSeq {
			_, _ = s.Store.AppendEvents(ctx, head, events[:1])
			return 0, &eventstore.SequenceConflictError{Expected: expectedSeq, Found: head}
		}
	}
	return s.Store.AppendEvents(ctx, expectedSeq, events)
}

// expectedHeadKS reports the caller's expected sequence as the head found.
type expectedHeadKS struct{ keyspace.Store }

func (s expectedHeadKS) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	head, err := s.Store.AppendEvents(ctx, expectedSeq, events)
	var conflict *eventstore.SequenceConflictError
	if errors.As(err, &conflict) {
		return head, &eventstore.SequenceConflictError{Expected: expectedSeq, Found: expectedSeq}
	}
	return head, err
}

// mixedAcceptingKS splits a mixed batch and appends each event at its own
// stream's head.
type mixedAcceptingKS struct{ keyspace.Store }

func (s mixedAcceptingKS) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	mixed := slices.ContainsFunc(events, func(ev keyspace.ActivityEvent) bool { return keyspace.KeyOf(ev) != keyspace.KeyOf(events[0]) })
	if !mixed {
		return s.Store.AppendEvents(ctx, expectedSeq, events)
	}
	for _, ev := range events {
		head, err := s.Store.Head(ctx, keyspace.KeyOf(ev))
		if err != nil {
			return 0, err
		}
		if _, err := s.Store.AppendEvents(ctx, head, []keyspace.ActivityEvent{ev}); err != nil {
			return 0, err
		}
	}
	return expectedSeq + uint64(len(events)), nil
}

// runBlindListingKS lists the streams of every run of the workflow.
type runBlindListingKS struct {
	keyspace.Store
	mu   sync.Mutex
	runs map[eventstore.WorkflowID][]eventstore.RunID
}

func (s *runBlindListingKS) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	head, err := s.Store.AppendEvents(ctx, expectedSeq, events)
	if err == nil && len(events) > 0 {
		s.mu.Lock()
		if !slices.Contains(s.runs[events[0].WorkflowID], events[0].RunID) {
			s.runs[events[0].WorkflowID] = append(s.runs[events[0].WorkflowID], events[0].RunID)
		}
		s.mu.Unlock()
	}
	return head, err
}

func (s *runBlindListingKS) ListStreams(ctx context.Context, wf eventstore.WorkflowID, run eventstore.RunID) ([]keyspace.StreamSummary, error) {
	s.mu.Lock()
	runs := slices.Clone(s.runs[wf])
	s.mu.Unlock()
	var out []keyspace.StreamSummary
	for _, r := range runs {
		l, err := s.Store.ListStreams(ctx, wf, r)
		if err != nil {
			return nil, err
		}
		out = append(out, l...)
	}
	slices.SortStableFunc(out, func(a, b keyspace.StreamSummary) int {
		return cmp.Or(cmp.Compare(a.Key.ActivityID, b.Key.ActivityID), cmp.Compare(a.Key.Attempt, b.Key.Attempt))
	})
	return out, nil
}

// offByOneKS resumes one record late.
type offByOneKS struct{ keyspace.Store }

func (s offByOneKS) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	return s.Store.ReadFrom(ctx, key, fromSeq+1, limit)
}

// ephemeralAcceptingKS stores ephemeral events as durable ones.
type ephemeralAcceptingKS struct{ keyspace.Store }

func (s ephemeralAcceptingKS) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	durable := slices.Clone(events)
	for i := range durable {
		durable[i].Ephemeral = false
	}
	return s.Store.AppendEvents(ctx, expectedSeq, durable)
}

// conflictSwallowingKS reports success for a conflicting append and drops
// its events: every racer "wins".
type conflictSwallowingKS struct{ keyspace.Store }

func (s conflictSwallowingKS) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	head, err := s.Store.AppendEvents(ctx, expectedSeq, events)
	if errors.Is(err, eventstore.ErrSequenceConflict) {
		return expectedSeq + uint64(len(events)), nil
	}
	return head, err
}

// aliasingKS caches reads and hands every reader the same records.
type aliasingKS struct {
	keyspace.Store
	mu    sync.Mutex
	cache map[keyspace.StreamKey][]keyspace.Record
}

func (s *aliasingKS) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	s.mu.Lock()
	clear(s.cache)
	s.mu.Unlock()
	return s.Store.AppendEvents(ctx, expectedSeq, events)
}

func (s *aliasingKS) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fromSeq == 0 && limit <= 0 {
		if recs, ok := s.cache[key]; ok {
			return recs, nil
		}
	}
	recs, err := s.Store.ReadFrom(ctx, key, fromSeq, limit)
	if err == nil && fromSeq == 0 && limit <= 0 {
		s.cache[key] = recs
	}
	return recs, err
}

// reversedListingKS lists a run's streams backwards.
type reversedListingKS struct{ keyspace.Store }

func (s reversedListingKS) ListStreams(ctx context.Context, wf eventstore.WorkflowID, run eventstore.RunID) ([]keyspace.StreamSummary, error) {
	l, err := s.Store.ListStreams(ctx, wf, run)
	slices.Reverse(l)
	return l, err
}

// keyMappingKS folds one key axis: every key goes through fold on the way
// in, so streams that differ only on that axis share one stream.
type keyMappingKS struct {
	keyspace.Store
	fold func(keyspace.StreamKey) keyspace.StreamKey
}

func (s keyMappingKS) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	folded := slices.Clone(events)
	for i := range folded {
		k := s.fold(keyspace.KeyOf(folded[i]))
		folded[i].WorkflowID, folded[i].RunID, folded[i].ActivityID, folded[i].Attempt = k.WorkflowID, k.RunID, k.ActivityID, k.Attempt
	}
	return s.Store.AppendEvents(ctx, expectedSeq, folded)
}

func (s keyMappingKS) Head(ctx context.Context, key keyspace.StreamKey) (uint64, error) {
	return s.Store.Head(ctx, s.fold(key))
}

func (s keyMappingKS) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	return s.Store.ReadFrom(ctx, s.fold(key), fromSeq, limit)
}

// ctxIgnoringKS appends even when the caller's context is cancelled.
type ctxIgnoringKS struct{ keyspace.Store }

func (s ctxIgnoringKS) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	return s.Store.AppendEvents(context.WithoutCancel(ctx), expectedSeq, events)
}

// emptyBatchKS answers an empty batch with head 0.
type emptyBatchKS struct{ keyspace.Store }

func (s emptyBatchKS) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	if len(events) == 0 {
		return 0, nil
	}
	return s.Store.AppendEvents(ctx, expectedSeq, events)
}

// lossyKS drops the agent role and the emission time of what it stores.
type lossyKS struct{ keyspace.Store }

func (s lossyKS) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	lossy := slices.Clone(events)
	for i := range lossy {
		lossy[i].AgentRole, lossy[i].EmittedAt = "", time.Time{}
	}
	return s.Store.AppendEvents(ctx, expectedSeq, lossy)
}

// staleHeadKS reports a head one short.
type staleHeadKS struct{ keyspace.Store }

func (s staleHeadKS) Head(ctx context.Context, key keyspace.StreamKey) (uint64, error) {
	h, err := s.Store.Head(ctx, key)
	if h > 0 {
		h--
	}
	return h, err
}

// failedRules returns the Rule of every *RuleError of suite in err.
func failedRules(t *testing.T, err error, suite string) map[string]*RuleError {
	t.Helper()
	out := map[string]*RuleError{}
	for _, re := range RuleErrors(err) {
		if re.Suite != suite {
			t.Errorf("RuleError from suite %q, want %q: %v", re.Suite, suite, re)
		}
		out[re.Rule] = re
	}
	return out
}

func TestCheckKeyspaceMemoryPasses(t *testing.T) {
	calls := 0
	err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) {
		calls++
		return keyspace.NewMemory(), nil, nil
	})
	if err != nil {
		t.Fatalf("CheckKeyspace(keyspace.Memory) = %v, want nil", err)
	}
	if calls != len(keyspaceSuite.rules) {
		t.Errorf("the factory was called %d times for %d rules, want a fresh store per rule", calls, len(keyspaceSuite.rules))
	}
}

func TestCheckKeyspaceCatchesBrokenStores(t *testing.T) {
	memory := func() keyspace.Store { return keyspace.NewMemory() }
	testCases := []struct {
		name  string
		store func() keyspace.Store
		rules []string // each must be among the failures
	}{
		{"partial write on conflict", func() keyspace.Store { return partialConflictKS{memory()} }, []string{RuleKSConflictWritesNone}},
		{"expected head reported as found", func() keyspace.Store { return expectedHeadKS{memory()} }, []string{RuleKSConflictFound}},
		{"mixed streams accepted", func() keyspace.Store { return mixedAcceptingKS{memory()} }, []string{RuleKSMixedStreams}},
		{"listing ignores the run", func() keyspace.Store {
			return &runBlindListingKS{Store: memory(), runs: map[eventstore.WorkflowID][]eventstore.RunID{}}
		}, []string{RuleKSListRunScoping}},
		{"ReadFrom off by one", func() keyspace.Store { return offByOneKS{memory()} }, []string{RuleKSReadFromResume}},
		{"ephemeral stored", func() keyspace.Store { return ephemeralAcceptingKS{memory()} }, []string{RuleKSEphemeral}},
		{"conflict swallowed", func() keyspace.Store { return conflictSwallowingKS{memory()} }, []string{RuleKSConflictFound, RuleKSConcurrentAppends}},
		{"records alias a cache", func() keyspace.Store {
			return &aliasingKS{Store: memory(), cache: map[keyspace.StreamKey][]keyspace.Record{}}
		}, []string{RuleKSRecordsAreCopies}},
		{"listing out of order", func() keyspace.Store { return reversedListingKS{memory()} }, []string{RuleKSListOrder}},
		{"attempts share a stream", func() keyspace.Store {
			return keyMappingKS{memory(), func(k keyspace.StreamKey) keyspace.StreamKey { k.Attempt = 0; return k }}
		}, []string{RuleKSAttemptsDisjoint}},
		{"runs share a stream", func() keyspace.Store {
			var mu sync.Mutex
			first := map[eventstore.WorkflowID]eventstore.RunID{}
			return keyMappingKS{memory(), func(k keyspace.StreamKey) keyspace.StreamKey {
				mu.Lock()
				defer mu.Unlock()
				if r, ok := first[k.WorkflowID]; ok && !k.RunID.IsZero() {
					k.RunID = r
				} else {
					first[k.WorkflowID] = k.RunID
				}
				return k
			}}
		}, []string{RuleKSRunAxis}},
		{"cancelled context ignored", func() keyspace.Store { return ctxIgnoringKS{memory()} }, []string{RuleKSContextCancelled}},
		{"empty batch answers 0", func() keyspace.Store { return emptyBatchKS{memory()} }, []string{RuleKSEmptyBatch}},
		{"fields lost", func() keyspace.Store { return lossyKS{memory()} }, []string{RuleKSContiguousSeqs, RuleKSBatch}},
		{"stale head", func() keyspace.Store { return staleHeadKS{memory()} }, []string{RuleKSHead, RuleKSContiguousSeqs}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) { return tc.store(), nil, nil }, fixedRulesOnly())
			if err == nil {
				t.Fatal("CheckKeyspace passed a broken keyspace")
			}
			failed := failedRules(t, err, SuiteKeyspace)
			for _, r := range tc.rules {
				if failed[r] == nil {
					t.Errorf("rule %q did not fail; failures: %v", r, err)
				}
			}
			var re *RuleError
			if !errors.As(err, &re) {
				t.Errorf("errors.As(err, *RuleError) = false for %v", err)
			}
		})
	}
}

// A single failure keeps the implementation's own error reachable.
func TestCheckKeyspaceFailureWrapsStoreError(t *testing.T) {
	err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) { return expectedHeadKS{keyspace.NewMemory()}, nil, nil }, fixedRulesOnly())
	re := failedRules(t, err, SuiteKeyspace)[RuleKSConflictFound]
	if re == nil {
		t.Fatalf("rule %q did not fail: %v", RuleKSConflictFound, err)
	}
	if !errors.Is(re, eventstore.ErrSequenceConflict) {
		t.Errorf("the RuleError %v does not wrap the store's conflict error", re)
	}
}
