package conformance

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// Deliberately broken keyspaces, one plausible bug each, for the rules
// added with the model.

// chunkEndKS stops a read at the end of the 1024-record chunk it starts in.
type chunkEndKS struct{ keyspace.Store }

func (s chunkEndKS) ReadFrom(ctx context.Context, key keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
	recs, err := s.Store.ReadFrom(ctx, key, from, limit)
	if end := (from/1024 + 1) * 1024; uint64(len(recs)) > end-from {
		recs = recs[:end-from]
	}
	return recs, err
}

// listCapKS lists at most 256 streams of a run.
type listCapKS struct{ keyspace.Store }

func (s listCapKS) ListStreams(ctx context.Context, wf eventstore.WorkflowID, run eventstore.RunID) ([]keyspace.StreamSummary, error) {
	l, err := s.Store.ListStreams(ctx, wf, run)
	return l[:min(len(l), 256)], err
}

// silentLimitKS applies a page size of 1000 to an unlimited read.
type silentLimitKS struct{ keyspace.Store }

func (s silentLimitKS) ReadFrom(ctx context.Context, key keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	return s.Store.ReadFrom(ctx, key, from, limit)
}

// callerAliasKS keeps the caller's slices and serves reads from them, as a
// store that stores the batch it was given would.
type callerAliasKS struct {
	keyspace.Store
	mu   sync.Mutex
	kept map[keyspace.StreamKey][]*keyspace.ActivityEvent
}

func (s *callerAliasKS) AppendEvents(ctx context.Context, expected uint64, evs []keyspace.ActivityEvent) (uint64, error) {
	h, err := s.Store.AppendEvents(ctx, expected, evs)
	if err == nil && len(evs) > 0 {
		s.mu.Lock()
		for i := range evs {
			s.kept[keyspace.KeyOf(evs[0])] = append(s.kept[keyspace.KeyOf(evs[0])], &evs[i])
		}
		s.mu.Unlock()
	}
	return h, err
}

func (s *callerAliasKS) ReadFrom(ctx context.Context, key keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
	recs, err := s.Store.ReadFrom(ctx, key, from, limit)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range recs {
		if seq := recs[i].StoreSeq; seq < uint64(len(s.kept[key])) {
			ev := *s.kept[key][seq]
			ev.StoreSeq, ev.Persisted = seq, true
			recs[i].Event = ev
		}
	}
	return recs, err
}

// oneByOneKS checks the head, then appends a batch one event at a time:
// racers interleave and partial batches land.
type oneByOneKS struct{ keyspace.Store }

func (s oneByOneKS) AppendEvents(ctx context.Context, expected uint64, evs []keyspace.ActivityEvent) (uint64, error) {
	if len(evs) == 0 {
		return expected, nil
	}
	if h, err := s.Store.Head(ctx, keyspace.KeyOf(evs[0])); err != nil || h != expected {
		if err != nil {
			return 0, err
		}
		return 0, &eventstore.SequenceConflictError{Expected: expected, Found: h}
	}
	for i, ev := range evs {
		runtime.Gosched()
		h, _ := s.Store.Head(ctx, keyspace.KeyOf(ev))
		if _, err := s.Store.AppendEvents(ctx, h, evs[i:i+1]); err != nil {
			return 0, err
		}
	}
	return expected + uint64(len(evs)), nil
}

// nilContentKS stores a nil content pointer as an empty message instead of
// refusing it.
type nilContentKS struct{ keyspace.Store }

func (s nilContentKS) AppendEvents(ctx context.Context, expected uint64, evs []keyspace.ActivityEvent) (uint64, error) {
	evs = slices.Clone(evs)
	for i := range evs {
		if c, ok := evs[i].Content.(*keyspace.Message); ok && c == nil {
			evs[i].Content = keyspace.Message{}
		}
	}
	return s.Store.AppendEvents(ctx, expected, evs)
}

