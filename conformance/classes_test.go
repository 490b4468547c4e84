package conformance

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// The classes of broken implementations issue 24 names, one or more
// broken implementation each, every one a thin wrapper around a correct
// store or decorator with one plausible bug. Each must fail the suite,
// whatever the seed.

// ksW is a keyspace.Memory with some methods replaced; it keeps DeleteRun.
type ksW struct {
	*keyspace.Memory
	appendEvents func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error)
	readFrom     func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error)
	listStreams  func(ctx context.Context, wf eventstore.WorkflowID, run eventstore.RunID) ([]keyspace.StreamSummary, error)
	deleteRun    func(wf eventstore.WorkflowID, run eventstore.RunID) int
}

func (s *ksW) AppendEvents(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
	if s.appendEvents != nil {
		return s.appendEvents(ctx, exp, evs)
	}
	return s.Memory.AppendEvents(ctx, exp, evs)
}

func (s *ksW) ReadFrom(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
	if s.readFrom != nil {
		return s.readFrom(ctx, k, from, limit)
	}
	return s.Memory.ReadFrom(ctx, k, from, limit)
}

func (s *ksW) ListStreams(ctx context.Context, wf eventstore.WorkflowID, run eventstore.RunID) ([]keyspace.StreamSummary, error) {
	if s.listStreams != nil {
		return s.listStreams(ctx, wf, run)
	}
	return s.Memory.ListStreams(ctx, wf, run)
}

func (s *ksW) DeleteRun(wf eventstore.WorkflowID, run eventstore.RunID) int {
	if s.deleteRun != nil {
		return s.deleteRun(wf, run)
	}
	return s.Memory.DeleteRun(wf, run)
}

// mapEvents rewrites a copy of every appended event.
func (s *ksW) mapEvents(f func(*keyspace.ActivityEvent)) *ksW {
	s.appendEvents = func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
		cp := deepCopy(evs)
		for i := range cp {
			f(&cp[i])
		}
		return s.Memory.AppendEvents(ctx, exp, cp)
	}
	return s
}

// esW is an eventstore.Memory with some methods replaced; it keeps Outbox,
// ShardOwner and PruneClosed.
type esW struct {
	*eventstore.Memory
	mu               sync.Mutex
	writes           int // appends so far, for the caching bugs
	appendFn         func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow, outbox bool) error
	readHistoryFrom  func(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error)
	readRunChain     func(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.RunSummary, error)
	listWorkflowIDs  func(ctx context.Context) ([]eventstore.WorkflowID, error)
	streamHeads      func(ctx context.Context) ([]eventstore.StreamHead, error)
	query            func(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error)
	scheduleTimer    func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) error
	retireTimer      func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) (eventstore.TimerRetirement, error)
	expiredTimers    func(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error)
	putPackage       func(ctx context.Context, rec eventstore.PackageRecord) error
	listPackages     func(ctx context.Context) ([]eventstore.PackageRecord, error)
	claim            func(ctx context.Context, limit int) ([]eventstore.OutboxRow, error)
	acquire          func(ctx context.Context, shards []int) error
	isCurrentOwner   func(ctx context.Context, shard int) bool
	pruneClosed      func(before time.Time) int
	afterAppend      func(ctx context.Context, wf eventstore.WorkflowID, evs []eventstore.Event, rows []eventstore.OutboxRow)
	settleCancelled  func(ctx context.Context, key string) error
	callerEventsEdit bool // AppendWithOutbox stamps Seq into the caller's events
}

func newESW() *esW { return &esW{Memory: eventstore.NewMemory()} }

// pagedHistories is an esW with ReadHistories, broken as a store whose
// pages of 1,000 lose the last history of an exactly full page.
type pagedHistories struct{ *esW }

func (p pagedHistories) ReadHistories(ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
	out := make([][]eventstore.Event, len(ids))
	for i, id := range ids {
		h, err := p.ReadHistory(ctx, id)
		if err != nil {
			return nil, err
		}
		if i%1000 == 999 && len(ids)-i > 1 {
			h = []eventstore.Event{}
		}
		out[i] = h
	}
	return out, nil
}

func (s *esW) write(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow, outbox bool) error {
	var err error
	switch {
	case s.appendFn != nil:
		err = s.appendFn(ctx, tok, wf, evs, exp, rows, outbox)
	case outbox:
		err = s.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
	default:
		err = s.Memory.Append(ctx, tok, wf, evs, exp)
	}
	if err == nil {
		s.mu.Lock()
		s.writes++
		s.mu.Unlock()
		if s.afterAppend != nil {
			s.afterAppend(ctx, wf, evs, rows)
		}
		if s.callerEventsEdit && outbox {
			for i, ev := range evs {
				env := ev.EventEnvelope()
				env.Seq = exp + 1 + uint64(i)
				evs[i] = eventstore.WithEnvelope(ev, env)
			}
		}
	}
	return err
}

func (s *esW) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
	return s.write(ctx, tok, wf, evs, exp, nil, false)
}

