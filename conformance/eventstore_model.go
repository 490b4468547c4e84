package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// The sizes of the event store model rule at scale 1: one history of
// thousands of events, hundreds of workflows (past 256), a 1 MiB payload.
const (
	esModelLongHistory = 3000
	esModelWorkflows   = 300
	esModelRandomOps   = 600
	esModelBigPayload  = 1 << 20
)

type esOpKind uint8

const (
	esOpAppend        esOpKind = iota // a lifecycle-driven batch at the head (with outbox rows when possible)
	esOpStale                         // a batch at head+delta
	esOpBad                           // a refused batch (variant)
	esOpEmpty                         // an empty batch anywhere
	esOpRead                          // ReadHistoryFrom(from)
	esOpReadAll                       // ReadHistory
	esOpReadMany                      // ReadHistoryFrom at the boundary offsets
	esOpChain                         // ReadRunChain
	esOpListings                      // ListWorkflowIDs, ListActive, ListPaused, StreamHeads
	esOpQuery                         // Query (variant)
	esOpClaim                         // ClaimOutboxRows(limit)
	esOpRearm                         // RearmOutboxPending of some rows
	esOpCancelRow                     // SettleOutboxRowCancelled
	esOpCancelWf                      // SettleWorkflowOutboxRowsCancelled
	esOpTimer                         // ScheduleTimer
	esOpRetire                        // RetireTimer (variant)
	esOpExpired                       // ExpiredTimers
	esOpPackage                       // PutPackage / PutPackageWithRoutes / PutPackageRoute / DeletePackage / lists (variant)
	esOpShard                         // AcquireOwnedShards / PublishShardOwner / IsCurrentOwner (variant)
	esOpChainScenario                 // the fixed continue-as-new outbox scenario, on the reserved workflow
)

var esOpNames = map[esOpKind]string{
	esOpAppend: "append", esOpStale: "stale append", esOpBad: "refused append", esOpEmpty: "empty append",
	esOpRead: "ReadHistoryFrom", esOpReadAll: "ReadHistory", esOpReadMany: "ReadHistoryFrom at boundaries",
	esOpChain: "ReadRunChain", esOpListings: "listings", esOpQuery: "Query", esOpClaim: "ClaimOutboxRows",
	esOpRearm: "RearmOutboxPending", esOpCancelRow: "SettleOutboxRowCancelled", esOpCancelWf: "SettleWorkflowOutboxRowsCancelled",
	esOpTimer: "ScheduleTimer", esOpRetire: "RetireTimer", esOpExpired: "ExpiredTimers", esOpPackage: "packages", esOpShard: "shards", esOpChainScenario: "continue-as-new outbox scenario",
}

// esOp is one generated operation, resolved against the model when it runs
// (see ksOp).
type esOp struct {
	kind    esOpKind
	wf      int
	n       int
	variant int
	delta   int64
	from    uint64
	limit   int
	seed    uint64
	big     bool
}

func (o esOp) String() string {
	return fmt.Sprintf("%s(workflow %d, n=%d, variant=%d, delta=%d, from=%d, limit=%d, seed=%#x, big=%v)",
		esOpNames[o.kind], o.wf, o.n, o.variant, o.delta, o.from, o.limit, o.seed, o.big)
}

// The model. It follows the contract text: the Store method docs, the
// event docs and, for the lifecycle, the Memory type doc; the
// generator only goes where those agree (every history begins with
// WorkflowStarted, a continue-as-new batch carries the next run's
// WorkflowStarted, events go to the current run, a closed run gets only a
// WorkflowReopened), so the verdict never rests on a choice left to the
// store.
type esModel struct {
	salt      string
	wfs       []*esWf
	owned     map[eventstore.WorkflowID]*esWf
	rows      []*eventstore.OutboxRow // staging order; State is the model's
	rowByKey  map[string]*eventstore.OutboxRow
	clock     time.Time // CreatedAt of the next staged row, strictly increasing
	timers    map[timerModelKey]eventstore.TimerEntry
	packages  map[[2]string]eventstore.PackageRecord
	routes    map[string]string
	shard0    bool
	outbox    eventstore.Outbox
	shards    eventstore.ShardOwner
	bigUsed   map[string]bool // payload fields that got a big payload
	reserved  *esWf           // the workflow of the fixed scenario
	wfTypes   []string
	pkgTypes  []string
	routeTyps []string
}

type timerModelKey struct {
	wf eventstore.WorkflowID
	id eventstore.TimerID
}

type esWf struct {
	id      eventstore.WorkflowID
	long    bool
	events  []eventstore.Event // as stored: envelope stamped
	runs    []*eventstore.RunSummary
	ids     *idGen
	nextAct eventstore.ActivityID
	open    []eventstore.ActivityID // scheduled, not ended, in the current run
	now     time.Time
	wfType  string
	knownAt []bool // whether events[i].RecordedAt is known to the model
}

func (w *esWf) head() uint64 { return uint64(len(w.events)) }

func (w *esWf) current() *eventstore.RunSummary {
	if len(w.runs) == 0 {
		return nil
	}
	return w.runs[len(w.runs)-1]
}

