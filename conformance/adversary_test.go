package conformance

// An adversarial self-test written independently of the suites' own broken
// stores: each case wraps a correct store (or, for decorators, forwards to
// the spy) with ONE plausible bug, and the matching Check* core must report
// it. A case that passes unnoticed is a hole in the suite.

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

// ---- keyspace adversaries ----

// ksBug is a keyspace.Memory with some methods replaced.
type ksBug struct {
	keyspace.Store
	appendEvents func(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error)
	head         func(ctx context.Context, key keyspace.StreamKey) (uint64, error)
	readFrom     func(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error)
	listStreams  func(ctx context.Context, workflowID eventstore.WorkflowID, runID eventstore.RunID) ([]keyspace.StreamSummary, error)
}

func (s *ksBug) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	if s.appendEvents != nil {
		return s.appendEvents(ctx, expectedSeq, events)
	}
	return s.Store.AppendEvents(ctx, expectedSeq, events)
}

func (s *ksBug) Head(ctx context.Context, key keyspace.StreamKey) (uint64, error) {
	if s.head != nil {
		return s.head(ctx, key)
	}
	return s.Store.Head(ctx, key)
}

func (s *ksBug) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	if s.readFrom != nil {
		return s.readFrom(ctx, key, fromSeq, limit)
	}
	return s.Store.ReadFrom(ctx, key, fromSeq, limit)
}

func (s *ksBug) ListStreams(ctx context.Context, workflowID eventstore.WorkflowID, runID eventstore.RunID) ([]keyspace.StreamSummary, error) {
	if s.listStreams != nil {
		return s.listStreams(ctx, workflowID, runID)
	}
	return s.Store.ListStreams(ctx, workflowID, runID)
}

func truncNUL(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// ksMapEvents applies f to a copy of every event of a batch, then appends.
func ksMapEvents(m keyspace.Store, f func(*keyspace.ActivityEvent)) func(context.Context, uint64, []keyspace.ActivityEvent) (uint64, error) {
	return func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
		cp := slices.Clone(evs)
		for i := range cp {
			f(&cp[i])
		}
		return m.AppendEvents(ctx, exp, cp)
	}
}

// ksMapKey rewrites every key a method receives, as a store with a narrow
// column would.
func ksMapKey(m keyspace.Store, f func(keyspace.StreamKey) keyspace.StreamKey) *ksBug {
	return &ksBug{Store: m,
		appendEvents: ksMapEvents(m, func(ev *keyspace.ActivityEvent) {
			k := f(keyspace.KeyOf(*ev))
			ev.WorkflowID, ev.RunID, ev.ActivityID, ev.Attempt = k.WorkflowID, k.RunID, k.ActivityID, k.Attempt
		}),
		head: func(ctx context.Context, key keyspace.StreamKey) (uint64, error) { return m.Head(ctx, f(key)) },
		readFrom: func(ctx context.Context, key keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
			return m.ReadFrom(ctx, f(key), from, limit)
		},
	}
}

