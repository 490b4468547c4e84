package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// The held-out broken event stores of issue 35: each written from the
// contract alone, each a class of bugs, each caught by the rules it names.

// historiesBug is an esW with a broken ReadHistories: read answers the
// IDs in order from a correct reader.
type historiesBug struct {
	*esW
	read func(ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error)
}

func (h historiesBug) ReadHistories(ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
	return h.read(ctx, ids)
}

// brokenHistories returns a store whose ReadHistories answers through bug,
// given each ID's history.
func brokenHistories(bug func(ids []eventstore.WorkflowID, hist func(eventstore.WorkflowID) []eventstore.Event) [][]eventstore.Event) func() eventstore.Store {
	return func() eventstore.Store {
		s := newESW()
		return historiesBug{s, func(ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
			var err error
			out := bug(ids, func(id eventstore.WorkflowID) []eventstore.Event {
				h, e := s.ReadHistory(ctx, id)
				err = errors.Join(err, e)
				return h
			})
			if err != nil {
				return nil, err
			}
			return out, nil
		}}
	}
}

// timerIDBug keys timers by norm(ID): IDs norm merges are one timer. With
// keep, ExpiredTimers answers the ID last armed (a store keeping the
// caller's ID in a column beside the normalised key); without, the
// normalised one.
func timerIDBug(norm func(string) string, keep bool) func() eventstore.Store {
	return func() eventstore.Store {
		s := newESW()
		var mu sync.Mutex
		given := map[timerKey]eventstore.TimerID{}
		n := func(id eventstore.TimerID) eventstore.TimerID { return eventstore.TimerID(norm(string(id))) }
		s.scheduleTimer = func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) error {
			err := s.Memory.ScheduleTimer(ctx, wf, n(id), at, seq)
			if err == nil && keep {
				mu.Lock()
				given[timerKey{wf, n(id)}] = id
				mu.Unlock()
			}
			return err
		}
		s.retireTimer = func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) (eventstore.TimerRetirement, error) {
			if id == "" {
				return s.Memory.RetireTimer(ctx, wf, id, at, seq)
			}
			return s.Memory.RetireTimer(ctx, wf, n(id), at, seq)
		}
		s.expiredTimers = func(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
			due, err := s.Memory.ExpiredTimers(ctx, asOf)
			mu.Lock()
			defer mu.Unlock()
			for i, e := range due {
				if id, ok := given[timerKey{e.WorkflowID, e.TimerID}]; ok {
					due[i].TimerID = id
				}
			}
			return due, err
		}
		return s
	}
}

// batchKey names a batch made to a workflow at an expectedSeq.
func batchKey(wf eventstore.WorkflowID, exp uint64, evs []eventstore.Event, rows []eventstore.OutboxRow, outbox bool) string {
	return fmt.Sprintf("%v %d %v %#v %#v", wf, exp, outbox, evs, rows)
}

// refusedRetryBug remembers the batches it refused with a conflict (only
// those at a seq past the head, with ahead); the same batch at the same
// seq is then taken as a retry: answered nil (commit false), or committed
// at the head (commit true).
func refusedRetryBug(commit, ahead bool) func() eventstore.Store {
	return func() eventstore.Store {
		s := newESW()
		var mu sync.Mutex
		seen := map[string]bool{}
		s.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow, outbox bool) error {
			write := func(exp uint64) error {
				if outbox {
					return s.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
				}
				return s.Memory.Append(ctx, tok, wf, evs, exp)
			}
			k := batchKey(wf, exp, evs, rows, outbox)
			mu.Lock()
			again := seen[k]
			mu.Unlock()
			if again {
				if !commit {
					return nil
				}
				head, err := esHead(ctx, s.Memory, wf)
				if err != nil {
					return err
				}
				return write(head)
			}
			err := write(exp)
			var c *eventstore.SequenceConflictError
			if errors.As(err, &c) && (!ahead || exp > c.Found) {
				mu.Lock()
				seen[k] = true
				mu.Unlock()
			}
			return err
		}
		return s
	}
}