func newESModel(ids *idGen, rng *rand.Rand, n int, s eventstore.Store) *esModel {
	salt := fmt.Sprintf("%x", ids.next())[:12]
	m := &esModel{
		salt:      salt,
		owned:     map[eventstore.WorkflowID]*esWf{},
		rowByKey:  map[string]*eventstore.OutboxRow{},
		bigUsed:   map[string]bool{},
		clock:     time.Unix(1_650_000_000, 0).UTC(),
		timers:    map[timerModelKey]eventstore.TimerEntry{},
		packages:  map[[2]string]eventstore.PackageRecord{},
		routes:    map[string]string{},
		wfTypes:   []string{"order-" + salt, "refund-" + salt, "ünï\x00\xff-" + salt},
		pkgTypes:  []string{"pkg-a-" + salt, "pkg-b-" + salt, "pkg-\x00ü\xfe-" + salt},
		routeTyps: []string{"route-a-" + salt, "route-b-" + salt, "route-c-" + salt},
	}
	m.outbox, _ = s.(eventstore.Outbox)
	m.shards, _ = s.(eventstore.ShardOwner)
	for i := range n {
		w := &esWf{id: ids.workflow(), long: i == 0, ids: ids, wfType: m.wfTypes[rng.IntN(len(m.wfTypes))],
			now: time.Unix(1_700_000_000+int64(rng.IntN(1000))*10, 0).UTC()}
		m.wfs = append(m.wfs, w)
		m.owned[w.id] = w
	}
	return m
}

func genESOps(rng *rand.Rand, scale, nWfs int) []esOp {
	var ops []esOp
	for total, i := 0, 0; total < esModelLongHistory*scale; i++ {
		n := 1 + rng.IntN(200)
		ops = append(ops, esOp{kind: esOpAppend, wf: 0, n: n, seed: rng.Uint64(), big: i < 6})
		total += n
	}
	for _, w := range rng.Perm(nWfs - 1) {
		ops = append(ops, esOp{kind: esOpAppend, wf: w + 1, n: 1 + rng.IntN(4), seed: rng.Uint64()})
	}
	// Fixed steps, so that no rule's power depends on what the seed drew:
	// a many-shard election with a bad shard and a publication, both
	// before any acquisition.
	ops = append(ops, esOp{kind: esOpShard, variant: 0, seed: 1}, esOp{kind: esOpShard, variant: 2, seed: 1})
	for range esModelRandomOps * scale {
		o := esOp{wf: rng.IntN(nWfs), n: 1 + rng.IntN(5), seed: rng.Uint64(), variant: rng.IntN(16)}
		if rng.IntN(5) == 0 {
			o.wf = 0
		}
		switch r := rng.IntN(40); {
		case r < 12:
			o.kind = esOpAppend
		case r < 13:
			o.kind, o.delta = esOpStale, []int64{-1, 1, 2, -3, 1 << 20}[rng.IntN(5)]
		case r < 15:
			o.kind = esOpBad
		case r < 16:
			o.kind, o.delta = esOpEmpty, int64(rng.IntN(5))-2
		case r < 18:
			o.kind, o.from = esOpRead, uint64(rng.IntN(12))
			if o.wf == 0 {
				o.from = uint64(rng.IntN(esModelLongHistory*scale + 3))
			}
		case r < 19:
			o.kind = esOpChain
		case r < 20:
			o.kind = esOpListings
		case r < 22:
			o.kind = esOpQuery
		case r < 25:
			o.kind, o.limit = esOpClaim, 1+rng.IntN(4)
		case r < 26:
			o.kind = esOpRearm
		case r < 27:
			o.kind = esOpCancelRow
		case r < 28:
			o.kind = esOpCancelWf
		case r < 30:
			o.kind = esOpTimer
		case r < 32:
			o.kind = esOpRetire
		case r < 33:
			o.kind = esOpExpired
		case r < 37:
			o.kind, o.big = esOpPackage, rng.IntN(40) == 0
		default:
			o.kind = esOpShard
		}
		ops = append(ops, o)
	}
	// More fixed steps: a timer re-armed under a new armedSeq only, then
	// under a new fireAt only, must not retire; the exact arming must.
	ops = append(ops,
		esOp{kind: esOpTimer, wf: 1, seed: 5},
		esOp{kind: esOpRetire, wf: 1, variant: 2, seed: 5},
		esOp{kind: esOpRetire, wf: 1, variant: 1, seed: 5},
		esOp{kind: esOpRetire, wf: 1, variant: 0, seed: 5},
		esOp{kind: esOpRetire, wf: 1, variant: 0, seed: 5},
		esOp{kind: esOpPackage, variant: 2, seed: 3},
		esOp{kind: esOpPackage, variant: 5},
		esOp{kind: esOpClaim, limit: 2},
		esOp{kind: esOpRearm, variant: 1},
	)
	ops = append(ops, esOp{kind: esOpChainScenario})
	// The final sweep.
	for w := range nWfs {
		ops = append(ops, esOp{kind: esOpReadAll, wf: w}, esOp{kind: esOpChain, wf: w})
	}
	ops = append(ops, esOp{kind: esOpReadMany, wf: 0}, esOp{kind: esOpListings})
	for v := range 9 {
		ops = append(ops, esOp{kind: esOpQuery, variant: v, seed: uint64(v)})
	}
	return append(ops, esOp{kind: esOpClaim, limit: 1 << 20}, esOp{kind: esOpExpired, variant: 1})
}

