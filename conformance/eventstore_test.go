package conformance

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// The deliberately broken event stores: thin wrappers around
// eventstore.Memory (so they keep its Outbox and ShardOwner methods), each
// with one bug.

// storeOnly hides Memory's capabilities: it is a plain eventstore.Store.
type storeOnly struct{ eventstore.Store }

// partialConflictES commits the first event of a conflicting batch at the
// real head before it reports the conflict.
type partialConflictES struct{ *eventstore.Memory }

func (s partialConflictES) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	hist, err := s.Memory.ReadHistory(ctx, wf)
	if err != nil {
		return err
	}
	if head := uint64(len(hist)); head != expectedSeq && len(events) > 0 {
		_ = s.Memory.Append(ctx, tok, wf, events[:1], head)
		return &eventstore.SequenceConflictError{Expected: expectedSeq, Found: head}
	}
	return s.Memory.Append(ctx, tok, wf, events, expectedSeq)
}

// zeroBasedES numbers its history from 0.
type zeroBasedES struct{ *eventstore.Memory }

func shiftDown(events []eventstore.Event) []eventstore.Event {
	for i, ev := range events {
		env := ev.EventEnvelope()
		env.Seq--
		events[i] = eventstore.WithEnvelope(ev, env)
	}
	return events
}

func (s zeroBasedES) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	evs, err := s.Memory.ReadHistory(ctx, wf)
	return shiftDown(evs), err
}

func (s zeroBasedES) ReadHistoryFrom(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
	evs, err := s.Memory.ReadHistoryFrom(ctx, wf, from+1)
	return shiftDown(evs), err
}

// wrongFoundES reports the caller's expected sequence as the head found.
type wrongFoundES struct{ *eventstore.Memory }

func (s wrongFoundES) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	err := s.Memory.Append(ctx, tok, wf, events, expectedSeq)
	if errors.Is(err, eventstore.ErrSequenceConflict) {
		return &eventstore.SequenceConflictError{Expected: expectedSeq, Found: expectedSeq}
	}
	return err
}

// callerMutatingES stamps the sequence into the caller's slice.
type callerMutatingES struct{ *eventstore.Memory }

func (s callerMutatingES) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	err := s.Memory.Append(ctx, tok, wf, events, expectedSeq)
	if err == nil {
		for i, ev := range events {
			env := ev.EventEnvelope()
			env.Seq = expectedSeq + 1 + uint64(i)
			events[i] = eventstore.WithEnvelope(ev, env)
		}
	}
	return err
}

// clockOnlyES replaces every RecordedAt with its own clock.
type clockOnlyES struct{ *eventstore.Memory }

func (s clockOnlyES) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	restamped := make([]eventstore.Event, len(events))
	for i, ev := range events {
		if ev != nil {
			env := ev.EventEnvelope()
			env.RecordedAt = time.Time{}
			ev = eventstore.WithEnvelope(ev, env)
		}
		restamped[i] = ev
	}
	return s.Memory.Append(ctx, tok, wf, restamped, expectedSeq)
}

// tokenBlindES writes whatever token it is given.
type tokenBlindES struct{ *eventstore.Memory }

func (s tokenBlindES) Append(ctx context.Context, _ eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	return s.Memory.Append(ctx, eventstore.RecorderToken(), wf, events, expectedSeq)
}

// nilDroppingES silently drops nil events from a batch.
type nilDroppingES struct{ *eventstore.Memory }

func (s nilDroppingES) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	return s.Memory.Append(ctx, tok, wf, slices.DeleteFunc(slices.Clone(events), func(ev eventstore.Event) bool { return ev == nil }), expectedSeq)
}

// emptyRefusingES refuses an empty batch.
type emptyRefusingES struct{ *eventstore.Memory }

func (s emptyRefusingES) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	if len(events) == 0 {
		return eventstore.ErrInvalidArgument
	}
	return s.Memory.Append(ctx, tok, wf, events, expectedSeq)
}

// unknownNotFoundES treats an unknown workflow's history as an error.
type unknownNotFoundES struct{ *eventstore.Memory }

func (s unknownNotFoundES) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	evs, err := s.Memory.ReadHistory(ctx, wf)
	if err == nil && len(evs) == 0 {
		return nil, eventstore.ErrNotFound
	}
	return evs, err
}