// rowsOnlySeqBug stages rows-only batches at the seq at(exp, head) says
// instead of checking exp.
func rowsOnlySeqBug(at func(exp, head uint64) uint64) func() eventstore.Store {
	return func() eventstore.Store {
		s := newESW()
		s.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow, outbox bool) error {
			if !outbox {
				return s.Memory.Append(ctx, tok, wf, evs, exp)
			}
			if len(evs) == 0 && len(rows) > 0 {
				head, err := esHead(ctx, s.Memory, wf)
				if err != nil {
					return err
				}
				exp = at(exp, head)
			}
			return s.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
		}
		return s
	}
}

func heldOutESCases() []classCase {
	var cases []classCase
	add := func(class, name string, mk func() eventstore.Store, rules ...string) {
		cases = append(cases, classCase{class: class, name: name, es: mk, rules: rules})
	}
	// 1. ListPaused capped.
	for _, n := range []int{1000, 1024, 4096} {
		add("list-paused", fmt.Sprintf("capped at %d", n), func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, listPaused: func(ctx context.Context) ([]eventstore.WorkflowID, error) {
				ids, err := m.ListPaused(ctx)
				return ids[:min(len(ids), n)], err
			}}
		}, RuleESStreamHeads)
	}
	// 2. ExpiredTimers capped.
	for _, n := range []int{1024, 2048, 4096} {
		add("expired-timers", fmt.Sprintf("capped at %d", n), func() eventstore.Store {
			s := newESW()
			s.expiredTimers = func(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
				due, err := s.Memory.ExpiredTimers(ctx, asOf)
				return due[:min(len(due), n)], err
			}
			return s
		}, RuleESSizes)
	}
	// 3. Timer IDs mangled (the case-folding, cut and PAD SPACE ones were
	// caught before; trimming and collapsing spaces were not).
	cutAtSpace := func(s string) string { return strings.SplitN(s, " ", 2)[0] }
	padSpace := func(s string) string { return strings.ToLower(strings.TrimRight(s, " ")) }
	for _, norm := range []struct {
		name string
		f    func(string) string
	}{
		{"trimmed of surrounding spaces", strings.TrimSpace},
		{"cut at the first space", cutAtSpace},
		{"compared without spaces", func(s string) string { return strings.ReplaceAll(s, " ", "") }},
		{"compared with runs of spaces collapsed", func(s string) string { return strings.Join(strings.Fields(s), " ") }},
		{"compared case-folded", strings.ToLower},
		{"compared as a PAD SPACE, case-insensitive collation does", padSpace},
	} {
		add("timer-ids", norm.name, timerIDBug(norm.f, false), RuleESTimers)
		add("timer-ids", norm.name+", the ID last armed answered", timerIDBug(norm.f, true), RuleESTimers)
	}
	// 4. Rows-only AppendWithOutbox at a wrong seq (caught before; "0
	// taken as any seq" by the model rule alone).
	add("rows-only-seq", "not checked", rowsOnlySeqBug(func(_, head uint64) uint64 { return head }), RuleOutboxAtomic)
	add("rows-only-seq", "a stale seq taken", rowsOnlySeqBug(func(exp, head uint64) uint64 { return max(exp, head) }), RuleOutboxAtomic)
	add("rows-only-seq", "a future seq taken", rowsOnlySeqBug(func(exp, head uint64) uint64 { return min(exp, head) }), RuleOutboxAtomic)
	add("rows-only-seq", "0 taken as any seq", rowsOnlySeqBug(func(exp, head uint64) uint64 {
		if exp == 0 {
			return head
		}
		return exp
	}), RuleOutboxAtomic)
	add("rows-only-seq", "a stale seq taken once the rows' activities are scheduled", func() eventstore.Store {
		s := newESW()
		s.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow, outbox bool) error {
			if !outbox {
				return s.Memory.Append(ctx, tok, wf, evs, exp)
			}
			if len(evs) == 0 && len(rows) > 0 {
				hist, err := s.Memory.ReadHistory(ctx, wf)
				if err != nil {
					return err
				}
				covered := exp <= uint64(len(hist))
				for _, r := range rows {
					covered = covered && slices.ContainsFunc(hist[:min(exp, uint64(len(hist)))], func(ev eventstore.Event) bool {
						a, ok := ev.(eventstore.ActivityScheduled)
						return ok && a.RunID == r.RunID && a.ActivityID == r.Ordinal
					})
				}
				if covered {
					exp = uint64(len(hist))
				}
			}
			return s.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
		}
		return s
	}, RuleOutboxAtomic)
	// 5. A refused batch made again (the first two were caught before,
	// through accepted batches retried twice; the ahead ones were not).
	add("refused-retry", "answered nil", refusedRetryBug(false, false), RuleESConflictFound, RuleESRetriedAppend)
	add("refused-retry", "committed at the head", refusedRetryBug(true, false), RuleESConflictFound, RuleESRetriedAppend)
	add("refused-retry", "ahead of the head, answered nil", refusedRetryBug(false, true), RuleESConflictFound)
	add("refused-retry", "ahead of the head, committed at the head", refusedRetryBug(true, true), RuleESConflictFound)
	// 6. ReadHistories (all but the exact multiples were caught before).
	for _, page := range []int{500, 1000} {
		add("read-histories", fmt.Sprintf("the last history lost at a multiple of %d IDs", page), brokenHistories(func(ids []eventstore.WorkflowID, hist func(eventstore.WorkflowID) []eventstore.Event) [][]eventstore.Event {
			out := make([][]eventstore.Event, len(ids))
			for i, id := range ids {
				out[i] = []eventstore.Event{}
				if i < len(ids)-1 || len(ids)%page != 0 {
					out[i] = hist(id)
				}
			}
			return out
		}), RuleESSizes)
	}
	add("read-histories", "a repeated ID answered once", brokenHistories(func(ids []eventstore.WorkflowID, hist func(eventstore.WorkflowID) []eventstore.Event) [][]eventstore.Event {
		var out [][]eventstore.Event
		seen := map[eventstore.WorkflowID]bool{}
		for _, id := range ids {
			if !seen[id] {
				seen[id] = true
				out = append(out, hist(id))
			}
		}
		return out
	}), RuleESSizes)
	add("read-histories", "a repeated ID answered empty", brokenHistories(func(ids []eventstore.WorkflowID, hist func(eventstore.WorkflowID) []eventstore.Event) [][]eventstore.Event {
		out := make([][]eventstore.Event, len(ids))
		seen := map[eventstore.WorkflowID]bool{}
		for i, id := range ids {
			out[i] = []eventstore.Event{}
			if !seen[id] {
				seen[id] = true
				out[i] = hist(id)
			}
		}
		return out
	}), RuleESSizes)
	add("read-histories", "an unknown ID skipped, the rest shifted", brokenHistories(func(ids []eventstore.WorkflowID, hist func(eventstore.WorkflowID) []eventstore.Event) [][]eventstore.Event {
		out := [][]eventstore.Event{}
		for _, id := range ids {
			if h := hist(id); len(h) > 0 {
				out = append(out, h)
			}
		}
		for len(out) < len(ids) {
			out = append(out, []eventstore.Event{})
		}
		return out
	}), RuleESSizes)
	return cases
}

// TestHeldOutES runs each held-out broken event store against the rules
// named for it, with one seed, and requires each rule to fail.
func TestHeldOutES(t *testing.T) {
	expensiveSelfTest(t)
	for _, c := range heldOutESCases() {
		t.Run(c.class+"/"+c.name, func(t *testing.T) {
			err := CheckEventStore(t.Context(), func() (eventstore.Store, func(), error) { return c.es(), nil, nil },
				WithSeed(adversarySeed), withoutShrinking(), onlyRules(c.rules...))
			failed := failedRules(t, err, SuiteEventStore)
			for _, r := range c.rules {
				if failed[r] == nil {
					t.Errorf("rule %q did not fail; failures: %v", r, err)
				}
			}
		})
	}
}