func ksCases() []struct {
	name string
	new  func() keyspace.Store
} {
	type c = struct {
		name string
		new  func() keyspace.Store
	}
	return []c{
		{"read-all-capped-1000", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, readFrom: func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
				if limit <= 0 || limit > 1000 {
					limit = 1000
				}
				return m.ReadFrom(ctx, k, from, limit)
			}}
		}},
		{"read-fromseq-rounded-to-chunk-256", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, readFrom: func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
				if from >= 256 {
					from = from / 256 * 256
				}
				return m.ReadFrom(ctx, k, from, limit)
			}}
		}},
		{"read-skips-record-at-chunk-512", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, readFrom: func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
				recs, err := m.ReadFrom(ctx, k, from, limit)
				return slices.DeleteFunc(recs, func(r keyspace.Record) bool { return r.StoreSeq == 512 }), err
			}}
		}},
		{"read-limit-ignored", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, readFrom: func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
				return m.ReadFrom(ctx, k, from, 0)
			}}
		}},
		{"read-negative-limit-none", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, readFrom: func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
				if limit < 0 {
					return nil, k.Validate()
				}
				return m.ReadFrom(ctx, k, from, limit)
			}}
		}},
		{"read-limit-off-by-one", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, readFrom: func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
				if limit > 0 {
					limit++
				}
				return m.ReadFrom(ctx, k, from, limit)
			}}
		}},
		{"read-persisted-false-with-limit", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, readFrom: func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
				recs, err := m.ReadFrom(ctx, k, from, limit)
				if limit > 0 {
					for i := range recs {
						recs[i].Event.Persisted = false
					}
				}
				return recs, err
			}}
		}},
		{"list-capped-64", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, listStreams: func(ctx context.Context, w eventstore.WorkflowID, r eventstore.RunID) ([]keyspace.StreamSummary, error) {
				l, err := m.ListStreams(ctx, w, r)
				return l[:min(len(l), 64)], err
			}}
		}},
		{"list-capped-256", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, listStreams: func(ctx context.Context, w eventstore.WorkflowID, r eventstore.RunID) ([]keyspace.StreamSummary, error) {
				l, err := m.ListStreams(ctx, w, r)
				return l[:min(len(l), 256)], err
			}}
		}},
		{"list-sorted-as-strings", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, listStreams: func(ctx context.Context, w eventstore.WorkflowID, r eventstore.RunID) ([]keyspace.StreamSummary, error) {
				l, err := m.ListStreams(ctx, w, r)
				slices.SortStableFunc(l, func(a, b keyspace.StreamSummary) int { return strings.Compare(a.Key.String(), b.Key.String()) })
				return l, err
			}}
		}},
		{"list-head-capped-1000", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, listStreams: func(ctx context.Context, w eventstore.WorkflowID, r eventstore.RunID) ([]keyspace.StreamSummary, error) {
				l, err := m.ListStreams(ctx, w, r)
				for i := range l {
					l[i].Head = min(l[i].Head, 1000)
				}
				return l, err
			}}
		}},
		{"list-scoped-by-workflow-only", func() keyspace.Store {
			m := keyspace.NewMemory()
			var mu sync.Mutex
			runs := map[eventstore.WorkflowID][]eventstore.RunID{}
			b := &ksBug{Store: m}
			b.appendEvents = func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
				n, err := m.AppendEvents(ctx, exp, evs)
				if err == nil && len(evs) > 0 {
					mu.Lock()
					if !slices.Contains(runs[evs[0].WorkflowID], evs[0].RunID) {
						runs[evs[0].WorkflowID] = append(runs[evs[0].WorkflowID], evs[0].RunID)
					}
					mu.Unlock()
				}
				return n, err
			}
			b.listStreams = func(ctx context.Context, w eventstore.WorkflowID, r eventstore.RunID) ([]keyspace.StreamSummary, error) {
				own, err := m.ListStreams(ctx, w, r)
				if err != nil {
					return own, err
				}
				mu.Lock()
				rs := slices.Clone(runs[w])
				mu.Unlock()
				for _, other := range rs {
					if other != r {
						l, _ := m.ListStreams(ctx, w, other)
						own = append(own, l...)
					}
				}
				return own, nil
			}
			return b
		}},
		{"list-zero-run-not-refused", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, listStreams: func(ctx context.Context, w eventstore.WorkflowID, r eventstore.RunID) ([]keyspace.StreamSummary, error) {
				if r.IsZero() {
					return nil, nil
				}
				return m.ListStreams(ctx, w, r)
			}}
		}},
		{"head-zero-run-not-refused", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, head: func(ctx context.Context, k keyspace.StreamKey) (uint64, error) {
				if k.RunID.IsZero() {
					return 0, nil
				}
				return m.Head(ctx, k)
			}}
		}},
		{"head-off-by-one-after-conflict", func() keyspace.Store {
			m := keyspace.NewMemory()
			var mu sync.Mutex
			conflicted := map[keyspace.StreamKey]bool{}
			return &ksBug{Store: m,
				appendEvents: func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
					n, err := m.AppendEvents(ctx, exp, evs)
					mu.Lock()
					if errors.Is(err, eventstore.ErrSequenceConflict) {
						conflicted[keyspace.KeyOf(evs[0])] = true
					} else if err == nil && len(evs) > 0 {
						delete(conflicted, keyspace.KeyOf(evs[0]))
					}
					mu.Unlock()
					return n, err
				},
				head: func(ctx context.Context, k keyspace.StreamKey) (uint64, error) {
					h, err := m.Head(ctx, k)
					mu.Lock()
					defer mu.Unlock()
					if err == nil && conflicted[k] {
						h++
					}
					return h, err
				}}
		}},
		{"conflict-found-is-last-seq", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
				n, err := m.AppendEvents(ctx, exp, evs)
				var c *eventstore.SequenceConflictError
				if errors.As(err, &c) && c.Found > 0 {
					return 0, &eventstore.SequenceConflictError{Expected: c.Expected, Found: c.Found - 1}
				}
				return n, err
			}}
		}},
		{"append-returns-last-seq", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
				n, err := m.AppendEvents(ctx, exp, evs)
				if err == nil && len(evs) > 0 {
					n--
				}
				return n, err
			}}
		}},
		{"empty-batch-returns-head", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
				if len(evs) == 0 {
					return 0, nil
				}
				return m.AppendEvents(ctx, exp, evs)
			}}
		}},
		{"ephemeral-accepted", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: ksMapEvents(m, func(ev *keyspace.ActivityEvent) { ev.Ephemeral = false })}
		}},
		{"mixed-streams-last-event-unchecked", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
				if n := len(evs); n >= 2 {
					first := keyspace.KeyOf(evs[0])
					if err := keyspace.ValidateBatch(evs[:n-1]); err == nil && keyspace.KeyOf(evs[n-1]) != first {
						cp := slices.Clone(evs)
						cp[n-1].WorkflowID, cp[n-1].RunID, cp[n-1].ActivityID, cp[n-1].Attempt = first.WorkflowID, first.RunID, first.ActivityID, first.Attempt
						return m.AppendEvents(ctx, exp, cp)
					}
				}
				return m.AppendEvents(ctx, exp, evs)
			}}
		}},
		{"nil-pointer-content-as-empty-message", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: ksMapEvents(m, func(ev *keyspace.ActivityEvent) {
				if p, ok := ev.Content.(*keyspace.Message); ok && p == nil {
					ev.Content = keyspace.Message{}
				}
			})}
		}},
		{"foreign-content-stored-as-nil", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: ksMapEvents(m, func(ev *keyspace.ActivityEvent) {
				switch ev.Content.(type) {
				case nil, keyspace.Message, keyspace.ToolCall, keyspace.ToolResult, keyspace.Status, keyspace.Usage,
					*keyspace.Message, *keyspace.ToolCall, *keyspace.ToolResult, *keyspace.Status, *keyspace.Usage:
				default:
					ev.Content = nil
				}
			})}
		}},
		{"partial-write-before-invalid-event", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
				if err := keyspace.ValidateBatch(evs); err != nil {
					for i := len(evs) - 1; i > 0; i-- {
						if keyspace.ValidateBatch(evs[:i]) == nil {
							_, _ = m.AppendEvents(ctx, exp, evs[:i])
							break
						}
					}
					return 0, err
				}
				return m.AppendEvents(ctx, exp, evs)
			}}
		}},
		{"attempt-truncated-to-uint16", func() keyspace.Store {
			return ksMapKey(keyspace.NewMemory(), func(k keyspace.StreamKey) keyspace.StreamKey { k.Attempt &= 0xffff; return k })
		}},
		{"activity-truncated-to-uint32", func() keyspace.Store {
			return ksMapKey(keyspace.NewMemory(), func(k keyspace.StreamKey) keyspace.StreamKey { k.ActivityID &= 0xffffffff; return k })
		}},
		{"strings-cut-at-nul", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: ksMapEvents(m, func(ev *keyspace.ActivityEvent) {
				ev.AgentID, ev.AgentRole = truncNUL(ev.AgentID), truncNUL(ev.AgentRole)
				if msg, ok := ev.Content.(keyspace.Message); ok {
					msg.Text = truncNUL(msg.Text)
					ev.Content = msg
				}
			})}
		}},
		{"invalid-utf8-replaced", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: ksMapEvents(m, func(ev *keyspace.ActivityEvent) {
				ev.AgentID = strings.ToValidUTF8(ev.AgentID, "\uFFFD")
				if msg, ok := ev.Content.(keyspace.Message); ok {
					msg.Text = strings.ToValidUTF8(msg.Text, "\uFFFD")
					ev.Content = msg
				}
			})}
		}},
		{"large-text-truncated-64k", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: ksMapEvents(m, func(ev *keyspace.ActivityEvent) {
				switch c := ev.Content.(type) {
				case keyspace.Message:
					c.Text = c.Text[:min(len(c.Text), 1<<16)]
					ev.Content = c
				case keyspace.ToolResult:
					c.Output = c.Output[:min(len(c.Output), 1<<16)]
					ev.Content = c
				case keyspace.ToolCall:
					c.Arguments = c.Arguments[:min(len(c.Arguments), 1<<16)]
					ev.Content = c
				}
			})}
		}},
		{"tool-output-truncated-64k", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: ksMapEvents(m, func(ev *keyspace.ActivityEvent) {
				if c, ok := ev.Content.(keyspace.ToolResult); ok {
					c.Output = c.Output[:min(len(c.Output), 1<<16)]
					ev.Content = c
				}
			})}
		}},
		{"tool-arguments-truncated-64k", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: ksMapEvents(m, func(ev *keyspace.ActivityEvent) {
				if c, ok := ev.Content.(keyspace.ToolCall); ok {
					c.Arguments = c.Arguments[:min(len(c.Arguments), 1<<16)]
					ev.Content = c
				}
			})}
		}},
		{"context-ignored", func() keyspace.Store {
			m := keyspace.NewMemory()
			bg := func(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }
			return &ksBug{Store: m,
				appendEvents: func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
					return m.AppendEvents(bg(ctx), exp, evs)
				},
				readFrom: func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
					return m.ReadFrom(bg(ctx), k, from, limit)
				}}
		}},
		{"keeps-caller-events", func() keyspace.Store {
			m := keyspace.NewMemory()
			type ref struct {
				evs []keyspace.ActivityEvent
				i   int
			}
			var mu sync.Mutex
			refs := map[keyspace.StreamKey][]ref{}
			return &ksBug{Store: m,
				appendEvents: func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
					n, err := m.AppendEvents(ctx, exp, evs)
					if err == nil && len(evs) > 0 {
						mu.Lock()
						k := keyspace.KeyOf(evs[0])
						for i := range evs {
							refs[k] = append(refs[k], ref{evs, i})
						}
						mu.Unlock()
					}
					return n, err
				},
				readFrom: func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
					recs, err := m.ReadFrom(ctx, k, from, limit)
					mu.Lock()
					defer mu.Unlock()
					for i := range recs {
						if s := recs[i].StoreSeq; s < uint64(len(refs[k])) {
							r := refs[k][s]
							ev := r.evs[r.i]
							if p, ok := ev.Content.(*keyspace.Message); ok && p != nil {
								ev.Content = *p
							}
							ev.StoreSeq, ev.Persisted = s, true
							recs[i].Event = ev
						}
					}
					return recs, err
				}}
		}},
		{"returns-cached-records", func() keyspace.Store {
			m := keyspace.NewMemory()
			type entry struct {
				head uint64
				recs []keyspace.Record
			}
			var mu sync.Mutex
			cache := map[keyspace.StreamKey]entry{}
			return &ksBug{Store: m, readFrom: func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
				h, err := m.Head(ctx, k)
				if err != nil {
					return nil, err
				}
				mu.Lock()
				defer mu.Unlock()
				e, ok := cache[k]
				if !ok || e.head != h {
					recs, err := m.ReadFrom(ctx, k, 0, 0)
					if err != nil {
						return nil, err
					}
					e = entry{h, recs}
					cache[k] = e
				}
				if from >= uint64(len(e.recs)) {
					return nil, nil
				}
				out := e.recs[from:]
				if limit > 0 && limit < len(out) {
					out = out[:limit]
				}
				return out, nil
			}}
		}},
		{"read-past-head-returns-last", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, readFrom: func(ctx context.Context, k keyspace.StreamKey, from uint64, limit int) ([]keyspace.Record, error) {
				recs, err := m.ReadFrom(ctx, k, from, limit)
				if err == nil && len(recs) == 0 && from > 0 {
					return m.ReadFrom(ctx, k, from-1, 1)
				}
				return recs, err
			}}
		}},
		{"check-then-act-append", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
				if len(evs) == 0 || keyspace.ValidateBatch(evs) != nil {
					return m.AppendEvents(ctx, exp, evs)
				}
				k := keyspace.KeyOf(evs[0])
				h, err := m.Head(ctx, k)
				if err != nil {
					return 0, err
				}
				if h != exp {
					return 0, &eventstore.SequenceConflictError{Expected: exp, Found: h}
				}
				runtime.Gosched()
				for {
					cur, err := m.Head(ctx, k)
					if err != nil {
						return 0, err
					}
					n, err := m.AppendEvents(ctx, cur, evs)
					if errors.Is(err, eventstore.ErrSequenceConflict) {
						continue
					}
					if err == nil {
						n = exp + uint64(len(evs))
					}
					return n, err
				}
			}}
		}},
		{"torn-batches", func() keyspace.Store {
			m := keyspace.NewMemory()
			return &ksBug{Store: m, appendEvents: func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
				if len(evs) < 2 || keyspace.ValidateBatch(evs) != nil {
					return m.AppendEvents(ctx, exp, evs)
				}
				if _, err := m.AppendEvents(ctx, exp, evs[:1]); err != nil {
					return 0, err
				}
				k := keyspace.KeyOf(evs[0])
				for _, ev := range evs[1:] {
					runtime.Gosched()
					for {
						cur, _ := m.Head(ctx, k)
						if _, err := m.AppendEvents(ctx, cur, []keyspace.ActivityEvent{ev}); err == nil {
							break
						}
					}
				}
				return exp + uint64(len(evs)), nil
			}}
		}},
	}
}

// ---- event store adversaries ----

type esFull interface {
	eventstore.Store
	eventstore.Outbox
	eventstore.ShardOwner
}