// fromOffByOneES resumes one event late.
type fromOffByOneES struct{ *eventstore.Memory }

func (s fromOffByOneES) ReadHistoryFrom(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
	return s.Memory.ReadHistoryFrom(ctx, wf, from+1)
}

// newestFirstChainES lists runs newest first.
type newestFirstChainES struct{ *eventstore.Memory }

func (s newestFirstChainES) ReadRunChain(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.RunSummary, error) {
	runs, err := s.Memory.ReadRunChain(ctx, wf)
	slices.Reverse(runs)
	return runs, err
}

// pausedActiveES lists paused workflows as active too.
type pausedActiveES struct{ *eventstore.Memory }

func (s pausedActiveES) ListActive(ctx context.Context) ([]eventstore.WorkflowID, error) {
	active, err := s.Memory.ListActive(ctx)
	if err != nil {
		return nil, err
	}
	paused, err := s.Memory.ListPaused(ctx)
	return append(active, paused...), err
}

// headsPlusOneES counts one event too many.
type headsPlusOneES struct{ *eventstore.Memory }

func (s headsPlusOneES) StreamHeads(ctx context.Context) ([]eventstore.StreamHead, error) {
	heads, err := s.Memory.StreamHeads(ctx)
	for i := range heads {
		heads[i].Head++
	}
	return heads, err
}

// limitBlindES ignores the query limit.
type limitBlindES struct{ *eventstore.Memory }

func (s limitBlindES) Query(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
	f.Limit = 0
	return s.Memory.Query(ctx, f)
}

// unfencedTimersES retires a re-armed timer whatever arming it is named by.
type unfencedTimersES struct{ *eventstore.Memory }

func (s unfencedTimersES) RetireTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) (eventstore.TimerRetirement, error) {
	r, err := s.Memory.RetireTimer(ctx, wf, id, at, seq)
	if err != nil || r != eventstore.TimerSuperseded {
		return r, err
	}
	all, err := s.Memory.ExpiredTimers(ctx, time.Unix(1<<40, 0))
	if err != nil {
		return 0, err
	}
	for _, e := range all {
		if e.WorkflowID == wf && e.TimerID == id {
			return s.Memory.RetireTimer(ctx, wf, id, e.FireAt, e.ArmedSeq)
		}
	}
	return r, nil
}

// deleteMissingOKES reports success for deleting a package it never held.
type deleteMissingOKES struct{ *eventstore.Memory }

func (s deleteMissingOKES) DeletePackage(ctx context.Context, wt, hash string) error {
	if err := s.Memory.DeletePackage(ctx, wt, hash); !errors.Is(err, eventstore.ErrNotFound) {
		return err
	}
	return nil
}

// ctxIgnoringES reads histories even with a cancelled context.
type ctxIgnoringES struct{ *eventstore.Memory }

func (s ctxIgnoringES) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	return s.Memory.ReadHistory(context.WithoutCancel(ctx), wf)
}

// rowsFirstES stages the rows before it appends the events, so a conflict
// leaves the rows behind.
type rowsFirstES struct{ *eventstore.Memory }

func (s rowsFirstES) AppendWithOutbox(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64, rows []eventstore.OutboxRow) error {
	hist, err := s.Memory.ReadHistory(ctx, wf)
	if err != nil {
		return err
	}
	if err := s.Memory.AppendWithOutbox(ctx, tok, wf, nil, uint64(len(hist)), rows); err != nil {
		return err
	}
	return s.Memory.Append(ctx, tok, wf, events, expectedSeq)
}

// claimOneMoreES claims one row more than asked.
type claimOneMoreES struct{ *eventstore.Memory }

func (s claimOneMoreES) ClaimOutboxRows(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
	if limit <= 0 {
		return s.Memory.ClaimOutboxRows(ctx, limit)
	}
	return s.Memory.ClaimOutboxRows(ctx, limit+1)
}

// rearmNoopES accepts a re-arm and does nothing.
type rearmNoopES struct{ *eventstore.Memory }

func (rearmNoopES) RearmOutboxPending(context.Context, []eventstore.OutboxRow) error { return nil }

// settleNoopES accepts a cancellation and does nothing (the silent no-op of
// the seed's #157 family).
type settleNoopES struct{ *eventstore.Memory }

