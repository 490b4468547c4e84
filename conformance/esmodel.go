package conformance

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// The event store model, written from the contract text: the Store, Outbox
// and ShardOwner method docs, the event docs and, for the lifecycle, the
// Memory type doc. The generator only goes where those agree (every run
// begins with WorkflowStarted, a continue-as-new batch carries the next
// run's WorkflowStarted, events go to the current run, a closed run gets
// only a WorkflowReopened), so no verdict rests on a choice left to the
// store.

// ClosedPruner is the optional retention capability of an event store
// (eventstore.Memory has it): PruneClosed removes every workflow whose
// current run closed (completed, failed, cancelled or timed out; not
// continued as new) strictly before before, with its history, run chain,
// timers and outbox rows, and returns how many it removed; afterwards the
// workflow is as if never written. The suite checks it ([RuleESRetention],
// and in the model) when the store has the method; it is not part of
// [eventstore.Store], which an engine uses without it.
type ClosedPruner interface {
	PruneClosed(before time.Time) int
}

var token = eventstore.RecorderToken()

type esWf struct {
	id      eventstore.WorkflowID
	wfType  string
	events  []eventstore.Event // as stored
	known   []bool             // whether events[i].RecordedAt is the caller's
	runs    []eventstore.RunSummary
	life    life
	unrowed []rowRef // activities scheduled without an outbox row
}

// life is where a workflow's current run is, as the generator sees it.
type life struct {
	run    eventstore.RunID
	status eventstore.WorkflowStatus
	open   []eventstore.ActivityID
	next   eventstore.ActivityID
}

type rowRef struct {
	run eventstore.RunID
	id  eventstore.ActivityID
}

// actKey names one activity of one run of one workflow.
type actKey struct {
	wf eventstore.WorkflowID
	rowRef
}

func (w *esWf) head() uint64 { return uint64(len(w.events)) }

type timerKey struct {
	wf eventstore.WorkflowID
	id eventstore.TimerID
}

type esModel struct {
	ctx      context.Context
	s        eventstore.Store
	ob       eventstore.Outbox
	so       eventstore.ShardOwner
	pr       ClosedPruner
	g        *gen
	wfs      []*esWf
	byID     map[eventstore.WorkflowID]*esWf
	rows     []*eventstore.OutboxRow // staging order; State is the model's
	rowByKey map[string]*eventstore.OutboxRow
	rowsOf   map[actKey][]*eventstore.OutboxRow // by the activity they dispatch
	clock    time.Time                          // CreatedAt of the next staged row, increasing
	timers   map[timerKey]eventstore.TimerEntry
	packages map[[2]string]eventstore.PackageRecord
	routes   map[string]string
	shard0   bool     // shard 0 acquired
	noScope  bool     // SetOwnedShards([]int{}) is in force
	done     []esDone // the last accepted appends, oldest first, for retries
}

// esDone is an accepted append, as the caller gave it.
type esDone struct {
	w        *esWf
	expected uint64
	events   []eventstore.Event
	rows     []eventstore.OutboxRow
	outbox   bool
}

// newESModel returns the start function of a model run with n workflows:
// their IDs are drawn from idSeed, the same in every replay, with a fresh
// salt.
func newESModel(ctx context.Context, idSeed uint64, n, scale int) func(eventstore.Store) (*esModel, error) {
	return func(s eventstore.Store) (*esModel, error) {
		g := newGen(rand.New(rand.NewPCG(idSeed, 3)))
		*g.bigLeft = 24 * scale
		m := &esModel{ctx: ctx, s: s, g: g, byID: map[eventstore.WorkflowID]*esWf{}, rowByKey: map[string]*eventstore.OutboxRow{}, rowsOf: map[actKey][]*eventstore.OutboxRow{},
			clock: time.Unix(1_650_000_000, 0).UTC(), timers: map[timerKey]eventstore.TimerEntry{},
			packages: map[[2]string]eventstore.PackageRecord{}, routes: map[string]string{}}
		m.ob, _ = s.(eventstore.Outbox)
		m.so, _ = s.(eventstore.ShardOwner)
		m.pr, _ = s.(ClosedPruner)
		for i := range n {
			m.wf(i)
		}
		return m, nil
	}
}

// wf returns the model's i-th workflow, drawing IDs up to it when the
// table is shorter.
func (m *esModel) wf(i int) *esWf {
	for len(m.wfs) <= i {
		w := &esWf{id: m.g.workflow(), wfType: pick(m.g, m.g.salt+"order", m.g.salt+"Order", m.g.salt+"ü/x")}
		m.wfs = append(m.wfs, w)
		m.byID[w.id] = w
	}
	return m.wfs[i]
}

// The event kinds the generator emits, by name: each makes one event (two
// for continue-as-new), filled field by field, then given its lifecycle
// fields.
const (
	kStart, kSignal, kSchedule, kTimer, kFired, kTrigger = "start", "signal", "schedule", "timer", "fired", "trigger"
	kDone, kFail, kRetry, kCancelAct, kTimeoutAct        = "activity-completed", "activity-failed", "activity-retry", "activity-cancelled", "activity-timed-out"
	kPause, kResume, kReopen, kContinue                  = "pause", "resume", "reopen", "continue-as-new"
	kComplete, kFailWf, kCancelWf, kTimeoutWf            = "complete", "fail", "cancel", "time-out"
)

// nextKind draws a kind the lifecycle allows; a long-lived workflow is
// seldom paused or closed.
func nextKind(st *life, g *gen, long bool) string {
	switch {
	case st.status == "":
		return kStart
	case st.status.Closed():
		return kReopen
	case st.status == eventstore.StatusPaused:
		return pick(g, kSignal, kResume)
	}
	r := g.IntN(100)
	if long && r >= 88 && g.IntN(8) != 0 {
		r = g.IntN(88)
	}
	switch {
	case r < 20:
		return kSignal
	case r < 40:
		return kSchedule
	case r < 60 && len(st.open) > 0:
		return pick(g, kDone, kFail, kRetry, kCancelAct, kTimeoutAct)
	case r < 70:
		return kTimer
	case r < 75:
		return kFired
	case r < 80:
		return kTrigger
	case r < 88:
		return kPause
	case r < 92:
		return pick(g, kComplete, kFailWf, kCancelWf, kTimeoutWf)
	}
	return kContinue
}

// mk returns an E with every field drawn, then env and set applied.
func mk[E eventstore.Event](g *gen, env eventstore.Envelope, set func(*E)) eventstore.Event {
	e := filled[E](g)
	reflect.ValueOf(&e).Elem().FieldByName("Envelope").Set(reflect.ValueOf(env))
	if set != nil {
		set(&e)
	}
	return e
}