// esBug is an eventstore.Memory with some methods replaced; it keeps the
// Outbox and ShardOwner capabilities.
type esBug struct {
	esFull
	appendFn          func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error
	appendWithOutbox  func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error
	readHistory       func(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error)
	readHistoryFrom   func(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error)
	readRunChain      func(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.RunSummary, error)
	listWorkflowIDs   func(ctx context.Context) ([]eventstore.WorkflowID, error)
	listActive        func(ctx context.Context) ([]eventstore.WorkflowID, error)
	listPaused        func(ctx context.Context) ([]eventstore.WorkflowID, error)
	streamHeads       func(ctx context.Context) ([]eventstore.StreamHead, error)
	query             func(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error)
	expiredTimers     func(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error)
	retireTimer       func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, armedSeq uint64) (eventstore.TimerRetirement, error)
	putPackage        func(ctx context.Context, rec eventstore.PackageRecord) error
	putPackageRoutes  func(ctx context.Context, rec eventstore.PackageRecord, types []string) error
	listPackages      func(ctx context.Context) ([]eventstore.PackageRecord, error)
	claimOutboxRows   func(ctx context.Context, limit int) ([]eventstore.OutboxRow, error)
	countClaimed      func(ctx context.Context) (int, error)
	acquireOwnedShard func(ctx context.Context, shards []int) error
	acquireOne        func(ctx context.Context, shard int) error
	isCurrentOwner    func(ctx context.Context, shard int) bool
	publishOwner      func(ctx context.Context, shard int) error
	rearm             func(ctx context.Context, rows []eventstore.OutboxRow) error
	settleWorkflow    func(ctx context.Context, wf eventstore.WorkflowID) ([]string, error)
	scheduleTimer     func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, armedSeq uint64) error
	deletePackage     func(ctx context.Context, wt, hash string) error
}

func (s *esBug) AcquireOwnedShard(ctx context.Context, shard int) error {
	if s.acquireOne != nil {
		return s.acquireOne(ctx, shard)
	}
	return s.esFull.AcquireOwnedShard(ctx, shard)
}

func (s *esBug) IsCurrentOwner(ctx context.Context, shard int) bool {
	if s.isCurrentOwner != nil {
		return s.isCurrentOwner(ctx, shard)
	}
	return s.esFull.IsCurrentOwner(ctx, shard)
}

func (s *esBug) PublishShardOwner(ctx context.Context, shard int) error {
	if s.publishOwner != nil {
		return s.publishOwner(ctx, shard)
	}
	return s.esFull.PublishShardOwner(ctx, shard)
}

func (s *esBug) RearmOutboxPending(ctx context.Context, rows []eventstore.OutboxRow) error {
	if s.rearm != nil {
		return s.rearm(ctx, rows)
	}
	return s.esFull.RearmOutboxPending(ctx, rows)
}

func (s *esBug) SettleWorkflowOutboxRowsCancelled(ctx context.Context, wf eventstore.WorkflowID) ([]string, error) {
	if s.settleWorkflow != nil {
		return s.settleWorkflow(ctx, wf)
	}
	return s.esFull.SettleWorkflowOutboxRowsCancelled(ctx, wf)
}

func (s *esBug) ScheduleTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, armedSeq uint64) error {
	if s.scheduleTimer != nil {
		return s.scheduleTimer(ctx, wf, id, fireAt, armedSeq)
	}
	return s.esFull.ScheduleTimer(ctx, wf, id, fireAt, armedSeq)
}

func (s *esBug) DeletePackage(ctx context.Context, wt, hash string) error {
	if s.deletePackage != nil {
		return s.deletePackage(ctx, wt, hash)
	}
	return s.esFull.DeletePackage(ctx, wt, hash)
}

func (s *esBug) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
	if s.appendFn != nil {
		return s.appendFn(ctx, tok, wf, evs, exp)
	}
	return s.esFull.Append(ctx, tok, wf, evs, exp)
}

func (s *esBug) AppendWithOutbox(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
	if s.appendWithOutbox != nil {
		return s.appendWithOutbox(ctx, tok, wf, evs, exp, rows)
	}
	return s.esFull.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
}

func (s *esBug) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	if s.readHistory != nil {
		return s.readHistory(ctx, wf)
	}
	return s.esFull.ReadHistory(ctx, wf)
}

func (s *esBug) ReadHistoryFrom(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
	if s.readHistoryFrom != nil {
		return s.readHistoryFrom(ctx, wf, from)
	}
	return s.esFull.ReadHistoryFrom(ctx, wf, from)
}

func (s *esBug) ReadRunChain(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.RunSummary, error) {
	if s.readRunChain != nil {
		return s.readRunChain(ctx, wf)
	}
	return s.esFull.ReadRunChain(ctx, wf)
}

func (s *esBug) ListWorkflowIDs(ctx context.Context) ([]eventstore.WorkflowID, error) {
	if s.listWorkflowIDs != nil {
		return s.listWorkflowIDs(ctx)
	}
	return s.esFull.ListWorkflowIDs(ctx)
}

func (s *esBug) ListActive(ctx context.Context) ([]eventstore.WorkflowID, error) {
	if s.listActive != nil {
		return s.listActive(ctx)
	}
	return s.esFull.ListActive(ctx)
}

func (s *esBug) ListPaused(ctx context.Context) ([]eventstore.WorkflowID, error) {
	if s.listPaused != nil {
		return s.listPaused(ctx)
	}
	return s.esFull.ListPaused(ctx)
}

func (s *esBug) StreamHeads(ctx context.Context) ([]eventstore.StreamHead, error) {
	if s.streamHeads != nil {
		return s.streamHeads(ctx)
	}
	return s.esFull.StreamHeads(ctx)
}

func (s *esBug) Query(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
	if s.query != nil {
		return s.query(ctx, f)
	}
	return s.esFull.Query(ctx, f)
}

func (s *esBug) ExpiredTimers(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
	if s.expiredTimers != nil {
		return s.expiredTimers(ctx, asOf)
	}
	return s.esFull.ExpiredTimers(ctx, asOf)
}

func (s *esBug) RetireTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, armedSeq uint64) (eventstore.TimerRetirement, error) {
	if s.retireTimer != nil {
		return s.retireTimer(ctx, wf, id, fireAt, armedSeq)
	}
	return s.esFull.RetireTimer(ctx, wf, id, fireAt, armedSeq)
}

func (s *esBug) PutPackage(ctx context.Context, rec eventstore.PackageRecord) error {
	if s.putPackage != nil {
		return s.putPackage(ctx, rec)
	}
	return s.esFull.PutPackage(ctx, rec)
}

func (s *esBug) PutPackageWithRoutes(ctx context.Context, rec eventstore.PackageRecord, types []string) error {
	if s.putPackageRoutes != nil {
		return s.putPackageRoutes(ctx, rec, types)
	}
	return s.esFull.PutPackageWithRoutes(ctx, rec, types)
}

func (s *esBug) ListPackages(ctx context.Context) ([]eventstore.PackageRecord, error) {
	if s.listPackages != nil {
		return s.listPackages(ctx)
	}
	return s.esFull.ListPackages(ctx)
}

func (s *esBug) ClaimOutboxRows(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
	if s.claimOutboxRows != nil {
		return s.claimOutboxRows(ctx, limit)
	}
	return s.esFull.ClaimOutboxRows(ctx, limit)
}

func (s *esBug) CountClaimedOutboxRows(ctx context.Context) (int, error) {
	if s.countClaimed != nil {
		return s.countClaimed(ctx)
	}
	return s.esFull.CountClaimedOutboxRows(ctx)
}

func (s *esBug) AcquireOwnedShards(ctx context.Context, shards []int) error {
	if s.acquireOwnedShard != nil {
		return s.acquireOwnedShard(ctx, shards)
	}
	return s.esFull.AcquireOwnedShards(ctx, shards)
}

func newMem() esFull { return eventstore.NewMemory() }

// payloadOf returns the payload data of the kinds that carry one.
func payloadOf(ev eventstore.Event) ([]byte, bool) {
	switch e := ev.(type) {
	case eventstore.WorkflowStarted:
		return e.Input.Data, true
	case eventstore.SignalReceived:
		return e.Input.Data, true
	case eventstore.ActivityScheduled:
		return e.Input.Data, true
	case eventstore.ActivityCompleted:
		return e.Result.Data, true
	case eventstore.WorkflowCompleted:
		return e.Result.Data, true
	}
	return nil, false
}

func withPayload(ev eventstore.Event, data []byte) eventstore.Event {
	switch e := ev.(type) {
	case eventstore.WorkflowStarted:
		e.Input.Data = data
		return e
	case eventstore.SignalReceived:
		e.Input.Data = data
		return e
	case eventstore.ActivityScheduled:
		e.Input.Data = data
		return e
	case eventstore.ActivityCompleted:
		e.Result.Data = data
		return e
	case eventstore.WorkflowCompleted:
		e.Result.Data = data
		return e
	}
	return ev
}

// esMapEvents rewrites a copy of each appended event, on both append paths.
func esMapEvents(b *esBug, f func(eventstore.Event) eventstore.Event) *esBug {
	mapAll := func(evs []eventstore.Event) []eventstore.Event {
		out := slices.Clone(evs)
		for i, ev := range out {
			if ev != nil {
				out[i] = f(ev)
			}
		}
		return out
	}
	m := b.esFull
	b.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
		return m.Append(ctx, tok, wf, mapAll(evs), exp)
	}
	b.appendWithOutbox = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
		return m.AppendWithOutbox(ctx, tok, wf, mapAll(evs), exp, rows)
	}
	return b
}

// esAfterAppend runs f after each successful append on both paths.
func esAfterAppend(b *esBug, f func(ctx context.Context, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64)) {
	m := b.esFull
	b.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
		err := m.Append(ctx, tok, wf, evs, exp)
		if err == nil {
			f(ctx, wf, evs, exp)
		}
		return err
	}
	b.appendWithOutbox = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
		err := m.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
		if err == nil {
			f(ctx, wf, evs, exp)
		}
		return err
	}
}