func (settleNoopES) SettleOutboxRowCancelled(context.Context, string) error { return nil }

// settleKeysLostES settles a workflow's rows but reports none.
type settleKeysLostES struct{ *eventstore.Memory }

func (s settleKeysLostES) SettleWorkflowOutboxRowsCancelled(ctx context.Context, wf eventstore.WorkflowID) ([]string, error) {
	_, err := s.Memory.SettleWorkflowOutboxRowsCancelled(ctx, wf)
	return nil, err
}

// neverOwnerES answers that it owns nothing.
type neverOwnerES struct{ *eventstore.Memory }

func (neverOwnerES) IsCurrentOwner(context.Context, int) bool { return false }

// publishAnywayES acquires a shard it was asked to publish without owning.
type publishAnywayES struct{ *eventstore.Memory }

func (s publishAnywayES) PublishShardOwner(ctx context.Context, shard int) error {
	if !s.Memory.IsCurrentOwner(ctx, shard) {
		if err := s.Memory.AcquireOwnedShard(ctx, shard); err != nil {
			return err
		}
	}
	return s.Memory.PublishShardOwner(ctx, shard)
}

// negativeShardES holds elections for negative shards.
type negativeShardES struct{ *eventstore.Memory }

func (s negativeShardES) AcquireOwnedShard(ctx context.Context, shard int) error {
	if shard < 0 {
		return nil
	}
	return s.Memory.AcquireOwnedShard(ctx, shard)
}

// timerZeroWorkflowES arms timers for the zero workflow.
type timerZeroWorkflowES struct{ *eventstore.Memory }

func (s timerZeroWorkflowES) ScheduleTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) error {
	if wf.IsZero() {
		return nil
	}
	return s.Memory.ScheduleTimer(ctx, wf, id, at, seq)
}

// nilScopeNoneES takes the nil "every shard" scope for "no shard".
type nilScopeNoneES struct{ *eventstore.Memory }

func (s nilScopeNoneES) SetOwnedShards(ctx context.Context, shards []int) {
	if shards == nil {
		shards = []int{}
	}
	s.Memory.SetOwnedShards(ctx, shards)
}

func TestCheckEventStoreMemoryPasses(t *testing.T) {
	calls := 0
	err := CheckEventStore(t.Context(), func() (eventstore.Store, func(), error) {
		calls++
		return eventstore.NewMemory(), nil, nil
	})
	if err != nil {
		t.Fatalf("CheckEventStore(eventstore.Memory) = %v, want nil", err)
	}
	if calls != len(eventStoreSuite.rules) {
		t.Errorf("the factory was called %d times for %d rules, want a fresh store per rule", calls, len(eventStoreSuite.rules))
	}
}

// A store without the optional capabilities passes: their rules are
// skipped, not failed, and every other rule still runs.
func TestCheckEventStoreWithoutCapabilities(t *testing.T) {
	if err := CheckEventStore(t.Context(), func() (eventstore.Store, func(), error) {
		return storeOnly{eventstore.NewMemory()}, nil, nil
	}); err != nil {
		t.Fatalf("CheckEventStore(Store only) = %v, want nil", err)
	}
	// ... and a broken plain store still fails, so the rules did run.
	err := CheckEventStore(t.Context(), func() (eventstore.Store, func(), error) {
		return storeOnly{wrongFoundES{eventstore.NewMemory()}}, nil, nil
	}, fixedRulesOnly())
	if failedRules(t, err, SuiteEventStore)[RuleESConflictFound] == nil {
		t.Errorf("rule %q did not fail for a broken plain store: %v", RuleESConflictFound, err)
	}
}