func (s *esW) AppendWithOutbox(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
	return s.write(ctx, tok, wf, evs, exp, rows, true)
}

func (s *esW) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	return s.ReadHistoryFrom(ctx, wf, 1)
}

func (s *esW) ReadHistoryFrom(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
	if s.readHistoryFrom != nil {
		return s.readHistoryFrom(ctx, wf, from)
	}
	return s.Memory.ReadHistoryFrom(ctx, wf, from)
}

func (s *esW) ReadRunChain(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.RunSummary, error) {
	if s.readRunChain != nil {
		return s.readRunChain(ctx, wf)
	}
	return s.Memory.ReadRunChain(ctx, wf)
}

func (s *esW) ListWorkflowIDs(ctx context.Context) ([]eventstore.WorkflowID, error) {
	if s.listWorkflowIDs != nil {
		return s.listWorkflowIDs(ctx)
	}
	return s.Memory.ListWorkflowIDs(ctx)
}

func (s *esW) StreamHeads(ctx context.Context) ([]eventstore.StreamHead, error) {
	if s.streamHeads != nil {
		return s.streamHeads(ctx)
	}
	return s.Memory.StreamHeads(ctx)
}

func (s *esW) Query(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
	if s.query != nil {
		return s.query(ctx, f)
	}
	return s.Memory.Query(ctx, f)
}

func (s *esW) ScheduleTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) error {
	if s.scheduleTimer != nil {
		return s.scheduleTimer(ctx, wf, id, at, seq)
	}
	return s.Memory.ScheduleTimer(ctx, wf, id, at, seq)
}

func (s *esW) RetireTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) (eventstore.TimerRetirement, error) {
	if s.retireTimer != nil {
		return s.retireTimer(ctx, wf, id, at, seq)
	}
	return s.Memory.RetireTimer(ctx, wf, id, at, seq)
}

func (s *esW) ExpiredTimers(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
	if s.expiredTimers != nil {
		return s.expiredTimers(ctx, asOf)
	}
	return s.Memory.ExpiredTimers(ctx, asOf)
}

func (s *esW) PutPackage(ctx context.Context, rec eventstore.PackageRecord) error {
	if s.putPackage != nil {
		return s.putPackage(ctx, rec)
	}
	return s.Memory.PutPackage(ctx, rec)
}

func (s *esW) ListPackages(ctx context.Context) ([]eventstore.PackageRecord, error) {
	if s.listPackages != nil {
		return s.listPackages(ctx)
	}
	return s.Memory.ListPackages(ctx)
}

func (s *esW) ClaimOutboxRows(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
	if s.claim != nil {
		return s.claim(ctx, limit)
	}
	return s.Memory.ClaimOutboxRows(ctx, limit)
}

func (s *esW) SettleOutboxRowCancelled(ctx context.Context, key string) error {
	if s.settleCancelled != nil {
		return s.settleCancelled(ctx, key)
	}
	return s.Memory.SettleOutboxRowCancelled(ctx, key)
}

func (s *esW) AcquireOwnedShards(ctx context.Context, shards []int) error {
	if s.acquire != nil {
		return s.acquire(ctx, shards)
	}
	return s.Memory.AcquireOwnedShards(ctx, shards)
}

func (s *esW) AcquireOwnedShard(ctx context.Context, shard int) error {
	return s.AcquireOwnedShards(ctx, []int{shard})
}

func (s *esW) IsCurrentOwner(ctx context.Context, shard int) bool {
	if s.isCurrentOwner != nil {
		return s.isCurrentOwner(ctx, shard)
	}
	return s.Memory.IsCurrentOwner(ctx, shard)
}

func (s *esW) PruneClosed(before time.Time) int {
	if s.pruneClosed != nil {
		return s.pruneClosed(before)
	}
	return s.Memory.PruneClosed(before)
}

// mapEvents rewrites a copy of every appended event, and rows with mapRow.
func (s *esW) mapEvents(f func(eventstore.Event) eventstore.Event, mapRow func(*eventstore.OutboxRow)) *esW {
	s.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow, outbox bool) error {
		evs, rows = deepCopy(evs), deepCopy(rows)
		for i, ev := range evs {
			if ev != nil && f != nil {
				evs[i] = f(ev)
			}
		}
		for i := range rows {
			if mapRow != nil {
				mapRow(&rows[i])
			}
		}
		if outbox {
			return s.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
		}
		return s.Memory.Append(ctx, tok, wf, evs, exp)
	}
	return s
}

// cached returns read, answered from a cache shared by every caller until
// the next write: what a store that hands out its memory does.
func cached[T any](s *esW, read func(context.Context) ([]T, error)) func(context.Context) ([]T, error) {
	var last []T
	version := -1
	return func(ctx context.Context) ([]T, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if version == s.writes && last != nil {
			return last, nil
		}
		out, err := read(ctx)
		if err == nil && len(out) > 2 {
			last, version = out, s.writes
		}
		return out, err
	}
}