// events makes the events of kind for w from st, and advances st.
func (m *esModel) events(w *esWf, st *life, g *gen, kind string) []eventstore.Event {
	env := func(known bool) eventstore.Envelope {
		e := eventstore.Envelope{RunID: st.run, Seq: g.u64()}
		if g.IntN(3) != 0 {
			e.WorkflowID = w.id
		}
		if known {
			e.RecordedAt = g.time()
		}
		return e
	}
	settle := func() eventstore.ActivityID {
		if len(st.open) == 0 {
			return st.next // ends nothing the model tracks
		}
		i := g.IntN(len(st.open))
		id := st.open[i]
		if kind != kRetry {
			st.open = slices.Delete(slices.Clone(st.open), i, i+1)
		}
		return id
	}
	closeAs := func(s eventstore.WorkflowStatus) { st.status = s }
	switch kind {
	case kStart:
		st.run, st.status, st.open, st.next = g.run(), eventstore.StatusRunning, nil, 0
		return []eventstore.Event{mk(g, env(true), func(e *eventstore.WorkflowStarted) { e.WorkflowType = w.wfType })}
	case kContinue:
		next := g.run()
		can := mk(g, env(true), func(e *eventstore.WorkflowContinuedAsNew) { e.NewRunID = next })
		st.run, st.status, st.open, st.next = next, eventstore.StatusRunning, nil, 0
		return []eventstore.Event{can, mk(g, env(true), func(e *eventstore.WorkflowStarted) { e.WorkflowType = w.wfType })}
	case kSignal:
		return []eventstore.Event{mk[eventstore.SignalReceived](g, env(g.IntN(4) != 0), nil)}
	case kSchedule:
		id := st.next
		// Ordinals past 2^32 and 2^63 now and then: a store keeping them
		// narrower settles or dispatches the wrong row.
		switch r := g.IntN(10); {
		case r == 0 && st.next < 1<<62:
			st.next += 1 << 32
		case r == 1 && st.next < 1<<63:
			st.next += 1 << 63
		default:
			st.next++
		}
		st.open = append(slices.Clone(st.open), id)
		return []eventstore.Event{mk(g, env(g.IntN(4) != 0), func(e *eventstore.ActivityScheduled) { e.ActivityID = id })}
	case kDone:
		return []eventstore.Event{mk(g, env(true), func(e *eventstore.ActivityCompleted) { e.ActivityID = settle() })}
	case kFail, kRetry:
		kindOf := map[string]eventstore.ActivityErrorKind{kFail: eventstore.Terminal, kRetry: eventstore.Retryable}[kind]
		return []eventstore.Event{mk(g, env(true), func(e *eventstore.ActivityFailed) { e.ActivityID, e.Error.Kind = settle(), kindOf })}
	case kCancelAct:
		return []eventstore.Event{mk(g, env(true), func(e *eventstore.ActivityCancelled) { e.ActivityID = settle() })}
	case kTimeoutAct:
		return []eventstore.Event{mk(g, env(true), func(e *eventstore.ActivityTimedOut) { e.ActivityID = settle() })}
	case kTimer:
		return []eventstore.Event{mk[eventstore.TimerScheduled](g, env(true), nil)}
	case kFired:
		return []eventstore.Event{mk[eventstore.TimerFired](g, env(true), nil)}
	case kTrigger:
		return []eventstore.Event{mk[eventstore.ScheduleTriggered](g, env(true), nil)}
	case kPause:
		st.status = eventstore.StatusPaused
		return []eventstore.Event{mk[eventstore.WorkflowPaused](g, env(true), nil)}
	case kResume:
		st.status = eventstore.StatusRunning
		return []eventstore.Event{mk[eventstore.WorkflowResumed](g, env(true), nil)}
	case kReopen:
		st.status = eventstore.StatusRunning
		return []eventstore.Event{mk[eventstore.WorkflowReopened](g, env(true), nil)}
	case kComplete:
		closeAs(eventstore.StatusCompleted)
		return []eventstore.Event{mk[eventstore.WorkflowCompleted](g, env(true), nil)}
	case kFailWf:
		closeAs(eventstore.StatusFailed)
		return []eventstore.Event{mk[eventstore.WorkflowFailed](g, env(true), nil)}
	case kCancelWf:
		closeAs(eventstore.StatusCancelled)
		return []eventstore.Event{mk[eventstore.WorkflowCancelled](g, env(true), nil)}
	case kTimeoutWf:
		closeAs(eventstore.StatusTimedOut)
		return []eventstore.Event{mk[eventstore.WorkflowTimedOut](g, env(true), nil)}
	}
	panic("conformance: unknown event kind " + kind)
}

// esFlaw is what makes a generated append one every store refuses.
type esFlaw int

const (
	esNoFlaw esFlaw = iota
	esZeroToken
	esZeroTokenEmpty
	esZeroWF
	esNilEvent
	esPointerEvent
	esForeignEvent
	esOtherWfEnvelope
	esZeroRunEvent
	esRowOtherWf // the row flaws, checked after the expected seq
	esRowZeroRun
	esRowDupKey
	esRowStagedKey
)

var esFlawNames = []string{"", "the zero token", "the zero token and no events", "a zero workflow ID", "a nil event",
	"a pointer event", "an event of a foreign kind", "an event of another workflow", "an event with a zero run ID",
	"a row of another workflow", "a row with a zero run ID", "two rows with one dispatch key", "a row with a dispatch key already staged"}

// foreignEvent is an Event of a kind outside the eventstore package.
type foreignEvent struct{ eventstore.SignalReceived }

// esAppend is one generated append.
type esAppend struct {
	wf, n    int
	at       pos
	kinds    []string // the kinds of the events, in order; empty: drawn
	seed     uint64
	rows     bool // a row for every ActivityScheduled event (most, with partial), through AppendWithOutbox
	partial  bool
	rowsOnly bool // no events, rows for activities scheduled earlier without one
	big      bool // a 1 MiB payload in every payload field met
	flaw     esFlaw
	where    int
	mode     ctxMode
	trip     int
}

func (a esAppend) String() string {
	var b strings.Builder
	call := "Append"
	if a.rows || a.rowsOnly || a.flaw >= esRowOtherWf {
		call = "AppendWithOutbox"
	}
	kinds := fmt.Sprint(a.kinds)
	if len(a.kinds) > 6 {
		kinds = fmt.Sprintf("[%s and %d more]", a.kinds[0], len(a.kinds)-1)
	}
	fmt.Fprintf(&b, "%s(workflow %d, %d events %s at %v", call, a.wf, a.n, kinds, a.at)
	if a.rowsOnly {
		b.WriteString(", rows only")
	}
	if a.flaw != esNoFlaw {
		fmt.Fprintf(&b, ", with %s at %d", esFlawNames[a.flaw], a.where)
	}
	if a.big {
		b.WriteString(", 1 MiB payloads")
	}
	return b.String() + ")"
}

// batch makes the events and rows of an append, from w's state.
func (m *esModel) batch(w *esWf, a esAppend) ([]eventstore.Event, []eventstore.OutboxRow) {
	g := m.g.sub(a.seed)
	st := w.life
	var events []eventstore.Event
	var rows []eventstore.OutboxRow
	keys := map[string]bool{}
	row := func(run eventstore.RunID, id eventstore.ActivityID) eventstore.OutboxRow {
		r := filled[eventstore.OutboxRow](g)
		r.RunID, r.Ordinal, r.WorkflowID = run, id, pick(g, w.id, eventstore.WorkflowID{})
		m.clock = m.clock.Add(time.Second)
		r.CreatedAt, r.DispatchKey = m.clock, ""
		// A key shape not staged yet now and then: "a" and "A", "a/b" and
		// "a:b", two long keys sharing 300 bytes must all be distinct; or
		// the conventional key given explicitly.
		switch k := g.salt + pick(g, keyShapes...); g.IntN(3) {
		case 0:
			if m.rowByKey[k] == nil && !keys[k] {
				r.DispatchKey, keys[k] = k, true
			}
		case 1:
			r.DispatchKey = eventstore.DispatchKey(w.id, run, id)
		}
		return r
	}
	if a.rowsOnly {
		for _, u := range w.unrowed[:min(a.n, len(w.unrowed))] {
			rows = append(rows, row(u.run, u.id))
		}
	}
	for i := 0; !a.rowsOnly && len(events) < a.n; i++ {
		kind := ""
		if i < len(a.kinds) {
			kind = a.kinds[i]
		} else if a.kinds != nil {
			break
		} else {
			kind = nextKind(&st, g, a.wf == 0)
		}
		for _, ev := range m.events(w, &st, g, kind) {
			events = append(events, ev)
			if s, ok := ev.(eventstore.ActivityScheduled); ok && a.rows && (!a.partial || g.IntN(4) != 0) {
				rows = append(rows, row(s.RunID, s.ActivityID))
			}
		}
	}
	if a.big {
		used := map[string]bool{}
		for i, ev := range events {
			v := reflect.New(reflect.TypeOf(ev)).Elem()
			v.Set(reflect.ValueOf(ev))
			bigPayloads(v, reflect.TypeOf(ev).Name(), used)
			events[i] = v.Interface().(eventstore.Event)
		}
	}
	return m.flawed(w, a, g, events, rows)
}

