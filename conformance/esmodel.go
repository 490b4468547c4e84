package conformance

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
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
// run's WorkflowStarted), so no verdict rests on a choice left to the
// store; within that, lifecycle events come in every order and now and
// then name an earlier run, as the Memory doc's Runs section has them.

// ClosedPruner is the optional retention capability of an event store
// (eventstore.Memory has it), checked when a store has the method
// ([RuleESRetention], and in the model): PruneClosed removes every workflow
// whose current run closed (not continued as new) strictly before before,
// with all it holds, and returns how many; each is then as if never written.
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
		w := &esWf{id: m.g.workflow(), wfType: m.g.salt + wfTypes[len(m.wfs)%len(wfTypes)]}
		m.wfs = append(m.wfs, w)
		m.byID[w.id] = w
	}
	return m.wfs[i]
}

// wfTypes are the workflow types, by workflow: two differing in case only,
// two sharing their first 300 bytes (a column cut at 255 merges them).
var wfTypes = []string{"order", "Order", "ü/x", keyShapes[len(keyShapes)-2], keyShapes[len(keyShapes)-1]}

// The event kinds the generator emits, by name: each makes one event (two
// for continue-as-new), filled field by field, then given its lifecycle
// fields.
const (
	kStart, kSignal, kSchedule, kTimer, kFired, kTrigger = "start", "signal", "schedule", "timer", "fired", "trigger"
	kDone, kFail, kRetry, kCancelAct, kTimeoutAct        = "activity-completed", "activity-failed", "activity-retry", "activity-cancelled", "activity-timed-out"
	kPause, kResume, kReopen, kContinue                  = "pause", "resume", "reopen", "continue-as-new"
	kComplete, kFailWf, kCancelWf, kTimeoutWf            = "complete", "fail", "cancel", "time-out"
	// kLate, alone or before a plain kind, is an event of an earlier run
	// than the current one (of that kind, or drawn); of the current run
	// when there is none.
	kLate = "late "
	// kRestart is a WorkflowStarted of the current run again, which
	// restarts it in place; kCanAlone a continue-as-new before the next
	// run has an event (its NewRunID creates no run).
	kRestart, kCanAlone = "restart", "continued-as-new alone"
)