func truncBytes(b []byte, n int) []byte { return b[:min(len(b), n)] }

// A classCase is one broken implementation and the rules that must catch it.
type classCase struct {
	class, name string
	ks          func() keyspace.Store
	es          func() eventstore.Store
	dec         func(eventstore.Store) eventstore.Store
	rules       []string
}

func classCases() []classCase {
	var cases []classCase
	ks := func(class, name string, mk func(m *ksW) *ksW, rules ...string) {
		cases = append(cases, classCase{class: class, name: name, ks: func() keyspace.Store { return mk(&ksW{Memory: keyspace.NewMemory()}) }, rules: rules})
	}
	es := func(class, name string, mk func(s *esW) *esW, rules ...string) {
		cases = append(cases, classCase{class: class, name: name, es: func() eventstore.Store { return mk(newESW()) }, rules: rules})
	}
	dec := func(class, name string, f faults, rules ...string) {
		cases = append(cases, classCase{class: class, name: name, dec: passWrap(f), rules: rules})
	}
	u32 := func(v uint64) uint64 { return uint64(uint32(v)) }

	// Retries taken as done (issue 35): an identical batch at a stale seq
	// answered as if it had just been committed.
	ks("retries", "an identical batch at a stale seq is taken as done", func(m *ksW) *ksW {
		m.appendEvents = func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
			head, err := m.Memory.AppendEvents(ctx, exp, evs)
			var c *eventstore.SequenceConflictError
			if !errors.As(err, &c) || len(evs) == 0 || c.Found < exp+uint64(len(evs)) {
				return head, err
			}
			recs, rerr := m.Memory.ReadFrom(ctx, keyspace.KeyOf(evs[0]), exp, len(evs))
			if rerr != nil || len(recs) != len(evs) {
				return head, err
			}
			for i, rec := range recs {
				if diff(rec, stored(evs[i], exp+uint64(i))) != "" {
					return head, err
				}
			}
			return exp + uint64(len(evs)), nil
		}
		return m
	}, RuleKSRetriedBatch)
	// Sizes never drawn before (issue 35): pages of 1,000 whose loop stops
	// on a full last page, caps at powers of two, cut keys.
	lastPageLost := func(n int) int {
		if n > 0 && n%1000 == 0 {
			return n - 1000
		}
		return n
	}
	es("pages", "a history read in pages of 1,000 loses an exactly full last page", func(s *esW) *esW {
		s.readHistoryFrom = func(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
			evs, err := s.Memory.ReadHistoryFrom(ctx, wf, from)
			return evs[:lastPageLost(len(evs))], err
		}
		return s
	}, RuleESSizes)
	es("pages", "workflows listed in pages of 1,000 lose an exactly full last page", func(s *esW) *esW {
		s.listWorkflowIDs = func(ctx context.Context) ([]eventstore.WorkflowID, error) {
			ids, err := s.Memory.ListWorkflowIDs(ctx)
			return ids[:lastPageLost(len(ids))], err
		}
		return s
	}, RuleESSizes)
	es("pages", "claims in pages of 1,000 lose an exactly full last page", func(s *esW) *esW {
		s.claim = func(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
			rows, err := s.Memory.ClaimOutboxRows(ctx, limit)
			return rows[:lastPageLost(len(rows))], err
		}
		return s
	}, RuleESSizes)
	cases = append(cases, classCase{class: "pages", name: "histories read in pages of 1,000 lose the last of an exactly full page",
		es: func() eventstore.Store { return pagedHistories{newESW()} }, rules: []string{RuleESSizes}})
	es("pages", "due timers capped at 1,024", func(s *esW) *esW {
		s.expiredTimers = func(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
			due, err := s.Memory.ExpiredTimers(ctx, asOf)
			return due[:min(len(due), 1024)], err
		}
		return s
	}, RuleESSizes)
	es("pages", "timer IDs cut at 4,096 bytes", func(s *esW) *esW {
		s.scheduleTimer = func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) error {
			return s.Memory.ScheduleTimer(ctx, wf, id[:min(len(id), 4096)], at, seq)
		}
		return s
	}, RuleESSizes)
	ks("pages", "a stream read in pages of 1,000 loses an exactly full last page", func(m *ksW) *ksW {
		m.readFrom = func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
			recs, err := m.Memory.ReadFrom(ctx, k, from, limit)
			return recs[:lastPageLost(len(recs))], err
		}
		return m
	}, RuleKSSizes)
	ks("pages", "ListStreams capped at 512", func(m *ksW) *ksW {
		m.listStreams = func(ctx context.Context, wf eventstore.WorkflowID, run eventstore.RunID) ([]keyspace.StreamSummary, error) {
			l, err := m.Memory.ListStreams(ctx, wf, run)
			return l[:min(len(l), 512)], err
		}
		return m
	}, RuleKSSizes)

	// Races other than two appends at one seq (issue 35).
	ks("races", "a run's stream index updated by read, then write: a concurrent creation is lost", func(m *ksW) *ksW {
		type run struct {
			wf  eventstore.WorkflowID
			run eventstore.RunID
		}
		var mu sync.Mutex
		index := map[run][]keyspace.StreamKey{}
		m.appendEvents = func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
			head, err := m.Memory.AppendEvents(ctx, exp, evs)
			if err != nil || exp != 0 || len(evs) == 0 {
				return head, err
			}
			k := keyspace.KeyOf(evs[0])
			r := run{k.WorkflowID, k.RunID}
			mu.Lock()
			cur := slices.Clone(index[r])
			mu.Unlock()
			runtime.Gosched()
			mu.Lock()
			index[r] = append(cur, k)
			mu.Unlock()
			return head, nil
		}
		m.listStreams = func(ctx context.Context, wf eventstore.WorkflowID, rn eventstore.RunID) ([]keyspace.StreamSummary, error) {
			all, err := m.Memory.ListStreams(ctx, wf, rn)
			mu.Lock()
			known := slices.Clone(index[run{wf, rn}])
			mu.Unlock()
			return slices.DeleteFunc(all, func(s keyspace.StreamSummary) bool { return !slices.Contains(known, s.Key) }), err
		}
		return m
	}, RuleKSConcurrentStreams)
	es("races", "a claim reads the pending rows, then marks them, in two steps", func(s *esW) *esW {
		s.claim = func(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
			// The read: what is pending now (claimed and put back).
			seen, err := s.Memory.ClaimOutboxRows(ctx, limit)
			if err != nil || len(seen) == 0 {
				return seen, err
			}
			if err := s.Memory.RearmOutboxPending(ctx, seen); err != nil {
				return nil, err
			}
			runtime.Gosched()
			// The write: mark what is pending then; hand out what was read.
			if _, err := s.Memory.ClaimOutboxRows(ctx, limit); err != nil {
				return nil, err
			}
			return seen, nil
		}
		return s
	}, RuleOutboxConcurrentClaims)
	es("retries", "an identical append at a stale seq is taken as done", func(s *esW) *esW {
		norm := func(ev eventstore.Event) eventstore.Event {
			return eventstore.WithEnvelope(ev, eventstore.Envelope{RunID: ev.EventEnvelope().RunID})
		}
		s.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow, outbox bool) error {
			var err error
			if outbox {
				err = s.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
			} else {
				err = s.Memory.Append(ctx, tok, wf, evs, exp)
			}
			var c *eventstore.SequenceConflictError
			if !errors.As(err, &c) || c.Found < exp+uint64(len(evs)) {
				return err
			}
			got, rerr := s.Memory.ReadHistoryFrom(ctx, wf, exp+1)
			if rerr != nil || len(got) < len(evs) {
				return err
			}
			for i, ev := range evs {
				if diff(norm(got[i]), norm(ev)) != "" {
					return err
				}
			}
			return nil // rows only, or the same events: done already
		}
		return s
	}, RuleESRetriedAppend)

	// Fields nobody set.
	ks("fields", "Usage model and provider fields dropped", func(m *ksW) *ksW {
		return m.mapEvents(func(ev *keyspace.ActivityEvent) {
			if u, ok := ev.Content.(keyspace.Usage); ok {
				ev.Content = keyspace.Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens}
			}
		})
	}, RuleKSModel)
	ks("fields", "request and response model swapped", func(m *ksW) *ksW {
		return m.mapEvents(func(ev *keyspace.ActivityEvent) {
			if u, ok := ev.Content.(keyspace.Usage); ok {
				u.RequestModel, u.ResponseModel = u.ResponseModel, u.RequestModel
				ev.Content = u
			}
		})
	}, RuleKSModel)
	ks("fields", "agent role dropped", func(m *ksW) *ksW {
		return m.mapEvents(func(ev *keyspace.ActivityEvent) { ev.AgentRole = "" })
	}, RuleKSModel, RuleKSBatch)
	es("fields", "ActivityScheduled.Node dropped", func(s *esW) *esW {
		return s.mapEvents(func(ev eventstore.Event) eventstore.Event {
			if a, ok := ev.(eventstore.ActivityScheduled); ok {
				a.Node = ""
				return a
			}
			return ev
		}, nil)
	}, RuleESModel, RuleESSeqStamping)
	es("fields", "WorkflowStarted.ParentRunID zeroed", func(s *esW) *esW {
		return s.mapEvents(func(ev eventstore.Event) eventstore.Event {
			if a, ok := ev.(eventstore.WorkflowStarted); ok {
				a.ParentRunID = eventstore.RunID{}
				return a
			}
			return ev
		}, nil)
	}, RuleESModel, RuleESReadHistory)
	es("fields", "ActivityFailed.Error.Details dropped", func(s *esW) *esW {
		return s.mapEvents(func(ev eventstore.Event) eventstore.Event {
			if a, ok := ev.(eventstore.ActivityFailed); ok {
				a.Error.Details = eventstore.Payload{}
				return a
			}
			return ev
		}, nil)
	}, RuleESModel)
	es("fields", "outbox row ActivityType dropped", func(s *esW) *esW {
		return s.mapEvents(nil, func(r *eventstore.OutboxRow) { r.ActivityType = "" })
	}, RuleESModel, RuleOutboxClaim)
	es("fields", "package CreatedAt dropped", func(s *esW) *esW {
		s.putPackage = func(ctx context.Context, rec eventstore.PackageRecord) error {
			rec.CreatedAt = time.Time{}
			return s.Memory.PutPackage(ctx, rec)
		}
		return s
	}, RuleESModel, RuleESPackages)

	// Sizes just past the fixed limits.
	ks("sizes", "records past 4,096 lost", func(m *ksW) *ksW {
		m.readFrom = func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
			recs, err := m.Memory.ReadFrom(ctx, k, from, limit)
			for i, r := range recs {
				if r.StoreSeq >= 4096 {
					return recs[:i], err
				}
			}
			return recs, err
		}
		return m
	}, RuleKSModel, RuleKSBatch)
	ks("sizes", "reads capped at 65,536 records", func(m *ksW) *ksW {
		m.readFrom = func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
			recs, err := m.Memory.ReadFrom(ctx, k, from, limit)
			return recs[:min(len(recs), 65536)], err
		}
		return m
	}, RuleKSModel)
	ks("sizes", "texts cut at 64 KiB", func(m *ksW) *ksW {
		return m.mapEvents(func(ev *keyspace.ActivityEvent) {
			if msg, ok := ev.Content.(keyspace.Message); ok && len(msg.Text) > 65535 {
				msg.Text = msg.Text[:65535]
				ev.Content = msg
			}
		})
	}, RuleKSModel)
	es("sizes", "history past 4,096 events lost", func(s *esW) *esW {
		s.readHistoryFrom = func(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
			evs, err := s.Memory.ReadHistoryFrom(ctx, wf, from)
			for i, ev := range evs {
				if ev.EventEnvelope().Seq > 4096 {
					return evs[:i], err
				}
			}
			return evs, err
		}
		return s
	}, RuleESModel)
	es("sizes", "claims capped at 4,096 rows", func(s *esW) *esW {
		s.claim = func(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
			return s.Memory.ClaimOutboxRows(ctx, min(limit, 4096))
		}
		return s
	}, RuleESModel, RuleOutboxClaim)
	es("sizes", "payloads cut at 64 KiB", func(s *esW) *esW {
		return s.mapEvents(func(ev eventstore.Event) eventstore.Event {
			if a, ok := ev.(eventstore.SignalReceived); ok {
				a.Input.Data = truncBytes(a.Input.Data, 65535)
				return a
			}
			return ev
		}, nil)
	}, RuleESModel, RuleESAliasing)
	es("sizes", "listings capped at 4,096 workflows", func(s *esW) *esW {
		s.listWorkflowIDs = func(ctx context.Context) ([]eventstore.WorkflowID, error) {
			ids, err := s.Memory.ListWorkflowIDs(ctx)
			return ids[:min(len(ids), 4096)], err
		}
		return s
	}, RuleESStreamHeads)
	dec("sizes", "a decorator caps outbox rows at 64", faults{capRows: 64}, "outbox/differential", "outbox+shardowner/differential")
	dec("sizes", "a decorator caps histories at 4,096", faults{capHistory: 4096}, "outbox+shardowner/differential")

	// Numbers nobody drew.
	ks("numbers", "expected seqs kept in 32 bits", func(m *ksW) *ksW {
		m.appendEvents = func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
			head, err := m.Memory.AppendEvents(ctx, u32(exp), evs)
			var c *eventstore.SequenceConflictError
			if errors.As(err, &c) {
				return 0, &eventstore.SequenceConflictError{Expected: exp, Found: c.Found}
			}
			return head, err
		}
		return m
	}, RuleKSModel, RuleKSConflictFound)
	ks("numbers", "fromSeq kept in 32 bits", func(m *ksW) *ksW {
		m.readFrom = func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
			return m.Memory.ReadFrom(ctx, k, u32(from), limit)
		}
		return m
	}, RuleKSModel, RuleKSReadFromResume)
	ks("numbers", "limit kept in 32 bits", func(m *ksW) *ksW {
		m.readFrom = func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
			return m.Memory.ReadFrom(ctx, k, from, int(int32(limit)))
		}
		return m
	}, RuleKSModel, RuleKSReadFromResume)
	es("numbers", "expected seqs kept in 32 bits", func(s *esW) *esW {
		s.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow, outbox bool) error {
			if outbox {
				return s.Memory.AppendWithOutbox(ctx, tok, wf, evs, u32(exp), rows)
			}
			return s.Memory.Append(ctx, tok, wf, evs, u32(exp))
		}
		return s
	}, RuleESModel, RuleESConflictFound)
	es("numbers", "fromSeq kept in 32 bits", func(s *esW) *esW {
		s.readHistoryFrom = func(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
			return s.Memory.ReadHistoryFrom(ctx, wf, u32(from))
		}
		return s
	}, RuleESModel, RuleESReadHistoryFrom)
	es("numbers", "armed seqs kept in 32 bits", func(s *esW) *esW {
		s.scheduleTimer = func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) error {
			return s.Memory.ScheduleTimer(ctx, wf, id, at, u32(seq))
		}
		s.retireTimer = func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) (eventstore.TimerRetirement, error) {
			return s.Memory.RetireTimer(ctx, wf, id, at, u32(seq))
		}
		s.expiredTimers = func(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
			return s.Memory.ExpiredTimers(ctx, asOf) // the stored, truncated seqs
		}
		return s
	}, RuleESModel, RuleESTimers)
	es("numbers", "outbox ordinals kept in 32 bits", func(s *esW) *esW {
		return s.mapEvents(nil, func(r *eventstore.OutboxRow) { r.Ordinal = eventstore.ActivityID(u32(uint64(r.Ordinal))) })
	}, RuleESModel)
	es("numbers", "claim limit kept in 32 bits", func(s *esW) *esW {
		s.claim = func(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
			return s.Memory.ClaimOutboxRows(ctx, int(int32(limit)))
		}
		return s
	}, RuleESModel, RuleOutboxClaim)
	es("numbers", "shard numbers kept in 32 bits", func(s *esW) *esW {
		s.acquire = func(ctx context.Context, shards []int) error {
			narrow := make([]int, len(shards))
			for i, x := range shards {
				narrow[i] = int(int32(x))
			}
			return s.Memory.AcquireOwnedShards(ctx, narrow)
		}
		return s
	}, RuleESModel, RuleShardNegative)
	es("numbers", "query limit kept in 32 bits", func(s *esW) *esW {
		s.query = func(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
			f.Limit = int(int32(f.Limit))
			return s.Memory.Query(ctx, f)
		}
		return s
	}, RuleESModel)

	// Keys of one shape.
	es("keys", "package keys joined with a slash", func(s *esW) *esW {
		s.putPackage = func(ctx context.Context, rec eventstore.PackageRecord) error {
			pkgs, _ := s.Memory.ListPackages(ctx)
			for _, p := range pkgs {
				if p.WorkflowType+"/"+p.ContentHash == rec.WorkflowType+"/"+rec.ContentHash && (p.WorkflowType != rec.WorkflowType || p.ContentHash != rec.ContentHash) {
					_ = s.Memory.DeletePackage(ctx, p.WorkflowType, p.ContentHash) // the joined key is overwritten
				}
			}
			return s.Memory.PutPackage(ctx, rec)
		}
		return s
	}, RuleESPackages)
	es("keys", "dispatch keys compared without case", func(s *esW) *esW {
		staged := map[string]bool{}
		s.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow, outbox bool) error {
			s.mu.Lock()
			for _, r := range rows {
				if r.DispatchKey != "" && staged[strings.ToLower(r.DispatchKey)] {
					s.mu.Unlock()
					return fmt.Errorf("%w: dispatch key %q already staged", eventstore.ErrInvalidArgument, r.DispatchKey)
				}
			}
			s.mu.Unlock()
			err := s.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
			if err == nil {
				s.mu.Lock()
				for _, r := range rows {
					staged[strings.ToLower(r.DispatchKey)] = true
				}
				s.mu.Unlock()
			}
			return err
		}
		return s
	}, RuleESModel)
	es("keys", "timer IDs cut at 255 bytes", func(s *esW) *esW {
		cut := func(id eventstore.TimerID) eventstore.TimerID { return id[:min(len(id), 255)] }
		s.scheduleTimer = func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) error {
			return s.Memory.ScheduleTimer(ctx, wf, cut(id), at, seq)
		}
		s.retireTimer = func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) (eventstore.TimerRetirement, error) {
			return s.Memory.RetireTimer(ctx, wf, cut(id), at, seq)
		}
		return s
	}, RuleESModel, RuleESTimers)

	// Errors the decorator's inner never returned.
	dec("errors", "a decorator retries a conflicting append at the found seq", faults{retryConflict: true}, "store/error/Append")
	dec("errors", "a decorator replaces ErrNotOwner", faults{replaceNotOwner: true}, "shardowner/error/AcquireOwnedShard", "outbox/error/Append")
	dec("errors", "a decorator turns a deadline into a cancellation", faults{deadlineToCanceled: true}, "store/error/ReadHistory", "outbox+shardowner/error/ClaimOutboxRows")
	dec("errors", "a decorator loses the fields of a conflict", faults{conflictFields: true}, "store/error/Append", "outbox/error/AppendWithOutbox")

	// Contexts cancelled during the call.
	es("cancel", "AppendWithOutbox loses its rows when cancelled after the commit", func(s *esW) *esW {
		// It commits events and rows in one step, then gives the rows up
		// if the context was cancelled meanwhile: the events stay, the
		// rows are lost.
		s.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow, outbox bool) error {
			if !outbox {
				return s.Memory.Append(ctx, tok, wf, evs, exp)
			}
			if err := s.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows); err != nil {
				return err
			}
			if err := ctx.Err(); err != nil {
				for _, r := range rows {
					key := r.DispatchKey
					if key == "" {
						key = eventstore.DispatchKey(wf, r.RunID, r.Ordinal)
					}
					_ = s.Memory.SettleOutboxRowCancelled(context.Background(), key)
				}
				return err
			}
			return nil
		}
		return s
	}, RuleESContextCancelled)
	ks("cancel", "AppendEvents commits half a batch when cancelled between", func(m *ksW) *ksW {
		var mu sync.Mutex // no racer sees the halves apart: only a cancellation splits them
		m.appendEvents = func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
			mu.Lock()
			defer mu.Unlock()
			half := len(evs) / 2
			if half == 0 || keyspace.ValidateBatch(evs) != nil {
				return m.Memory.AppendEvents(ctx, exp, evs)
			}
			if _, err := m.Memory.AppendEvents(ctx, exp, evs[:half]); err != nil {
				return 0, err
			}
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			return m.Memory.AppendEvents(ctx, exp+uint64(half), evs[half:])
		}
		return m
	}, RuleKSContextCancelled)

	// Shared memory on one read path.
	es("sharing", "StreamHeads hands out a cached slice", func(s *esW) *esW {
		s.streamHeads = cached(s, s.Memory.StreamHeads)
		return s
	}, RuleESModel, RuleESStreamHeads)
	es("sharing", "ListPackages hands out a cached slice", func(s *esW) *esW {
		s.listPackages = cached(s, s.Memory.ListPackages)
		return s
	}, RuleESModel, RuleESPackages)
	es("sharing", "ReadRunChain hands out a cached slice", func(s *esW) *esW {
		var mu sync.Mutex
		cache := map[eventstore.WorkflowID]func(context.Context) ([]eventstore.RunSummary, error){}
		s.readRunChain = func(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.RunSummary, error) {
			mu.Lock()
			c := cache[wf]
			if c == nil {
				c = cached(s, func(ctx context.Context) ([]eventstore.RunSummary, error) { return s.Memory.ReadRunChain(ctx, wf) })
				cache[wf] = c
			}
			mu.Unlock()
			return c(ctx)
		}
		return s
	}, RuleESModel, RuleESRunChain)
	es("sharing", "ExpiredTimers hands out a cached slice", func(s *esW) *esW {
		var last []eventstore.TimerEntry
		s.expiredTimers = func(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
			out, err := s.Memory.ExpiredTimers(ctx, asOf)
			if len(out) > 2 && len(last) == len(out) {
				return last, err
			}
			last = out
			return out, err
		}
		return s
	}, RuleESModel, RuleESTimers)
	ks("sharing", "ListStreams hands out a cached slice", func(m *ksW) *ksW {
		var last []keyspace.StreamSummary
		var run eventstore.RunID
		m.listStreams = func(ctx context.Context, wf eventstore.WorkflowID, r eventstore.RunID) ([]keyspace.StreamSummary, error) {
			out, err := m.Memory.ListStreams(ctx, wf, r)
			if len(out) > 2 && r == run && len(last) == len(out) {
				return last, err
			}
			last, run = out, r
			return out, err
		}
		return m
	}, RuleKSModel)
	ks("sharing", "ReadFrom hands out a cached slice for long reads", func(m *ksW) *ksW {
		type key struct {
			k     keyspace.StreamKey
			from  uint64
			limit int
		}
		cache := map[key][]keyspace.Record{}
		var mu sync.Mutex
		m.readFrom = func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
			out, err := m.Memory.ReadFrom(ctx, k, from, limit)
			mu.Lock()
			defer mu.Unlock()
			if c, ok := cache[key{k, from, limit}]; ok && len(c) == len(out) && len(out) >= 100 {
				return c, err
			}
			cache[key{k, from, limit}] = out
			return out, err
		}
		return m
	}, RuleKSModel)

	// Retention.
	es("retention", "PruneClosed prunes a workflow closed at the cutoff", func(s *esW) *esW {
		s.pruneClosed = func(before time.Time) int { return s.Memory.PruneClosed(before.Add(time.Nanosecond)) }
		return s
	}, RuleESRetention)
	es("retention", "PruneClosed counts nothing", func(s *esW) *esW {
		s.pruneClosed = func(before time.Time) int { s.Memory.PruneClosed(before); return 0 }
		return s
	}, RuleESRetention, RuleESModel)
	ks("retention", "DeleteRun deletes every run of the workflow", func(m *ksW) *ksW {
		var mu sync.Mutex
		runs := map[eventstore.WorkflowID][]eventstore.RunID{}
		m.appendEvents = func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
			if len(evs) > 0 {
				mu.Lock()
				runs[evs[0].WorkflowID] = append(runs[evs[0].WorkflowID], evs[0].RunID)
				mu.Unlock()
			}
			return m.Memory.AppendEvents(ctx, exp, evs)
		}
		m.deleteRun = func(wf eventstore.WorkflowID, run eventstore.RunID) int {
			n := m.Memory.DeleteRun(wf, run)
			mu.Lock()
			defer mu.Unlock()
			for _, r := range runs[wf] {
				if r != run {
					m.Memory.DeleteRun(wf, r)
				}
			}
			return n
		}
		return m
	}, RuleKSRetention)

	// The older misses.
	es("older", "a stale AppendWithOutbox of rows only is accepted", func(s *esW) *esW {
		s.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow, outbox bool) error {
			if outbox && len(evs) == 0 && len(rows) > 0 {
				h, _ := s.Memory.ReadHistory(ctx, wf)
				exp = uint64(len(h))
			}
			if outbox {
				return s.Memory.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
			}
			return s.Memory.Append(ctx, tok, wf, evs, exp)
		}
		return s
	}, RuleOutboxAtomic, RuleESModel)
	es("older", "IsCurrentOwner ignores a cancelled context", func(s *esW) *esW {
		s.isCurrentOwner = func(ctx context.Context, shard int) bool {
			return s.Memory.IsCurrentOwner(context.WithoutCancel(ctx), shard)
		}
		return s
	}, RuleShardAcquireOne, RuleESContextCancelled)
	es("older", "a timed-out activity also settles older runs' rows", func(s *esW) *esW {
		type ref struct {
			wf  eventstore.WorkflowID
			ord eventstore.ActivityID
		}
		var mu sync.Mutex
		keys := map[ref][]struct {
			run eventstore.RunID
			key string
		}{}
		s.afterAppend = func(ctx context.Context, wf eventstore.WorkflowID, evs []eventstore.Event, rows []eventstore.OutboxRow) {
			mu.Lock()
			defer mu.Unlock()
			for _, r := range rows {
				k := r.DispatchKey
				if k == "" {
					k = eventstore.DispatchKey(wf, r.RunID, r.Ordinal)
				}
				keys[ref{wf, r.Ordinal}] = append(keys[ref{wf, r.Ordinal}], struct {
					run eventstore.RunID
					key string
				}{r.RunID, k})
			}
			for _, ev := range evs {
				var ord eventstore.ActivityID
				e, ok := ev.(eventstore.ActivityTimedOut)
				if !ok {
					continue
				}
				ord = e.ActivityID
				for _, r := range keys[ref{wf, ord}] {
					if r.run != ev.EventEnvelope().RunID {
						_ = s.Memory.SettleOutboxRowCancelled(ctx, r.key)
					}
				}
			}
		}
		return s
	}, RuleOutboxTerminalSettles)
	es("older", "the caller's events slice is written into", func(s *esW) *esW {
		s.callerEventsEdit = true
		return s
	}, RuleESModel, RuleOutboxAtomic, RuleESAliasing)
	return cases
}