func genPayload(rng *rand.Rand) eventstore.Payload {
	if rng.IntN(6) == 0 {
		return eventstore.Payload{}
	}
	return eventstore.Payload{ContentType: hostile(rng), Data: []byte("data:" + hostile(rng))}
}

// genBatch makes n events for w from its lifecycle state (it does not
// change the model: apply does, once the store accepted the batch).
func (m *esModel) genBatch(w *esWf, o esOp) (events []eventstore.Event, runOf []eventstore.RunID) {
	rng := rand.New(rand.NewPCG(o.seed, 7))
	// Work on a scratch copy of the generator state.
	cur := w.current()
	var run eventstore.RunID
	status := eventstore.WorkflowStatus("")
	if cur != nil {
		run, status = cur.RunID, cur.Status
	}
	open := slices.Clone(w.open)
	next := w.nextAct
	now := w.now
	tick := func() time.Time { now = now.Add(time.Duration(1+rng.IntN(3)) * time.Second); return now }
	env := func(known bool) eventstore.Envelope {
		e := eventstore.Envelope{RunID: run}
		if rng.IntN(3) != 0 {
			e.WorkflowID = w.id
		}
		if known {
			e.RecordedAt = tick()
		} else {
			e.Seq = 999 // the store must stamp it
		}
		return e
	}
	add := func(ev eventstore.Event) { events = append(events, ev); runOf = append(runOf, run) }
	// A big op gives a 1 MiB payload to the first event of each payload
	// field it meets, so a size limit on any one of them (a signal's input,
	// an activity's result) shows, whichever kinds the batch holds.
	pl := func(field string) eventstore.Payload {
		if o.big && !m.bigUsed[field] {
			m.bigUsed[field] = true
			return eventstore.Payload{ContentType: "application/octet-stream", Data: []byte(strings.Repeat("\x00\xffü", esModelBigPayload/4))}
		}
		return genPayload(rng)
	}
	for len(events) < o.n {
		switch {
		case status == "":
			run, status = w.ids.run(), eventstore.StatusRunning
			add(eventstore.WorkflowStarted{Envelope: env(true), WorkflowType: w.wfType, Input: pl("started"), PackageVersion: hostile(rng)})
			open, next = nil, 0
		case status.Closed():
			add(eventstore.WorkflowReopened{Envelope: env(true), Reason: hostile(rng)})
			status = eventstore.StatusRunning
		case status == eventstore.StatusPaused:
			if rng.IntN(2) == 0 {
				add(eventstore.SignalReceived{Envelope: env(rng.IntN(4) != 0), SignalName: hostile(rng), Input: pl("signal")})
			} else {
				add(eventstore.WorkflowResumed{Envelope: env(true)})
				status = eventstore.StatusRunning
			}
		default:
			r := rng.IntN(100)
			if w.long && r >= 88 {
				r = rng.IntN(88)
			}
			switch {
			case r < 20:
				add(eventstore.SignalReceived{Envelope: env(rng.IntN(4) != 0), SignalName: hostile(rng), Input: pl("signal")})
			case r < 40:
				add(eventstore.ActivityScheduled{Envelope: env(rng.IntN(4) != 0), ActivityID: next, ActivityType: hostile(rng), Input: pl("scheduled"), TaskQueue: hostile(rng), Node: hostile(rng)})
				open = append(open, next)
				next++
			case r < 60 && len(open) > 0:
				i := rng.IntN(len(open))
				id := open[i]
				att := uint32(1 + rng.IntN(3))
				var ev eventstore.Event
				switch rng.IntN(5) {
				case 0:
					ev = eventstore.ActivityCompleted{Envelope: env(true), ActivityID: id, Result: pl("activity-result"), Attempt: att}
				case 1:
					ev = eventstore.ActivityFailed{Envelope: env(true), ActivityID: id, Error: eventstore.ActivityError{Kind: eventstore.Terminal, Message: hostile(rng), Details: pl("activity-details")}, Attempt: att}
				case 2:
					ev = eventstore.ActivityCancelled{Envelope: env(true), ActivityID: id, Attempt: att}
				case 3:
					ev = eventstore.ActivityTimedOut{Envelope: env(true), ActivityID: id, Attempt: att}
				default:
					// A retryable failure ends nothing: the activity stays open.
					add(eventstore.ActivityFailed{Envelope: env(true), ActivityID: id, Error: eventstore.ActivityError{Kind: eventstore.Retryable, Message: hostile(rng)}, Attempt: att})
					continue
				}
				add(ev)
				open = slices.Delete(open, i, i+1)
			case r < 70:
				add(eventstore.TimerScheduled{Envelope: env(true), TimerID: eventstore.TimerID(hostile(rng)), FireAt: now.Add(time.Hour)})
			case r < 75:
				add(eventstore.TimerFired{Envelope: env(true), TimerID: eventstore.TimerID(hostile(rng))})
			case r < 80:
				add(eventstore.ScheduleTriggered{Envelope: env(true), ScheduleID: hostile(rng)})
			case r < 88:
				add(eventstore.WorkflowPaused{Envelope: env(true), Reason: hostile(rng)})
				status = eventstore.StatusPaused
			case r < 92:
				var ev eventstore.Event
				switch rng.IntN(4) {
				case 0:
					ev, status = eventstore.WorkflowCompleted{Envelope: env(true), Result: pl("workflow-result")}, eventstore.StatusCompleted
				case 1:
					ev, status = eventstore.WorkflowFailed{Envelope: env(true), Message: hostile(rng), Details: pl("workflow-details")}, eventstore.StatusFailed
				case 2:
					ev, status = eventstore.WorkflowCancelled{Envelope: env(true), Reason: hostile(rng)}, eventstore.StatusCancelled
				default:
					ev, status = eventstore.WorkflowTimedOut{Envelope: env(true)}, eventstore.StatusTimedOut
				}
				add(ev)
			default:
				newRun := w.ids.run()
				add(eventstore.WorkflowContinuedAsNew{Envelope: env(true), NewRunID: newRun, Input: pl("continued")})
				run = newRun
				add(eventstore.WorkflowStarted{Envelope: env(true), WorkflowType: w.wfType, Input: pl("started")})
				status, open, next = eventstore.StatusRunning, nil, 0
			}
		}
	}
	return events, runOf
}