func TestKeyspaceNewRulesCatchBrokenStores(t *testing.T) {
	memory := func() keyspace.Store { return validatingKS{keyspace.NewMemory()} }
	testCases := []struct {
		name  string
		store func() keyspace.Store
		rule  string
	}{
		{"read stops at a chunk boundary", func() keyspace.Store { return chunkEndKS{memory()} }, RuleKSModel},
		{"listing capped at 256", func() keyspace.Store { return listCapKS{memory()} }, RuleKSModel},
		{"silent limit of 1000", func() keyspace.Store { return silentLimitKS{memory()} }, RuleKSModel},
		{"caller memory kept", func() keyspace.Store {
			return &callerAliasKS{Store: memory(), kept: map[keyspace.StreamKey][]*keyspace.ActivityEvent{}}
		}, RuleKSModel},
		{"batch appended one event at a time", func() keyspace.Store { return oneByOneKS{memory()} }, RuleKSConcurrentBatches},
		{"nil content stored", func() keyspace.Store { return nilContentKS{memory()} }, RuleKSValidation},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			// Two seeds: the verdict must not depend on the one drawn.
			for _, seed := range []int64{1, 20260101} {
				err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) { return tc.store(), nil, nil }, WithSeed(seed), withoutShrinking(), onlyRules(tc.rule))
				re := failedRules(t, err, SuiteKeyspace)[tc.rule]
				if re == nil {
					t.Fatalf("seed %d: rule %q did not fail; failures: %v", seed, tc.rule, err)
				}
				if want := newConfig([]Option{WithSeed(seed)}).seed; tc.rule != RuleKSValidation && re.Seed != want {
					t.Errorf("the RuleError names seed %d, want %d", re.Seed, want)
				}
				t.Logf("seed %d: %v", seed, firstLines(re.Error(), 6))
			}
		})
	}
}

// validatingKS is keyspace.Memory with the content checks the durable
// backends make (issue 12 item 6), until Memory makes them itself.
type validatingKS struct{ keyspace.Store }

func (s validatingKS) AppendEvents(ctx context.Context, expected uint64, evs []keyspace.ActivityEvent) (uint64, error) {
	for _, ev := range evs {
		switch c := ev.Content.(type) {
		case nil, keyspace.Message, keyspace.ToolCall, keyspace.ToolResult, keyspace.Status, keyspace.Usage:
		case *keyspace.Message:
			if c == nil {
				return 0, eventstore.ErrInvalidArgument
			}
		default:
			return 0, eventstore.ErrInvalidArgument
		}
	}
	return s.Store.AppendEvents(ctx, expected, evs)
}

func withoutShrinking() Option { return optionFunc(func(c *config) { c.noShrink = true }) }

// onlyRules runs only the named rules.
func onlyRules(names ...string) Option {
	return optionFunc(func(c *config) {
		c.only = map[string]bool{}
		for _, n := range names {
			c.only[n] = true
		}
	})
}

// fixedRulesOnly leaves the seeded rules out.
func fixedRulesOnly() Option { return optionFunc(func(c *config) { c.noSeeded = true }) }

// A failure shrinks to a short sequence that still fails on a fresh store,
// and the same seed replays the same failure.
func TestModelFailureShrinksAndReplays(t *testing.T) {
	run := func() *opError {
		err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) {
			return chunkEndKS{validatingKS{keyspace.NewMemory()}}, nil, nil
		}, WithSeed(7))
		re := failedRules(t, err, SuiteKeyspace)[RuleKSModel]
		if re == nil {
			t.Fatalf("rule %q did not fail: %v", RuleKSModel, err)
		}
		var oe *opError
		if !errors.As(re, &oe) {
			t.Fatalf("the model failure %v is not an *opError", re)
		}
		return oe
	}
	first, again := run(), run()
	if len(first.repro) == 0 || len(first.repro) >= first.index+1 {
		t.Errorf("shrunk to %d operations from a failing prefix of %d, want a shorter one", len(first.repro), first.index+1)
	}
	if first.index != again.index || first.op != again.op {
		t.Errorf("the same seed failed at operation %d (%s), then at %d (%s)", first.index, first.op, again.index, again.op)
	}
	t.Logf("%v", firstLines(first.Error(), 30))
}

func firstLines(s string, n int) string {
	lines := 0
	for i := range len(s) {
		if s[i] == '\n' {
			if lines++; lines == n {
				return s[:i] + " ..."
			}
		}
	}
	return s
}

// Deliberately broken event stores.

// readCapES stops reading a history after 2048 events.
type readCapES struct{ *eventstore.Memory }

func (s readCapES) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	return s.ReadHistoryFrom(ctx, wf, 1)
}

func (s readCapES) ReadHistoryFrom(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
	evs, err := s.Memory.ReadHistoryFrom(ctx, wf, from)
	return evs[:min(len(evs), 2048)], err
}

// listCapES lists at most 128 workflows.
type listCapES struct{ *eventstore.Memory }

func (s listCapES) ListWorkflowIDs(ctx context.Context) ([]eventstore.WorkflowID, error) {
	ids, err := s.Memory.ListWorkflowIDs(ctx)
	return ids[:min(len(ids), 128)], err
}

// runBlindSettleES settles rows by workflow and ordinal, forgetting the
// run: a terminal in a new run of a continue-as-new chain also settles the
// previous run's row of the same ordinal (here: cancels it).
type runBlindSettleES struct {
	*eventstore.Memory
	mu   sync.Mutex
	rows map[eventstore.WorkflowID][]eventstore.OutboxRow
}