// nextKind draws a kind; a long-lived workflow is seldom paused or closed.
// One time in ten it draws a lifecycle event out of the usual order: a
// pause, resume or reopen where it changes nothing, a close of a paused or
// closed run, an event of an earlier run.
func nextKind(st *life, g *gen, long bool) string {
	switch {
	case st.status == "":
		return kStart
	case g.IntN(10) == 0 && (!long || g.IntN(8) == 0):
		return pick(g, kPause, kResume, kReopen, kLate, kLate, kRestart, pick(g, kComplete, kFailWf, kCancelWf, kTimeoutWf, kCanAlone))
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

// plainKinds make one event whose fields are all drawn.
var plainKinds = map[string]func(*gen, eventstore.Envelope) eventstore.Event{
	kSignal: plain[eventstore.SignalReceived], kTimer: plain[eventstore.TimerScheduled], kFired: plain[eventstore.TimerFired],
	kTrigger: plain[eventstore.ScheduleTriggered], kPause: plain[eventstore.WorkflowPaused], kResume: plain[eventstore.WorkflowResumed],
	kReopen: plain[eventstore.WorkflowReopened], kComplete: plain[eventstore.WorkflowCompleted], kFailWf: plain[eventstore.WorkflowFailed],
	kCancelWf: plain[eventstore.WorkflowCancelled], kTimeoutWf: plain[eventstore.WorkflowTimedOut],
	kCanAlone: plain[eventstore.WorkflowContinuedAsNew],
}

func plain[E eventstore.Event](g *gen, env eventstore.Envelope) eventstore.Event {
	return mk[E](g, env, nil)
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
	// An activity's end names an open activity, or one that ends nothing
	// the model tracks.
	act := func() eventstore.ActivityID {
		if len(st.open) == 0 {
			return st.next
		}
		return pick(g, st.open...)
	}
	started := func(e *eventstore.WorkflowStarted) { e.WorkflowType = w.wfType }
	var evs []eventstore.Event
	var jump eventstore.ActivityID
	var early []eventstore.RunID // the runs a late event may name
	if k, late := strings.CutPrefix(kind, kLate); late {
		kind = cmp.Or(k, pick(g, kSignal, kPause, kResume, kReopen, kComplete, kFailWf))
		for _, r := range w.runs {
			if r.RunID != st.run {
				early = append(early, r.RunID)
			}
		}
	}
	switch kind {
	case kStart:
		st.run = g.run()
		evs = []eventstore.Event{mk(g, env(true), started)}
	case kRestart:
		evs = []eventstore.Event{mk(g, env(true), started)}
	case kContinue:
		next := g.run()
		can := mk(g, env(true), func(e *eventstore.WorkflowContinuedAsNew) { e.NewRunID = next })
		first := env(true)
		first.RunID = next
		evs = []eventstore.Event{can, mk(g, first, started)}
	case kSchedule:
		// The next ordinal past 2^32 or 2^63 now and then: a store keeping
		// them narrower settles or dispatches the wrong row.
		id := st.next
		switch r := g.IntN(10); {
		case r == 0 && id < 1<<62:
			jump = 1<<32 - 1
		case r == 1 && id < 1<<63:
			jump = 1<<63 - 1
		}
		evs = []eventstore.Event{mk(g, env(g.IntN(4) != 0), func(e *eventstore.ActivityScheduled) { e.ActivityID = id })}
	case kDone:
		evs = []eventstore.Event{mk(g, env(true), func(e *eventstore.ActivityCompleted) { e.ActivityID = act() })}
	case kFail, kRetry:
		kindOf := map[string]eventstore.ActivityErrorKind{kFail: eventstore.Terminal, kRetry: eventstore.Retryable}[kind]
		evs = []eventstore.Event{mk(g, env(true), func(e *eventstore.ActivityFailed) { e.ActivityID, e.Error.Kind = act(), kindOf })}
	case kCancelAct:
		evs = []eventstore.Event{mk(g, env(true), func(e *eventstore.ActivityCancelled) { e.ActivityID = act() })}
	case kTimeoutAct:
		evs = []eventstore.Event{mk(g, env(true), func(e *eventstore.ActivityTimedOut) { e.ActivityID = act() })}
	default:
		evs = []eventstore.Event{plainKinds[kind](g, env(kind != kSignal || g.IntN(4) != 0))}
	}
	if len(early) > 0 {
		e := evs[0].EventEnvelope()
		e.RunID = pick(g, early...)
		evs[0] = eventstore.WithEnvelope(evs[0], e)
	}
	for _, ev := range evs {
		st.advance(ev)
	}
	st.next += jump
	return evs
}

// advance moves st past ev, as the contract's lifecycle does; an event of
// an earlier run leaves the current run as it is.
func (st *life) advance(ev eventstore.Event) {
	if _, ok := ev.(eventstore.WorkflowStarted); !ok && ev.EventEnvelope().RunID != st.run {
		return
	}
	st.status = statusAfter(st.status, ev)
	switch e := ev.(type) {
	case eventstore.WorkflowStarted:
		next := st.next // a run restarted in place keeps its ordinals
		if e.RunID != st.run {
			next = 0
		}
		*st = life{run: e.RunID, status: eventstore.StatusRunning, next: next}
	case eventstore.ActivityScheduled:
		st.open, st.next = append(slices.Clip(st.open), e.ActivityID), max(st.next, e.ActivityID+1)
	}
	if id, ok := settles(ev); ok {
		st.open = slices.DeleteFunc(slices.Clone(st.open), func(x eventstore.ActivityID) bool { return x == id })
	}
}

// statusAfter is the status of a run of status s after an event of it, as
// the Memory doc states the lifecycle: a close from any status, a pause of
// a running run only, a resume of a paused one, a reopen of a closed one.
func statusAfter(s eventstore.WorkflowStatus, ev eventstore.Event) eventstore.WorkflowStatus {
	to, moves := closingStatus(ev)
	switch ev.(type) {
	case eventstore.WorkflowStarted:
		to, moves = eventstore.StatusRunning, true
	case eventstore.WorkflowPaused:
		to, moves = eventstore.StatusPaused, s == eventstore.StatusRunning
	case eventstore.WorkflowResumed:
		to, moves = eventstore.StatusRunning, s == eventstore.StatusPaused
	case eventstore.WorkflowReopened:
		to, moves = eventstore.StatusRunning, s.Closed()
	}
	if !moves {
		return s
	}
	return to
}

// settles returns the activity a terminal event of it (not a retryable
// failure) ends.
func settles(ev eventstore.Event) (eventstore.ActivityID, bool) {
	switch e := ev.(type) {
	case eventstore.ActivityCompleted:
		return e.ActivityID, true
	case eventstore.ActivityFailed:
		return e.ActivityID, e.Error.Kind == eventstore.Terminal
	case eventstore.ActivityCancelled:
		return e.ActivityID, true
	case eventstore.ActivityTimedOut:
		return e.ActivityID, true
	}
	return 0, false
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
	kinds    []string // the kinds of the events, in order, all made; empty: n drawn
	seed     uint64
	rows     bool // a row for every ActivityScheduled event (most, with partial), through AppendWithOutbox
	partial  bool
	rowsOnly bool // no events, rows for activities scheduled earlier without one
	big      bool // a 1 MiB payload in every payload field met
	tied     bool // every event at tieAt, every row at one CreatedAt: ties on the keys Query and claims sort by
	flaw     esFlaw
	where    int
	mode     ctxMode
	trip     int
}

func (a esAppend) String() string {
	call, kinds, more := "Append", fmt.Sprint(a.kinds), ""
	if a.rows || a.rowsOnly || a.flaw >= esRowOtherWf {
		call = "AppendWithOutbox"
	}
	if len(a.kinds) > 6 {
		kinds = fmt.Sprintf("[%s and %d more]", a.kinds[0], len(a.kinds)-1)
	}
	if a.rowsOnly {
		more = ", rows only"
	}
	if a.flaw != esNoFlaw {
		more += fmt.Sprintf(", with %s at %d", esFlawNames[a.flaw], a.where)
	}
	if a.big {
		more += ", 1 MiB payloads"
	}
	return fmt.Sprintf("%s(workflow %d, %d events %s at %v%s)", call, a.wf, a.n, kinds, a.at, more)
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
		m.clock = m.clock.Add(time.Second + time.Millisecond + time.Microsecond) // microseconds a cut to the millisecond loses
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
	for i := 0; !a.rowsOnly && (a.kinds == nil && len(events) < a.n || i < len(a.kinds)); i++ {
		kind := ""
		if a.kinds == nil {
			kind = nextKind(&st, g, a.wf == 0)
		} else {
			kind = a.kinds[i]
		}
		for _, ev := range m.events(w, &st, g, kind) {
			events = append(events, ev)
			if s, ok := ev.(eventstore.ActivityScheduled); ok && a.rows && (!a.partial || g.IntN(4) != 0) {
				rows = append(rows, row(s.RunID, s.ActivityID))
			}
		}
	}
	if a.tied {
		for i, ev := range events {
			env := ev.EventEnvelope()
			env.RecordedAt = tieAt
			events[i] = eventstore.WithEnvelope(ev, env)
		}
		for i := range rows {
			rows[i].CreatedAt = rows[0].CreatedAt
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
		// Made again, it is still a conflict: a store does not remember
		// refusals either.
		return errors.Join(wantConflict(err, expected, head, "the append"), m.again(esDone{w, expected, givenE, givenR, outbox}, "the refused append made again"))
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

// retry makes an accepted append again, identical, at the expectedSeq it
// was accepted at (back appends before the last; none kept: a no-op).
func (m *esModel) retry(back int) error {
	if back >= len(m.done) {
		return nil
	}
	d := m.done[len(m.done)-1-back]
	if d.w.head() == d.expected {
		return nil // pruned since: not a retry any more
	}
	return m.again(d, fmt.Sprintf("the identical retry of an accepted append of %d events and %d rows", len(d.events), len(d.rows)))
}

// again makes d again, identical (events and rows, through the same
// method): the history moved on, so it is a conflict whose Found is the
// history length, and it writes nothing. A store that takes it as a retry
// already done answers nil, which the contract does not allow.
func (m *esModel) again(d esDone, what string) error {
	err := m.write(m.ctx, d.outbox, token, d.w.id, deepCopy(d.events), d.expected, deepCopy(d.rows))
	return errors.Join(wantConflict(err, d.expected, d.w.head(), what), m.readFrom(d.w, rel(0), ctxLive, 0))
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
		// The event's run: the current one, an earlier one (a late event),
		// or, for a WorkflowStarted, a new one. A run started again is
		// restarted in place: its type and StartedAt are the new event's.
		i := slices.IndexFunc(w.runs, func(r eventstore.RunSummary) bool { return r.RunID == env.RunID })
		if s, ok := ev.(eventstore.WorkflowStarted); ok {
			if i < 0 {
				i, w.runs = len(w.runs), append(w.runs, eventstore.RunSummary{RunID: env.RunID, FirstSeq: env.Seq})
			}
			w.runs[i].WorkflowType, w.runs[i].StartedAt = s.WorkflowType, env.RecordedAt
		}
		w.life.advance(ev)
		run := &w.runs[i]
		run.LastSeq, run.Status = env.Seq, statusAfter(run.Status, ev)
		switch _, closing := closingStatus(ev); {
		case closing:
			run.ClosedAt = env.RecordedAt
		case !run.Status.Closed():
			run.ClosedAt = time.Time{}
		}
		if s, ok := ev.(eventstore.ActivityScheduled); ok && len(m.rowsOf[actKey{w.id, rowRef{env.RunID, s.ActivityID}}]) == 0 {
			w.unrowed = append(w.unrowed, rowRef{env.RunID, s.ActivityID})
		}
		if id, ok := settles(ev); ok {
			for _, r := range m.rowsOf[actKey{w.id, rowRef{env.RunID, id}}] {
				if isOpenRow(r.State) {
					r.State = eventstore.OutboxSettled
				}
			}
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

func (m *esModel) readAll(w *esWf) error {
	return twice(m.ctx, ctxLive, 0, false, func(ctx context.Context) ([]eventstore.Event, error) {
		return m.s.ReadHistory(ctx, w.id)
	}, func(got []eventstore.Event) string { return m.history(w, 1, got) })
}

// histories reads n histories through ReadHistories, if the store has
// it: of the model's first n-2 workflows, an unknown one amid them and the
// first again, last.
func (m *esModel) histories(n int) error {
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
	return twice(m.ctx, ctxLive, 0, false, func(ctx context.Context) ([][]eventstore.Event, error) {
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

func (m *esModel) chain(w *esWf) error {
	return twice(m.ctx, ctxLive, 0, false, func(ctx context.Context) ([]eventstore.RunSummary, error) {
		return m.s.ReadRunChain(ctx, w.id)
	}, func(got []eventstore.RunSummary) string { return diff(got, w.runs) })
}

func (m *esModel) listings() error { return m.listed(true) }

// listed judges ListActive and ListPaused, and with every the listings
// of every workflow too (ListWorkflowIDs, StreamHeads).
func (m *esModel) listed(every bool) error {
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
	ours := func(id eventstore.WorkflowID) bool { return m.byID[id] != nil }
	byID := func(a, b eventstore.WorkflowID) int { return bytes.Compare(a[:], b[:]) }
	errs := []error{judgeSet(m, "ListActive", m.s.ListActive, ours, byID, active),
		judgeSet(m, "ListPaused", m.s.ListPaused, ours, byID, paused)}
	if every {
		errs = append(errs, judgeSet(m, "ListWorkflowIDs", m.s.ListWorkflowIDs, ours, byID, all),
			judgeSet(m, "StreamHeads", m.s.StreamHeads, func(h eventstore.StreamHead) bool { return ours(h.WorkflowID) },
				func(a, b eventstore.StreamHead) int { return byID(a.WorkflowID, b.WorkflowID) }, heads))
	}
	return errors.Join(errs...)
}

// judgeSet reads a listing twice and compares what of it is the rule's
// (ours), sorted by order, with want.
func judgeSet[T any](m *esModel, what string, read func(context.Context) ([]T, error), ours func(T) bool, order func(a, b T) int, want []T) error {
	slices.SortFunc(want, order)
	return twice(m.ctx, ctxLive, 0, false, read, func(got []T) string {
		got = slices.DeleteFunc(slices.Clone(got), func(v T) bool { return !ours(v) })
		slices.SortStableFunc(got, order)
		if d := diff(got, want); d != "" {
			return fmt.Sprintf("%s (this rule's, sorted): %s", what, d)
		}
		return ""
	})
}

// queryVariants is how many filters query draws from.
const queryVariants = 13

// queryLimits are the limits query adds to each filter (variant /
// queryVariants; 0 keeps the filter's): small ones against a store that
// applies the limit before a filter, ones at and past a page against a
// store that clamps it.
var queryLimits = []int{0, 1, 2, 512, 1000, 1001, 1025, 4097}

// query runs Query with a filter of the variant (and a limit of
// queryLimits) and checks every summary of the model's workflows it
// returns, and how many.
func (m *esModel) query(variant int, seed uint64) error {
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
	if l := queryLimits[variant/queryVariants%len(queryLimits)]; l > 0 {
		f.Limit = l
	}
	want := map[eventstore.WorkflowID]eventstore.WorkflowSummary{}
	for _, w := range started {
		r := w.runs[len(w.runs)-1]
		if (f.WorkflowType == "" || r.WorkflowType == f.WorkflowType) && (f.Status == "" || r.Status == f.Status) &&
			(f.StartedAfter.IsZero() || !r.StartedAt.Before(f.StartedAfter)) && (f.StartedBefore.IsZero() || r.StartedAt.Before(f.StartedBefore)) {
			want[w.id] = eventstore.WorkflowSummary{WorkflowID: w.id, RunID: r.RunID, WorkflowType: r.WorkflowType, Status: r.Status, StartedAt: r.StartedAt, ClosedAt: r.ClosedAt, Head: w.head()}
		}
	}
	return twice(m.ctx, ctxLive, 0, false, func(ctx context.Context) ([]eventstore.WorkflowSummary, error) { return m.s.Query(ctx, f) },
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
				if s == want[s.WorkflowID] {
					continue // equal without reflection: the common case, cheap at 4,097
				}
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
	if c := a.FireAt.Compare(b.FireAt); c != 0 {
		return c
	}
	return cmp.Or(bytes.Compare(a.WorkflowID[:], b.WorkflowID[:]), strings.Compare(string(a.TimerID), string(b.TimerID)))
}

// armed returns the armed timers, in timerOrder.
func (m *esModel) armed() []eventstore.TimerEntry {
	return slices.SortedFunc(maps.Values(m.timers), timerOrder)
}

// tieAt is the instant of the events of a tied append.
var tieAt = time.Unix(1_600_000_000, 1000).UTC()

// farAhead is a time after every one drawn.
var farAhead = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)

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

// cancelWf cancels the open rows of a workflow (every run), whose keys
// come back in staging order (as Memory and pgstore return them): variant
// 1 an unknown workflow (none), 2 the zero one (ErrInvalidArgument).
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
	var want []string
	for _, r := range m.rows {
		if r.WorkflowID == id && isOpenRow(r.State) {
			want = append(want, r.DispatchKey)
			r.State = eventstore.OutboxCancelled
		}
	}
	if err != nil {
		return fmt.Errorf("SettleWorkflowOutboxRowsCancelled: %w", err)
	}
	if d := diff(got, want); d != "" {
		return fmt.Errorf("SettleWorkflowOutboxRowsCancelled returned the keys %s: exactly the workflow's open rows, of every run, in staging order", d)
	}
	return m.count()
}

// timerShapes are the key shapes, and IDs differing from them only in
// spaces, that a store trimming or collapsing spaces merges.
var timerShapes = append(slices.Clip(keyShapes), " a", "a ", "a  b")

// schedule arms a timer with a key-shaped ID (timer shape variant-6 from
// variant 6 on); variant 1 uses the zero workflow and 2 the empty ID
// (ErrInvalidArgument, nothing armed).
func (m *esModel) schedule(w *esWf, variant int, seed uint64) error {
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
	err := m.s.ScheduleTimer(m.ctx, e.WorkflowID, e.TimerID, e.FireAt, e.ArmedSeq)
	what := fmt.Sprintf("ScheduleTimer(%s, fireAt %v, armedSeq %d)", short(string(e.TimerID)), e.FireAt, e.ArmedSeq)
	switch {
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
	e := eventstore.TimerEntry{WorkflowID: m.wf(0).id, TimerID: "never-armed", FireAt: g.time()}
	if armed := m.armed(); len(armed) > 0 {
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
func (m *esModel) expired(variant int, seed uint64) error {
	asOf := farAhead
	if armed := m.armed(); len(armed) > 0 {
		asOf = pick(m.g.sub(seed), armed...).FireAt
	}
	switch variant % 4 {
	case 1:
		asOf = asOf.Add(-time.Microsecond)
	case 2:
		asOf = time.Time{}
	case 3:
		asOf = farAhead
	}
	return m.expiredAsOf(asOf)
}

// expiredAsOf calls ExpiredTimers(asOf) and judges the answer.
func (m *esModel) expiredAsOf(asOf time.Time) error {
	var want []eventstore.TimerEntry
	for _, e := range m.timers {
		if !e.FireAt.After(asOf) && !m.noScope {
			want = append(want, e)
		}
	}
	return judgeSet(m, fmt.Sprintf("ExpiredTimers(%v)", asOf), func(ctx context.Context) ([]eventstore.TimerEntry, error) {
		got, err := m.s.ExpiredTimers(ctx, asOf)
		for i := 1; err == nil && i < len(got); i++ {
			if got[i].FireAt.Before(got[i-1].FireAt) {
				return nil, fmt.Errorf("ExpiredTimers(%v) is not earliest first: %v after %v", asOf, got[i].FireAt, got[i-1].FireAt)
			}
		}
		return got, err
	}, func(e eventstore.TimerEntry) bool { return m.byID[e.WorkflowID] != nil }, timerOrder, want)
}

// pkg is one generated package operation: variant 0 puts, 1 puts with
// routes (one of them empty for 2: nothing stored), 3 routes, 4 deletes, 5
// lists; typ and hash (key shapes, salted here) name the package when set.
func (m *esModel) pkg(variant int, seed uint64, typ, hash string) error {
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
			err = m.s.PutPackage(m.ctx, rec)
		} else {
			err = m.s.PutPackageWithRoutes(m.ctx, rec, routes)
		}
		if d := diff(rec, given) + diff(routes, givenRoutes); d != "" {
			return fmt.Errorf("putting %s changed the caller's arguments: %s", what, d)
		}
		scribble(rec)
		switch {
		case variant%6 == 2:
			return errors.Join(refused(err, eventstore.ErrInvalidArgument, "PutPackageWithRoutes with an empty route"), m.listPackages())
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
		err = m.s.PutPackageRoute(m.ctx, rt, hash)
		switch {
		case !hashStored(hash, [2]string{}):
			return refused(err, eventstore.ErrNotFound, fmt.Sprintf("PutPackageRoute to %s, which no package has", short(hash)))
		case err != nil:
			return fmt.Errorf("PutPackageRoute(%s, %s): %w", short(rt), short(hash), err)
		}
		m.routes[rt] = hash
	case 4:
		_, stored := m.packages[k]
		routed := slices.Contains(slices.Collect(maps.Values(m.routes)), hash)
		if stored && routed && !hashStored(hash, k) {
			return m.listPackages() // deleting the last package of a routed hash is the store's choice
		}
		err = m.s.DeletePackage(m.ctx, typ, hash)
		switch {
		case !stored:
			return refused(err, eventstore.ErrNotFound, "DeletePackage of "+what+", not stored")
		case err != nil:
			return fmt.Errorf("DeletePackage of %s: %w", what, err)
		}
		delete(m.packages, k)
	default:
		return m.listPackages()
	}
	return nil
}

func (m *esModel) listPackages() error {
	var routes []eventstore.PackageRoute
	for t, h := range m.routes {
		routes = append(routes, eventstore.PackageRoute{WorkflowType: t, ContentHash: h})
	}
	ours := func(t string) bool { return strings.HasPrefix(t, m.g.salt) }
	return errors.Join(judgeSet(m, "ListPackages", m.s.ListPackages, func(p eventstore.PackageRecord) bool { return ours(p.WorkflowType) },
		func(a, b eventstore.PackageRecord) int {
			return cmp.Or(strings.Compare(a.WorkflowType, b.WorkflowType), strings.Compare(a.ContentHash, b.ContentHash))
		}, slices.Collect(maps.Values(m.packages))),
		judgeSet(m, "ListPackageRoutes", m.s.ListPackageRoutes, func(r eventstore.PackageRoute) bool { return ours(r.WorkflowType) },
			func(a, b eventstore.PackageRoute) int { return strings.Compare(a.WorkflowType, b.WorkflowType) }, routes))
}

// badShards are shard numbers no store has: a store keeping shards in 32
// bits turns 1<<32 into shard 0.
var badShards = []int{-1, math.MinInt, 1 << 32, math.MaxInt}

// shard runs one single-node ShardOwner operation: variant 0 acquires
// shard 0 through AcquireOwnedShards and 7 through AcquireOwnedShard, 1 a
// list holding a bad shard (none acquired), 2 publishes shard 0, 3 a bad
// shard, 4 sets the empty scope (no workflow listed) and 5 clears it, 6
// widens the empty scope by no shard or the clear one by shard 0 (no
// change), each followed by every scoped read. Then IsCurrentOwner must
// follow, of shard 0 and of bad shards, and be false with a done context.
func (m *esModel) shard(variant int, seed uint64) error {
	so, g := m.so, m.g.sub(seed)
	bad := pick(g, badShards...)
	done, cancel := context.WithCancel(m.ctx)
	cancel()
	var err error
	switch variant % 8 {
	case 0, 7:
		if variant%8 == 7 {
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
		if variant%8 == 4 {
			scope = []int{}
		}
		so.SetOwnedShards(m.ctx, scope)
		m.noScope = scope != nil
		return errors.Join(m.listings(), m.expired(3, seed), m.query(0, seed))
	case 6:
		widen := []int{0}
		if m.noScope {
			widen = []int{}
		}
		so.ExtendOwnedShards(m.ctx, widen)
		return errors.Join(m.listings(), m.expired(3, seed))
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
	prunable := func(w *esWf) (time.Time, bool) {
		if w.head() == 0 {
			return time.Time{}, false
		}
		r := w.runs[len(w.runs)-1]
		return r.ClosedAt, r.Status.Closed() && r.Status != eventstore.StatusContinuedAsNew
	}
	cutoff := farAhead
	var closed []time.Time
	for _, w := range m.wfs {
		if at, ok := prunable(w); ok {
			closed = append(closed, at)
		}
	}
	if len(closed) > 0 {
		cutoff = pick(m.g.sub(seed), closed...)
	}
	switch variant % 4 {
	case 1:
		cutoff = cutoff.Add(time.Microsecond)
	case 2:
		cutoff = farAhead
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
		errs = append(errs, m.readAll(w), m.chain(w))
	}
	if m.ob != nil {
		errs = append(errs, m.count())
	}
	return errors.Join(errs...)
}

// doneCalls calls every method but the appends with a context done as mode
// says, on what the model holds (an armed timer, a stored package, a
// claimed row, shard 0): each must return the context's error, and
// IsCurrentOwner false; the reads after them check that nothing changed.
func (m *esModel) doneCalls(mode ctxMode) error {
	ctx, cancel := ctxFor(m.ctx, mode, 0)
	defer cancel()
	// The first armed timer, stored package and claimed row, or made-up
	// ones.
	w, t, key := m.wf(0), append(m.armed(), eventstore.TimerEntry{WorkflowID: m.wf(0).id, TimerID: "t"})[0], m.g.salt
	fresh := eventstore.PackageRecord{WorkflowType: m.g.salt + "t", ContentHash: "h" + m.g.salt, CreatedAt: time.Unix(1, 0)}
	stored := append(slices.Collect(maps.Values(m.packages)), fresh)[0]
	for _, r := range m.rows {
		if r.State == eventstore.OutboxClaimed {
			key = r.DispatchKey
		}
	}
	calls := map[string]error{
		"ReadHistory":          errOf(m.s.ReadHistory(ctx, w.id)),
		"ReadHistoryFrom":      errOf(m.s.ReadHistoryFrom(ctx, w.id, 1)),
		"ReadRunChain":         errOf(m.s.ReadRunChain(ctx, w.id)),
		"ListWorkflowIDs":      errOf(m.s.ListWorkflowIDs(ctx)),
		"ListActive":           errOf(m.s.ListActive(ctx)),
		"ListPaused":           errOf(m.s.ListPaused(ctx)),
		"StreamHeads":          errOf(m.s.StreamHeads(ctx)),
		"Query":                errOf(m.s.Query(ctx, eventstore.WorkflowFilter{})),
		"ScheduleTimer":        m.s.ScheduleTimer(ctx, w.id, t.TimerID+"x", t.FireAt, t.ArmedSeq),
		"ExpiredTimers":        errOf(m.s.ExpiredTimers(ctx, t.FireAt)),
		"RetireTimer":          errOf(m.s.RetireTimer(ctx, t.WorkflowID, t.TimerID, t.FireAt, t.ArmedSeq)),
		"PutPackage":           m.s.PutPackage(ctx, fresh),
		"PutPackageWithRoutes": m.s.PutPackageWithRoutes(ctx, fresh, []string{m.g.salt + "r"}),
		"PutPackageRoute":      m.s.PutPackageRoute(ctx, m.g.salt+"r", stored.ContentHash),
		"DeletePackage":        m.s.DeletePackage(ctx, stored.WorkflowType, stored.ContentHash),
		"ListPackages":         errOf(m.s.ListPackages(ctx)),
		"ListPackageRoutes":    errOf(m.s.ListPackageRoutes(ctx)),
	}
	if hr, ok := m.s.(eventstore.HistoriesReader); ok {
		calls["ReadHistories"] = errOf(hr.ReadHistories(ctx, []eventstore.WorkflowID{w.id}))
	}
	if m.ob != nil {
		calls["ClaimOutboxRows"] = errOf(m.ob.ClaimOutboxRows(ctx, 1))
		calls["RearmOutboxPending"] = m.ob.RearmOutboxPending(ctx, []eventstore.OutboxRow{{DispatchKey: key}})
		calls["SettleOutboxRowCancelled"] = m.ob.SettleOutboxRowCancelled(ctx, key)
		calls["SettleWorkflowOutboxRowsCancelled"] = errOf(m.ob.SettleWorkflowOutboxRowsCancelled(ctx, w.id))
		calls["CountClaimedOutboxRows"] = errOf(m.ob.CountClaimedOutboxRows(ctx))
	}
	var errs []error
	if m.so != nil {
		calls["AcquireOwnedShards"] = m.so.AcquireOwnedShards(ctx, []int{0})
		calls["AcquireOwnedShard"] = m.so.AcquireOwnedShard(ctx, 0)
		calls["PublishShardOwner"] = m.so.PublishShardOwner(ctx, 0)
		m.so.SetOwnedShards(ctx, []int{})
		m.so.ExtendOwnedShards(ctx, []int{0})
		if m.so.IsCurrentOwner(ctx, 0) {
			errs = append(errs, errors.New("IsCurrentOwner(0) with a done context = true, want false"))
		}
		if got := m.so.IsCurrentOwner(m.ctx, 0); got != m.shard0 {
			errs = append(errs, fmt.Errorf("IsCurrentOwner(0) = %v after calls with a done context, want %v", got, m.shard0))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		errs = append(errs, refused(calls[name], doneErr(mode), name+" with a done context"))
	}
	errs = append(errs, m.readAll(w), m.chain(w), m.listings(), m.expired(3, 0), m.listPackages())
	if m.ob != nil {
		errs = append(errs, m.count())
	}
	return errors.Join(errs...)
}

// errOf drops a result, for a call whose error alone matters.
func errOf[T any](_ T, err error) error { return err }