func idSet(ids []eventstore.WorkflowID) map[eventstore.WorkflowID]bool {
	s := map[eventstore.WorkflowID]bool{}
	for _, id := range ids {
		s[id] = true
	}
	return s
}

var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

func armedTimer(ctx context.Context, m esFull, wf eventstore.WorkflowID, id eventstore.TimerID) (eventstore.TimerEntry, bool) {
	all, _ := m.ExpiredTimers(ctx, farFuture)
	for _, e := range all {
		if e.WorkflowID == wf && e.TimerID == id {
			return e, true
		}
	}
	return eventstore.TimerEntry{}, false
}

func esHead(ctx context.Context, m esFull, wf eventstore.WorkflowID) (uint64, error) {
	evs, err := m.ReadHistory(ctx, wf)
	return uint64(len(evs)), err
}

func esCases() []struct {
	name string
	new  func() eventstore.Store
} {
	type c = struct {
		name string
		new  func() eventstore.Store
	}
	return []c{
		{"read-history-capped-1000", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, readHistory: func(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
				evs, err := m.ReadHistory(ctx, wf)
				return evs[:min(len(evs), 1000)], err
			}}
		}},
		{"read-from-window-1024", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, readHistoryFrom: func(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
				evs, err := m.ReadHistoryFrom(ctx, wf, from)
				return evs[:min(len(evs), 1024)], err
			}}
		}},
		{"read-from-exclusive", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, readHistoryFrom: func(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
				return m.ReadHistoryFrom(ctx, wf, from+1)
			}}
		}},
		{"list-ids-capped-100", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, listWorkflowIDs: func(ctx context.Context) ([]eventstore.WorkflowID, error) {
				ids, err := m.ListWorkflowIDs(ctx)
				return ids[:min(len(ids), 100)], err
			}}
		}},
		{"stream-heads-capped-256", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, streamHeads: func(ctx context.Context) ([]eventstore.StreamHead, error) {
				h, err := m.StreamHeads(ctx)
				return h[:min(len(h), 256)], err
			}}
		}},
		{"list-active-includes-paused", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, listActive: func(ctx context.Context) ([]eventstore.WorkflowID, error) {
				a, err := m.ListActive(ctx)
				p, _ := m.ListPaused(ctx)
				return append(a, p...), err
			}}
		}},
		{"list-active-includes-closed", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, listActive: func(ctx context.Context) ([]eventstore.WorkflowID, error) {
				all, err := m.ListWorkflowIDs(ctx)
				p, _ := m.ListPaused(ctx)
				ps := idSet(p)
				return slices.DeleteFunc(all, func(id eventstore.WorkflowID) bool { return ps[id] }), err
			}}
		}},
		{"list-paused-keeps-closed", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, listPaused: func(ctx context.Context) ([]eventstore.WorkflowID, error) {
				all, err := m.ListWorkflowIDs(ctx)
				if err != nil {
					return nil, err
				}
				a, _ := m.ListActive(ctx)
				as := idSet(a)
				var out []eventstore.WorkflowID
				for _, id := range all {
					evs, _ := m.ReadHistory(ctx, id)
					if !as[id] && slices.ContainsFunc(evs, func(ev eventstore.Event) bool { _, ok := ev.(eventstore.WorkflowPaused); return ok }) {
						out = append(out, id)
					}
				}
				return out, nil
			}}
		}},
		{"query-ignores-type", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, query: func(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
				f.WorkflowType = ""
				return m.Query(ctx, f)
			}}
		}},
		{"query-ignores-started-after", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, query: func(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
				f.StartedAfter = time.Time{}
				return m.Query(ctx, f)
			}}
		}},
		{"query-started-before-inclusive", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, query: func(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
				if !f.StartedBefore.IsZero() {
					f.StartedBefore = f.StartedBefore.Add(time.Nanosecond)
				}
				return m.Query(ctx, f)
			}}
		}},
		{"query-status-paused-ignored", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, query: func(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
				if f.Status == eventstore.StatusPaused {
					f.Status = ""
				}
				return m.Query(ctx, f)
			}}
		}},
		{"query-negative-limit-none", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, query: func(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
				if f.Limit < 0 {
					return nil, nil
				}
				return m.Query(ctx, f)
			}}
		}},
		{"query-limit-zero-default-100", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, query: func(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
				if f.Limit <= 0 {
					f.Limit = 100
				}
				return m.Query(ctx, f)
			}}
		}},
		{"run-chain-drops-reopened-run", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, readRunChain: func(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.RunSummary, error) {
				chain, err := m.ReadRunChain(ctx, wf)
				evs, _ := m.ReadHistory(ctx, wf)
				reopened := map[eventstore.RunID]bool{}
				for _, ev := range evs {
					if _, ok := ev.(eventstore.WorkflowReopened); ok {
						reopened[ev.EventEnvelope().RunID] = true
					}
				}
				return slices.DeleteFunc(chain, func(r eventstore.RunSummary) bool { return reopened[r.RunID] }), err
			}}
		}},
		{"retire-ignores-armedseq", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, retireTimer: func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, seq uint64) (eventstore.TimerRetirement, error) {
				if e, ok := armedTimer(ctx, m, wf, id); ok && e.FireAt.Equal(fireAt) {
					seq = e.ArmedSeq
				}
				return m.RetireTimer(ctx, wf, id, fireAt, seq)
			}}
		}},
		{"retire-ignores-fireat", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, retireTimer: func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, seq uint64) (eventstore.TimerRetirement, error) {
				if e, ok := armedTimer(ctx, m, wf, id); ok && e.ArmedSeq == seq {
					fireAt = e.FireAt
				}
				return m.RetireTimer(ctx, wf, id, fireAt, seq)
			}}
		}},
		{"expired-latest-first", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, expiredTimers: func(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
				e, err := m.ExpiredTimers(ctx, asOf)
				slices.Reverse(e)
				return e, err
			}}
		}},
		{"expired-excludes-equal", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, expiredTimers: func(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
				return m.ExpiredTimers(ctx, asOf.Add(-time.Nanosecond))
			}}
		}},
		{"package-routes-not-atomic", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, putPackageRoutes: func(ctx context.Context, rec eventstore.PackageRecord, types []string) error {
				if err := m.PutPackage(ctx, rec); err != nil {
					return err
				}
				for _, t := range types {
					if err := m.PutPackageRoute(ctx, t, rec.ContentHash); err != nil {
						return err
					}
				}
				return nil
			}}
		}},
		{"package-data-aliased", func() eventstore.Store {
			m := newMem()
			var mu sync.Mutex
			kept := map[string][]byte{}
			return &esBug{esFull: m,
				putPackage: func(ctx context.Context, rec eventstore.PackageRecord) error {
					err := m.PutPackage(ctx, rec)
					if err == nil {
						mu.Lock()
						kept[rec.WorkflowType+"\x00"+rec.ContentHash] = rec.Data
						mu.Unlock()
					}
					return err
				},
				listPackages: func(ctx context.Context) ([]eventstore.PackageRecord, error) {
					recs, err := m.ListPackages(ctx)
					mu.Lock()
					defer mu.Unlock()
					for i, r := range recs {
						if d, ok := kept[r.WorkflowType+"\x00"+r.ContentHash]; ok {
							recs[i].Data = d
						}
					}
					return recs, err
				}}
		}},
		{"event-payload-aliased", func() eventstore.Store {
			m := newMem()
			var mu sync.Mutex
			kept := map[eventstore.WorkflowID]map[uint64][]byte{}
			b := &esBug{esFull: m}
			esAfterAppend(b, func(_ context.Context, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) {
				mu.Lock()
				defer mu.Unlock()
				if kept[wf] == nil {
					kept[wf] = map[uint64][]byte{}
				}
				for i, ev := range evs {
					if d, ok := payloadOf(ev); ok {
						kept[wf][exp+1+uint64(i)] = d
					}
				}
			})
			swap := func(wf eventstore.WorkflowID, evs []eventstore.Event) []eventstore.Event {
				mu.Lock()
				defer mu.Unlock()
				for i, ev := range evs {
					if d, ok := kept[wf][ev.EventEnvelope().Seq]; ok {
						evs[i] = withPayload(ev, d)
					}
				}
				return evs
			}
			b.readHistory = func(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
				evs, err := m.ReadHistory(ctx, wf)
				return swap(wf, evs), err
			}
			b.readHistoryFrom = func(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
				evs, err := m.ReadHistoryFrom(ctx, wf, from)
				return swap(wf, evs), err
			}
			return b
		}},
		{"read-history-returns-cache", func() eventstore.Store {
			m := newMem()
			var mu sync.Mutex
			cache := map[eventstore.WorkflowID][]eventstore.Event{}
			return &esBug{esFull: m, readHistory: func(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
				evs, err := m.ReadHistory(ctx, wf)
				if err != nil {
					return nil, err
				}
				mu.Lock()
				defer mu.Unlock()
				if c, ok := cache[wf]; ok && len(c) == len(evs) {
					return c, nil
				}
				cache[wf] = evs
				return evs, nil
			}}
		}},
		{"outbox-rows-never-settle", func() eventstore.Store {
			m := newMem()
			var mu sync.Mutex
			claimed := map[string]eventstore.OutboxRow{}
			ghosts := map[string]bool{}
			b := &esBug{esFull: m}
			esAfterAppend(b, func(_ context.Context, wf eventstore.WorkflowID, evs []eventstore.Event, _ uint64) {
				mu.Lock()
				defer mu.Unlock()
				for _, ev := range evs {
					var act eventstore.ActivityID
					switch e := ev.(type) {
					case eventstore.ActivityCompleted:
						act = e.ActivityID
					case eventstore.ActivityFailed:
						if e.Error.Kind == eventstore.Retryable {
							continue
						}
						act = e.ActivityID
					case eventstore.ActivityCancelled:
						act = e.ActivityID
					case eventstore.ActivityTimedOut:
						act = e.ActivityID
					default:
						continue
					}
					for k, r := range claimed {
						if r.WorkflowID == wf && r.RunID == ev.EventEnvelope().RunID && r.Ordinal == act {
							ghosts[k] = true
						}
					}
				}
			})
			b.claimOutboxRows = func(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
				rows, err := m.ClaimOutboxRows(ctx, limit)
				mu.Lock()
				for _, r := range rows {
					claimed[r.DispatchKey] = r
				}
				mu.Unlock()
				return rows, err
			}
			b.countClaimed = func(ctx context.Context) (int, error) {
				n, err := m.CountClaimedOutboxRows(ctx)
				mu.Lock()
				defer mu.Unlock()
				return n + len(ghosts), err
			}
			return b
		}},
		{"outbox-retryable-failure-settles", func() eventstore.Store {
			m := newMem()
			var mu sync.Mutex
			keys := map[string]string{} // run/ordinal -> dispatch key
			b := &esBug{esFull: m}
			ao := func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
				err := m.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
				if err == nil {
					mu.Lock()
					for _, r := range rows {
						keys[wf.String()+r.RunID.String()+r.Ordinal.String()] = r.DispatchKey
					}
					mu.Unlock()
				}
				return err
			}
			settle := func(ctx context.Context, wf eventstore.WorkflowID, evs []eventstore.Event) {
				for _, ev := range evs {
					if e, ok := ev.(eventstore.ActivityFailed); ok && e.Error.Kind == eventstore.Retryable {
						mu.Lock()
						k, ok := keys[wf.String()+e.RunID.String()+e.ActivityID.String()]
						mu.Unlock()
						if ok {
							_ = m.SettleOutboxRowCancelled(ctx, k)
						}
					}
				}
			}
			b.appendWithOutbox = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
				err := ao(ctx, tok, wf, evs, exp, rows)
				if err == nil {
					settle(ctx, wf, evs)
				}
				return err
			}
			b.appendFn = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
				err := m.Append(ctx, tok, wf, evs, exp)
				if err == nil {
					settle(ctx, wf, evs)
				}
				return err
			}
			return b
		}},
		{"claim-newest-first", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, claimOutboxRows: func(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
				if limit <= 0 {
					return m.ClaimOutboxRows(ctx, limit)
				}
				rows, err := m.ClaimOutboxRows(ctx, 1<<30)
				if err != nil || len(rows) <= limit {
					slices.Reverse(rows)
					return rows, err
				}
				keep := slices.Clone(rows[len(rows)-limit:])
				if err := m.RearmOutboxPending(ctx, rows[:len(rows)-limit]); err != nil {
					return nil, err
				}
				slices.Reverse(keep)
				return keep, nil
			}}
		}},
		{"claim-nonpositive-limit-claims-all", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, claimOutboxRows: func(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
				if limit <= 0 {
					limit = 1 << 30
				}
				return m.ClaimOutboxRows(ctx, limit)
			}}
		}},
		{"acquire-many-partial", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, acquireOwnedShard: func(ctx context.Context, shards []int) error {
				for _, s := range shards {
					if err := m.AcquireOwnedShard(ctx, s); err != nil {
						return err
					}
				}
				return nil
			}}
		}},
		{"conflict-found-is-next-seq", func() eventstore.Store {
			m := newMem()
			fix := func(err error) error {
				var c *eventstore.SequenceConflictError
				if errors.As(err, &c) {
					return &eventstore.SequenceConflictError{Expected: c.Expected, Found: c.Found + 1}
				}
				return err
			}
			return &esBug{esFull: m,
				appendFn: func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
					return fix(m.Append(ctx, tok, wf, evs, exp))
				},
				appendWithOutbox: func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
					return fix(m.AppendWithOutbox(ctx, tok, wf, evs, exp, rows))
				}}
		}},
		{"empty-append-skips-token-check", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, appendFn: func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
				if len(evs) == 0 {
					return nil
				}
				return m.Append(ctx, tok, wf, evs, exp)
			}}
		}},
		{"check-then-act-append", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, appendFn: func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
				if len(evs) == 0 || !tok.Valid() || eventstore.ValidateAppend(wf, evs) != nil {
					return m.Append(ctx, tok, wf, evs, exp)
				}
				h, err := esHead(ctx, m, wf)
				if err != nil {
					return err
				}
				if h != exp {
					return &eventstore.SequenceConflictError{Expected: exp, Found: h}
				}
				runtime.Gosched()
				for {
					cur, err := esHead(ctx, m, wf)
					if err != nil {
						return err
					}
					if err := m.Append(ctx, tok, wf, evs, cur); !errors.Is(err, eventstore.ErrSequenceConflict) {
						return err
					}
				}
			}}
		}},
		{"torn-batches", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, appendFn: func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
				if len(evs) < 2 || !tok.Valid() || eventstore.ValidateAppend(wf, evs) != nil {
					return m.Append(ctx, tok, wf, evs, exp)
				}
				if err := m.Append(ctx, tok, wf, evs[:1], exp); err != nil {
					return err
				}
				for _, ev := range evs[1:] {
					runtime.Gosched()
					for {
						cur, _ := esHead(ctx, m, wf)
						if err := m.Append(ctx, tok, wf, []eventstore.Event{ev}, cur); err == nil {
							break
						}
					}
				}
				return nil
			}}
		}},
		{"rearm-silently-no-op", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, rearm: func(ctx context.Context, rows []eventstore.OutboxRow) error {
				if err := ctx.Err(); err != nil {
					return err
				}
				return nil
			}}
		}},
		{"settle-workflow-current-run-only", func() eventstore.Store {
			m := newMem()
			var mu sync.Mutex
			var staged []eventstore.OutboxRow
			b := &esBug{esFull: m}
			b.appendWithOutbox = func(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
				err := m.AppendWithOutbox(ctx, tok, wf, evs, exp, rows)
				if err == nil {
					mu.Lock()
					for _, r := range rows {
						r.WorkflowID = wf
						staged = append(staged, r)
					}
					mu.Unlock()
				}
				return err
			}
			b.settleWorkflow = func(ctx context.Context, wf eventstore.WorkflowID) ([]string, error) {
				if wf.IsZero() {
					return m.SettleWorkflowOutboxRowsCancelled(ctx, wf)
				}
				chain, err := m.ReadRunChain(ctx, wf)
				if err != nil || len(chain) == 0 {
					return m.SettleWorkflowOutboxRowsCancelled(ctx, wf)
				}
				cur := chain[len(chain)-1].RunID
				mu.Lock()
				rows := slices.Clone(staged)
				mu.Unlock()
				var keys []string
				for _, r := range rows {
					if r.WorkflowID == wf && r.RunID == cur {
						if m.SettleOutboxRowCancelled(ctx, r.DispatchKey) == nil {
							keys = append(keys, r.DispatchKey)
						}
					}
				}
				return keys, nil
			}
			return b
		}},
		{"schedule-rearm-ignored", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, scheduleTimer: func(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, seq uint64) error {
				if _, ok := armedTimer(ctx, m, wf, id); ok {
					return nil
				}
				return m.ScheduleTimer(ctx, wf, id, fireAt, seq)
			}}
		}},
		{"expired-zero-as-of-means-all", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, expiredTimers: func(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
				if asOf.IsZero() {
					asOf = farFuture
				}
				return m.ExpiredTimers(ctx, asOf)
			}}
		}},
		{"delete-package-deletes-every-version", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, deletePackage: func(ctx context.Context, wt, hash string) error {
				if err := m.DeletePackage(ctx, wt, hash); err != nil {
					return err
				}
				recs, _ := m.ListPackages(ctx)
				for _, r := range recs {
					if r.WorkflowType == wt {
						_ = m.DeletePackage(ctx, r.WorkflowType, r.ContentHash)
					}
				}
				return nil
			}}
		}},
		{"put-package-keeps-old", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, putPackage: func(ctx context.Context, rec eventstore.PackageRecord) error {
				recs, _ := m.ListPackages(ctx)
				for _, r := range recs {
					if r.WorkflowType == rec.WorkflowType && r.ContentHash == rec.ContentHash {
						return nil
					}
				}
				return m.PutPackage(ctx, rec)
			}}
		}},
		{"read-from-zero-reads-nothing", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, readHistoryFrom: func(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
				if from == 0 {
					_, err := m.ReadHistoryFrom(ctx, wf, from)
					return nil, err
				}
				return m.ReadHistoryFrom(ctx, wf, from)
			}}
		}},
		{"list-ids-once-per-run", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, listWorkflowIDs: func(ctx context.Context) ([]eventstore.WorkflowID, error) {
				ids, err := m.ListWorkflowIDs(ctx)
				var out []eventstore.WorkflowID
				for _, id := range ids {
					chain, _ := m.ReadRunChain(ctx, id)
					for range max(1, len(chain)) {
						out = append(out, id)
					}
				}
				return out, err
			}}
		}},
		{"query-closed-at-missing", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, query: func(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
				out, err := m.Query(ctx, f)
				for i := range out {
					out[i].ClosedAt = time.Time{}
				}
				return out, err
			}}
		}},
		{"query-head-of-current-run", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, query: func(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
				out, err := m.Query(ctx, f)
				for i := range out {
					if chain, _ := m.ReadRunChain(ctx, out[i].WorkflowID); len(chain) > 0 {
						r := chain[len(chain)-1]
						out[i].Head = r.LastSeq - r.FirstSeq + 1
					}
				}
				return out, err
			}}
		}},
		{"list-active-misses-reopened", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, listActive: func(ctx context.Context) ([]eventstore.WorkflowID, error) {
				ids, err := m.ListActive(ctx)
				return slices.DeleteFunc(ids, func(id eventstore.WorkflowID) bool {
					evs, _ := m.ReadHistory(ctx, id)
					return slices.ContainsFunc(evs, func(ev eventstore.Event) bool { _, ok := ev.(eventstore.WorkflowReopened); return ok })
				}), err
			}}
		}},
		{"acquire-negative-shard-ok", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, acquireOne: func(ctx context.Context, shard int) error {
				if shard < 0 {
					return nil
				}
				return m.AcquireOwnedShard(ctx, shard)
			}}
		}},
		{"is-owner-of-everything-once-any", func() eventstore.Store {
			m := newMem()
			var mu sync.Mutex
			acquired := false
			return &esBug{esFull: m,
				acquireOne: func(ctx context.Context, shard int) error {
					err := m.AcquireOwnedShard(ctx, shard)
					if err == nil {
						mu.Lock()
						acquired = true
						mu.Unlock()
					}
					return err
				},
				isCurrentOwner: func(ctx context.Context, shard int) bool {
					mu.Lock()
					defer mu.Unlock()
					return acquired || m.IsCurrentOwner(ctx, shard)
				}}
		}},
		{"publish-without-acquire-ok", func() eventstore.Store {
			m := newMem()
			return &esBug{esFull: m, publishOwner: func(ctx context.Context, shard int) error {
				if err := m.PublishShardOwner(ctx, shard); err != nil && !errors.Is(err, eventstore.ErrNotOwner) {
					return err
				}
				return nil
			}}
		}},
		{"recorded-at-always-store-clock", func() eventstore.Store {
			return esMapEvents(&esBug{esFull: newMem()}, func(ev eventstore.Event) eventstore.Event {
				env := ev.EventEnvelope()
				env.RecordedAt = time.Time{}
				return eventstore.WithEnvelope(ev, env)
			})
		}},
		{"strings-cut-at-nul", func() eventstore.Store {
			return esMapEvents(&esBug{esFull: newMem()}, func(ev eventstore.Event) eventstore.Event {
				switch e := ev.(type) {
				case eventstore.WorkflowStarted:
					e.WorkflowType = truncNUL(e.WorkflowType)
					return e
				case eventstore.SignalReceived:
					e.SignalName = truncNUL(e.SignalName)
					return e
				}
				return ev
			})
		}},
		{"activity-result-truncated-512k", func() eventstore.Store {
			return esMapEvents(&esBug{esFull: newMem()}, func(ev eventstore.Event) eventstore.Event {
				if e, ok := ev.(eventstore.ActivityCompleted); ok && len(e.Result.Data) > 512<<10 {
					e.Result.Data = e.Result.Data[:512<<10]
					return e
				}
				return ev
			})
		}},
		{"payload-truncated-512k", func() eventstore.Store {
			return esMapEvents(&esBug{esFull: newMem()}, func(ev eventstore.Event) eventstore.Event {
				if d, ok := payloadOf(ev); ok && len(d) > 512<<10 {
					return withPayload(ev, d[:512<<10])
				}
				return ev
			})
		}},
	}
}