// rowsFor returns the outbox rows a batch stages: one per ActivityScheduled.
func (m *esModel) rowsFor(w *esWf, events []eventstore.Event, rng *rand.Rand) []eventstore.OutboxRow {
	var rows []eventstore.OutboxRow
	for _, ev := range events {
		if a, ok := ev.(eventstore.ActivityScheduled); ok {
			m.clock = m.clock.Add(time.Second)
			r := eventstore.OutboxRow{WorkflowID: w.id, RunID: a.RunID, Ordinal: a.ActivityID, ActivityType: a.ActivityType, Input: a.Input, CreatedAt: m.clock}
			if rng.IntN(2) == 0 {
				r.DispatchKey = eventstore.DispatchKey(w.id, a.RunID, a.ActivityID)
			}
			if rng.IntN(3) == 0 {
				r.WorkflowID = eventstore.WorkflowID{}
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// apply records an accepted batch (and its rows) in the model.
func (m *esModel) apply(w *esWf, events []eventstore.Event, rows []eventstore.OutboxRow) {
	for _, r := range rows {
		r.WorkflowID = w.id
		if r.DispatchKey == "" {
			r.DispatchKey = eventstore.DispatchKey(w.id, r.RunID, r.Ordinal)
		}
		r.Input = clonePayload(r.Input)
		r.State = eventstore.OutboxPending
		m.rows = append(m.rows, &r)
		m.rowByKey[r.DispatchKey] = &r
	}
	for _, ev := range events {
		env := ev.EventEnvelope()
		known := !env.RecordedAt.IsZero()
		env.WorkflowID, env.Seq = w.id, w.head()+1
		stored := eventstore.WithEnvelope(ev, env)
		w.events = append(w.events, stored)
		w.knownAt = append(w.knownAt, known)
		if known {
			w.now = env.RecordedAt
		}
		run := w.current()
		if _, ok := ev.(eventstore.WorkflowStarted); ok {
			run = &eventstore.RunSummary{RunID: env.RunID, WorkflowType: w.wfType, Status: eventstore.StatusRunning, StartedAt: env.RecordedAt, FirstSeq: env.Seq}
			w.runs = append(w.runs, run)
			w.open, w.nextAct = nil, 0
		}
		run.LastSeq = env.Seq
		closeRun := func(s eventstore.WorkflowStatus) { run.Status, run.ClosedAt = s, env.RecordedAt }
		settle := func(id eventstore.ActivityID) {
			for _, r := range m.rows {
				if r.WorkflowID == w.id && r.RunID == env.RunID && r.Ordinal == id && (r.State == eventstore.OutboxPending || r.State == eventstore.OutboxClaimed) {
					r.State = eventstore.OutboxSettled
				}
			}
			if i := slices.Index(w.open, id); i >= 0 {
				w.open = slices.Delete(w.open, i, i+1)
			}
		}
		switch e := ev.(type) {
		case eventstore.WorkflowCompleted:
			closeRun(eventstore.StatusCompleted)
		case eventstore.WorkflowFailed:
			closeRun(eventstore.StatusFailed)
		case eventstore.WorkflowCancelled:
			closeRun(eventstore.StatusCancelled)
		case eventstore.WorkflowTimedOut:
			closeRun(eventstore.StatusTimedOut)
		case eventstore.WorkflowContinuedAsNew:
			closeRun(eventstore.StatusContinuedAsNew)
		case eventstore.WorkflowPaused:
			run.Status = eventstore.StatusPaused
		case eventstore.WorkflowResumed, eventstore.WorkflowReopened:
			run.Status, run.ClosedAt = eventstore.StatusRunning, time.Time{}
		case eventstore.ActivityScheduled:
			w.open = append(w.open, e.ActivityID)
			w.nextAct = e.ActivityID + 1
		case eventstore.ActivityCompleted:
			settle(e.ActivityID)
		case eventstore.ActivityFailed:
			if e.Error.Kind == eventstore.Terminal {
				settle(e.ActivityID)
			}
		case eventstore.ActivityCancelled:
			settle(e.ActivityID)
		case eventstore.ActivityTimedOut:
			settle(e.ActivityID)
		}
	}
}

func clonePayload(p eventstore.Payload) eventstore.Payload {
	if p.Data != nil {
		p.Data = slices.Clone(p.Data)
	}
	return p
}

func execES(ids func() *idGen, rngSeed uint64, n int) func(ctx context.Context, s eventstore.Store, ops []esOp) (int, error) {
	return func(ctx context.Context, s eventstore.Store, ops []esOp) (int, error) {
		m := newESModel(ids(), rand.New(rand.NewPCG(rngSeed, 1)), n+1, s)
		m.reserved = m.wfs[n]
		m.wfs = m.wfs[:n] // random operations never touch the reserved workflow
		for i, o := range ops {
			if err := ctx.Err(); err != nil {
				return i, err
			}
			if err := m.step(ctx, s, o); err != nil {
				return i, err
			}
		}
		return 0, nil
	}
}

// checkHead checks that w's history is exactly as long as the model says,
// at the cost of two short reads.
func (m *esModel) checkHead(ctx context.Context, s eventstore.Store, w *esWf) error {
	h := w.head()
	got, err := s.ReadHistoryFrom(ctx, w.id, h+1)
	if err != nil {
		return fmt.Errorf("ReadHistoryFrom(%d): %w", h+1, err)
	}
	if len(got) != 0 {
		return fmt.Errorf("ReadHistoryFrom(head+1 = %d) returned %d events (seqs %v): something was written", h+1, len(got), eventSeqs(got))
	}
	if h == 0 {
		return nil
	}
	return m.readFrom(ctx, s, w, h)
}

func (m *esModel) readFrom(ctx context.Context, s eventstore.Store, w *esWf, from uint64) error {
	got, err := s.ReadHistoryFrom(ctx, w.id, from)
	if err != nil {
		return fmt.Errorf("ReadHistoryFrom(%d): %w", from, err)
	}
	start := max(from, 1)
	var want []eventstore.Event
	if start <= w.head() {
		want = w.events[start-1:]
	}
	if err := m.sameHistory(fmt.Sprintf("ReadHistoryFrom(%v, %d)", w.id, from), got, w, start, want); err != nil {
		return err
	}
	scribble(got)
	return nil
}

// sameHistory compares a read with the model: a RecordedAt the caller left
// zero must be set, any other must be kept.
func (m *esModel) sameHistory(what string, got []eventstore.Event, w *esWf, first uint64, want []eventstore.Event) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s returned %d events (seqs %v), want %d from seq %d", what, len(got), shortSeqs(got), len(want), first)
	}
	for i := range got {
		seq := first + uint64(i)
		exp := want[i]
		if !w.knownAt[seq-1] {
			env := exp.EventEnvelope()
			env.RecordedAt = time.Time{}
			exp = eventstore.WithEnvelope(exp, env)
		}
		if got[i] == nil {
			return fmt.Errorf("%s: event %d is nil", what, seq)
		}
		if err := sameEvent(got[i], exp, w.id, seq); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

func shortSeqs(evs []eventstore.Event) string {
	s := eventSeqs(evs)
	if len(s) > 12 {
		return fmt.Sprintf("%v ... %v", s[:6], s[len(s)-6:])
	}
	return fmt.Sprint(s)
}

// scribble overwrites the payload bytes and envelopes of what a read
// returned: the caller owns it, and the next read of the same events shows
// whether the store's copy changed.
func scribble(evs []eventstore.Event) {
	for i, ev := range evs {
		if ev == nil {
			continue
		}
		for _, p := range payloadsOf(ev) {
			for j := range p.Data {
				p.Data[j] = '#'
			}
		}
		env := ev.EventEnvelope()
		env.Seq += 1000
		evs[i] = eventstore.WithEnvelope(ev, env)
	}
}

// payloadsOf returns the payloads of an event (sharing its Data).
func payloadsOf(ev eventstore.Event) []eventstore.Payload {
	switch e := ev.(type) {
	case eventstore.WorkflowStarted:
		return []eventstore.Payload{e.Input}
	case eventstore.WorkflowCompleted:
		return []eventstore.Payload{e.Result}
	case eventstore.WorkflowFailed:
		return []eventstore.Payload{e.Details}
	case eventstore.WorkflowContinuedAsNew:
		return []eventstore.Payload{e.Input}
	case eventstore.SignalReceived:
		return []eventstore.Payload{e.Input}
	case eventstore.ActivityScheduled:
		return []eventstore.Payload{e.Input}
	case eventstore.ActivityCompleted:
		return []eventstore.Payload{e.Result}
	case eventstore.ActivityFailed:
		return []eventstore.Payload{e.Error.Details}
	}
	return nil
}

func (m *esModel) step(ctx context.Context, s eventstore.Store, o esOp) error {
	w := m.wfs[o.wf%len(m.wfs)]
	rng := rand.New(rand.NewPCG(o.seed, 11))
	switch o.kind {
	case esOpAppend:
		events, _ := m.genBatch(w, o)
		var rows []eventstore.OutboxRow
		if m.outbox != nil && rng.IntN(4) != 0 {
			rows = m.rowsFor(w, events, rng)
		}
		caller := copyEvents(events)
		var err error
		if rows != nil {
			err = m.outbox.AppendWithOutbox(ctx, token, w.id, caller, w.head(), rows)
		} else {
			err = s.Append(ctx, token, w.id, caller, w.head())
		}
		if err != nil {
			return fmt.Errorf("%d events, %d rows at head %d: %w", len(events), len(rows), w.head(), err)
		}
		m.apply(w, events, rows)
		// The call has returned: the caller may reuse its memory.
		scribble(caller)
		for i := range rows {
			for j := range rows[i].Input.Data {
				rows[i].Input.Data[j] = '#'
			}
		}
		if o.big {
			// Read the big payloads straight back: the random reads
			// may never reach them.
			return m.readFrom(ctx, s, w, w.head()-uint64(len(events))+1)
		}
		return nil
	case esOpStale:
		events, _ := m.genBatch(w, esOp{n: 1, seed: o.seed})
		expected := addDelta(w.head(), o.delta)
		err := s.Append(ctx, token, w.id, events, expected)
		if err := wantConflict(err, expected, w.head(), fmt.Sprintf("Append(expectedSeq=%d) on head %d", expected, w.head())); err != nil {
			return err
		}
		return m.checkHead(ctx, s, w)
	case esOpBad:
		return m.bad(ctx, s, w, o)
	case esOpEmpty:
		var batch []eventstore.Event
		if o.delta%2 == 0 {
			batch = []eventstore.Event{}
		}
		if err := s.Append(ctx, token, w.id, batch, addDelta(w.head(), o.delta)); err != nil {
			return fmt.Errorf("an empty Append at head%+d: %w; an empty batch is a no-op", o.delta, err)
		}
		return m.checkHead(ctx, s, w)
	case esOpRead:
		return m.readFrom(ctx, s, w, o.from)
	case esOpReadAll:
		got, err := s.ReadHistory(ctx, w.id)
		if err != nil {
			return fmt.Errorf("ReadHistory: %w", err)
		}
		if err := m.sameHistory(fmt.Sprintf("ReadHistory(%v)", w.id), got, w, 1, w.events); err != nil {
			return err
		}
		scribble(got)
	case esOpReadMany:
		h := w.head()
		for _, from := range []uint64{0, 1, 2, 99, 100, 101, 127, 128, 129, 255, 256, 257, 511, 512, 513, 999, 1000, 1001, 1023, 1024, 1025, 2047, 2048, 2049, h - 1, h, h + 1, h + 2} {
			if from <= h+2 {
				if err := m.readFrom(ctx, s, w, from); err != nil {
					return err
				}
			}
		}
	case esOpChain:
		return m.chain(ctx, s, w)
	case esOpListings:
		return m.listings(ctx, s)
	case esOpQuery:
		return m.query(ctx, s, o, rng)
	case esOpClaim, esOpRearm, esOpCancelRow, esOpCancelWf:
		if m.outbox == nil {
			return nil
		}
		return m.outboxOp(ctx, o, w, rng)
	case esOpTimer, esOpRetire, esOpExpired:
		return m.timerOp(ctx, s, o, w, rng)
	case esOpPackage:
		return m.packageOp(ctx, s, o, rng)
	case esOpShard:
		if m.shards == nil {
			return nil
		}
		return m.shardOp(ctx, o)
	case esOpChainScenario:
		return m.chainScenario(ctx, s)
	}
	return nil
}

// chainScenario: run 1 stages rows for activities 0 and 1 and continues as
// new with both open; run 2 (ordinals restart at 0) stages rows for 0 and 1,
// completes its 0 and fails its 1 retryably. Only run 2's row 0 settles:
// the terminal names its run, and a retryable failure settles nothing. The
// final claims and the chain and history reads check it.
func (m *esModel) chainScenario(ctx context.Context, s eventstore.Store) error {
	w := m.reserved
	if m.outbox == nil || w.head() > 0 {
		return nil
	}
	run1, run2 := w.ids.run(), w.ids.run()
	at := func(run eventstore.RunID) eventstore.Envelope {
		w.now = w.now.Add(time.Second)
		return eventstore.Envelope{WorkflowID: w.id, RunID: run, RecordedAt: w.now}
	}
	sched := func(run eventstore.RunID, id eventstore.ActivityID) eventstore.Event {
		return eventstore.ActivityScheduled{Envelope: at(run), ActivityID: id, ActivityType: "scenario", Input: eventstore.Payload{ContentType: "t", Data: []byte{byte(id)}}}
	}
	batches := [][]eventstore.Event{
		{eventstore.WorkflowStarted{Envelope: at(run1), WorkflowType: w.wfType}, sched(run1, 0), sched(run1, 1)},
		{eventstore.WorkflowContinuedAsNew{Envelope: at(run1), NewRunID: run2}, eventstore.WorkflowStarted{Envelope: at(run2), WorkflowType: w.wfType}, sched(run2, 0), sched(run2, 1)},
		{eventstore.ActivityCompleted{Envelope: at(run2), ActivityID: 0, Attempt: 1},
			eventstore.ActivityFailed{Envelope: at(run2), ActivityID: 1, Error: eventstore.ActivityError{Kind: eventstore.Retryable, Message: "again"}, Attempt: 1}},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i, b := range batches {
		rows := m.rowsFor(w, b, rng)
		if err := m.outbox.AppendWithOutbox(ctx, token, w.id, copyEvents(b), w.head(), rows); err != nil {
			return fmt.Errorf("scenario batch %d: %w", i+1, err)
		}
		m.apply(w, b, rows)
	}
	m.wfs = append(m.wfs, w) // from now on the sweeps read it too
	return nil
}

// bad appends a batch every store must refuse, and checks nothing landed.
func (m *esModel) bad(ctx context.Context, s eventstore.Store, w *esWf, o esOp) error {
	events, _ := m.genBatch(w, esOp{n: max(o.n, 2), seed: o.seed})
	tok, wfID, want := token, w.id, eventstore.ErrInvalidArgument
	at := int(o.seed % uint64(len(events)))
	var what string
	switch o.variant % 7 {
	case 0:
		tok, want, what = eventstore.WriteToken{}, eventstore.ErrInvalidToken, "the zero token"
	case 1:
		tok, want, what, events = eventstore.WriteToken{}, eventstore.ErrInvalidToken, "the zero token, empty batch", nil
	case 2:
		wfID, what = eventstore.WorkflowID{}, "a zero workflow ID"
	case 3:
		events[at], what = nil, fmt.Sprintf("a nil event at %d", at)
	case 4:
		sig := eventstore.SignalReceived{Envelope: events[at].EventEnvelope(), SignalName: "pointer"}
		events[at], what = &sig, fmt.Sprintf("a pointer event at %d", at)
	case 5:
		env := events[at].EventEnvelope()
		env.WorkflowID = m.wfs[(o.wf+1)%len(m.wfs)].id
		events[at], what = eventstore.WithEnvelope(events[at], env), fmt.Sprintf("an event of another workflow at %d", at)
	default:
		env := events[at].EventEnvelope()
		env.RunID = eventstore.RunID{}
		events[at], what = eventstore.WithEnvelope(events[at], env), fmt.Sprintf("a zero run ID at %d", at)
	}
	err := s.Append(ctx, tok, wfID, events, w.head())
	if err == nil {
		return fmt.Errorf("Append with %s succeeded, want an error matching %v", what, want)
	}
	if !errors.Is(err, want) {
		return fmt.Errorf("Append with %s: error %v does not match %v", what, err, want)
	}
	if err := m.checkHead(ctx, s, w); err != nil {
		return fmt.Errorf("after Append with %s: %w", what, err)
	}
	return nil
}

func (m *esModel) chain(ctx context.Context, s eventstore.Store, w *esWf) error {
	got, err := s.ReadRunChain(ctx, w.id)
	if err != nil {
		return fmt.Errorf("ReadRunChain: %w", err)
	}
	if len(got) != len(w.runs) {
		return fmt.Errorf("ReadRunChain(%v) returned %d runs, want %d (a history of %d events)", w.id, len(got), len(w.runs), w.head())
	}
	for i, r := range got {
		want := *w.runs[i]
		if r.RunID != want.RunID || r.WorkflowType != want.WorkflowType || r.Status != want.Status ||
			!r.StartedAt.Equal(want.StartedAt) || !r.ClosedAt.Equal(want.ClosedAt) || r.FirstSeq != want.FirstSeq || r.LastSeq != want.LastSeq {
			return fmt.Errorf("ReadRunChain(%v) run %d = %+v, want %+v", w.id, i, r, want)
		}
	}
	return nil
}

// ownIDs keeps the IDs of the model's workflows, in their order.
func (m *esModel) ownIDs(ids []eventstore.WorkflowID) []eventstore.WorkflowID {
	var out []eventstore.WorkflowID
	for _, id := range ids {
		if m.owned[id] != nil {
			out = append(out, id)
		}
	}
	return out
}

func (m *esModel) listings(ctx context.Context, s eventstore.Store) error {
	var all, active, paused []eventstore.WorkflowID
	heads := map[eventstore.WorkflowID]uint64{}
	for _, w := range m.wfs {
		if w.head() == 0 {
			continue
		}
		all = append(all, w.id)
		heads[w.id] = w.head()
		switch w.current().Status {
		case eventstore.StatusRunning:
			active = append(active, w.id)
		case eventstore.StatusPaused:
			paused = append(paused, w.id)
		}
	}
	for _, l := range []struct {
		name string
		call func(context.Context) ([]eventstore.WorkflowID, error)
		want []eventstore.WorkflowID
	}{{"ListWorkflowIDs", s.ListWorkflowIDs, all}, {"ListActive", s.ListActive, active}, {"ListPaused", s.ListPaused, paused}} {
		got, err := l.call(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
		mine := m.ownIDs(got)
		if len(mine) != len(l.want) || !sameSet(mine, l.want) {
			return fmt.Errorf("%s returned %d of this run's %d workflows, want %d: missing %v, extra %v", l.name, len(mine), len(m.wfs), len(l.want), missing(l.want, mine), missing(mine, l.want))
		}
	}
	got, err := s.StreamHeads(ctx)
	if err != nil {
		return fmt.Errorf("StreamHeads: %w", err)
	}
	seen := map[eventstore.WorkflowID]bool{}
	for _, h := range got {
		if m.owned[h.WorkflowID] == nil {
			continue
		}
		if seen[h.WorkflowID] {
			return fmt.Errorf("StreamHeads lists %v twice", h.WorkflowID)
		}
		seen[h.WorkflowID] = true
		if want, ok := heads[h.WorkflowID]; !ok || want != h.Head {
			return fmt.Errorf("StreamHeads: %v has head %d, want %d", h.WorkflowID, h.Head, want)
		}
	}
	if len(seen) != len(heads) {
		return fmt.Errorf("StreamHeads lists %d of this run's workflows, want %d", len(seen), len(heads))
	}
	return nil
}

func missing[T comparable](want, got []T) []T {
	var out []T
	for _, w := range want {
		if !slices.Contains(got, w) {
			out = append(out, w)
		}
	}
	if len(out) > 5 {
		out = out[:5]
	}
	return out
}

func (m *esModel) query(ctx context.Context, s eventstore.Store, o esOp, rng *rand.Rand) error {
	var f eventstore.WorkflowFilter
	started := []*esWf{}
	for _, w := range m.wfs {
		if w.head() > 0 {
			started = append(started, w)
		}
	}
	if len(started) == 0 {
		return nil
	}
	pivot := started[rng.IntN(len(started))].current()
	switch o.variant % 9 {
	case 8:
		// The zero filter: every workflow, so a silent cap shows.
	case 0:
		f.WorkflowType = m.wfTypes[rng.IntN(len(m.wfTypes))]
	case 1:
		f.WorkflowType, f.Status = m.wfTypes[rng.IntN(len(m.wfTypes))], []eventstore.WorkflowStatus{eventstore.StatusRunning, eventstore.StatusPaused, eventstore.StatusCompleted, eventstore.StatusFailed}[rng.IntN(4)]
	case 2:
		f.WorkflowType, f.Limit = m.wfTypes[rng.IntN(len(m.wfTypes))], 1+rng.IntN(20)
	case 3:
		// The pivot's own type, so the bound's own workflow is in play.
		f.WorkflowType, f.StartedAfter = pivot.WorkflowType, pivot.StartedAt
	case 4:
		f.WorkflowType, f.StartedBefore = pivot.WorkflowType, pivot.StartedAt
	case 5:
		f.StartedAfter, f.StartedBefore = pivot.StartedAt, pivot.StartedAt.Add(time.Duration(rng.IntN(3000))*time.Second)
	case 6:
		f.Status = eventstore.StatusPaused
	default:
		// Negative: no limit, like 0 (which the other variants use).
		f.WorkflowType, f.Limit = m.wfTypes[rng.IntN(len(m.wfTypes))], -1-rng.IntN(2)
	}
	want := map[eventstore.WorkflowID]eventstore.WorkflowSummary{}
	for _, w := range started {
		r := w.current()
		if (f.WorkflowType != "" && r.WorkflowType != f.WorkflowType) || (f.Status != "" && r.Status != f.Status) ||
			(!f.StartedAfter.IsZero() && r.StartedAt.Before(f.StartedAfter)) || (!f.StartedBefore.IsZero() && !r.StartedAt.Before(f.StartedBefore)) {
			continue
		}
		want[w.id] = eventstore.WorkflowSummary{WorkflowID: w.id, RunID: r.RunID, WorkflowType: r.WorkflowType, Status: r.Status, StartedAt: r.StartedAt, ClosedAt: r.ClosedAt, Head: w.head()}
	}
	got, err := s.Query(ctx, f)
	if err != nil {
		return fmt.Errorf("Query(%+v): %w", f, err)
	}
	n := 0
	seen := map[eventstore.WorkflowID]bool{}
	for _, g := range got {
		if m.owned[g.WorkflowID] == nil {
			continue
		}
		w, ok := want[g.WorkflowID]
		if !ok {
			return fmt.Errorf("Query(%+v) returned %v (%+v), which does not match", f, g.WorkflowID, g)
		}
		if seen[g.WorkflowID] {
			return fmt.Errorf("Query(%+v) returned %v twice", f, g.WorkflowID)
		}
		seen[g.WorkflowID] = true
		if g.RunID != w.RunID || g.WorkflowType != w.WorkflowType || g.Status != w.Status || !g.StartedAt.Equal(w.StartedAt) || !g.ClosedAt.Equal(w.ClosedAt) || g.Head != w.Head {
			return fmt.Errorf("Query(%+v): summary %+v, want %+v", f, g, w)
		}
		n++
	}
	wantN := len(want)
	if f.Limit > 0 {
		wantN = min(wantN, f.Limit)
		if len(got) > f.Limit {
			return fmt.Errorf("Query(%+v) returned %d summaries, more than the limit", f, len(got))
		}
	}
	if n != wantN {
		return fmt.Errorf("Query(%+v) returned %d of this run's workflows, want %d", f, n, wantN)
	}
	return nil
}
