package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// TestKeyspace tests a [keyspace.Store] implementation against every rule of
// the keyspace contract. Each rule is a subtest named after it, run on a
// fresh store from newStore (called on the subtest's *testing.T, so it may
// call t.Fatal and register cleanups), bounded by a watchdog (see
// [WithRuleTimeout]). Failures are reported with t.Error as a *[RuleError];
// every rule runs whatever the others did.
//
// Typical usage inside a test of the implementation's package:
//
//	func TestConformance(t *testing.T) {
//		conformance.TestKeyspace(t, func(t *testing.T) keyspace.Store {
//			s, err := mystore.Open(t.TempDir())
//			if err != nil {
//				t.Fatal(err)
//			}
//			t.Cleanup(func() { s.Close() })
//			return s
//		})
//	}
//
// The rules are the RuleKS* constants; what they do not check is in the
// package documentation. A failure of a seeded rule names the seed that
// replays it (-conformance.seed). Run it under the race detector: the
// concurrency rules are much sharper there.
func TestKeyspace(t *testing.T, newStore func(t *testing.T) keyspace.Store, opts ...Option) {
	t.Helper()
	keyspaceSuite.test(t, newConfig(opts), newStore)
}

// CheckKeyspace is the error-returning core of [TestKeyspace]: it runs every
// keyspace rule on a fresh store from newStore and returns nil when all hold,
// or the errors.Join of one *[RuleError] per broken rule (see [RuleErrors]).
// newStore returns the store and a cleanup (nil for none) that closes it;
// the cleanup runs when the rule is over, also when it timed out. It never
// stops at the first failure; it stops early only when ctx is done. A rule
// that hangs past its timeout fails with [ErrRuleTimedOut]; one that panics
// fails with [ErrRulePanicked].
func CheckKeyspace(ctx context.Context, newStore func() (keyspace.Store, func(), error), opts ...Option) error {
	return keyspaceSuite.check(ctx, newConfig(opts), newStore)
}

var keyspaceSuite = suite[keyspace.Store]{
	name: SuiteKeyspace,
	rules: []rule[keyspace.Store]{
		{name: RuleKSContiguousSeqs, check: ksContiguousSeqs},
		{name: RuleKSHead, check: ksHead},
		{name: RuleKSBatch, check: ksBatchContract},
		{name: RuleKSConflictFound, check: ksConflictFound},
		{name: RuleKSConflictWritesNone, check: ksConflictWritesNothing},
		{name: RuleKSMixedStreams, check: ksMixedStreams},
		{name: RuleKSEphemeral, check: ksEphemeral},
		{name: RuleKSEmptyBatch, check: ksEmptyBatch},
		{name: RuleKSAttemptsDisjoint, check: ksAttemptsDisjoint},
		{name: RuleKSRunAxis, check: ksRunAxis},
		{name: RuleKSListOrder, check: ksListOrder},
		{name: RuleKSListRunScoping, check: ksListRunScoping},
		{name: RuleKSEmptyListings, check: ksEmptyListings},
		{name: RuleKSReadFromResume, check: ksReadFromResume},
		{name: RuleKSRecordsAreCopies, check: ksRecordsAreCopies},
		{name: RuleKSConcurrentAppends, check: ksConcurrentAppends},
		{name: RuleKSContextCancelled, check: ksContextCancelled},
		{name: RuleKSZeroIDs, check: ksZeroIDs},
		{name: RuleKSAppendEvent, check: ksAppendEvent},
		{name: RuleKSValidation, check: ksValidation},
		{name: RuleKSModel, run: ksModelRule},
		{name: RuleKSConcurrentBatches, run: ksConcurrentBatches},
	},
}

// ksConcurrency is how many goroutines the concurrency rule runs.
const ksConcurrency = 8

// newRunKey returns a key in a fresh random workflow and run, so rules never
// depend on IDs another rule (or another user of a shared backend) wrote.
func newRunKey(activity eventstore.ActivityID, attempt uint32) keyspace.StreamKey {
	return keyspace.NewStreamKey(eventstore.NewWorkflowID(), eventstore.NewRunID(), activity, attempt)
}

// withCoords returns key with another activity and attempt (same run).
func withCoords(key keyspace.StreamKey, activity eventstore.ActivityID, attempt uint32) keyspace.StreamKey {
	key.ActivityID, key.Attempt = activity, attempt
	return key
}