// ---- decorator adversaries ----

// decHooks are a buggy decorator's deviations; nil fields forward faithfully.
type decHooks struct {
	ctx                func(context.Context) context.Context
	err                func(error) error
	append             func(inner eventstore.Store, ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error
	readHistory        func(inner eventstore.Store, ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error)
	readHistoryFrom    func(inner eventstore.Store, ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error)
	listWorkflowIDs    func(inner eventstore.Store, ctx context.Context) ([]eventstore.WorkflowID, error)
	listPaused         func(inner eventstore.Store, ctx context.Context) ([]eventstore.WorkflowID, error)
	query              func(inner eventstore.Store, ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error)
	scheduleTimer      func(inner eventstore.Store, ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, seq uint64) error
	expiredTimers      func(inner eventstore.Store, ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error)
	listPackages       func(inner eventstore.Store, ctx context.Context) ([]eventstore.PackageRecord, error)
	rearm              func(inner eventstore.Outbox, ctx context.Context, rows []eventstore.OutboxRow) error
	claim              func(inner eventstore.Outbox, ctx context.Context, limit int) ([]eventstore.OutboxRow, error)
	setOwnedShards     func(inner eventstore.ShardOwner, ctx context.Context, shards []int)
	isCurrentOwner     func(inner eventstore.ShardOwner, ctx context.Context, shard int) bool
	acquireOwnedShards func(inner eventstore.ShardOwner, ctx context.Context, shards []int) error
}

type decCore struct {
	inner eventstore.Store
	h     *decHooks
}

func (d *decCore) Unwrap() eventstore.Store { return d.inner }

func (d *decCore) c(ctx context.Context) context.Context {
	if d.h.ctx != nil {
		return d.h.ctx(ctx)
	}
	return ctx
}

func (d *decCore) e(err error) error {
	if d.h.err != nil {
		return d.h.err(err)
	}
	return err
}

func (d *decCore) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
	if d.h.append != nil {
		return d.h.append(d.inner, d.c(ctx), tok, wf, evs, exp)
	}
	return d.e(d.inner.Append(d.c(ctx), tok, wf, evs, exp))
}