func TestCheckEventStoreCatchesBrokenStores(t *testing.T) {
	testCases := []struct {
		name  string
		store func(m *eventstore.Memory) eventstore.Store
		rules []string
	}{
		{"partial write on conflict", func(m *eventstore.Memory) eventstore.Store { return partialConflictES{m} }, []string{RuleESConflictWritesNone}},
		{"seq not stamped from 1", func(m *eventstore.Memory) eventstore.Store { return zeroBasedES{m} }, []string{RuleESSeqStamping}},
		{"expected reported as found", func(m *eventstore.Memory) eventstore.Store { return wrongFoundES{m} }, []string{RuleESConflictFound}},
		{"caller slice mutated", func(m *eventstore.Memory) eventstore.Store { return callerMutatingES{m} }, []string{RuleESSeqStamping}},
		{"caller's RecordedAt replaced", func(m *eventstore.Memory) eventstore.Store { return clockOnlyES{m} }, []string{RuleESSeqStamping}},
		{"zero token accepted", func(m *eventstore.Memory) eventstore.Store { return tokenBlindES{m} }, []string{RuleESZeroToken}},
		{"nil event dropped", func(m *eventstore.Memory) eventstore.Store { return nilDroppingES{m} }, []string{RuleESBadInput}},
		{"empty batch refused", func(m *eventstore.Memory) eventstore.Store { return emptyRefusingES{m} }, []string{RuleESEmptyAppend}},
		{"unknown history is an error", func(m *eventstore.Memory) eventstore.Store { return unknownNotFoundES{m} }, []string{RuleESReadHistory}},
		{"ReadHistoryFrom off by one", func(m *eventstore.Memory) eventstore.Store { return fromOffByOneES{m} }, []string{RuleESReadHistoryFrom}},
		{"run chain newest first", func(m *eventstore.Memory) eventstore.Store { return newestFirstChainES{m} }, []string{RuleESRunChain}},
		{"paused listed active", func(m *eventstore.Memory) eventstore.Store { return pausedActiveES{m} }, []string{RuleESListings}},
		{"heads off by one", func(m *eventstore.Memory) eventstore.Store { return headsPlusOneES{m} }, []string{RuleESStreamHeads}},
		{"query limit ignored", func(m *eventstore.Memory) eventstore.Store { return limitBlindES{m} }, []string{RuleESQuery}},
		{"timer retirement unfenced", func(m *eventstore.Memory) eventstore.Store { return unfencedTimersES{m} }, []string{RuleESTimers}},
		{"missing package deleted", func(m *eventstore.Memory) eventstore.Store { return deleteMissingOKES{m} }, []string{RuleESPackages}},
		{"cancelled context ignored", func(m *eventstore.Memory) eventstore.Store { return ctxIgnoringES{m} }, []string{RuleESContextCancelled}},
		{"outbox rows staged before a conflict", func(m *eventstore.Memory) eventstore.Store { return rowsFirstES{m} }, []string{RuleOutboxAtomic}},
		{"claims past the limit", func(m *eventstore.Memory) eventstore.Store { return claimOneMoreES{m} }, []string{RuleOutboxClaim}},
		{"re-arm does nothing", func(m *eventstore.Memory) eventstore.Store { return rearmNoopES{m} }, []string{RuleOutboxRearm}},
		{"settle does nothing", func(m *eventstore.Memory) eventstore.Store { return settleNoopES{m} }, []string{RuleOutboxSettle}},
		{"settled keys lost", func(m *eventstore.Memory) eventstore.Store { return settleKeysLostES{m} }, []string{RuleOutboxSettleWorkflow}},
		{"never the owner", func(m *eventstore.Memory) eventstore.Store { return neverOwnerES{m} }, []string{RuleShardAcquireOne, RuleShardAcquireMany}},
		{"publishes without owning", func(m *eventstore.Memory) eventstore.Store { return publishAnywayES{m} }, []string{RuleShardPublishNotOwner}},
		{"negative shard elected", func(m *eventstore.Memory) eventstore.Store { return negativeShardES{m} }, []string{RuleShardNegative}},
		{"timer for the zero workflow", func(m *eventstore.Memory) eventstore.Store { return timerZeroWorkflowES{m} }, []string{RuleESTimers}},
		{"nil scope lists nothing", func(m *eventstore.Memory) eventstore.Store { return nilScopeNoneES{m} }, []string{RuleShardScopeEveryShard}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckEventStore(t.Context(), func() (eventstore.Store, func(), error) { return tc.store(eventstore.NewMemory()), nil, nil }, fixedRulesOnly())
			if err == nil {
				t.Fatal("CheckEventStore passed a broken store")
			}
			failed := failedRules(t, err, SuiteEventStore)
			for _, r := range tc.rules {
				if failed[r] == nil {
					t.Errorf("rule %q did not fail; failures: %v", r, err)
				}
			}
		})
	}
}