// ksEvent returns a durable message event of key. Times are whole seconds in
// UTC so a store that keeps only microseconds still round-trips them.
func ksEvent(key keyspace.StreamKey, workerSeq uint64, text string) keyspace.ActivityEvent {
	return keyspace.ActivityEvent{
		WorkflowID: key.WorkflowID,
		RunID:      key.RunID,
		ActivityID: key.ActivityID,
		Attempt:    key.Attempt,
		AgentID:    "conformance-agent",
		AgentRole:  "assistant",
		EmittedAt:  time.Unix(1_700_000_000+int64(workerSeq), 0).UTC(),
		WorkerSeq:  workerSeq,
		Content:    keyspace.Message{Role: "assistant", Text: text},
	}
}

// ksBatch returns n events of key with worker seqs first, first+1, ...
func ksBatch(key keyspace.StreamKey, first uint64, n int, text string) []keyspace.ActivityEvent {
	out := make([]keyspace.ActivityEvent, n)
	for i := range out {
		out[i] = ksEvent(key, first+uint64(i), fmt.Sprintf("%s-%d", text, first+uint64(i)))
	}
	return out
}

// appendOK appends and checks the returned head.
func appendOK(ctx context.Context, s keyspace.Store, expectedSeq uint64, events []keyspace.ActivityEvent) error {
	head, err := s.AppendEvents(ctx, expectedSeq, events)
	if err != nil {
		return fmt.Errorf("AppendEvents(expectedSeq=%d, %d events): %w", expectedSeq, len(events), err)
	}
	if want := expectedSeq + uint64(len(events)); head != want {
		return fmt.Errorf("AppendEvents(expectedSeq=%d, %d events) returned head %d, want %d", expectedSeq, len(events), head, want)
	}
	return nil
}

func wantHead(ctx context.Context, s keyspace.Store, key keyspace.StreamKey, want uint64) error {
	got, err := s.Head(ctx, key)
	if err != nil {
		return fmt.Errorf("Head(%v): %w", key, err)
	}
	if got != want {
		return fmt.Errorf("Head(%v) = %d, want %d", key, got, want)
	}
	return nil
}

// sameActivityEvent compares what a store must keep of an event: everything
// but StoreSeq and Persisted, which the store sets.
func sameActivityEvent(got, want keyspace.ActivityEvent) error {
	switch {
	case keyspace.KeyOf(got) != keyspace.KeyOf(want):
		return fmt.Errorf("stream %v, want %v", keyspace.KeyOf(got), keyspace.KeyOf(want))
	case got.AgentID != want.AgentID || got.AgentRole != want.AgentRole:
		return fmt.Errorf("agent %q/%q, want %q/%q", got.AgentID, got.AgentRole, want.AgentID, want.AgentRole)
	case !got.EmittedAt.Equal(want.EmittedAt):
		return fmt.Errorf("EmittedAt %v, want %v", got.EmittedAt, want.EmittedAt)
	case got.WorkerSeq != want.WorkerSeq:
		return fmt.Errorf("WorkerSeq %d, want %d", got.WorkerSeq, want.WorkerSeq)
	case got.Ephemeral != want.Ephemeral:
		return fmt.Errorf("field Ephemeral %v, want %v", got.Ephemeral, want.Ephemeral)
	case !reflect.DeepEqual(got.Content, want.Content):
		return fmt.Errorf("field Content %#v, want %#v", got.Content, want.Content)
	}
	return nil
}

// readExpect reads key from fromSeq with limit and checks the records are
// exactly want, at StoreSeqs firstSeq, firstSeq+1, ..., self-describing.
func readExpect(ctx context.Context, s keyspace.Store, key keyspace.StreamKey, fromSeq uint64, limit int, firstSeq uint64, want []keyspace.ActivityEvent) error {
	recs, err := s.ReadFrom(ctx, key, fromSeq, limit)
	if err != nil {
		return fmt.Errorf("ReadFrom(%v, %d, %d): %w", key, fromSeq, limit, err)
	}
	if len(recs) != len(want) {
		return fmt.Errorf("ReadFrom(%v, %d, %d) returned %d records (store seqs %v), want %d from store seq %d",
			key, fromSeq, limit, len(recs), recordSeqs(recs), len(want), firstSeq)
	}
	for i, r := range recs {
		seq := firstSeq + uint64(i)
		if r.StoreSeq != seq {
			return fmt.Errorf("ReadFrom(%v, %d, %d): record %d has StoreSeq %d, want %d (store seqs %v)", key, fromSeq, limit, i, r.StoreSeq, seq, recordSeqs(recs))
		}
		if r.Event.StoreSeq != r.StoreSeq || !r.Event.Persisted {
			return fmt.Errorf("ReadFrom(%v): record %d is not self-describing: Event.StoreSeq %d, Event.Persisted %v, want %d, true", key, seq, r.Event.StoreSeq, r.Event.Persisted, r.StoreSeq)
		}
		if err := sameActivityEvent(r.Event, want[i]); err != nil {
			return fmt.Errorf("ReadFrom(%v): record %d: %w", key, seq, err)
		}
	}
	return nil
}