func (d *decCore) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	if d.h.readHistory != nil {
		return d.h.readHistory(d.inner, d.c(ctx), wf)
	}
	r, err := d.inner.ReadHistory(d.c(ctx), wf)
	return r, d.e(err)
}

func (d *decCore) ReadHistoryFrom(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
	if d.h.readHistoryFrom != nil {
		return d.h.readHistoryFrom(d.inner, d.c(ctx), wf, from)
	}
	r, err := d.inner.ReadHistoryFrom(d.c(ctx), wf, from)
	return r, d.e(err)
}

func (d *decCore) ReadRunChain(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.RunSummary, error) {
	r, err := d.inner.ReadRunChain(d.c(ctx), wf)
	return r, d.e(err)
}

func (d *decCore) ListWorkflowIDs(ctx context.Context) ([]eventstore.WorkflowID, error) {
	if d.h.listWorkflowIDs != nil {
		return d.h.listWorkflowIDs(d.inner, d.c(ctx))
	}
	r, err := d.inner.ListWorkflowIDs(d.c(ctx))
	return r, d.e(err)
}

func (d *decCore) ListActive(ctx context.Context) ([]eventstore.WorkflowID, error) {
	r, err := d.inner.ListActive(d.c(ctx))
	return r, d.e(err)
}

func (d *decCore) ListPaused(ctx context.Context) ([]eventstore.WorkflowID, error) {
	if d.h.listPaused != nil {
		return d.h.listPaused(d.inner, d.c(ctx))
	}
	r, err := d.inner.ListPaused(d.c(ctx))
	return r, d.e(err)
}

func (d *decCore) StreamHeads(ctx context.Context) ([]eventstore.StreamHead, error) {
	r, err := d.inner.StreamHeads(d.c(ctx))
	return r, d.e(err)
}

func (d *decCore) Query(ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
	if d.h.query != nil {
		return d.h.query(d.inner, d.c(ctx), f)
	}
	r, err := d.inner.Query(d.c(ctx), f)
	return r, d.e(err)
}

func (d *decCore) ScheduleTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, seq uint64) error {
	if d.h.scheduleTimer != nil {
		return d.h.scheduleTimer(d.inner, d.c(ctx), wf, id, fireAt, seq)
	}
	return d.e(d.inner.ScheduleTimer(d.c(ctx), wf, id, fireAt, seq))
}

func (d *decCore) ExpiredTimers(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
	if d.h.expiredTimers != nil {
		return d.h.expiredTimers(d.inner, d.c(ctx), asOf)
	}
	r, err := d.inner.ExpiredTimers(d.c(ctx), asOf)
	return r, d.e(err)
}

func (d *decCore) RetireTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, seq uint64) (eventstore.TimerRetirement, error) {
	r, err := d.inner.RetireTimer(d.c(ctx), wf, id, fireAt, seq)
	return r, d.e(err)
}

func (d *decCore) PutPackage(ctx context.Context, rec eventstore.PackageRecord) error {
	return d.e(d.inner.PutPackage(d.c(ctx), rec))
}

func (d *decCore) PutPackageWithRoutes(ctx context.Context, rec eventstore.PackageRecord, types []string) error {
	return d.e(d.inner.PutPackageWithRoutes(d.c(ctx), rec, types))
}

func (d *decCore) ListPackages(ctx context.Context) ([]eventstore.PackageRecord, error) {
	if d.h.listPackages != nil {
		return d.h.listPackages(d.inner, d.c(ctx))
	}
	r, err := d.inner.ListPackages(d.c(ctx))
	return r, d.e(err)
}

func (d *decCore) DeletePackage(ctx context.Context, wt, hash string) error {
	return d.e(d.inner.DeletePackage(d.c(ctx), wt, hash))
}