// TestClassesCaught runs every broken implementation against the rules
// named for it, its seeded rules with three seeds, its fixed ones once,
// and requires each rule to fail each time.
func TestClassesCaught(t *testing.T) {
	expensiveSelfTest(t)
	for _, c := range classCases() {
		t.Run(c.class+"/"+c.name, func(t *testing.T) {
			for i, seed := range classSeeds {
				// A fixed rule does not draw from the seed: it runs once.
				rules := c.rules
				if i > 0 {
					rules = slices.DeleteFunc(slices.Clone(rules), func(r string) bool { return !seededRule(r) })
					if len(rules) == 0 {
						break
					}
				}
				opts := []Option{WithSeed(seed), withoutShrinking(), onlyRules(rules...)}
				var err error
				suite := SuiteEventStore
				switch {
				case c.ks != nil:
					suite = SuiteKeyspace
					err = CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) { return c.ks(), nil, nil }, opts...)
				case c.es != nil:
					err = CheckEventStore(t.Context(), func() (eventstore.Store, func(), error) { return c.es(), nil, nil }, opts...)
				default:
					suite = SuiteDecorator
					err = CheckDecorator(t.Context(), c.dec, opts...)
				}
				failed := failedRules(t, err, suite)
				for _, r := range rules {
					if failed[r] == nil {
						t.Errorf("seed %d: rule %q did not fail; failures: %v", seed, r, err)
					}
				}
			}
		})
	}
}

// seededRule reports whether the rule of that name draws from the seed.
func seededRule(name string) bool {
	for _, r := range keyspaceSuite.rules {
		if r.name == name {
			return r.seeded
		}
	}
	for _, r := range eventStoreSuite.rules {
		if r.name == name {
			return r.seeded
		}
	}
	for _, r := range decoratorSuite.rules {
		if r.name == name {
			return r.seeded
		}
	}
	return false
}

// classSeeds are the seeds every class case is run with (its fixed rules
// with the first only: they do not depend on it).
var classSeeds = []int64{11, 12, 13}