func recordSeqs(recs []keyspace.Record) []uint64 {
	out := make([]uint64, len(recs))
	for i, r := range recs {
		out[i] = r.StoreSeq
	}
	return out
}

// snapshot renders everything a reader can see of the given streams and of
// their runs' listings, to prove that a refused call wrote nothing.
func snapshot(ctx context.Context, s keyspace.Store, keys ...keyspace.StreamKey) (string, error) {
	var b strings.Builder
	type run struct {
		wf  eventstore.WorkflowID
		run eventstore.RunID
	}
	seen := map[run]bool{}
	for _, k := range keys {
		head, err := s.Head(ctx, k)
		if err != nil {
			return "", fmt.Errorf("Head(%v): %w", k, err)
		}
		recs, err := s.ReadFrom(ctx, k, 0, 0)
		if err != nil {
			return "", fmt.Errorf("ReadFrom(%v, 0, 0): %w", k, err)
		}
		fmt.Fprintf(&b, "stream %v head %d\n", k, head)
		for _, r := range recs {
			fmt.Fprintf(&b, "  %d: %s %d %#v\n", r.StoreSeq, r.Event.AgentID, r.Event.WorkerSeq, r.Event.Content)
		}
		rk := run{k.WorkflowID, k.RunID}
		if seen[rk] {
			continue
		}
		seen[rk] = true
		list, err := s.ListStreams(ctx, k.WorkflowID, k.RunID)
		if err != nil {
			return "", fmt.Errorf("ListStreams(%v, %v): %w", k.WorkflowID, k.RunID, err)
		}
		fmt.Fprintf(&b, "run %v/%v lists %v\n", k.WorkflowID, k.RunID, list)
	}
	return b.String(), nil
}

// unchanged compares a snapshot taken before a refused call with the state
// after it.
func unchanged(ctx context.Context, s keyspace.Store, before string, what string, keys ...keyspace.StreamKey) error {
	after, err := snapshot(ctx, s, keys...)
	if err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("%s changed the keyspace; before:\n%safter:\n%s", what, before, after)
	}
	return nil
}

func wantConflict(err error, expected, found uint64, what string) error {
	if err == nil {
		return fmt.Errorf("%s succeeded, want a *eventstore.SequenceConflictError (expected %d, found %d)", what, expected, found)
	}
	var conflict *eventstore.SequenceConflictError
	if !errors.As(err, &conflict) {
		return fmt.Errorf("%s: error is not a *eventstore.SequenceConflictError: %w", what, err)
	}
	if !errors.Is(err, eventstore.ErrSequenceConflict) {
		return fmt.Errorf("%s: error does not match eventstore.ErrSequenceConflict: %w", what, err)
	}
	if conflict.Expected != expected || conflict.Found != found {
		return fmt.Errorf("%s: conflict {Expected: %d, Found: %d}, want {Expected: %d, Found: %d} (Found must be the actual head): %w",
			what, conflict.Expected, conflict.Found, expected, found, err)
	}
	return nil
}

func ksContiguousSeqs(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(3, 1)
	evs := ksBatch(key, 1, 5, "contiguous")
	if err := wantHead(ctx, s, key, 0); err != nil {
		return err
	}
	if err := appendOK(ctx, s, 0, evs[:1]); err != nil {
		return err
	}
	if err := appendOK(ctx, s, 1, evs[1:2]); err != nil {
		return err
	}
	if err := appendOK(ctx, s, 2, evs[2:]); err != nil {
		return err
	}
	if err := wantHead(ctx, s, key, 5); err != nil {
		return err
	}
	return readExpect(ctx, s, key, 0, 0, 0, evs)
}

func ksHead(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(0, 1)
	sibling := withCoords(key, 0, 2)
	if err := wantHead(ctx, s, key, 0); err != nil {
		return fmt.Errorf("unwritten stream: %w", err)
	}
	for i, n := range []int{1, 3, 2} {
		head, err := s.Head(ctx, key)
		if err != nil {
			return err
		}
		if err := appendOK(ctx, s, head, ksBatch(key, head, n, "head")); err != nil {
			return fmt.Errorf("append %d: %w", i, err)
		}
	}
	if err := wantHead(ctx, s, key, 6); err != nil {
		return err
	}
	return wantHead(ctx, s, sibling, 0)
}