func (d *decCore) PutPackageRoute(ctx context.Context, wt, hash string) error {
	return d.e(d.inner.PutPackageRoute(d.c(ctx), wt, hash))
}

func (d *decCore) ListPackageRoutes(ctx context.Context) ([]eventstore.PackageRoute, error) {
	r, err := d.inner.ListPackageRoutes(d.c(ctx))
	return r, d.e(err)
}

type decOB struct{ d *decCore }

func (o decOB) ob() eventstore.Outbox { return o.d.inner.(eventstore.Outbox) }

func (o decOB) AppendWithOutbox(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64, rows []eventstore.OutboxRow) error {
	return o.d.e(o.ob().AppendWithOutbox(o.d.c(ctx), tok, wf, evs, exp, rows))
}

func (o decOB) RearmOutboxPending(ctx context.Context, rows []eventstore.OutboxRow) error {
	if o.d.h.rearm != nil {
		return o.d.h.rearm(o.ob(), o.d.c(ctx), rows)
	}
	return o.d.e(o.ob().RearmOutboxPending(o.d.c(ctx), rows))
}

func (o decOB) ClaimOutboxRows(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
	if o.d.h.claim != nil {
		return o.d.h.claim(o.ob(), o.d.c(ctx), limit)
	}
	r, err := o.ob().ClaimOutboxRows(o.d.c(ctx), limit)
	return r, o.d.e(err)
}

func (o decOB) CountClaimedOutboxRows(ctx context.Context) (int, error) {
	r, err := o.ob().CountClaimedOutboxRows(o.d.c(ctx))
	return r, o.d.e(err)
}

func (o decOB) SettleOutboxRowCancelled(ctx context.Context, key string) error {
	return o.d.e(o.ob().SettleOutboxRowCancelled(o.d.c(ctx), key))
}

func (o decOB) SettleWorkflowOutboxRowsCancelled(ctx context.Context, wf eventstore.WorkflowID) ([]string, error) {
	r, err := o.ob().SettleWorkflowOutboxRowsCancelled(o.d.c(ctx), wf)
	return r, o.d.e(err)
}

type decSH struct{ d *decCore }

func (s decSH) sh() eventstore.ShardOwner { return s.d.inner.(eventstore.ShardOwner) }

func (s decSH) SetOwnedShards(ctx context.Context, shards []int) {
	if s.d.h.setOwnedShards != nil {
		s.d.h.setOwnedShards(s.sh(), s.d.c(ctx), shards)
		return
	}
	s.sh().SetOwnedShards(s.d.c(ctx), shards)
}

func (s decSH) AcquireOwnedShards(ctx context.Context, shards []int) error {
	if s.d.h.acquireOwnedShards != nil {
		return s.d.h.acquireOwnedShards(s.sh(), s.d.c(ctx), shards)
	}
	return s.d.e(s.sh().AcquireOwnedShards(s.d.c(ctx), shards))
}

func (s decSH) AcquireOwnedShard(ctx context.Context, shard int) error {
	return s.d.e(s.sh().AcquireOwnedShard(s.d.c(ctx), shard))
}

func (s decSH) ExtendOwnedShards(ctx context.Context, shards []int) {
	s.sh().ExtendOwnedShards(s.d.c(ctx), shards)
}

func (s decSH) IsCurrentOwner(ctx context.Context, shard int) bool {
	if s.d.h.isCurrentOwner != nil {
		return s.d.h.isCurrentOwner(s.sh(), s.d.c(ctx), shard)
	}
	return s.sh().IsCurrentOwner(s.d.c(ctx), shard)
}

func (s decSH) PublishShardOwner(ctx context.Context, shard int) error {
	return s.d.e(s.sh().PublishShardOwner(s.d.c(ctx), shard))
}

type decOutbox struct {
	*decCore
	decOB
}

type decShard struct {
	*decCore
	decSH
}

type decFull struct {
	*decCore
	decOB
	decSH
}

// decWrap builds a decorator with the inner's exact capabilities; hooks
// returns fresh per-wrap state.
func decWrap(hooks func() *decHooks) func(eventstore.Store) eventstore.Store {
	return func(inner eventstore.Store) eventstore.Store {
		d := &decCore{inner: inner, h: hooks()}
		_, ob := inner.(eventstore.Outbox)
		_, sh := inner.(eventstore.ShardOwner)
		hr, _ := inner.(eventstore.HistoriesReader)
		switch {
		case ob && sh:
			return withHistories(&decFull{d, decOB{d}, decSH{d}}, hr)
		case ob:
			return withHistories(&decOutbox{d, decOB{d}}, hr)
		case sh:
			return withHistories(&decShard{d, decSH{d}}, hr)
		}
		return withHistories(d, hr)
	}
}

// noDeadlineCtx forwards cancellation and values but hides the deadline.
type noDeadlineCtx struct{ context.Context }

func (noDeadlineCtx) Deadline() (time.Time, bool) { return time.Time{}, false }