func (s *runBlindSettleES) AppendWithOutbox(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, seq uint64, rows []eventstore.OutboxRow) error {
	if err := s.Memory.AppendWithOutbox(ctx, tok, wf, evs, seq, rows); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rows {
		if r.DispatchKey == "" {
			r.DispatchKey = eventstore.DispatchKey(wf, r.RunID, r.Ordinal)
		}
		s.rows[wf] = append(s.rows[wf], r)
	}
	for _, ev := range evs {
		if c, ok := ev.(eventstore.ActivityCompleted); ok {
			for _, r := range s.rows[wf] {
				if r.Ordinal == c.ActivityID && r.RunID != c.RunID {
					_ = s.Memory.SettleOutboxRowCancelled(ctx, r.DispatchKey)
				}
			}
		}
	}
	return nil
}

// queryCapES answers a query with at most 100 summaries, whatever its
// Limit.
type queryCapES struct{ *eventstore.Memory }

func (s queryCapES) Query(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
	out, err := s.Memory.Query(ctx, f)
	return out[:min(len(out), 100)], err
}

// neverSettleES stages rows under a shifted ordinal, so no activity
// terminal ever settles them; claims shift it back.
type neverSettleES struct{ *eventstore.Memory }

const settleShift = 1 << 40

func (s neverSettleES) AppendWithOutbox(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, seq uint64, rows []eventstore.OutboxRow) error {
	rows = slices.Clone(rows)
	for i := range rows {
		if rows[i].DispatchKey == "" {
			rows[i].DispatchKey = eventstore.DispatchKey(wf, rows[i].RunID, rows[i].Ordinal)
		}
		rows[i].Ordinal += settleShift
	}
	return s.Memory.AppendWithOutbox(ctx, tok, wf, evs, seq, rows)
}

func (s neverSettleES) ClaimOutboxRows(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
	rows, err := s.Memory.ClaimOutboxRows(ctx, limit)
	for i := range rows {
		rows[i].Ordinal -= settleShift
	}
	return rows, err
}

// newestFirstClaimES returns claimed rows newest first.
type newestFirstClaimES struct{ *eventstore.Memory }

func (s newestFirstClaimES) ClaimOutboxRows(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
	rows, err := s.Memory.ClaimOutboxRows(ctx, limit)
	slices.Reverse(rows)
	return rows, err
}

// fireAtOnlyFenceES fences timer retirement on fireAt alone.
type fireAtOnlyFenceES struct{ *eventstore.Memory }

func (s fireAtOnlyFenceES) RetireTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) (eventstore.TimerRetirement, error) {
	all, _ := s.Memory.ExpiredTimers(ctx, time.Unix(1<<40, 0))
	for _, e := range all {
		if e.WorkflowID == wf && e.TimerID == id && e.FireAt.Equal(at) {
			seq = e.ArmedSeq
		}
	}
	return s.Memory.RetireTimer(ctx, wf, id, at, seq)
}

// routesOneByOneES stores the package, then each route, stopping at the
// first bad one: a partial multi-part write.
type routesOneByOneES struct{ *eventstore.Memory }

func (s routesOneByOneES) PutPackageWithRoutes(ctx context.Context, r eventstore.PackageRecord, types []string) error {
	if err := s.Memory.PutPackage(ctx, r); err != nil {
		return err
	}
	for _, t := range types {
		if err := s.Memory.PutPackageRoute(ctx, t, r.ContentHash); err != nil {
			return err
		}
	}
	return nil
}

// shardsOneByOneES acquires shards one at a time, stopping at a bad one.
type shardsOneByOneES struct{ *eventstore.Memory }

func (s shardsOneByOneES) AcquireOwnedShards(ctx context.Context, shards []int) error {
	for _, sh := range shards {
		if err := s.Memory.AcquireOwnedShard(ctx, sh); err != nil {
			return err
		}
	}
	return nil
}

// packageAliasES keeps the caller's package bytes and lists them.
type packageAliasES struct {
	*eventstore.Memory
	mu   sync.Mutex
	kept map[[2]string][]byte
}

func (s *packageAliasES) PutPackage(ctx context.Context, r eventstore.PackageRecord) error {
	err := s.Memory.PutPackage(ctx, r)
	if err == nil {
		s.mu.Lock()
		s.kept[[2]string{r.WorkflowType, r.ContentHash}] = r.Data
		s.mu.Unlock()
	}
	return err
}