func ksBatchContract(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(1, 0)
	first := ksBatch(key, 0, 4, "batched")
	if err := appendOK(ctx, s, 0, first); err != nil {
		return err
	}
	if err := readExpect(ctx, s, key, 0, 0, 0, first); err != nil {
		return err
	}
	more := ksBatch(key, 4, 2, "more")
	if err := appendOK(ctx, s, 4, more); err != nil {
		return err
	}
	if err := wantHead(ctx, s, key, 6); err != nil {
		return err
	}
	return readExpect(ctx, s, key, 0, 0, 0, append(first, more...))
}

// ksConflictCase is an append at expected on key that must conflict and be
// told found, the real head.
type ksConflictCase struct {
	name     string
	key      keyspace.StreamKey
	expected uint64
	found    uint64
}

func ksConflictFound(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(2, 1)
	if err := appendOK(ctx, s, 0, ksBatch(key, 0, 3, "x")); err != nil {
		return err
	}
	cases := []ksConflictCase{
		{"stale", key, 1, 3},
		{"consumed-zero", key, 0, 3},
		{"ahead", key, 7, 3},
		{"unwritten-stream", withCoords(key, 2, 2), 2, 0},
	}
	for _, c := range cases {
		_, err := s.AppendEvents(ctx, c.expected, ksBatch(c.key, 100, 1, c.name))
		if err := wantConflict(err, c.expected, c.found, fmt.Sprintf("%s: AppendEvents(expectedSeq=%d) on head %d", c.name, c.expected, c.found)); err != nil {
			return err
		}
	}
	return nil
}

func ksConflictWritesNothing(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(0, 1)
	fresh := withCoords(key, 4, 1)
	if err := appendOK(ctx, s, 0, ksBatch(key, 0, 2, "first")); err != nil {
		return err
	}
	cases := []ksConflictCase{
		{"stale", key, 0, 2},
		{"behind-by-one", key, 1, 2},
		{"ahead", key, 5, 2},
		{"unwritten-stream", fresh, 1, 0},
	}
	for _, c := range cases {
		before, err := snapshot(ctx, s, key, fresh)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("%s: a conflicting 4-event AppendEvents(expectedSeq=%d)", c.name, c.expected)
		_, err = s.AppendEvents(ctx, c.expected, ksBatch(c.key, 10, 4, "losing"))
		if err := wantConflict(err, c.expected, c.found, what); err != nil {
			return err
		}
		if err := unchanged(ctx, s, before, what, key, fresh); err != nil {
			return err
		}
	}
	return nil
}

func ksMixedStreams(ctx context.Context, s keyspace.Store) error {
	base := newRunKey(5, 1)
	if err := appendOK(ctx, s, 0, ksBatch(base, 0, 1, "base")); err != nil {
		return err
	}
	otherWF := base
	otherWF.WorkflowID = eventstore.NewWorkflowID()
	otherRun := base
	otherRun.RunID = eventstore.NewRunID()
	cases := []struct {
		name  string
		other keyspace.StreamKey
	}{
		{"other-attempt", withCoords(base, 5, 2)},
		{"other-activity", withCoords(base, 6, 1)},
		{"other-run", otherRun},
		{"other-workflow", otherWF},
	}
	for _, c := range cases {
		before, err := snapshot(ctx, s, base, c.other)
		if err != nil {
			return err
		}
		// The odd one out is last, so a store that compares only the first
		// two events is caught too.
		batch := append(ksBatch(base, 1, 2, "mixed"), ksEvent(c.other, 3, "intruder"))
		what := fmt.Sprintf("%s: AppendEvents of a batch mixing %v and %v", c.name, base, c.other)
		_, err = s.AppendEvents(ctx, 1, batch)
		if err == nil {
			return fmt.Errorf("%s succeeded, want keyspace.ErrMixedStreams", what)
		}
		if !errors.Is(err, keyspace.ErrMixedStreams) {
			return fmt.Errorf("%s: error %v does not match keyspace.ErrMixedStreams", what, err)
		}
		if err := unchanged(ctx, s, before, what, base, c.other); err != nil {
			return err
		}
	}
	return nil
}

func ksEphemeral(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(0, 1)
	if err := appendOK(ctx, s, 0, ksBatch(key, 0, 1, "durable")); err != nil {
		return err
	}
	live := ksEvent(key, 9, "typing")
	live.Ephemeral = true
	live.Content = keyspace.Status{State: "thinking", Detail: "live only"}
	cases := []struct {
		name  string
		batch []keyspace.ActivityEvent
	}{
		{"alone", []keyspace.ActivityEvent{live}},
		{"last-of-three", append(ksBatch(key, 1, 2, "durable"), live)},
	}
	for _, c := range cases {
		before, err := snapshot(ctx, s, key)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("%s: AppendEvents of a batch holding an ephemeral event", c.name)
		_, err = s.AppendEvents(ctx, 1, c.batch)
		if err == nil {
			return fmt.Errorf("%s succeeded, want keyspace.ErrEphemeral", what)
		}
		if !errors.Is(err, keyspace.ErrEphemeral) {
			return fmt.Errorf("%s: error %v does not match keyspace.ErrEphemeral", what, err)
		}
		if err := unchanged(ctx, s, before, what, key); err != nil {
			return err
		}
	}
	return nil
}