func decCases() []struct {
	name string
	wrap func(eventstore.Store) eventstore.Store
} {
	type c = struct {
		name string
		wrap func(eventstore.Store) eventstore.Store
	}
	return []c{
		{"faithful-baseline-must-pass", nil},
		{"drops-cancellation", decWrap(func() *decHooks { return &decHooks{ctx: context.WithoutCancel} })},
		{"drops-deadline", decWrap(func() *decHooks {
			return &decHooks{ctx: func(ctx context.Context) context.Context { return noDeadlineCtx{ctx} }}
		})},
		{"adds-default-timeout", decWrap(func() *decHooks {
			return &decHooks{ctx: func(ctx context.Context) context.Context {
				if _, ok := ctx.Deadline(); ok {
					return ctx
				}
				c, cancel := context.WithTimeout(ctx, time.Hour)
				_ = cancel // leaked on purpose: the bug is the added deadline
				return c
			}}
		})},
		{"wraps-errors", decWrap(func() *decHooks {
			return &decHooks{err: func(err error) error {
				if err == nil {
					return nil
				}
				return fmt.Errorf("otelstore: %w", err)
			}}
		})},
		{"swallows-not-found", decWrap(func() *decHooks {
			return &decHooks{err: func(err error) error {
				if errors.Is(err, eventstore.ErrNotFound) {
					return nil
				}
				return err
			}}
		})},
		{"retries-append-once", decWrap(func() *decHooks {
			return &decHooks{append: func(in eventstore.Store, ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
				if err := in.Append(ctx, tok, wf, evs, exp); err != nil {
					return in.Append(ctx, tok, wf, evs, exp)
				}
				return nil
			}}
		})},
		{"reads-history-twice", decWrap(func() *decHooks {
			return &decHooks{readHistory: func(in eventstore.Store, ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
				_, _ = in.ReadHistory(ctx, wf) // "count events for an attribute"
				return in.ReadHistory(ctx, wf)
			}}
		})},
		{"caches-list-packages", decWrap(func() *decHooks {
			var once sync.Once
			var recs []eventstore.PackageRecord
			var err error
			return &decHooks{listPackages: func(in eventstore.Store, ctx context.Context) ([]eventstore.PackageRecord, error) {
				once.Do(func() { recs, err = in.ListPackages(ctx) })
				return recs, err
			}}
		})},
		{"caches-is-current-owner", decWrap(func() *decHooks {
			var mu sync.Mutex
			seen := map[int]bool{}
			return &decHooks{isCurrentOwner: func(in eventstore.ShardOwner, ctx context.Context, shard int) bool {
				mu.Lock()
				defer mu.Unlock()
				v, ok := seen[shard]
				if !ok {
					v = in.IsCurrentOwner(ctx, shard)
					seen[shard] = v
				}
				return v
			}}
		})},
		{"read-history-nil-to-empty", decWrap(func() *decHooks {
			return &decHooks{readHistory: func(in eventstore.Store, ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
				evs, err := in.ReadHistory(ctx, wf)
				if evs == nil && err == nil {
					evs = []eventstore.Event{}
				}
				return evs, err
			}}
		})},
		{"list-ids-empty-to-nil", decWrap(func() *decHooks {
			return &decHooks{listWorkflowIDs: func(in eventstore.Store, ctx context.Context) ([]eventstore.WorkflowID, error) {
				ids, err := in.ListWorkflowIDs(ctx)
				if len(ids) == 0 {
					ids = nil
				}
				return ids, err
			}}
		})},
		{"expired-timers-reordered", decWrap(func() *decHooks {
			return &decHooks{expiredTimers: func(in eventstore.Store, ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
				e, err := in.ExpiredTimers(ctx, asOf)
				slices.SortStableFunc(e, func(a, b eventstore.TimerEntry) int { return strings.Compare(string(a.TimerID), string(b.TimerID)) })
				return e, err
			}}
		})},
		{"list-paused-truncated-3", decWrap(func() *decHooks {
			return &decHooks{listPaused: func(in eventstore.Store, ctx context.Context) ([]eventstore.WorkflowID, error) {
				ids, err := in.ListPaused(ctx)
				return ids[:min(len(ids), 3)], err
			}}
		})},
		{"read-from-panics-on-empty", decWrap(func() *decHooks {
			return &decHooks{readHistoryFrom: func(in eventstore.Store, ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
				evs, err := in.ReadHistoryFrom(ctx, wf, from)
				if err == nil {
					_ = evs[0].EventEnvelope().Seq // first seq for a span attribute
				}
				return evs, err
			}}
		})},
		{"set-owned-shards-panics-on-empty", decWrap(func() *decHooks {
			return &decHooks{setOwnedShards: func(in eventstore.ShardOwner, ctx context.Context, shards []int) {
				_ = shards[0]
				in.SetOwnedShards(ctx, shards)
			}}
		})},
		{"set-owned-shards-nil-to-empty", decWrap(func() *decHooks {
			return &decHooks{setOwnedShards: func(in eventstore.ShardOwner, ctx context.Context, shards []int) {
				if shards == nil {
					shards = []int{}
				}
				in.SetOwnedShards(ctx, shards)
			}}
		})},
		{"acquire-empty-to-nil", decWrap(func() *decHooks {
			return &decHooks{acquireOwnedShards: func(in eventstore.ShardOwner, ctx context.Context, shards []int) error {
				if len(shards) == 0 {
					shards = nil
				}
				return in.AcquireOwnedShards(ctx, shards)
			}}
		})},
		{"zero-token-replaced", decWrap(func() *decHooks {
			return &decHooks{append: func(in eventstore.Store, ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
				if !tok.Valid() {
					tok = eventstore.RecorderToken()
				}
				return in.Append(ctx, tok, wf, evs, exp)
			}}
		})},
		{"zero-token-refused-locally", decWrap(func() *decHooks {
			return &decHooks{append: func(in eventstore.Store, ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
				if !tok.Valid() {
					return eventstore.ErrInvalidToken
				}
				return in.Append(ctx, tok, wf, evs, exp)
			}}
		})},
		{"empty-append-not-forwarded", decWrap(func() *decHooks {
			return &decHooks{append: func(in eventstore.Store, ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
				if len(evs) == 0 {
					return nil
				}
				return in.Append(ctx, tok, wf, evs, exp)
			}}
		})},
		{"empty-rearm-not-forwarded", decWrap(func() *decHooks {
			return &decHooks{rearm: func(in eventstore.Outbox, ctx context.Context, rows []eventstore.OutboxRow) error {
				if len(rows) == 0 {
					return nil
				}
				return in.RearmOutboxPending(ctx, rows)
			}}
		})},
		{"claim-limit-clamped", decWrap(func() *decHooks {
			return &decHooks{claim: func(in eventstore.Outbox, ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
				return in.ClaimOutboxRows(ctx, max(limit, 1))
			}}
		})},
		{"query-limit-default-100", decWrap(func() *decHooks {
			return &decHooks{query: func(in eventstore.Store, ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
				if f.Limit <= 0 {
					f.Limit = 100
				}
				return in.Query(ctx, f)
			}}
		})},
		{"zero-fire-at-to-epoch", decWrap(func() *decHooks {
			return &decHooks{scheduleTimer: func(in eventstore.Store, ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, seq uint64) error {
				if fireAt.IsZero() {
					fireAt = time.Unix(0, 0).UTC()
				}
				return in.ScheduleTimer(ctx, wf, id, fireAt, seq)
			}}
		})},
		{"expired-as-of-to-utc", decWrap(func() *decHooks {
			return &decHooks{expiredTimers: func(in eventstore.Store, ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
				return in.ExpiredTimers(ctx, asOf.UTC())
			}}
		})},
		{"read-from-zero-to-one", decWrap(func() *decHooks {
			return &decHooks{readHistoryFrom: func(in eventstore.Store, ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
				if from == 0 {
					from = 1
				}
				return in.ReadHistoryFrom(ctx, wf, from)
			}}
		})},
		{"short-circuits-done-context", decWrap(func() *decHooks {
			return &decHooks{readHistory: func(in eventstore.Store, ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				return in.ReadHistory(ctx, wf)
			}}
		})},
		{"query-type-lowercased", decWrap(func() *decHooks {
			return &decHooks{query: func(in eventstore.Store, ctx context.Context, f eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
				f.WorkflowType = strings.ToLower(f.WorkflowType)
				return in.Query(ctx, f)
			}}
		})},
		{"fire-at-truncated-to-ms", decWrap(func() *decHooks {
			return &decHooks{scheduleTimer: func(in eventstore.Store, ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, seq uint64) error {
				return in.ScheduleTimer(ctx, wf, id, fireAt.Truncate(time.Millisecond), seq)
			}}
		})},
		{"list-ids-sorted", decWrap(func() *decHooks {
			return &decHooks{listWorkflowIDs: func(in eventstore.Store, ctx context.Context) ([]eventstore.WorkflowID, error) {
				ids, err := in.ListWorkflowIDs(ctx)
				slices.SortFunc(ids, func(a, b eventstore.WorkflowID) int { return strings.Compare(a.String(), b.String()) })
				return ids, err
			}}
		})},
		{"reads-caller-events-late", decWrap(func() *decHooks {
			// Counts the previous batch's events by kind when the next
			// append comes: it keeps the caller's slice past the call.
			var mu sync.Mutex
			var kept []eventstore.Event
			return &decHooks{append: func(in eventstore.Store, ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
				mu.Lock()
				for _, ev := range kept {
					func() {
						defer func() { _ = recover() }() // a nil pointer event
						if ev != nil {
							_ = ev.EventEnvelope()
						}
					}()
				}
				kept = evs
				mu.Unlock()
				return in.Append(ctx, tok, wf, evs, exp)
			}}
		})},
		{"reports-commit-cancelled", decWrap(func() *decHooks {
			// An append whose context ended while the inner store took
			// it is reported as cancelled, though it committed: the
			// caller retries a write that landed.
			return &decHooks{append: func(in eventstore.Store, ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
				live := ctx.Err() == nil
				if err := in.Append(ctx, tok, wf, evs, exp); err != nil || !live {
					return err
				}
				return ctx.Err()
			}}
		})},
		{"reads-caller-shards-late", decWrap(func() *decHooks {
			// It keeps the caller's shard list and, at the next
			// acquisition, checks on its own account that it still owns
			// those shards.
			var mu sync.Mutex
			var kept []int
			return &decHooks{acquireOwnedShards: func(in eventstore.ShardOwner, ctx context.Context, shards []int) error {
				mu.Lock()
				for _, s := range kept {
					in.IsCurrentOwner(context.Background(), s)
				}
				kept = shards
				mu.Unlock()
				return in.AcquireOwnedShards(ctx, shards)
			}}
		})},
		{"reads-caller-rows-late", decWrap(func() *decHooks {
			// It keeps the caller's re-armed rows and, at the next
			// re-arm, reads the history of the first one's workflow on
			// its own account.
			var mu sync.Mutex
			var kept []eventstore.OutboxRow
			return &decHooks{rearm: func(in eventstore.Outbox, ctx context.Context, rows []eventstore.OutboxRow) error {
				mu.Lock()
				if len(kept) > 0 {
					_, _ = in.(eventstore.Store).ReadHistory(context.Background(), kept[0].WorkflowID)
				}
				kept = rows
				mu.Unlock()
				return in.RearmOutboxPending(ctx, rows)
			}}
		})},
		{"caches-read-history", decWrap(func() *decHooks {
			var mu sync.Mutex
			cache := map[eventstore.WorkflowID][]eventstore.Event{}
			return &decHooks{readHistory: func(in eventstore.Store, ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
				mu.Lock()
				defer mu.Unlock()
				if evs, ok := cache[wf]; ok {
					return evs, nil
				}
				evs, err := in.ReadHistory(ctx, wf)
				if err == nil {
					cache[wf] = evs
				}
				return evs, err
			}}
		})},
	}
}

// TestAdversary runs every suite on independently written broken
// implementations and requires each to be reported, and the faithful
// decorator baseline to pass.
// adversarySeed is the seed of every suite run of TestAdversary.
const adversarySeed = 20261201

func TestAdversary(t *testing.T) {
	expensiveSelfTest(t)
	ctx := context.Background()
	// A fixed seed: this table proves that the rules catch each bug, so
	// its verdicts must not change from run to run (the suites' own default
	// is a fresh seed per run). A case is caught by its first failed rule:
	// the rest of the suite is not run.
	seed := optionFunc(func(c *config) { c.seed, c.noShrink, c.stopAtFirst, c.raceFor = adversarySeed, true, true, 0 })
	t.Run("keyspace", func(t *testing.T) {
		for _, tc := range ksCases() {
			t.Run(tc.name, func(t *testing.T) {
				err := CheckKeyspace(ctx, func() (keyspace.Store, func(), error) { return tc.new(), nil, nil }, seed)
				report(t, err)
			})
		}
	})
	t.Run("eventstore", func(t *testing.T) {
		for _, tc := range esCases() {
			t.Run(tc.name, func(t *testing.T) {
				err := CheckEventStore(ctx, func() (eventstore.Store, func(), error) { return tc.new(), nil, nil },
					WithRequiredCapabilities(CapOutbox|CapShardOwner), seed)
				report(t, err)
			})
		}
	})
	t.Run("decorator", func(t *testing.T) {
		for _, tc := range decCases() {
			t.Run(tc.name, func(t *testing.T) {
				if tc.wrap == nil {
					if err := CheckDecorator(ctx, decWrap(func() *decHooks { return &decHooks{} }), seed); err != nil {
						t.Fatalf("faithful decorator fails the suite: %v", err)
					}
					return
				}
				report(t, CheckDecorator(ctx, tc.wrap, seed))
			})
		}
	})
}

func report(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		t.Fatal("MISSED: the broken implementation passes the suite")
	}
	var names []string
	for _, re := range RuleErrors(err) {
		names = append(names, re.Rule)
	}
	t.Logf("caught by %v", names)
}