// bigPayloads gives a 1 MiB Data to the first payload of each field path.
func bigPayloads(v reflect.Value, path string, used map[string]bool) {
	for i := range v.NumField() {
		f, p := v.Field(i), path+"."+v.Type().Field(i).Name
		switch {
		case f.Type() == reflect.TypeFor[eventstore.Payload]() && !used[p]:
			used[p] = true
			f.FieldByName("Data").SetBytes([]byte(strings.Repeat("\x00\xffü", bigText/4)))
		case f.Kind() == reflect.Struct && f.Type() != timeType:
			bigPayloads(f, p, used)
		}
	}
}

// flawed applies a's flaw to a batch.
func (m *esModel) flawed(w *esWf, a esAppend, g *gen, events []eventstore.Event, rows []eventstore.OutboxRow) ([]eventstore.Event, []eventstore.OutboxRow) {
	at := func(n int) int { return (a.where%n + n) % n }
	if a.flaw >= esNilEvent && a.flaw <= esZeroRunEvent && len(events) == 0 {
		events = m.events(w, &life{run: w.life.run}, g, kSignal)
	}
	if a.flaw >= esRowOtherWf && len(rows) == 0 {
		if len(events) == 0 {
			events = m.events(w, &life{run: w.life.run}, g, kSignal)
		}
		rows = []eventstore.OutboxRow{{RunID: w.life.run, Ordinal: 1 << 40}}
	}
	switch a.flaw {
	case esZeroTokenEmpty:
		return nil, nil
	case esNilEvent:
		events[at(len(events))] = nil
	case esPointerEvent:
		sig := mk[eventstore.SignalReceived](g, events[0].EventEnvelope(), nil).(eventstore.SignalReceived)
		events[at(len(events))] = &sig
	case esForeignEvent:
		events[at(len(events))] = foreignEvent{mk[eventstore.SignalReceived](g, events[0].EventEnvelope(), nil).(eventstore.SignalReceived)}
	case esOtherWfEnvelope, esZeroRunEvent:
		i := at(len(events))
		env := events[i].EventEnvelope()
		if a.flaw == esZeroRunEvent {
			env.RunID = eventstore.RunID{}
		} else {
			env.WorkflowID = m.wf(a.wf + 1).id
		}
		events[i] = eventstore.WithEnvelope(events[i], env)
	case esRowOtherWf:
		rows[at(len(rows))].WorkflowID = m.wf(a.wf + 1).id
	case esRowZeroRun:
		rows[at(len(rows))].RunID = eventstore.RunID{}
	case esRowDupKey:
		i := at(len(rows))
		if rows[i].DispatchKey == "" {
			rows[i].DispatchKey = eventstore.DispatchKey(w.id, rows[i].RunID, rows[i].Ordinal)
		}
		dup := rows[i]
		dup.Ordinal ^= 1 << 20
		rows = append(rows, dup)
	case esRowStagedKey:
		if len(m.rows) == 0 {
			return m.flawed(w, esAppend{flaw: esRowDupKey, where: a.where}, g, events, rows)
		}
		rows[at(len(rows))].DispatchKey = pick(g, m.rows...).DispatchKey
	}
	return events, rows
}

// append makes one generated append and judges it.
func (m *esModel) append(a esAppend) error {
	tick(m.ctx)
	w := m.wf(a.wf)
	head := w.head()
	expected := a.at.at(head)
	events, rows := m.batch(w, a)
	givenE, givenR := deepCopy(events), deepCopy(rows)
	tok, wfID := token, w.id
	switch a.flaw {
	case esZeroToken, esZeroTokenEmpty:
		tok = eventstore.WriteToken{}
	case esZeroWF:
		wfID = eventstore.WorkflowID{}
	}
	ctx, cancel := ctxFor(m.ctx, a.mode, a.trip)
	defer cancel()
	outbox := a.rows || a.rowsOnly || a.flaw >= esRowOtherWf
	if m.ob == nil {
		outbox, rows, givenR = false, nil, nil
		if a.flaw >= esRowOtherWf {
			a.flaw = esNoFlaw
		}
	}
	err := m.write(ctx, outbox, tok, wfID, events, expected, rows)
	if d := diff(ends(events), ends(givenE)) + diff(ends(rows), ends(givenR)); d != "" {
		return fmt.Errorf("the call changed the caller's arguments: %s", d)
	}
	scribble(events) // the caller may reuse its memory now
	scribble(rows)
	var want error
	switch {
	case a.flaw == esZeroToken || a.flaw == esZeroTokenEmpty:
		want = eventstore.ErrInvalidToken
	case a.mode == ctxCancelled:
		want = context.Canceled
	case a.mode == ctxExpired:
		want = context.DeadlineExceeded
	case a.flaw > esZeroTokenEmpty && a.flaw < esRowOtherWf:
		want = eventstore.ErrInvalidArgument
	case len(givenE) == 0 && len(givenR) == 0:
		if err != nil {
			return fmt.Errorf("an empty append returned %w; it is a no-op", err)
		}
		return m.readFrom(w, rel(0), ctxLive, 0)
	case expected != head:
		// The same batch again is no retry of an accepted one: a conflict
		// still.
		again := m.write(m.ctx, outbox, tok, wfID, deepCopy(givenE), expected, deepCopy(givenR))
		if err := errors.Join(wantConflict(err, expected, head, "the append"), wantConflict(again, expected, head, "the refused append made again")); err != nil {
			return err
		}
		return m.readFrom(w, rel(0), ctxLive, 0)
	case a.flaw != esNoFlaw:
		want = eventstore.ErrInvalidArgument
	}
	if want != nil {
		if !errors.Is(err, want) {
			return fmt.Errorf("returned %v, want an error matching %v", err, want)
		}
		return m.readFrom(w, rel(0), ctxLive, 0)
	}
	if err := settleCancelled(err, a.mode, head, uint64(len(givenE)), func() (uint64, error) {
		got, err := m.s.ReadHistoryFrom(m.ctx, w.id, head+1)
		return uint64(len(got)), err
	}, func() error { return m.write(m.ctx, outbox, tok, wfID, deepCopy(givenE), expected, deepCopy(givenR)) }); err != nil {
		return err
	}
	m.apply(w, givenE, givenR)
	if !a.big && len(givenE)+len(givenR) <= 64 {
		m.done = append(m.done[max(0, len(m.done)-retriesKept+1):], esDone{w, expected, givenE, givenR, outbox})
	}
	if a.big {
		return m.readFrom(w, abs(head+1), ctxLive, 0)
	}
	return nil
}