func ksEmptyBatch(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(0, 0)
	if err := appendOK(ctx, s, 0, ksBatch(key, 0, 2, "x")); err != nil {
		return err
	}
	before, err := snapshot(ctx, s, key)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name     string
		expected uint64
		batch    []keyspace.ActivityEvent
	}{
		{"nil-at-zero", 0, nil},
		{"empty-at-head", 2, []keyspace.ActivityEvent{}},
		{"empty-elsewhere", 9, []keyspace.ActivityEvent{}},
	} {
		head, err := s.AppendEvents(ctx, c.expected, c.batch)
		if err != nil {
			return fmt.Errorf("%s: AppendEvents(expectedSeq=%d, empty): %w; an empty batch is a no-op", c.name, c.expected, err)
		}
		if head != c.expected {
			return fmt.Errorf("%s: AppendEvents(expectedSeq=%d, empty) returned %d, want expectedSeq", c.name, c.expected, head)
		}
	}
	return unchanged(ctx, s, before, "an empty AppendEvents", key)
}

func ksAttemptsDisjoint(ctx context.Context, s keyspace.Store) error {
	// Attempts 0, 1, 1<<16 and the largest, and activity 3+1<<32: a store
	// keeping a coordinate in a narrower column folds 1<<16 onto 0 (16
	// bits), the largest attempt onto a small one (a signed or narrower
	// type), or the activity onto 3 (32 bits).
	a0 := newRunKey(3, 0)
	keys := []keyspace.StreamKey{a0, withCoords(a0, 3, 1), withCoords(a0, 3, 1<<16), withCoords(a0, 3, math.MaxUint32), withCoords(a0, 3+1<<32, 0)}
	batches := make([][]keyspace.ActivityEvent, len(keys))
	for i, k := range keys {
		batches[i] = ksBatch(k, 0, len(keys)-i, fmt.Sprintf("attempt-%d", k.Attempt))
		if err := appendOK(ctx, s, 0, batches[i]); err != nil {
			if i == 0 {
				return err
			}
			return fmt.Errorf("the first event of attempt %d must land at 0 of its own stream: %w", k.Attempt, err)
		}
	}
	for i, k := range keys {
		if err := wantHead(ctx, s, k, uint64(len(batches[i]))); err != nil {
			return err
		}
		if err := readExpect(ctx, s, k, 0, 0, 0, batches[i]); err != nil {
			return err
		}
	}
	return nil
}

func ksRunAxis(ctx context.Context, s keyspace.Store) error {
	gen1 := newRunKey(0, 1)
	gen2 := gen1
	gen2.RunID = eventstore.NewRunID()
	e1 := ksEvent(gen1, 1, "generation one")
	e2 := ksEvent(gen2, 1, "generation two")
	if err := appendOK(ctx, s, 0, []keyspace.ActivityEvent{e1}); err != nil {
		return err
	}
	if err := appendOK(ctx, s, 0, []keyspace.ActivityEvent{e2}); err != nil {
		return fmt.Errorf("a new run's first event must land at 0 of its own stream, not after the previous run's: %w", err)
	}
	if err := readExpect(ctx, s, gen2, 0, 0, 0, []keyspace.ActivityEvent{e2}); err != nil {
		return err
	}
	if err := readExpect(ctx, s, gen1, 0, 0, 0, []keyspace.ActivityEvent{e1}); err != nil {
		return err
	}
	if err := wantHead(ctx, s, gen1, 1); err != nil {
		return err
	}
	return wantHead(ctx, s, gen2, 1)
}

type listed struct {
	activity eventstore.ActivityID
	attempt  uint32
	head     uint64
}

func wantListing(ctx context.Context, s keyspace.Store, wf eventstore.WorkflowID, run eventstore.RunID, want []listed) error {
	got, err := s.ListStreams(ctx, wf, run)
	if err != nil {
		return fmt.Errorf("ListStreams(%v, %v): %w", wf, run, err)
	}
	gotL := make([]listed, len(got))
	for i, sum := range got {
		if sum.Key.WorkflowID != wf || sum.Key.RunID != run {
			return fmt.Errorf("ListStreams(%v, %v) returned stream %v of another workflow or run", wf, run, sum.Key)
		}
		gotL[i] = listed{sum.Key.ActivityID, sum.Key.Attempt, sum.Head}
	}
	if len(want) == 0 && len(gotL) == 0 {
		return nil
	}
	if !reflect.DeepEqual(gotL, want) {
		return fmt.Errorf("ListStreams(%v, %v) = %+v (activity, attempt, head), want %+v", wf, run, gotL, want)
	}
	return nil
}

