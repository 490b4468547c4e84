package conformance

// Held-out broken implementations (issue 35) of the keyspace suite, its
// sizes, and the race rules of both store suites: each must be caught by
// the suite as a user runs it (every rule, the first failure ends it).

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// ksRememberRefused is a keyspace that remembers the batches it refused
// with a conflict (not those it holds at that seq already: a retry of an
// accepted batch stays refused) and takes the same batch at the same
// expectedSeq the second time as meant: appended at the head (atHead), or
// answered as done without writing.
func ksRememberRefused(atHead bool) func() keyspace.Store {
	return func() keyspace.Store {
		m := &ksW{Memory: keyspace.NewMemory()}
		type batch struct {
			exp uint64
			evs []keyspace.ActivityEvent
		}
		var mu sync.Mutex
		var refused []batch
		m.appendEvents = func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
			mu.Lock()
			again := slices.ContainsFunc(refused, func(b batch) bool { return b.exp == exp && diff(evs, b.evs) == "" })
			mu.Unlock()
			if again && len(evs) > 0 {
				if !atHead {
					return exp + uint64(len(evs)), nil
				}
				head, err := m.Memory.Head(ctx, keyspace.KeyOf(evs[0]))
				if err != nil {
					return 0, err
				}
				return m.Memory.AppendEvents(ctx, head, evs)
			}
			head, err := m.Memory.AppendEvents(ctx, exp, evs)
			var c *eventstore.SequenceConflictError
			if errors.As(err, &c) && !holds(ctx, m.Memory, exp, evs) {
				mu.Lock()
				refused = append(refused, batch{exp, deepCopy(evs)})
				mu.Unlock()
			}
			return head, err
		}
		return m
	}
}

// holds reports whether the store holds evs from seq exp on.
func holds(ctx context.Context, m keyspace.Store, exp uint64, evs []keyspace.ActivityEvent) bool {
	recs, err := m.ReadFrom(ctx, keyspace.KeyOf(evs[0]), exp, len(evs))
	if err != nil || len(recs) != len(evs) {
		return false
	}
	for i, rec := range recs {
		if diff(rec, stored(evs[i], exp+uint64(i))) != "" {
			return false
		}
	}
	return true
}

// ksListCapped caps every listing at n streams.
func ksListCapped(n int) func() keyspace.Store {
	return func() keyspace.Store {
		m := &ksW{Memory: keyspace.NewMemory()}
		m.listStreams = func(ctx context.Context, wf eventstore.WorkflowID, run eventstore.RunID) ([]keyspace.StreamSummary, error) {
			l, err := m.Memory.ListStreams(ctx, wf, run)
			return l[:min(len(l), n)], err
		}
		return m
	}
}

// ksPagedRead reads in pages of p: whole pages while more than a page is
// left, then the rest when it is not empty: an exact multiple loses its
// last page.
func ksPagedRead(p int) func() keyspace.Store {
	return func() keyspace.Store {
		m := &ksW{Memory: keyspace.NewMemory()}
		m.readFrom = func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
			all, err := m.Memory.ReadFrom(ctx, k, from, limit)
			if err != nil {
				return nil, err
			}
			var out []keyspace.Record
			off := 0
			for ; off+p < len(all); off += p {
				out = append(out, all[off:off+p]...)
			}
			if len(all)%p != 0 {
				out = append(out, all[off:]...)
			}
			return out, nil
		}
		return m
	}
}

// ksIndexNoLock keeps each run's stream index as an immutable slice behind
// an atomic pointer, replaced by load, copy and store without a
// compare-and-swap: two creations at once, one is lost from ListStreams.
func ksIndexNoLock() keyspace.Store {
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
		runtime.Gosched()
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

// ksTwoSections checks the seq under one lock and writes under another
// (at the head it finds then): two appends at one seq are both accepted
// now and then.
func ksTwoSections() keyspace.Store {
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
		runtime.Gosched()
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

// esClaimWindow claims in two steps: it reads the oldest pending rows,
// drops its lock, and marks them; a claim in between reads the same rows
// as still pending.
func esClaimWindow() eventstore.Store {
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
		runtime.Gosched()
		mu.Lock()
		window = slices.DeleteFunc(window, func(r eventstore.OutboxRow) bool {
			return slices.ContainsFunc(seen, func(x eventstore.OutboxRow) bool { return x.DispatchKey == r.DispatchKey })
		})
		mu.Unlock()
		return seen, nil
	}
	return s
}

// esTwoSections checks the expected seq under one lock and writes under
// another, at the head it finds then.
func esTwoSections() eventstore.Store {
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
		runtime.Gosched()
		write.Lock()
		defer write.Unlock()
		h, _ = esHead(ctx, s.Memory, wf)
		return do(h)
	}
	return s
}

func TestHeldOutKS(t *testing.T) {
	expensiveSelfTest(t)
	ctx := context.Background()
	seed := optionFunc(func(c *config) { c.seed, c.noShrink, c.stopAtFirst, c.raceFor = adversarySeed, true, true, 0 })
	ks := []struct {
		name string
		new  func() keyspace.Store
	}{
		{"refused-batch-retried-appended-at-head", ksRememberRefused(true)},
		{"refused-batch-retried-taken-as-done", ksRememberRefused(false)},
		{"list-capped-512", ksListCapped(512)},
		{"list-capped-1024", ksListCapped(1024)},
		{"list-capped-4096", ksListCapped(4096)},
		{"read-pages-1000-lose-exact-last", ksPagedRead(1000)},
		{"read-pages-512-lose-exact-last", ksPagedRead(512)},
		{"read-pages-256-lose-exact-last", ksPagedRead(256)},
		{"run-index-load-copy-store", ksIndexNoLock},
		{"seq-check-and-write-two-sections", ksTwoSections},
	}
	for _, tc := range ks {
		t.Run("keyspace/"+tc.name, func(t *testing.T) {
			report(t, CheckKeyspace(ctx, func() (keyspace.Store, func(), error) { return tc.new(), nil, nil }, seed))
		})
	}
	es := []struct {
		name string
		new  func() eventstore.Store
	}{
		{"claim-read-then-mark", esClaimWindow},
		{"append-seq-check-and-write-two-sections", esTwoSections},
	}
	for _, tc := range es {
		t.Run("eventstore/"+tc.name, func(t *testing.T) {
			report(t, CheckEventStore(ctx, func() (eventstore.Store, func(), error) { return tc.new(), nil, nil },
				WithRequiredCapabilities(CapOutbox|CapShardOwner), seed))
		})
	}
}