// write appends through AppendWithOutbox (outbox) or Append.
func (m *esModel) write(ctx context.Context, outbox bool, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expected uint64, rows []eventstore.OutboxRow) error {
	if outbox {
		return m.ob.AppendWithOutbox(ctx, tok, wf, events, expected, rows)
	}
	return m.s.Append(ctx, tok, wf, events, expected)
}

// retry makes an accepted append again, identical (events and rows,
// through the same method), at the expectedSeq it was accepted at (back
// appends before the last; none kept: a no-op): the history moved on, so
// it is a conflict whose Found is the history length, and it writes
// nothing. A store that takes an identical retry as already done answers
// nil, which the contract does not allow.
func (m *esModel) retry(back int) error {
	if back >= len(m.done) {
		return nil
	}
	d := m.done[len(m.done)-1-back]
	if d.w.head() == d.expected {
		return nil // pruned since: not a retry any more
	}
	err := m.write(m.ctx, d.outbox, token, d.w.id, deepCopy(d.events), d.expected, deepCopy(d.rows))
	what := fmt.Sprintf("the identical retry of an accepted append of %d events and %d rows", len(d.events), len(d.rows))
	if err := wantConflict(err, d.expected, d.w.head(), what); err != nil {
		return err
	}
	return m.readFrom(d.w, rel(0), ctxLive, 0)
}