func ksListOrder(ctx context.Context, s keyspace.Store) error {
	k := newRunKey(0, 0)
	// Inserted out of order; activity 10 and attempt 10 catch a store that
	// sorts the numbers as text.
	writes := []struct {
		activity eventstore.ActivityID
		attempt  uint32
		n        int
	}{
		{10, 0, 1}, {2, 1, 1}, {2, 0, 2}, {2, 10, 1}, {2, 9, 3},
	}
	for _, w := range writes {
		key := withCoords(k, w.activity, w.attempt)
		if err := appendOK(ctx, s, 0, ksBatch(key, 0, w.n, "list")); err != nil {
			return err
		}
	}
	return wantListing(ctx, s, k.WorkflowID, k.RunID, []listed{
		{2, 0, 2}, {2, 1, 1}, {2, 9, 3}, {2, 10, 1}, {10, 0, 1},
	})
}

func ksListRunScoping(ctx context.Context, s keyspace.Store) error {
	run1 := newRunKey(0, 1)
	run2 := run1
	run2.RunID = eventstore.NewRunID()
	otherWF := run1 // another workflow that happens to carry the same run ID
	otherWF.WorkflowID = eventstore.NewWorkflowID()
	writes := []struct {
		key keyspace.StreamKey
		n   int
	}{
		{run1, 2},
		{withCoords(run1, 1, 1), 1},
		{run2, 3},
		{withCoords(run2, 7, 2), 1},
		{otherWF, 4},
	}
	for _, w := range writes {
		if err := appendOK(ctx, s, 0, ksBatch(w.key, 0, w.n, "scoped")); err != nil {
			return err
		}
	}
	if err := wantListing(ctx, s, run1.WorkflowID, run1.RunID, []listed{{0, 1, 2}, {1, 1, 1}}); err != nil {
		return err
	}
	if err := wantListing(ctx, s, run2.WorkflowID, run2.RunID, []listed{{0, 1, 3}, {7, 2, 1}}); err != nil {
		return err
	}
	return wantListing(ctx, s, otherWF.WorkflowID, otherWF.RunID, []listed{{0, 1, 4}})
}

func ksEmptyListings(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(0, 1)
	if err := appendOK(ctx, s, 0, ksBatch(key, 0, 1, "x")); err != nil {
		return err
	}
	if err := wantListing(ctx, s, eventstore.NewWorkflowID(), key.RunID, nil); err != nil {
		return fmt.Errorf("unknown workflow: %w", err)
	}
	if err := wantListing(ctx, s, key.WorkflowID, eventstore.NewRunID(), nil); err != nil {
		return fmt.Errorf("unwritten run of a known workflow: %w", err)
	}
	return nil
}

func ksReadFromResume(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(0, 1)
	evs := ksBatch(key, 0, 5, "resume")
	if err := appendOK(ctx, s, 0, evs); err != nil {
		return err
	}
	cases := []struct {
		from  uint64
		limit int
		first uint64
		n     int
	}{
		{0, 0, 0, 5},
		{0, -1, 0, 5},
		{3, 0, 3, 2},
		{1, 2, 1, 2},
		{4, 10, 4, 1},
		{0, 1, 0, 1},
		{5, 0, 5, 0},
		{6, 0, 6, 0},
		{5, 3, 5, 0},
	}
	for _, c := range cases {
		if err := readExpect(ctx, s, key, c.from, c.limit, c.first, evs[min(c.first, 5):min(c.first+uint64(c.n), 5)]); err != nil {
			return err
		}
	}
	return readExpect(ctx, s, withCoords(key, 9, 9), 0, 0, 0, nil)
}

func ksRecordsAreCopies(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(0, 1)
	evs := ksBatch(key, 0, 3, "original")
	want := append([]keyspace.ActivityEvent(nil), evs...)
	if err := appendOK(ctx, s, 0, evs); err != nil {
		return err
	}
	// The caller's slice is the caller's: changing it after the append must
	// not reach the store.
	evs[0].AgentID = "mutated"
	evs[1].Content = keyspace.Message{Role: "user", Text: "mutated"}
	if err := readExpect(ctx, s, key, 0, 0, 0, want); err != nil {
		return fmt.Errorf("after mutating the appended slice: %w", err)
	}
	recs, err := s.ReadFrom(ctx, key, 0, 0)
	if err != nil {
		return err
	}
	for i := range recs {
		recs[i].StoreSeq += 100
		recs[i].Event.StoreSeq += 100
		recs[i].Event.AgentID = "mutated"
		recs[i].Event.Content = keyspace.Message{Role: "user", Text: "mutated"}
	}
	if err := readExpect(ctx, s, key, 0, 0, 0, want); err != nil {
		return fmt.Errorf("after mutating returned records: %w", err)
	}
	list, err := s.ListStreams(ctx, key.WorkflowID, key.RunID)
	if err != nil {
		return err
	}
	for i := range list {
		list[i].Head += 100
		list[i].Key.Attempt += 100
	}
	return wantListing(ctx, s, key.WorkflowID, key.RunID, []listed{{0, 1, 3}})
}