func (s *packageAliasES) ListPackages(ctx context.Context) ([]eventstore.PackageRecord, error) {
	out, err := s.Memory.ListPackages(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range out {
		if d, ok := s.kept[[2]string{out[i].WorkflowType, out[i].ContentHash}]; ok {
			out[i].Data = d
		}
	}
	return out, err
}

// oneByOneES checks the head, then appends a batch one event at a time.
type oneByOneES struct{ eventstore.Store }

func (s oneByOneES) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, seq uint64) error {
	if !tok.Valid() || len(evs) == 0 {
		return s.Store.Append(ctx, tok, wf, evs, seq)
	}
	if after, err := s.Store.ReadHistoryFrom(ctx, wf, seq+1); err != nil || len(after) > 0 {
		return s.Store.Append(ctx, tok, wf, evs, seq) // the inner store reports the conflict
	}
	for i := range evs {
		runtime.Gosched()
		if err := s.Store.Append(ctx, tok, wf, evs[i:i+1], seq+uint64(i)); err != nil {
			return err
		}
	}
	return nil
}

func TestEventStoreNewRulesCatchBrokenStores(t *testing.T) {
	testCases := []struct {
		name  string
		store func(m *eventstore.Memory) eventstore.Store
		rule  string
	}{
		{"read stops after 2048 events", func(m *eventstore.Memory) eventstore.Store { return readCapES{m} }, RuleESModel},
		{"listing capped at 128", func(m *eventstore.Memory) eventstore.Store { return listCapES{m} }, RuleESModel},
		{"rows settled across runs", func(m *eventstore.Memory) eventstore.Store {
			return &runBlindSettleES{Memory: m, rows: map[eventstore.WorkflowID][]eventstore.OutboxRow{}}
		}, RuleESModel},
		{"query capped at 100", func(m *eventstore.Memory) eventstore.Store { return queryCapES{m} }, RuleESModel},
		{"outbox rows never settle", func(m *eventstore.Memory) eventstore.Store { return neverSettleES{m} }, RuleESModel},
		{"claims newest first", func(m *eventstore.Memory) eventstore.Store { return newestFirstClaimES{m} }, RuleESModel},
		{"timer fence ignores armedSeq", func(m *eventstore.Memory) eventstore.Store { return fireAtOnlyFenceES{m} }, RuleESModel},
		{"routes stored one by one", func(m *eventstore.Memory) eventstore.Store { return routesOneByOneES{m} }, RuleESModel},
		{"shards acquired one by one", func(m *eventstore.Memory) eventstore.Store { return shardsOneByOneES{m} }, RuleESModel},
		{"package bytes aliased", func(m *eventstore.Memory) eventstore.Store {
			return &packageAliasES{Memory: m, kept: map[[2]string][]byte{}}
		}, RuleESAliasing},
		{"batch appended one event at a time", func(m *eventstore.Memory) eventstore.Store { return oneByOneES{m} }, RuleESConcurrentAppends},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			for _, seed := range []int64{1, 20260101} {
				err := CheckEventStore(t.Context(), func() (eventstore.Store, func(), error) {
					return tc.store(eventstore.NewMemory()), nil, nil
				}, WithSeed(seed), withoutShrinking(), onlyRules(tc.rule))
				re := failedRules(t, err, SuiteEventStore)[tc.rule]
				if re == nil {
					t.Fatalf("seed %d: rule %q did not fail; failures: %v", seed, tc.rule, err)
				}
				t.Logf("seed %d: %v", seed, firstLines(re.Error(), 6))
			}
		})
	}
}

// A store without a capability the caller requires fails that
// capability's rules instead of skipping them.
func TestRequiredCapabilityMissingFails(t *testing.T) {
	newStore := func() (eventstore.Store, func(), error) { return storeOnly{eventstore.NewMemory()}, nil, nil }
	if err := CheckEventStore(t.Context(), newStore, fixedRulesOnly()); err != nil {
		t.Fatalf("without the requirement: %v, want nil (skipped)", err)
	}
	err := CheckEventStore(t.Context(), newStore, WithRequiredCapabilities(CapOutbox), fixedRulesOnly())
	failed := failedRules(t, err, SuiteEventStore)
	if re := failed[RuleOutboxClaim]; re == nil || !errors.Is(re, ErrCapabilityMissing) {
		t.Errorf("rule %q = %v, want a failure matching ErrCapabilityMissing", RuleOutboxClaim, re)
	}
	if re := failed[RuleShardAcquireOne]; re != nil {
		t.Errorf("rule %q failed (%v), but ShardOwner was not required", RuleShardAcquireOne, re)
	}
}

// Every cleanup a factory returns runs, once per fresh store.
func TestCheckRunsCleanups(t *testing.T) {
	made, closed := 0, 0
	err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) {
		made++
		return validatingKS{keyspace.NewMemory()}, func() { closed++ }, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if made != len(keyspaceSuite.rules) || closed != made {
		t.Errorf("%d stores made, %d closed, want %d each", made, closed, len(keyspaceSuite.rules))
	}
}