// apply records an accepted batch and its rows.
func (m *esModel) apply(w *esWf, events []eventstore.Event, rows []eventstore.OutboxRow) {
	for _, r := range deepCopy(rows) {
		r.WorkflowID, r.State = w.id, eventstore.OutboxPending
		if r.DispatchKey == "" {
			r.DispatchKey = eventstore.DispatchKey(w.id, r.RunID, r.Ordinal)
		}
		m.rows = append(m.rows, &r)
		m.rowByKey[r.DispatchKey] = &r
		k := actKey{w.id, rowRef{r.RunID, r.Ordinal}}
		m.rowsOf[k] = append(m.rowsOf[k], &r)
		w.unrowed = slices.DeleteFunc(w.unrowed, func(u rowRef) bool { return u == k.rowRef })
	}
	for _, ev := range deepCopy(events) {
		env := ev.EventEnvelope()
		known := !env.RecordedAt.IsZero()
		env.WorkflowID, env.Seq = w.id, w.head()+1
		ev = eventstore.WithEnvelope(ev, env)
		w.events, w.known = append(w.events, ev), append(w.known, known)
		st := &w.life
		if s, ok := ev.(eventstore.WorkflowStarted); ok {
			w.runs = append(w.runs, eventstore.RunSummary{RunID: env.RunID, WorkflowType: s.WorkflowType, Status: eventstore.StatusRunning, StartedAt: env.RecordedAt, FirstSeq: env.Seq})
			*st = life{run: env.RunID, status: eventstore.StatusRunning}
		}
		run := &w.runs[len(w.runs)-1]
		run.LastSeq = env.Seq
		closeAs := func(s eventstore.WorkflowStatus) { run.Status, run.ClosedAt, st.status = s, env.RecordedAt, s }
		settle := func(id eventstore.ActivityID) {
			for _, r := range m.rowsOf[actKey{w.id, rowRef{env.RunID, id}}] {
				if isOpenRow(r.State) {
					r.State = eventstore.OutboxSettled
				}
			}
			st.open = slices.DeleteFunc(st.open, func(x eventstore.ActivityID) bool { return x == id })
		}
		if s, ok := closingStatus(ev); ok {
			closeAs(s)
		}
		switch e := ev.(type) {
		case eventstore.WorkflowPaused:
			run.Status, st.status = eventstore.StatusPaused, eventstore.StatusPaused
		case eventstore.WorkflowResumed, eventstore.WorkflowReopened:
			run.Status, run.ClosedAt, st.status = eventstore.StatusRunning, time.Time{}, eventstore.StatusRunning
		case eventstore.ActivityScheduled:
			st.open = append(st.open, e.ActivityID)
			st.next = max(st.next, e.ActivityID+1)
			if len(m.rowsOf[actKey{w.id, rowRef{env.RunID, e.ActivityID}}]) == 0 {
				w.unrowed = append(w.unrowed, rowRef{env.RunID, e.ActivityID})
			}
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

func isOpenRow(s eventstore.OutboxState) bool {
	return s == eventstore.OutboxPending || s == eventstore.OutboxClaimed
}

// twice reads, judges the answer, scribbles on it and reads again (unless
// once): a store that hands callers shared memory answers differently the
// second time.
func twice[T any](parent context.Context, mode ctxMode, trip int, once bool, read func(context.Context) (T, error), judge func(T) string) error {
	for pass := range 2 - boolInt(once) {
		ctx, cancel := ctxFor(parent, mode, trip)
		got, err := read(ctx)
		cancel()
		if err := checkAnswer(mode, err, func() string { return judge(got) }); err != nil {
			if pass > 0 {
				return fmt.Errorf("read again after the caller scribbled on the first answer: %w", err)
			}
			return err
		}
		scribble(got)
	}
	return nil
}

// history judges events read from seq from: a RecordedAt the caller left
// zero must be set, any other kept.
func (m *esModel) history(w *esWf, from uint64, got []eventstore.Event) string {
	var want []eventstore.Event
	if from <= w.head() {
		want = slices.Clone(w.events[from-1:])
	}
	if len(got) != len(want) {
		return fmt.Sprintf("%d events from seq %d, want %d (of a history of %d)", len(got), from, len(want), w.head())
	}
	for i := range want {
		if !w.known[from-1+uint64(i)] && got[i] != nil {
			at := got[i].EventEnvelope().RecordedAt
			if at.IsZero() {
				return fmt.Sprintf("event %d: a zero RecordedAt was not set at commit", from+uint64(i))
			}
			env := want[i].EventEnvelope()
			env.RecordedAt = at
			want[i] = eventstore.WithEnvelope(want[i], env)
		}
	}
	if d := diff(got, want); d != "" {
		return fmt.Sprintf("from seq %d: %s", from, d)
	}
	return ""
}

func (m *esModel) readFrom(w *esWf, p pos, mode ctxMode, trip int) error {
	from := p.at(w.head())
	return twice(m.ctx, mode, trip, false, func(ctx context.Context) ([]eventstore.Event, error) {
		return m.s.ReadHistoryFrom(ctx, w.id, from)
	}, func(got []eventstore.Event) string {
		return m.history(w, max(from, 1), got)
	})
}

func (m *esModel) readAll(w *esWf, mode ctxMode) error {
	return twice(m.ctx, mode, 0, false, func(ctx context.Context) ([]eventstore.Event, error) {
		return m.s.ReadHistory(ctx, w.id)
	}, func(got []eventstore.Event) string { return m.history(w, 1, got) })
}

// histories reads n histories through ReadHistories, if the store has
// it: of the model's first n-2 workflows, an unknown one amid them and the
// first again, last.
func (m *esModel) histories(n int, mode ctxMode) error {
	hr, ok := m.s.(eventstore.HistoriesReader)
	if !ok {
		return nil
	}
	unknown := eventstore.WorkflowID{0: 0xfe, 15: 0xfe}
	for m.byID[unknown] != nil {
		unknown[14]++
	}
	ws := slices.Clone(m.wfs[:n-2])
	ws = append(slices.Insert(ws, len(ws)/2, &esWf{id: unknown}), ws[0])
	ids := make([]eventstore.WorkflowID, len(ws))
	for i, w := range ws {
		ids[i] = w.id
	}
	return twice(m.ctx, mode, 0, false, func(ctx context.Context) ([][]eventstore.Event, error) {
		return hr.ReadHistories(ctx, ids)
	}, func(got [][]eventstore.Event) string {
		if len(got) != len(ids) {
			return fmt.Sprintf("%d histories for %d workflows", len(got), len(ids))
		}
		for i, w := range ws {
			if d := m.history(w, 1, got[i]); d != "" {
				return fmt.Sprintf("history %d of %d: %s", i, len(ids), d)
			}
		}
		return ""
	})
}

func (m *esModel) chain(w *esWf, mode ctxMode) error {
	return twice(m.ctx, mode, 0, false, func(ctx context.Context) ([]eventstore.RunSummary, error) {
		return m.s.ReadRunChain(ctx, w.id)
	}, func(got []eventstore.RunSummary) string { return diff(got, w.runs) })
}

// mine keeps the model's workflows of ids, sorted.
func (m *esModel) mine(ids []eventstore.WorkflowID) []eventstore.WorkflowID {
	var out []eventstore.WorkflowID
	for _, id := range ids {
		if m.byID[id] != nil {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b eventstore.WorkflowID) int { return bytes.Compare(a[:], b[:]) })
	return out
}

func (m *esModel) listings(mode ctxMode) error {
	var all, active, paused []eventstore.WorkflowID
	var heads []eventstore.StreamHead
	for _, w := range m.wfs {
		if w.head() == 0 || m.noScope {
			continue
		}
		all = append(all, w.id)
		heads = append(heads, eventstore.StreamHead{WorkflowID: w.id, Head: w.head()})
		switch w.runs[len(w.runs)-1].Status {
		case eventstore.StatusRunning, eventstore.StatusContinuedAsNew:
			active = append(active, w.id)
		case eventstore.StatusPaused:
			paused = append(paused, w.id)
		}
	}
	all, active, paused = m.mine(all), m.mine(active), m.mine(paused)
	for _, l := range []struct {
		name string
		call func(context.Context) ([]eventstore.WorkflowID, error)
		want []eventstore.WorkflowID
	}{{"ListWorkflowIDs", m.s.ListWorkflowIDs, all}, {"ListActive", m.s.ListActive, active}, {"ListPaused", m.s.ListPaused, paused}} {
		if err := twice(m.ctx, mode, 0, false, l.call, func(got []eventstore.WorkflowID) string {
			if d := diff(m.mine(got), l.want); d != "" {
				return fmt.Sprintf("%s (this rule's workflows, sorted): %s", l.name, d)
			}
			return ""
		}); err != nil {
			return err
		}
	}
	byID := func(a, b eventstore.StreamHead) int { return bytes.Compare(a.WorkflowID[:], b.WorkflowID[:]) }
	slices.SortFunc(heads, byID)
	return twice(m.ctx, mode, 0, false, m.s.StreamHeads, func(got []eventstore.StreamHead) string {
		got = slices.DeleteFunc(slices.Clone(got), func(h eventstore.StreamHead) bool { return m.byID[h.WorkflowID] == nil })
		slices.SortFunc(got, byID)
		if d := diff(got, heads); d != "" {
			return "StreamHeads (this rule's workflows, sorted): " + d
		}
		return ""
	})
}

// queryVariants is how many filters query draws from.
const queryVariants = 13

// query runs Query with a filter of the variant and checks every summary
// of the model's workflows it returns, and how many.
func (m *esModel) query(variant int, seed uint64, mode ctxMode) error {
	g := m.g.sub(seed)
	var started []*esWf
	for _, w := range m.wfs {
		if w.head() > 0 {
			started = append(started, w)
		}
	}
	var f eventstore.WorkflowFilter
	if len(started) > 0 {
		pivot := pick(g, started...).runs
		p := pivot[len(pivot)-1]
		f = []eventstore.WorkflowFilter{
			{}, // every workflow: a silent cap shows
			{WorkflowType: p.WorkflowType},
			{WorkflowType: p.WorkflowType, Status: p.Status},
			{WorkflowType: p.WorkflowType, Limit: pick(g, boundaryInt...)},
			{WorkflowType: p.WorkflowType, StartedAfter: p.StartedAt},
			{WorkflowType: p.WorkflowType, StartedBefore: p.StartedAt},
			{StartedAfter: p.StartedAt, StartedBefore: p.StartedAt.Add(time.Microsecond)},
			{Status: eventstore.StatusPaused},
			{Status: eventstore.StatusRunning},
			{Status: pick(g, eventstore.StatusCompleted, eventstore.StatusContinuedAsNew, eventstore.StatusFailed, eventstore.StatusTimedOut)},
			{Limit: pick(g, 1, 4097, 1<<32+1, math.MaxInt)},
			{Limit: 1<<32 + 2}, // a limit kept in 32 bits is 2
			{Limit: math.MaxInt32 + 1},
		}[variant%queryVariants]
	}
	want := map[eventstore.WorkflowID]eventstore.WorkflowSummary{}
	for _, w := range started {
		r := w.runs[len(w.runs)-1]
		if (f.WorkflowType == "" || r.WorkflowType == f.WorkflowType) && (f.Status == "" || r.Status == f.Status) &&
			(f.StartedAfter.IsZero() || !r.StartedAt.Before(f.StartedAfter)) && (f.StartedBefore.IsZero() || r.StartedAt.Before(f.StartedBefore)) {
			want[w.id] = eventstore.WorkflowSummary{WorkflowID: w.id, RunID: r.RunID, WorkflowType: r.WorkflowType, Status: r.Status, StartedAt: r.StartedAt, ClosedAt: r.ClosedAt, Head: w.head()}
		}
	}
	return twice(m.ctx, mode, 0, false, func(ctx context.Context) ([]eventstore.WorkflowSummary, error) { return m.s.Query(ctx, f) },
		func(got []eventstore.WorkflowSummary) string {
			n, seen := 0, map[eventstore.WorkflowID]bool{}
			for _, s := range got {
				if m.byID[s.WorkflowID] == nil {
					continue
				}
				if seen[s.WorkflowID] {
					return fmt.Sprintf("Query(%+v) returned %v twice", f, s.WorkflowID)
				}
				n, seen[s.WorkflowID] = n+1, true
				if d := diff(s, want[s.WorkflowID]); d != "" {
					return fmt.Sprintf("Query(%+v) returned %v: %s", f, s.WorkflowID, d)
				}
			}
			wantN := len(want)
			if f.Limit > 0 {
				wantN = min(wantN, f.Limit)
			}
			if n != wantN || (f.Limit > 0 && len(got) > f.Limit) {
				return fmt.Sprintf("Query(%+v) returned %d summaries, %d of this rule's workflows, want %d", f, len(got), n, wantN)
			}
			return ""
		})
}

// The side tables of the event store model: outbox, timers, packages,
// shards and retention. Each method is one generated operation.

// refused checks that err matches want (a done context's error, or a
// sentinel).
func refused(err, want error, what string) error {
	if !errors.Is(err, want) {
		return fmt.Errorf("%s returned %v, want an error matching %v", what, err, want)
	}
	return nil
}

// doneErr is the error a call with a done context of mode must return, nil
// for a live one.
func doneErr(mode ctxMode) error {
	return []error{nil, context.Canceled, context.DeadlineExceeded, nil}[mode]
}

// lookalike turns a key into one differing only in case, a separator or
// an accent: a distinct key a careless store merges with the first.
var lookalike = strings.NewReplacer("a", "A", "A", "a", "/", ":", ":", "/", "u", "ü", "ü", "u")

// timerOrder orders timers earliest first, then by workflow and ID.
func timerOrder(a, b eventstore.TimerEntry) int {
	return cmp.Or(a.FireAt.Compare(b.FireAt), strings.Compare(a.WorkflowID.String()+string(a.TimerID), b.WorkflowID.String()+string(b.TimerID)))
}

func (m *esModel) claim(limit int) error {
	got, err := m.ob.ClaimOutboxRows(m.ctx, limit)
	what := fmt.Sprintf("ClaimOutboxRows(%d)", limit)
	if limit <= 0 {
		if err := refused(err, eventstore.ErrInvalidArgument, what); err != nil {
			return err
		}
		return m.count()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	want := []eventstore.OutboxRow{}
	for _, r := range m.rows {
		if r.State == eventstore.OutboxPending && len(want) < limit {
			r.State = eventstore.OutboxClaimed
			want = append(want, *r)
		}
	}
	if d := diff(got, want); d != "" {
		return fmt.Errorf("%s, oldest pending first, in state claimed: %s", what, d)
	}
	scribble(got)
	return m.count()
}

func (m *esModel) count() error {
	want := 0
	for _, r := range m.rows {
		if r.State == eventstore.OutboxClaimed {
			want++
		}
	}
	if got, err := m.ob.CountClaimedOutboxRows(m.ctx); err != nil || got != want {
		return fmt.Errorf("CountClaimedOutboxRows = %d, %v; want %d", got, err, want)
	}
	return nil
}

// rearm re-arms some claimed rows (and, now and then, a row in another
// state, which stays as it is); variant 1 adds an unknown key (ErrNotFound)
// and 2 an empty one (ErrInvalidArgument): nothing changes then.
func (m *esModel) rearm(variant int, seed uint64) error {
	g := m.g.sub(seed)
	var rows []eventstore.OutboxRow
	for _, r := range m.rows {
		if (r.State == eventstore.OutboxClaimed && g.IntN(2) == 0) || g.IntN(40) == 0 {
			rows = append(rows, eventstore.OutboxRow{DispatchKey: r.DispatchKey, Ordinal: eventstore.ActivityID(g.u64())})
		}
	}
	var want error
	switch variant % 4 {
	case 1:
		rows, want = append(rows, eventstore.OutboxRow{DispatchKey: m.g.salt + "never-staged"}), eventstore.ErrNotFound
	case 2:
		rows, want = append(rows, eventstore.OutboxRow{}), eventstore.ErrInvalidArgument
	}
	given := deepCopy(rows)
	err := m.ob.RearmOutboxPending(m.ctx, rows)
	if d := diff(rows, given); d != "" {
		return fmt.Errorf("RearmOutboxPending changed the caller's rows: %s", d)
	}
	if want != nil {
		return errors.Join(refused(err, want, "RearmOutboxPending naming a bad row"), m.count())
	}
	if err != nil {
		return fmt.Errorf("RearmOutboxPending(%d rows): %w", len(rows), err)
	}
	for _, r := range rows {
		if mr := m.rowByKey[r.DispatchKey]; mr.State == eventstore.OutboxClaimed {
			mr.State = eventstore.OutboxPending
		}
	}
	return m.count()
}

// cancelRow cancels one row: an open one (variant 0), one already settled
// or cancelled (1, a no-op), a key differing from a staged one only in case
// or in a separator (2, ErrNotFound unless staged too), the empty key (3,
// ErrInvalidArgument).
func (m *esModel) cancelRow(variant int, seed uint64) error {
	g := m.g.sub(seed)
	key := m.g.salt + "never-staged"
	if len(m.rows) > 0 {
		key = pick(g, m.rows...).DispatchKey
		var open []*eventstore.OutboxRow
		for _, r := range m.rows {
			if isOpenRow(r.State) == (variant%4 == 0) {
				open = append(open, r)
			}
		}
		if len(open) > 0 {
			key = pick(g, open...).DispatchKey
		}
	}
	switch variant % 4 {
	case 2:
		key = lookalike.Replace(key)
	case 3:
		key = ""
	}
	err := m.ob.SettleOutboxRowCancelled(m.ctx, key)
	what := fmt.Sprintf("SettleOutboxRowCancelled(%s)", short(key))
	switch r := m.rowByKey[key]; {
	case key == "":
		return refused(err, eventstore.ErrInvalidArgument, what)
	case r == nil:
		return refused(err, eventstore.ErrNotFound, what)
	case err != nil:
		return fmt.Errorf("%s of a row %s: %w", what, r.State, err)
	case isOpenRow(r.State):
		r.State = eventstore.OutboxCancelled
	}
	return m.count()
}

// cancelWf cancels the open rows of a workflow (every run): variant 1 an
// unknown workflow (none), 2 the zero one (ErrInvalidArgument).
func (m *esModel) cancelWf(w *esWf, variant int) error {
	id := w.id
	switch variant % 5 {
	case 1:
		id = m.g.workflow()
	case 2:
		id = eventstore.WorkflowID{}
	}
	got, err := m.ob.SettleWorkflowOutboxRowsCancelled(m.ctx, id)
	if id.IsZero() {
		return refused(err, eventstore.ErrInvalidArgument, "SettleWorkflowOutboxRowsCancelled(zero workflow)")
	}
	want := []string{}
	for _, r := range m.rows {
		if r.WorkflowID == id && isOpenRow(r.State) {
			want = append(want, r.DispatchKey)
			r.State = eventstore.OutboxCancelled
		}
	}
	if err != nil {
		return fmt.Errorf("SettleWorkflowOutboxRowsCancelled: %w", err)
	}
	got = slices.Clone(got)
	slices.Sort(got)
	slices.Sort(want)
	if d := diff(got, want); d != "" {
		return fmt.Errorf("SettleWorkflowOutboxRowsCancelled returned the keys (sorted) %s: exactly the workflow's open rows, of every run", d)
	}
	return m.count()
}

// timerShapes are the key shapes, and IDs differing from them only in
// spaces, that a store trimming or collapsing spaces merges.
var timerShapes = append(slices.Clip(keyShapes), " a", "a ", "a  b")

// schedule arms a timer with a key-shaped ID (timer shape variant-6 from
// variant 6 on); variant 1 uses the zero workflow and 2 the empty ID
// (ErrInvalidArgument, nothing armed).
func (m *esModel) schedule(w *esWf, variant int, seed uint64, mode ctxMode) error {
	g := m.g.sub(seed)
	e := eventstore.TimerEntry{WorkflowID: w.id, TimerID: eventstore.TimerID(g.key("")), FireAt: g.time(), ArmedSeq: g.u64()}
	if variant >= 6 {
		e.TimerID = eventstore.TimerID(timerShapes[(variant-6)%len(timerShapes)])
	}
	switch variant {
	case 1:
		e.WorkflowID = eventstore.WorkflowID{}
	case 2:
		e.TimerID = ""
	}
	ctx, cancel := ctxFor(m.ctx, mode, 0)
	defer cancel()
	err := m.s.ScheduleTimer(ctx, e.WorkflowID, e.TimerID, e.FireAt, e.ArmedSeq)
	what := fmt.Sprintf("ScheduleTimer(%s, fireAt %v, armedSeq %d)", short(string(e.TimerID)), e.FireAt, e.ArmedSeq)
	switch {
	case doneErr(mode) != nil:
		return refused(err, doneErr(mode), what)
	case e.WorkflowID.IsZero() || e.TimerID == "":
		return refused(err, eventstore.ErrInvalidArgument, what)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	}
	m.timers[timerKey{e.WorkflowID, e.TimerID}] = e
	return nil
}

// retire retires an armed timer as armed (variant 0), with its fireAt
// moved by a microsecond (1), its armedSeq differing in bit 32 (2) or 63
// (3), or a timer not armed: an ID differing only in case or separator (4);
// 5 uses an empty ID (ErrInvalidArgument).
func (m *esModel) retire(variant int, seed uint64) error {
	g := m.g.sub(seed)
	armed := make([]eventstore.TimerEntry, 0, len(m.timers))
	for _, e := range m.timers {
		armed = append(armed, e)
	}
	slices.SortFunc(armed, timerOrder)
	e := eventstore.TimerEntry{WorkflowID: m.wf(0).id, TimerID: "never-armed", FireAt: g.time()}
	if len(armed) > 0 {
		e = pick(g, armed...)
	}
	switch variant % 6 {
	case 1:
		e.FireAt = e.FireAt.Add(time.Microsecond)
	case 2:
		e.ArmedSeq ^= 1 << 32
	case 3:
		e.ArmedSeq ^= 1 << 63
	case 4:
		e.TimerID = eventstore.TimerID(lookalike.Replace(string(e.TimerID)))
	case 5:
		e.TimerID = ""
	}
	got, err := m.s.RetireTimer(m.ctx, e.WorkflowID, e.TimerID, e.FireAt, e.ArmedSeq)
	what := fmt.Sprintf("RetireTimer(%s, %v, armedSeq %d)", short(string(e.TimerID)), e.FireAt, e.ArmedSeq)
	if e.TimerID == "" {
		return refused(err, eventstore.ErrInvalidArgument, what)
	}
	k := timerKey{e.WorkflowID, e.TimerID}
	want := eventstore.TimerAbsent
	if a, ok := m.timers[k]; ok {
		want = eventstore.TimerSuperseded
		if a.FireAt.Equal(e.FireAt) && a.ArmedSeq == e.ArmedSeq {
			want = eventstore.TimerRetired
			delete(m.timers, k)
		}
	}
	if err != nil || got != want {
		return fmt.Errorf("%s = %v, %v; want %v (armed: %+v)", what, got, err, want, m.timers[k])
	}
	return nil
}

// expired lists the due timers as of an armed timer's FireAt (variant 0),
// a microsecond before it (1), the zero time (2) or far ahead (3).
func (m *esModel) expired(variant int, seed uint64, mode ctxMode) error {
	g := m.g.sub(seed)
	asOf := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, e := range m.timers {
		if g.IntN(len(m.timers)) == 0 {
			asOf = e.FireAt
		}
	}
	switch variant % 4 {
	case 1:
		asOf = asOf.Add(-time.Microsecond)
	case 2:
		asOf = time.Time{}
	case 3:
		asOf = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return m.expiredAsOf(asOf, mode)
}

// expiredAsOf calls ExpiredTimers(asOf) and judges the answer.
func (m *esModel) expiredAsOf(asOf time.Time, mode ctxMode) error {
	want := []eventstore.TimerEntry{}
	for _, e := range m.timers {
		if !e.FireAt.After(asOf) && !m.noScope {
			want = append(want, e)
		}
	}
	slices.SortFunc(want, timerOrder)
	return twice(m.ctx, mode, 0, false, func(ctx context.Context) ([]eventstore.TimerEntry, error) { return m.s.ExpiredTimers(ctx, asOf) },
		func(got []eventstore.TimerEntry) string {
			for i := 1; i < len(got); i++ {
				if got[i].FireAt.Before(got[i-1].FireAt) {
					return fmt.Sprintf("ExpiredTimers(%v) is not earliest first: %v after %v", asOf, got[i].FireAt, got[i-1].FireAt)
				}
			}
			got = slices.DeleteFunc(slices.Clone(got), func(e eventstore.TimerEntry) bool { return m.byID[e.WorkflowID] == nil })
			slices.SortStableFunc(got, timerOrder)
			if d := diff(got, want); d != "" {
				return fmt.Sprintf("ExpiredTimers(%v), this rule's timers: %s", asOf, d)
			}
			return ""
		})
}

// pkg is one generated package operation: variant 0 puts, 1 puts with
// routes (one of them empty for 2: nothing stored), 3 routes, 4 deletes, 5
// lists; typ and hash (key shapes, salted here) name the package when set.
func (m *esModel) pkg(variant int, seed uint64, typ, hash string, mode ctxMode) error {
	g := m.g.sub(seed)
	if typ == "" {
		typ, hash = pick(g, keyShapes...), pick(g, keyShapes...)
	}
	// The hash before the salt, so that ("a/b", "c") and ("a", "b/c")
	// still join to one string.
	typ, hash = m.g.salt+typ, hash+m.g.salt
	rec := filled[eventstore.PackageRecord](g)
	rec.WorkflowType, rec.ContentHash = typ, hash
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = time.Unix(1, 0)
	}
	hashStored := func(h string, except [2]string) bool {
		for k := range m.packages {
			if k != except && k[1] == h {
				return true
			}
		}
		return false
	}
	ctx, cancel := ctxFor(m.ctx, mode, 0)
	defer cancel()
	k := [2]string{typ, hash}
	what := fmt.Sprintf("package (%s, %s)", short(typ), short(hash))
	var err error
	switch variant % 6 {
	case 0, 1, 2:
		routes := []string{g.key(m.g.salt), g.key(m.g.salt)}
		if variant%6 == 2 {
			routes = append(routes, "")
		}
		given, givenRoutes := deepCopy(rec), slices.Clone(routes)
		if variant%6 == 0 {
			err = m.s.PutPackage(ctx, rec)
		} else {
			err = m.s.PutPackageWithRoutes(ctx, rec, routes)
		}
		if d := diff(rec, given) + diff(routes, givenRoutes); d != "" {
			return fmt.Errorf("putting %s changed the caller's arguments: %s", what, d)
		}
		scribble(rec)
		switch {
		case doneErr(mode) != nil:
			return refused(err, doneErr(mode), "putting "+what)
		case variant%6 == 2:
			return errors.Join(refused(err, eventstore.ErrInvalidArgument, "PutPackageWithRoutes with an empty route"), m.listPackages(ctxLive))
		case err != nil:
			return fmt.Errorf("putting %s: %w", what, err)
		}
		m.packages[k] = given
		if variant%6 == 1 {
			for _, r := range routes {
				m.routes[r] = hash
			}
		}
	case 3:
		rt := g.key(m.g.salt)
		err = m.s.PutPackageRoute(ctx, rt, hash)
		switch {
		case doneErr(mode) != nil:
			return refused(err, doneErr(mode), "PutPackageRoute")
		case !hashStored(hash, [2]string{}):
			return refused(err, eventstore.ErrNotFound, fmt.Sprintf("PutPackageRoute to %s, which no package has", short(hash)))
		case err != nil:
			return fmt.Errorf("PutPackageRoute(%s, %s): %w", short(rt), short(hash), err)
		}
		m.routes[rt] = hash
	case 4:
		_, stored := m.packages[k]
		routed := slices.Contains(mapValues(m.routes), hash)
		if stored && routed && !hashStored(hash, k) {
			return m.listPackages(mode) // deleting the last package of a routed hash is the store's choice
		}
		err = m.s.DeletePackage(ctx, typ, hash)
		switch {
		case doneErr(mode) != nil:
			return refused(err, doneErr(mode), "DeletePackage")
		case !stored:
			return refused(err, eventstore.ErrNotFound, "DeletePackage of "+what+", not stored")
		case err != nil:
			return fmt.Errorf("DeletePackage of %s: %w", what, err)
		}
		delete(m.packages, k)
	default:
		return m.listPackages(mode)
	}
	return nil
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func (m *esModel) listPackages(mode ctxMode) error {
	ours := func(s string) bool { return strings.HasPrefix(s, m.g.salt) }
	want := mapValues(m.packages)
	byKey := func(a, b eventstore.PackageRecord) int {
		return strings.Compare(a.WorkflowType+"\xff\xff"+a.ContentHash, b.WorkflowType+"\xff\xff"+b.ContentHash)
	}
	slices.SortFunc(want, byKey)
	if err := twice(m.ctx, mode, 0, false, m.s.ListPackages, func(got []eventstore.PackageRecord) string {
		got = slices.DeleteFunc(slices.Clone(got), func(p eventstore.PackageRecord) bool { return !ours(p.WorkflowType) })
		slices.SortFunc(got, byKey)
		if d := diff(got, want); d != "" {
			return "ListPackages, this rule's packages: " + d
		}
		return ""
	}); err != nil {
		return err
	}
	var routes []eventstore.PackageRoute
	for t, h := range m.routes {
		routes = append(routes, eventstore.PackageRoute{WorkflowType: t, ContentHash: h})
	}
	byType := func(a, b eventstore.PackageRoute) int { return strings.Compare(a.WorkflowType, b.WorkflowType) }
	slices.SortFunc(routes, byType)
	return twice(m.ctx, mode, 0, false, m.s.ListPackageRoutes, func(got []eventstore.PackageRoute) string {
		got = slices.DeleteFunc(slices.Clone(got), func(r eventstore.PackageRoute) bool { return !ours(r.WorkflowType) })
		slices.SortFunc(got, byType)
		if d := diff(got, routes); d != "" {
			return "ListPackageRoutes, this rule's routes: " + d
		}
		return ""
	})
}

// badShards are shard numbers no store has: a store keeping shards in 32
// bits turns 1<<32 into shard 0.
var badShards = []int{-1, math.MinInt, 1 << 32, math.MaxInt}

// shard runs one single-node ShardOwner operation: variant 0 acquires
// shard 0 through AcquireOwnedShards and 8 through AcquireOwnedShard, 1 a
// list holding a bad shard (none acquired), 2 publishes shard 0, 3 a bad
// shard, 4 sets the empty scope (no workflow listed) and 5 clears it, 6
// widens the clear scope (no change), 7 sets the empty scope with a done
// context (no change). Then IsCurrentOwner must follow, of shard 0 and of bad shards,
// and false with a done context.
func (m *esModel) shard(variant int, seed uint64) error {
	so := m.so
	g := m.g.sub(seed)
	bad := pick(g, badShards...)
	done, cancel := context.WithCancel(m.ctx)
	cancel()
	var err error
	switch variant % 9 {
	case 0, 8:
		if variant%9 == 8 {
			err = so.AcquireOwnedShard(m.ctx, 0)
		} else {
			err = so.AcquireOwnedShards(m.ctx, []int{0})
		}
		if err != nil {
			return fmt.Errorf("acquiring shard 0: %w", err)
		}
		m.shard0 = true
	case 1:
		list := pick(g, []int{bad}, []int{0, bad}, []int{bad, 0})
		if len(list) == 1 && seed%2 == 1 {
			err = so.AcquireOwnedShard(m.ctx, bad)
		} else {
			err = so.AcquireOwnedShards(m.ctx, list)
		}
		if err := refused(err, eventstore.ErrInvalidArgument, fmt.Sprintf("acquiring shards %v", list)); err != nil {
			return err
		}
	case 2:
		err = so.PublishShardOwner(m.ctx, 0)
		if m.shard0 && err != nil {
			return fmt.Errorf("PublishShardOwner(0) after acquiring it: %w", err)
		}
		if !m.shard0 {
			if err := refused(err, eventstore.ErrNotOwner, "PublishShardOwner(0) before acquiring it"); err != nil {
				return err
			}
		}
	case 3:
		if err := refused(so.PublishShardOwner(m.ctx, bad), eventstore.ErrInvalidArgument, fmt.Sprintf("PublishShardOwner(%d)", bad)); err != nil {
			return err
		}
	case 4, 5:
		var scope []int
		if variant%9 == 4 {
			scope = []int{}
		}
		so.SetOwnedShards(m.ctx, scope)
		m.noScope = scope != nil
		return errors.Join(m.listings(ctxLive), m.expired(3, seed, ctxLive), m.query(0, seed, ctxLive))
	case 6:
		if m.noScope {
			so.SetOwnedShards(m.ctx, nil)
			m.noScope = false
		}
		so.ExtendOwnedShards(m.ctx, []int{0})
		return m.listings(ctxLive)
	case 7:
		so.SetOwnedShards(done, pick(g, []int{}, nil))
		so.ExtendOwnedShards(done, []int{0})
		return m.listings(ctxLive)
	}
	if got := so.IsCurrentOwner(m.ctx, 0); got != m.shard0 {
		return fmt.Errorf("IsCurrentOwner(0) = %v, want %v", got, m.shard0)
	}
	if so.IsCurrentOwner(done, 0) {
		return errors.New("IsCurrentOwner(0) with a cancelled context = true, want false")
	}
	if so.IsCurrentOwner(m.ctx, bad) {
		return fmt.Errorf("IsCurrentOwner(%d) = true, but no store has that shard", bad)
	}
	return nil
}

// prune removes closed workflows through PruneClosed with a cutoff at a
// closed run's ClosedAt (variant 0: that one stays), a microsecond after
// it (1), far ahead (2) or the zero time (3).
func (m *esModel) prune(variant int, seed uint64) error {
	if m.pr == nil {
		return skipf(0, "%T has no PruneClosed method (retention is optional)", m.s)
	}
	g := m.g.sub(seed)
	prunable := func(w *esWf) (time.Time, bool) {
		if w.head() == 0 {
			return time.Time{}, false
		}
		r := w.runs[len(w.runs)-1]
		return r.ClosedAt, r.Status.Closed() && r.Status != eventstore.StatusContinuedAsNew
	}
	cutoff := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	var closed []time.Time
	for _, w := range m.wfs {
		if at, ok := prunable(w); ok {
			closed = append(closed, at)
		}
	}
	if len(closed) > 0 {
		cutoff = pick(g, closed...)
	}
	switch variant % 4 {
	case 1:
		cutoff = cutoff.Add(time.Microsecond)
	case 2:
		cutoff = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	case 3:
		cutoff = time.Time{}
	}
	var gone []*esWf
	for _, w := range m.wfs {
		if at, ok := prunable(w); ok && at.Before(cutoff) {
			gone = append(gone, w)
		}
	}
	if n := m.pr.PruneClosed(cutoff); n != len(gone) {
		return fmt.Errorf("PruneClosed(%v) = %d, want %d (the workflows whose current run closed strictly before)", cutoff, n, len(gone))
	}
	var errs []error
	for _, w := range gone {
		*w = esWf{id: w.id, wfType: w.wfType}
		m.rows = slices.DeleteFunc(m.rows, func(r *eventstore.OutboxRow) bool {
			if r.WorkflowID == w.id {
				delete(m.rowByKey, r.DispatchKey)
				delete(m.rowsOf, actKey{w.id, rowRef{r.RunID, r.Ordinal}})
				return true
			}
			return false
		})
		for k := range m.timers {
			if k.wf == w.id {
				delete(m.timers, k)
			}
		}
		errs = append(errs, m.readAll(w, ctxLive), m.chain(w, ctxLive))
	}
	if m.ob != nil {
		errs = append(errs, m.count())
	}
	return errors.Join(errs...)
}