func ksConcurrentAppends(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(0, 1)

	// Phase 1: every round, all goroutines race to append at the same
	// expectedSeq; exactly one may win, and every loser must be told the
	// head the winner left.
	const rounds = 16
	winners := make([]int, rounds)
	for r := range rounds {
		start := make(chan struct{})
		errs := make([]error, ksConcurrency)
		var wg sync.WaitGroup
		for g := range ksConcurrency {
			spawn(&wg, &errs[g], func() error {
				ev := ksEvent(key, uint64(r*ksConcurrency+g), fmt.Sprintf("round %d goroutine %d", r, g))
				<-start
				_, err := s.AppendEvents(ctx, uint64(r), []keyspace.ActivityEvent{ev})
				return err
			})
		}
		close(start)
		wg.Wait()
		won := -1
		for g, err := range errs {
			if err == nil {
				if won >= 0 {
					return fmt.Errorf("round %d: goroutines %d and %d both appended at expectedSeq %d", r, won, g, r)
				}
				won = g
				continue
			}
			if err := wantConflict(err, uint64(r), uint64(r+1), fmt.Sprintf("round %d: losing goroutine %d", r, g)); err != nil {
				return err
			}
		}
		if won < 0 {
			return fmt.Errorf("round %d: no goroutine won expectedSeq %d", r, r)
		}
		winners[r] = won
	}
	recs, err := s.ReadFrom(ctx, key, 0, 0)
	if err != nil {
		return err
	}
	if len(recs) != rounds {
		return fmt.Errorf("after %d contested rounds the stream holds %d records, want %d", rounds, len(recs), rounds)
	}
	for r, rec := range recs {
		if want := uint64(r*ksConcurrency + winners[r]); rec.StoreSeq != uint64(r) || rec.Event.WorkerSeq != want {
			return fmt.Errorf("record %d: StoreSeq %d WorkerSeq %d, want StoreSeq %d from the round's winner (WorkerSeq %d)", r, rec.StoreSeq, rec.Event.WorkerSeq, r, want)
		}
	}

	// Phase 2: free-running writers, each reading the head and retrying on
	// conflict, must land every event exactly once, contiguously. Each
	// conflict a writer meets is caused by another writer's success between
	// its Head and its append, so a writer that loses more often than all
	// the others together succeed is being fed a wrong head.
	key2 := withCoords(key, 1, 1)
	const perWriter = 20
	const maxLosses = ksConcurrency * perWriter
	errs := make([]error, ksConcurrency)
	var wg sync.WaitGroup
	for g := range ksConcurrency {
		spawn(&wg, &errs[g], func() error {
			losses := 0
			for i := 0; i < perWriter; {
				if err := ctx.Err(); err != nil {
					return err
				}
				head, err := s.Head(ctx, key2)
				if err != nil {
					return fmt.Errorf("reading the head: %w", err)
				}
				ev := ksEvent(key2, uint64(i), fmt.Sprintf("writer %d event %d", g, i))
				ev.AgentID = fmt.Sprintf("writer-%d", g)
				_, err = s.AppendEvents(ctx, head, []keyspace.ActivityEvent{ev})
				switch {
				case err == nil:
					i++
				case errors.Is(err, eventstore.ErrSequenceConflict):
					if losses++; losses > maxLosses {
						return fmt.Errorf("writer %d lost %d appends at the head Head reported, more than all writers append together: %w", g, losses, err)
					}
				default:
					return fmt.Errorf("AppendEvents(expectedSeq=%d): %w", head, err)
				}
			}
			return nil
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	recs, err = s.ReadFrom(ctx, key2, 0, 0)
	if err != nil {
		return err
	}
	if len(recs) != ksConcurrency*perWriter {
		return fmt.Errorf("%d writers × %d events: the stream holds %d records, want %d", ksConcurrency, perWriter, len(recs), ksConcurrency*perWriter)
	}
	next := map[string]uint64{}
	for i, rec := range recs {
		if rec.StoreSeq != uint64(i) {
			return fmt.Errorf("record %d has StoreSeq %d: store seqs are not contiguous", i, rec.StoreSeq)
		}
		agent := rec.Event.AgentID
		if rec.Event.WorkerSeq != next[agent] {
			return fmt.Errorf("record %d: %s event %d, want its event %d (lost or duplicated)", i, agent, rec.Event.WorkerSeq, next[agent])
		}
		next[agent]++
	}
	return wantHead(ctx, s, key2, ksConcurrency*perWriter)
}

func ksContextCancelled(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(0, 1)
	if err := appendOK(ctx, s, 0, ksBatch(key, 0, 1, "before")); err != nil {
		return err
	}
	before, err := snapshot(ctx, s, key)
	if err != nil {
		return err
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = s.AppendEvents(cancelled, 1, ksBatch(key, 1, 2, "cancelled"))
	if !errors.Is(err, context.Canceled) {
		return fmt.Errorf("AppendEvents with a cancelled context returned %v, want an error matching context.Canceled", err)
	}
	if err := unchanged(ctx, s, before, "AppendEvents with a cancelled context", key); err != nil {
		return err
	}
	if _, err := s.Head(cancelled, key); !errors.Is(err, context.Canceled) {
		return fmt.Errorf("Head(key) with a cancelled context returned %v, want an error matching context.Canceled", err)
	}
	if _, err := s.ReadFrom(cancelled, key, 0, 0); !errors.Is(err, context.Canceled) {
		return fmt.Errorf("ReadFrom with a cancelled context returned %v, want an error matching context.Canceled", err)
	}
	if _, err := s.ListStreams(cancelled, key.WorkflowID, key.RunID); !errors.Is(err, context.Canceled) {
		return fmt.Errorf("ListStreams with a cancelled context returned %v, want an error matching context.Canceled", err)
	}
	return nil
}

func ksZeroIDs(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(0, 1)
	if err := appendOK(ctx, s, 0, ksBatch(key, 0, 1, "x")); err != nil {
		return err
	}
	zeroWF := key
	zeroWF.WorkflowID = eventstore.WorkflowID{}
	zeroRun := key
	zeroRun.RunID = eventstore.RunID{}
	for _, c := range []struct {
		name string
		key  keyspace.StreamKey
	}{{"zero-workflow", zeroWF}, {"zero-run", zeroRun}} {
		before, err := snapshot(ctx, s, key)
		if err != nil {
			return err
		}
		_, err = s.AppendEvents(ctx, 0, ksBatch(c.key, 0, 2, c.name))
		if !errors.Is(err, eventstore.ErrInvalidArgument) {
			return fmt.Errorf("%s: AppendEvents returned %v, want an error matching eventstore.ErrInvalidArgument", c.name, err)
		}
		if err := unchanged(ctx, s, before, c.name+": AppendEvents", key); err != nil {
			return err
		}
		// Every method refuses them, the reads too: a read answering "empty"
		// for a key no stream can have hides the caller's bug.
		if _, err := s.Head(ctx, c.key); !errors.Is(err, eventstore.ErrInvalidArgument) {
			return fmt.Errorf("%s: Head returned %v, want an error matching eventstore.ErrInvalidArgument", c.name, err)
		}
		if _, err := s.ReadFrom(ctx, c.key, 0, 0); !errors.Is(err, eventstore.ErrInvalidArgument) {
			return fmt.Errorf("%s: ReadFrom returned %v, want an error matching eventstore.ErrInvalidArgument", c.name, err)
		}
		if _, err := s.ListStreams(ctx, c.key.WorkflowID, c.key.RunID); !errors.Is(err, eventstore.ErrInvalidArgument) {
			return fmt.Errorf("%s: ListStreams returned %v, want an error matching eventstore.ErrInvalidArgument", c.name, err)
		}
	}
	return nil
}

func ksAppendEvent(ctx context.Context, s keyspace.Store) error {
	key := newRunKey(0, 1)
	evs := ksBatch(key, 0, 2, "one")
	for i, ev := range evs {
		seq, err := keyspace.AppendEvent(ctx, s, uint64(i), ev)
		if err != nil {
			return fmt.Errorf("AppendEvent(expectedSeq=%d): %w", i, err)
		}
		if seq != uint64(i) {
			return fmt.Errorf("AppendEvent(expectedSeq=%d) returned StoreSeq %d, want %d", i, seq, i)
		}
	}
	_, err := keyspace.AppendEvent(ctx, s, 0, ksEvent(key, 7, "late"))
	if err := wantConflict(err, 0, 2, "AppendEvent at a consumed seq"); err != nil {
		return err
	}
	return readExpect(ctx, s, key, 0, 0, 0, evs)
}
