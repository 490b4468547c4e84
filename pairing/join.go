package pairing

import (
	"container/heap"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// The join: what the tracker knows of each workflow, and the rules that
// turn facts into telemetry whatever order they arrive in.
//
// A fact is remembered until its partner arrives: a dispatch waits for its
// settler, a terminal or a retry for its dispatch, a close for its run's
// start. A pairing is decided from the facts that take part in it, by
// their history positions, never by arrival order:
//
//   - an activity's settler is the earliest, by position, of its terminal
//     and its run's closes that follow its dispatch (a close settles it as
//     abandoned); until a settler is known it is in flight;
//   - a run's settler is its earliest close that follows its start;
//   - a pairing is final, and its completion, duration and span recorded,
//     once every position between its two facts has been observed, so
//     that no unobserved fact can come between them (a terminal committed
//     before the close but observed after it). Facts without a position
//     (the per-fact methods) are final on arrival.
//
// State only moves forward (unpaired, in flight, settling, done), so a
// fact that repeats, or arrives late, can only complete what is missing.

// wfKey names a workflow in a namespace: the scope of history positions.
type wfKey struct {
	namespace string
	id        eventstore.WorkflowID
}

type workflow struct {
	// slot holds a workflow in the remembered queue while it has no runs:
	// a batch without facts still fills in its positions.
	slot
	key  wfKey
	seen seen
	// run1 is a run of the workflow, more its others, a map made for the
	// second run held at once: most workflows hold one, and a Go map of
	// one entry costs more than the run (see runs.go).
	run1 *run
	more map[eventstore.RunID]*run
	// sameID is the next workflow of the same ID in another namespace
	// (see wfIndex).
	sameID *workflow
	// waiting are the settling activities and closing runs: their
	// decision waits for positions not yet observed. Made for the first
	// (most workflows never have one), kept with the workflow for reuse.
	waiting *[]queued
	// fill is the token of the pending fill of a gap (fill.go), 0 if none;
	// fillTo the last position it is asked to fill; fillTried the last
	// position a fill was tried for (read or failed): a gap up to it is
	// not read again.
	fill, fillTo, fillTried uint64
}

// The states of a run's marker.
type runState uint8

const (
	runNone    runState = iota // no start, no close: a container for activities
	runPending                 // closed, start not known
	runOpen                    // started, no close follows: live
	runClosing                 // started and closed, positions between missing
	runDone                    // closed and recorded
)

// A run is what the tracker knows of one run. Its fields are what an open
// run, or a run holding one activity, needs (112 bytes); the rest (its
// closes, its settled activities, a second activity, the span held open,
// what the timeline keeps) is in x, taken when first needed (see
// runFacts).
type run struct {
	slot
	wf *workflow
	// act1 is an activity of the run; its others are in x.acts, a map
	// made for the second activity held at once (see runs.go).
	act1     *activity
	id       eventstore.RunID
	startPos position
	startAt  int64
	wa       *workflowAttrs
	ns       *nsAttrs  // for counting a drop of the run's facts
	gen      uint64    // bumped on reuse: a span started for an older use is not attached
	x        *runFacts // nil until needed
	opening  int32     // as activity.opening
	state    runState
	started  bool
	emitted  bool // the run's duration and span are recorded
	// unlinked is as activity.unlinked, for x.startCall.
	unlinked bool
}

// runFacts are what a run needs beyond what one open or holding one
// activity does. They are given back to the join with their run
// (join.freeRunIfEmpty) and reused.
type runFacts struct {
	acts   map[eventstore.ActivityID]*activity
	closes []closeFact // sorted by position, at most maxCloses
	// settled are the activities settled and recorded here, kept as ranges
	// of their IDs plus one rather than one entry each: a repeat of their
	// facts is recognised for as long as the run is remembered.
	settled seen
	span    trace.Span // the open run span, once attached
	// ids are what the run's spans share (rootCache), kept once a span of
	// the run looked them up: its later spans skip the lookup.
	ids  *runIDs
	peak int // most activities acts held at once since it was made
	// spanRef is the context of the run span, held open or made whole at
	// its close: the parent of its activity spans, which need no trace
	// state.
	spanRef   callRef
	startCall callRef
}

// runFacts returns r's facts beyond the usual, taking them from the
// join's free list or making them if r has none.
func (j *join) runFacts(r *run) *runFacts {
	if r.x == nil {
		if n := len(j.freeRunFacts); n > 0 {
			r.x = j.freeRunFacts[n-1]
			j.freeRunFacts[n-1] = nil
			j.freeRunFacts = j.freeRunFacts[:n-1]
		} else {
			r.x = &runFacts{}
		}
	}
	return r.x
}

// closes returns r's closes, sorted by position.
func (r *run) closes() []closeFact {
	if r.x == nil {
		return nil
	}
	return r.x.closes
}

// hasSettled reports whether r keeps settled activities as ranges.
func (r *run) hasSettled() bool { return r.x != nil && len(r.x.settled.ranges) > 0 }

// span returns the run span r holds open, nil if none.
func (r *run) span() trace.Span {
	if r.x == nil {
		return nil
	}
	return r.x.span
}

// spanRef returns the context of r's span: the one held open, or the one
// made whole at its close, kept as the parent of later activities.
func (r *run) spanRef() callRef {
	if r.x == nil {
		return callRef{}
	}
	return r.x.spanRef
}

// startCall returns the store call that wrote r's start.
func (r *run) startCall() callRef {
	if r.x == nil {
		return callRef{}
	}
	return r.x.startCall
}

// setStartCall records c as the store call that wrote r's start.
func (j *join) setStartCall(r *run, c callRef) {
	if r.x != nil || c != (callRef{}) {
		j.runFacts(r).startCall = c
	}
}

// forget drops r's closes, settled activities and spans, as the memory
// bound does.
func (r *run) forget() {
	if x := r.x; x != nil {
		x.closes, x.span, x.spanRef = x.closes[:0], nil, callRef{}
		x.settled.reset()
	}
}

// ids returns what r's spans share, if a span of r looked them up.
func (r *run) ids() *runIDs {
	if r.x == nil {
		return nil
	}
	return r.x.ids
}

// maxCloses bounds the closes a run remembers (a run reopened and closed
// again and again); past it the latest are not kept.
const maxCloses = 8

type closeFact struct {
	pos    position
	at     int64
	next   eventstore.RunID
	nextWF eventstore.WorkflowID
	status uint8 // index in statuses
	live   bool
	call   callRef
}

// The states of an activity.
type actState uint8

const (
	actUnpaired actState = iota // facts known, dispatch not
	actLive                     // dispatched, no settler known: in flight
	actSettling                 // settler known, positions between missing
	actDone                     // settled and recorded
)

// An activity is what the tracker knows of one activity. Its fields are
// what one in flight needs (128 bytes); the facts it rarely has while in
// flight (a terminal waiting for positions, retries, claims, a span held
// open) are in x, taken from the join when the first arrives (see
// activityFacts). Fields are ordered by size so that no padding is lost.
type activity struct {
	slot
	run  *run
	id   eventstore.ActivityID
	dpos position
	dat  int64
	ta   *typeAttrs
	gen  uint64
	x    *activityFacts // nil until one of its facts arrives
	// heapAt is its index in its type's heaps (byDispatch), by slot: at
	// most the activities in flight, a number the heap could not hold past
	// 2^31 (256 GiB of activities).
	heapAt [2]int32
	// opening is 1 + the index of the effect that opens its span, while
	// the call that added it holds the lock; 0 otherwise.
	opening int32

	state      actState
	dispatched bool
	counted    bool // aion.activities.dispatched counted for it
	// unlinked: its span was opened without a link to dcall (its dispatch
	// was read back first); the settlement adds it once known.
	unlinked bool
	hasTerm  bool // x.term is its terminal
	emitted  bool
	// spanQuiet: its span (x.span) records nothing (a sampler dropped it),
	// so its settlement only ends it and prepares no span work.
	spanQuiet bool

	// The outbox facts (claims.go): a row was staged for it, whether its
	// wait was recorded, and whether it is in its type's waiting heap (the
	// times its row was claimed are x.claims).
	staged  bool
	waited  bool
	waiting bool

	dcall callRef // last: its alignment is 1
}

// activityFacts are the facts an activity in flight rarely has. They are
// given back to the join with their activity (join.unlinkActivity) and
// reused, so that a steady flow of dispatches and terminals allocates none.
type activityFacts struct {
	term    termFact
	retries []retryFact // sorted by position, at most maxRetries
	claims  []int64     // times its row was claimed, sorted, at most maxClaims
	span    trace.Span  // held open (IDs not derived), until it settles
	spanSC  trace.SpanContext
	extra   uint32 // retries past maxRetries
}

// facts returns a's rarer facts, taking them from the join's free list or
// making them if a has none.
func (j *join) facts(a *activity) *activityFacts {
	if a.x == nil {
		if n := len(j.freeFacts); n > 0 {
			a.x = j.freeFacts[n-1]
			j.freeFacts[n-1] = nil
			j.freeFacts = j.freeFacts[:n-1]
		} else {
			a.x = &activityFacts{}
		}
	}
	return a.x
}

// retries returns a's retries, sorted by position.
func (a *activity) retries() []retryFact {
	if a.x == nil {
		return nil
	}
	return a.x.retries
}

// claims returns the times a's row was claimed, sorted.
func (a *activity) claims() []int64 {
	if a.x == nil {
		return nil
	}
	return a.x.claims
}

// extraRetries is the number of a's retries past maxRetries.
func (a *activity) extraRetries() uint32 {
	if a.x == nil {
		return 0
	}
	return a.x.extra
}

// span returns the span a holds open, nil if none.
func (a *activity) span() trace.Span {
	if a.x == nil {
		return nil
	}
	return a.x.span
}

// spanContext returns the context of the span a holds open.
func (a *activity) spanContext() trace.SpanContext {
	if a.x == nil {
		return trace.SpanContext{}
	}
	return a.x.spanSC
}

// dropSpan forgets the span a holds: moved to an effect, or dropped.
func (a *activity) dropSpan() {
	if a.x != nil {
		a.x.span, a.x.spanSC = nil, trace.SpanContext{}
	}
}

// maxRetries bounds the retries an activity remembers for its span events
// and for recognising a repeat; later ones are only counted.
const maxRetries = 32

type termFact struct {
	pos     position
	at      int64
	outcome uint8 // index in outcomes
	live    bool
	call    callRef
}

type retryFact struct {
	pos     position
	at      int64
	live    bool
	counted bool
}

// callRef is the span context of the store call that wrote a fact, kept
// small: a link to it needs no trace state.
type callRef struct {
	trace trace.TraceID
	span  trace.SpanID
	flags trace.TraceFlags
}

func callOf(sc trace.SpanContext) callRef {
	if !sc.IsValid() {
		return callRef{}
	}
	return callRef{trace: sc.TraceID(), span: sc.SpanID(), flags: sc.TraceFlags()}
}

func (c callRef) spanContext() trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: c.trace, SpanID: c.span, TraceFlags: c.flags})
}

// settler is what settles an activity: its terminal, or a close of its run
// (outcome abandoned).
type settler struct {
	ok      bool
	pos     position
	at      int64
	outcome int
	call    callRef
	live    bool
}

// settler returns a's settler, if one is known. a is dispatched.
func (a *activity) settler() settler {
	var s settler
	if a.hasTerm && a.x.term.pos.follows(a.dpos) {
		t := &a.x.term
		s = settler{ok: true, pos: t.pos, at: t.at, outcome: int(t.outcome), call: t.call, live: t.live}
	}
	for _, c := range a.run.closes() {
		if !c.pos.follows(a.dpos) {
			continue
		}
		if !s.ok || c.pos.before(s.pos) {
			s = settler{ok: true, pos: c.pos, at: c.at, outcome: abandonedIndex, call: c.call, live: c.live}
		}
		break // closes are sorted: the first that follows is the earliest
	}
	return s
}

// closer returns the close that settles run r (started), if one is known.
func (r *run) closer() (closeFact, bool) {
	for _, c := range r.closes() {
		if c.pos.follows(r.startPos) {
			return c, true
		}
	}
	return closeFact{}, false
}

// join holds everything the tracker knows, under one mutex. No method
// calls an instrument, a tracer or other user code: each appends what is
// to be recorded to the effects, which the tracker applies after
// unlocking.
type join struct {
	mu         sync.Mutex
	workflows  wfIndex
	live       queue // activities in flight and open runs
	remembered queue // everything else
	arrival    uint64
	active     int // activities in flight
	ages       map[*typeAttrs]*byDispatch
	spans      bool // timeline on: settled activities and closed runs get spans
	// ids is what the timeline learned of the provider's span IDs (nil
	// without a timeline). While they are derived, an activity in flight
	// or an open run holds no span: its span context is known without one
	// (Tracker.ActivitySpanContext, the run's root), and its span is made
	// whole, with its start time, when it settles or closes.
	ids *atomic.Int32

	waits map[*typeAttrs]*byDispatch // activities waiting for a worker (claims.go)

	fillSeq      uint64 // the last fill token given
	pendingFills int    // fills queued or running

	freeWorkflows []*workflow
	freeRuns      []*run
	freeActs      []*activity
	freeFacts     []*activityFacts
	freeRunFacts  []*runFacts
}

// Reuse bounds: at most maxFree workflows, runs, activities, and side
// structs of each of the last two, wait for reuse, and a run's facts keep
// its activity map for the next run only if it never held more than
// maxRunPeak activities (Go maps never shrink).
const (
	maxFree    = 1024
	maxRunPeak = 8
)

func newJoin(maxLive, maxRemembered int, spans bool) *join {
	return &join{
		workflows:  wfIndex{m: make(map[eventstore.WorkflowID]*workflow)},
		live:       queue{max: maxLive},
		remembered: queue{max: maxRemembered},
		ages:       make(map[*typeAttrs]*byDispatch),
		waits:      make(map[*typeAttrs]*byDispatch),
		spans:      spans,
	}
}

// derived reports whether the provider is known to derive the timeline's
// span IDs: then no span is opened before it ends.
func (j *join) derived() bool { return j.ids != nil && j.ids.Load() == idsDerived }

// workflowOf returns the workflow k, making it if missing.
func (j *join) workflowOf(k wfKey) *workflow {
	w := j.workflows.get(k)
	if w == nil {
		if n := len(j.freeWorkflows); n > 0 {
			w = j.freeWorkflows[n-1]
			j.freeWorkflows = j.freeWorkflows[:n-1]
		} else {
			w = &workflow{}
		}
		w.key = k
		j.workflows.put(w)
	}
	return w
}

// runOf returns w's run id, making it if missing.
func (j *join) runOf(w *workflow, id eventstore.RunID) *run {
	r := w.run(id)
	if r == nil {
		if n := len(j.freeRuns); n > 0 {
			r = j.freeRuns[n-1]
			j.freeRuns = j.freeRuns[:n-1]
		} else {
			r = &run{}
		}
		r.wf, r.id = w, id
		if r.x != nil {
			r.x.ids = nil
		}
		w.addRun(r)
	}
	return r
}

// live counts w's activities in flight and open runs.
func (w *workflow) live() (activities, runs int) {
	for r := range w.runs {
		if r.state == runOpen {
			runs++
		}
		for a := range r.activities {
			if a.state == actLive {
				activities++
			}
		}
	}
	return activities, runs
}

// activityOf returns r's activity id, making it if missing; nil if it is
// settled and recorded, so that its facts are repeats.
func (j *join) activityOf(r *run, id eventstore.ActivityID) *activity {
	a := r.activity(id)
	if a == nil {
		if r.isSettled(id) {
			return nil
		}
		if n := len(j.freeActs); n > 0 {
			a = j.freeActs[n-1]
			j.freeActs = j.freeActs[:n-1]
		} else {
			a = &activity{}
		}
		a.run, a.id = r, id
		j.addActivity(r, a)
	}
	return a
}

// isSettled reports whether activity id of r was settled and recorded.
func (r *run) isSettled(id eventstore.ActivityID) bool {
	return id != ^eventstore.ActivityID(0) && r.x != nil && r.x.settled.covers(uint64(id)+1, uint64(id)+1)
}

// retire keeps a settled and recorded activity as a range of its run's
// settled IDs instead of an entry, once the call that settled it is done
// with it (the facts of the same batch may still name it). An activity
// with a fact read back (a gap filled, a resume) stays an entry: that fact
// may still be observed committing here (a batch that returns late), and
// then counts, which a range could not tell from a repeat.
func (j *join) retire(fx *effects) {
	for _, a := range fx.retired {
		if a.state != actDone || !a.emitted || !a.counted || a.id == ^eventstore.ActivityID(0) || !a.retriesLive() {
			continue
		}
		r := a.run
		j.runFacts(r).settled.add(uint64(a.id)+1, uint64(a.id)+1, maxSettledRanges)
		if r.state == runNone {
			j.place(r, &j.remembered) // remembered for its settled activities
		}
		remove(&a.slot)
		j.freeActivity(a)
	}
}

// dispatch applies a dispatch fact and reports whether it is new and
// whether it put the activity in flight.
func (j *join) dispatch(w *workflow, f *fact, fx *effects) (isNew, inFlight bool) {
	a := j.activityOf(j.runOf(w, f.run), f.activity)
	if a == nil {
		return false, false
	}
	if f.live && !a.counted {
		a.counted = true
		if a.dispatched && !a.dcall.span.IsValid() {
			a.dcall = f.call // read back first: the call that wrote it
		}
		ta := f.ta
		if a.dispatched {
			ta = a.ta
			j.recordWait(a, fx) // its dispatch is seen committing now
		}
		fx.add(effect{op: opDispatched, ta: ta})
	}
	if a.dispatched {
		return false, false
	}
	a.dispatched, a.dpos, a.dat, a.ta, a.dcall = true, f.pos, f.at, f.ta, f.call
	// Every type dispatched has an age point (0 while none is in flight),
	// whether or not an activity of it was ever in flight here.
	if j.ages[f.ta] == nil {
		j.ages[f.ta] = &byDispatch{slot: slotInFlight}
	}
	j.joinOutbox(a, fx) // a row staged or claimed before the dispatch arrived
	// Retries that arrived first are counted now that the type is known.
	s := a.settler()
	for i := range a.retries() {
		j.countRetry(a, &a.x.retries[i], s, fx)
	}
	return true, j.resolveActivity(a, fx)
}

// terminal applies a terminal fact and reports whether it took its
// activity out of flight.
func (j *join) terminal(w *workflow, f *fact, fx *effects) bool {
	a := j.activityOf(j.runOf(w, f.run), f.activity)
	switch {
	case a == nil:
		return false
	case a.hasTerm && f.pos.known() && f.pos.seq == a.x.term.pos.seq:
		if !f.live || a.x.term.live {
			return false // a repeat
		}
		a.x.term.live = true // seen committing here: its completion is ours
		a.x.term.call = f.call
	case a.state == actDone:
		return false
	case a.dispatched && !f.pos.follows(a.dpos):
		return false // before its own dispatch: not a terminal of it
	case a.hasTerm && !f.pos.before(a.x.term.pos):
		return false // a later terminal: the earliest settles
	default:
		a.hasTerm = true
		j.facts(a).term = termFact{pos: f.pos, at: f.at, outcome: uint8(f.outcome), call: f.call, live: f.live}
	}
	before := a.state
	j.resolveActivity(a, fx)
	return before == actLive && a.state != actLive
}

// retry applies a retry fact and reports whether it was counted.
func (j *join) retry(w *workflow, f *fact, fx *effects) bool {
	a := j.activityOf(j.runOf(w, f.run), f.activity)
	if a == nil {
		return false
	}
	i, found := a.findRetry(f.pos, f.at)
	x := j.facts(a)
	switch {
	case found:
		if f.live && !x.retries[i].live {
			x.retries[i].live = true
		} else {
			return false
		}
	case len(x.retries) < maxRetries:
		x.retries = append(x.retries, retryFact{})
		copy(x.retries[i+1:], x.retries[i:])
		x.retries[i] = retryFact{pos: f.pos, at: f.at, live: f.live}
	default:
		x.extra++
		i = -1
	}
	if !a.dispatched {
		j.place(a, &j.remembered)
		return false
	}
	if i < 0 {
		if f.live && a.state == actLive {
			fx.add(effect{op: opRetried, ta: a.ta})
			return true
		}
		return false
	}
	return j.countRetry(a, &x.retries[i], a.settler(), fx)
}

// retriesLive reports whether every retry a remembers was observed
// committing here.
func (a *activity) retriesLive() bool {
	for _, r := range a.retries() {
		if !r.live {
			return false
		}
	}
	return true
}

// findRetry returns where a retry at (pos, at) is, or would go, in
// a.retries, and whether it is there: a retry is the same retry when its
// Seq is, or, without a Seq, when its time is.
func (a *activity) findRetry(pos position, at int64) (int, bool) {
	retries := a.retries()
	for i, r := range retries {
		if pos.known() && r.pos.seq == pos.seq || !pos.known() && !r.pos.known() && r.at == at {
			return i, true
		}
		if pos.before(r.pos) {
			return i, false
		}
	}
	return len(retries), false
}

// countRetry counts a live retry of dispatched activity a once, unless its
// settler s comes before it.
func (j *join) countRetry(a *activity, r *retryFact, s settler, fx *effects) bool {
	if !r.live || r.counted || !r.pos.follows(a.dpos) || s.ok && !r.pos.before(s.pos) {
		return false
	}
	r.counted = true
	fx.add(effect{op: opRetried, ta: a.ta})
	return true
}

// start applies a run's start fact and reports whether it is new.
func (j *join) start(w *workflow, f *fact, fx *effects) bool {
	r := j.runOf(w, f.run)
	r.ns = f.ns
	if r.started {
		if f.live && !r.startCall().span.IsValid() && r.startPos.seq == f.pos.seq {
			j.setStartCall(r, f.call) // read back first: the call that wrote it
		}
		return false
	}
	r.started, r.startPos, r.startAt, r.wa = true, f.pos, f.at, f.wa
	j.setStartCall(r, f.call)
	j.resolveRun(r, fx)
	return true
}

// close applies a close fact and returns the number of activities it
// settled.
func (j *join) close(w *workflow, f *fact, fx *effects) int {
	r := j.runOf(w, f.run)
	if r.ns == nil {
		r.ns = f.ns
	}
	c := closeFact{pos: f.pos, at: f.at, status: uint8(f.status), next: f.next, nextWF: f.nextWF, call: f.call, live: f.live}
	x := j.runFacts(r)
	at := len(x.closes)
	for i, old := range x.closes {
		if f.pos.known() && old.pos.seq == f.pos.seq {
			if !f.live || old.live {
				return 0 // a repeat
			}
			x.closes[i].live, x.closes[i].call = true, f.call
			at = -1
			break
		}
		if f.pos.before(old.pos) {
			at = i
			break
		}
	}
	if at >= 0 {
		if at == maxCloses {
			return 0
		}
		if len(x.closes) == maxCloses {
			x.closes = x.closes[:maxCloses-1]
		}
		x.closes = append(x.closes, closeFact{})
		copy(x.closes[at+1:], x.closes[at:])
		x.closes[at] = c
	}
	j.resolveRun(r, fx)
	n := 0
	for a := range r.activities {
		// Also one settled by this close read back: seen committing
		// now, its completion is recorded here.
		if a.state == actLive || a.state == actSettling || a.state == actDone && !a.emitted {
			before := a.state
			j.resolveActivity(a, fx)
			if before == actLive && a.state != actLive {
				n++
			}
		}
	}
	return n
}

// resolveActivity moves a to the state its facts decide, recording what
// the move means, and reports whether a is newly in flight.
func (j *join) resolveActivity(a *activity, fx *effects) bool {
	if !a.dispatched {
		j.place(a, &j.remembered)
		return false
	}
	s := a.settler()
	if !s.ok {
		if a.state == actLive {
			return false
		}
		a.state = actLive
		j.active++
		heap.Push(j.ages[a.ta], a)
		j.startWaiting(a)
		if j.spans && !j.derived() {
			w := fx.addWork(spanWork{act: a, gen: a.gen, key: a.key(), start: a.dcall,
				parent: a.run.spanRef(), run: a.run, runGen: a.run.gen, ids: a.run.ids()})
			a.unlinked = !a.dcall.span.IsValid()
			fx.add(effect{op: opStartActivity, ta: a.ta, from: a.dat, work: w})
			a.opening = int32(len(fx.list))
		}
		j.place(a, &j.live)
		return true
	}
	release := false
	switch a.state {
	case actLive:
		j.leaveFlight(a)
		fx.cancel(&a.opening)
		release = true
	case actDone:
		if !a.emitted && s.live { // the settler is now seen committing here
			a.emitted = true
			fx.add(j.settleEffect(a, s, fx))
			fx.retired = append(fx.retired, a)
		}
		return false
	}
	if !a.run.wf.seen.between(a.dpos, s.pos) || !a.run.started && a.run.wf.fill != 0 {
		// Positions between are missing, or the run's start is in a gap
		// being filled: its span, the parent, comes with the fill.
		if release {
			fx.add(effect{op: opGauge, ta: a.ta})
		}
		a.state = actSettling
		j.wait(a.run.wf, queued{act: a})
		j.place(a, &j.remembered)
		return false
	}
	a.state = actDone
	j.unwait(a.run.wf, queued{act: a})
	switch {
	case s.live:
		a.emitted = true
		e := j.settleEffect(a, s, fx)
		e.release = release
		fx.add(e)
		fx.retired = append(fx.retired, a)
	case release:
		fx.add(effect{op: opGauge, ta: a.ta})
	}
	a.dropSpan() // moved to the effect, or dropped
	j.place(a, &j.remembered)
	return false
}

// settleEffect is the record of a's completion by s: the counter, the
// duration and, with the timeline on, the span, ending the open one or, if
// it has none, made whole. The times of the retries between the two, then
// of its row's claims, go to fx.times.
func (j *join) settleEffect(a *activity, s settler, fx *effects) effect {
	span := a.span()
	e := effect{op: opSettle, ta: a.ta, outcome: uint8(s.outcome), from: a.dat, to: s.at, span: span, retries: a.extraRetries()}
	work := j.spans && (span == nil || !a.spanQuiet) // a quiet span is only ended
	at := len(fx.times)
	for _, r := range a.retries() {
		if r.pos.follows(a.dpos) && r.pos.before(s.pos) {
			e.retries++
			if work {
				fx.times = append(fx.times, r.at)
			}
		}
	}
	if work {
		claimAt := len(fx.times)
		claims := a.claims()
		fx.times = append(fx.times, claims...)
		e.work = fx.addWork(spanWork{key: a.key(), start: a.dcall, end: s.call, parent: a.run.spanRef(),
			retryAt: int32(at), retryTimes: int32(claimAt - at), claimAt: int32(claimAt), claimTimes: int32(len(claims)),
			run: a.run, runGen: a.run.gen, ids: a.run.ids(), lateStart: span != nil && a.unlinked})
	}
	return e
}

// leaveFlight takes live activity a out of the in-flight count and its age
// heap.
func (j *join) leaveFlight(a *activity) {
	j.ages[a.ta].remove(a)
	j.active--
	j.stopWaiting(a)
}

// resolveRun moves run r to the state its facts decide.
func (j *join) resolveRun(r *run, fx *effects) {
	if !r.started {
		if len(r.closes()) > 0 && r.state == runNone {
			r.state = runPending
			j.place(r, &j.remembered)
		}
		return
	}
	c, ok := r.closer()
	if !ok {
		if r.state == runOpen {
			return
		}
		r.state = runOpen
		if j.spans && !j.derived() {
			w := fx.addWork(spanWork{run: r, gen: r.gen, key: r.key(), start: r.startCall(), ids: r.ids()})
			r.unlinked = !r.startCall().span.IsValid()
			fx.add(effect{op: opStartRun, wa: r.wa, from: r.startAt, work: w})
			r.opening = int32(len(fx.list))
		}
		j.place(r, &j.live)
		return
	}
	fx.cancel(&r.opening)
	if r.state == runDone {
		if !r.emitted && c.live {
			r.emitted = true
			fx.add(j.closeEffect(r, c, fx))
		}
		return
	}
	if !r.wf.seen.between(r.startPos, c.pos) {
		r.state = runClosing
		j.wait(r.wf, queued{run: r})
		j.place(r, &j.remembered)
		return
	}
	r.state = runDone
	j.unwait(r.wf, queued{run: r})
	if c.live {
		r.emitted = true
		fx.add(j.closeEffect(r, c, fx))
	}
	if r.x != nil {
		r.x.span = nil // moved to the effect, or dropped; spanRef stays as the parent of later activities
	}
	j.place(r, &j.remembered)
}

// closeEffect is the record of run r's close c: the duration and, with
// the timeline on, the run span, ending the open one or, if it has none,
// made whole.
func (j *join) closeEffect(r *run, c closeFact, fx *effects) effect {
	span := r.span()
	e := effect{op: opClose, wa: r.wa, status: c.status, from: r.startAt, to: c.at, span: span}
	if j.spans {
		e.work = fx.addWork(spanWork{key: r.key(), start: r.startCall(), end: c.call, next: c.next, nextWF: c.nextWF, ids: r.ids(), run: r, gen: r.gen,
			lateStart: span != nil && r.unlinked})
	}
	return e
}

// keepIDs keeps ids on r for its later spans, if they are r's.
func (j *join) keepIDs(r *run, ids *runIDs) {
	if r.ids() == nil && ids != nil && ids.run == r.id && ids.wf == r.wf.key.id && ids.namespace == r.wf.key.namespace {
		j.runFacts(r).ids = ids
	}
}

func (a *activity) key() Key {
	return Key{Namespace: a.run.wf.key.namespace, WorkflowID: a.run.wf.key.id, RunID: a.run.id, ActivityID: a.id}
}

func (r *run) key() Key {
	return Key{Namespace: r.wf.key.namespace, WorkflowID: r.wf.key.id, RunID: r.id}
}

// place moves an activity or run into queue q, if it is not there. The
// bound is enforced by trim, once the facts of a call are applied, so that
// no rule sees an item vanish under it.
func (j *join) place(item any, q *queue) {
	var e queued
	var s *slot
	switch v := item.(type) {
	case *activity:
		e, s = queued{act: v}, &v.slot
	case *run:
		e, s = queued{run: v}, &v.slot
	case *workflow:
		e, s = queued{wf: v}, &v.slot
	}
	if s.in != q {
		remove(s)
		q.push(e, s)
	}
}

// trim drops the oldest items of each queue while it is over its bound.
func (j *join) trim(fx *effects) {
	for j.live.full() {
		j.drop(j.live.pop(), true, fx)
	}
	for j.remembered.full() {
		j.drop(j.remembered.pop(), false, fx)
	}
}

// drop forgets an item the bound pushed out of its queue, recording the
// loss: a live activity releases its gauge slot and counts as evicted, an
// open run counts as evicted; remembered facts of history still waiting for
// a partner or a position count as forgotten, settled ones and the outbox
// facts of a dispatch never seen go silently. Spans are
// dropped unended, so they are never exported.
func (j *join) drop(e queued, live bool, fx *effects) {
	if w := e.wf; w != nil { // positions only
		j.freeWorkflow(w)
		return
	}
	if a := e.act; a != nil {
		switch {
		case a.state == actLive:
			j.leaveFlight(a)
			fx.cancel(&a.opening)
			fx.add(effect{op: opEvicted, ta: a.ta})
		case a.waitsForPartner():
			fx.add(effect{op: opForgotten, ns: j.nsOf(a.run)})
		}
		j.unwait(a.run.wf, e)
		j.freeActivity(a)
		return
	}
	r := e.run
	fx.cancel(&r.opening)
	switch {
	case r.state == runOpen && live:
		fx.add(effect{op: opRunEvicted, ns: j.nsOf(r)})
	case r.state == runClosing || r.state == runPending:
		fx.add(effect{op: opForgotten, ns: j.nsOf(r)})
	}
	j.unwait(r.wf, e)
	ns := j.nsOf(r)
	r.state, r.started, r.wa, r.emitted = runNone, false, nil, false
	r.forget()
	// Without its closes, the run's settled activities could not be told
	// from new ones: they go with it; those in flight stay.
	for a := range r.activities {
		if a.state != actLive {
			if a.waitsForPartner() {
				fx.add(effect{op: opForgotten, ns: ns})
			}
			remove(&a.slot)
			j.unwait(r.wf, queued{act: a})
			j.unlinkActivity(a)
		}
	}
	j.freeRunIfEmpty(r)
}

// nsOf returns the namespace options to count a drop of r's facts under.
func (j *join) nsOf(r *run) *nsAttrs {
	if r.ns != nil {
		return r.ns
	}
	for a := range r.activities {
		if a.ta != nil {
			return a.ta.ns
		}
	}
	return nil
}

// wait puts a settling activity or closing run on its workflow's list of
// decisions that wait for positions.
func (j *join) wait(w *workflow, e queued) {
	if w.waiting == nil {
		w.waiting = new([]queued)
	}
	for _, x := range *w.waiting {
		if x.act == e.act && x.run == e.run {
			return
		}
	}
	*w.waiting = append(*w.waiting, e)
}

func (j *join) unwait(w *workflow, e queued) {
	if w.waiting == nil {
		return
	}
	l := *w.waiting
	for i, x := range l {
		if x.act == e.act && x.run == e.run {
			copy(l[i:], l[i+1:])
			l[len(l)-1] = queued{}
			*w.waiting = l[:len(l)-1]
			return
		}
	}
}

// clearWaiting empties w's list of decisions that wait.
func (w *workflow) clearWaiting() {
	if w.waiting != nil {
		clear(*w.waiting)
		*w.waiting = (*w.waiting)[:0]
	}
}

// observed records that positions lo..hi of w were observed, and decides
// the pairings that waited for them.
func (j *join) observed(w *workflow, lo, hi uint64, fx *effects) {
	if lo == 0 || !w.seen.add(lo, hi, maxRanges) {
		return
	}
	j.resolveWaiting(w, fx)
}

// resolveWaiting decides again the pairings of w that wait.
func (j *join) resolveWaiting(w *workflow, fx *effects) {
	if w.waiting == nil || len(*w.waiting) == 0 {
		return
	}
	// Resolving removes from w.waiting: work on a copy of the list head.
	var buf [8]queued
	pending := append(buf[:0], *w.waiting...)
	for _, e := range pending {
		if e.act != nil {
			j.resolveActivity(e.act, fx)
		} else {
			j.resolveRun(e.run, fx)
		}
	}
}

// freeActivity unlinks a from its run (and the run from its workflow, if
// now empty) and keeps it for reuse.
func (j *join) freeActivity(a *activity) {
	r := a.run
	j.unlinkActivity(a)
	j.freeRunIfEmpty(r)
}

// unlinkActivity takes a out of its run and keeps it for reuse; the run
// may be left empty.
func (j *join) unlinkActivity(a *activity) {
	r := a.run
	r.removeActivity(a)
	if x := a.x; x != nil && len(j.freeFacts) < maxFree {
		*x = activityFacts{retries: x.retries[:0], claims: x.claims[:0]}
		j.freeFacts = append(j.freeFacts, x)
	}
	*a = activity{gen: a.gen + 1}
	if len(j.freeActs) < maxFree {
		j.freeActs = append(j.freeActs, a)
	}
}

// freeRunIfEmpty frees r if it holds nothing, and its workflow likewise. A
// run that holds only settled activities is remembered for them.
func (j *join) freeRunIfEmpty(r *run) {
	if r.state != runNone || r.numActivities() > 0 || r.slot.in != nil {
		return
	}
	if r.hasSettled() {
		j.place(r, &j.remembered)
		return
	}
	w := r.wf
	w.removeRun(r)
	if x := r.x; x != nil && len(j.freeRunFacts) < maxFree {
		acts, peak := x.acts, x.peak
		*x = runFacts{closes: x.closes[:0], settled: seen{ranges: x.settled.ranges[:0]}}
		if peak <= maxRunPeak { // keep the small map
			clear(acts)
			x.acts, x.peak = acts, peak
		}
		j.freeRunFacts = append(j.freeRunFacts, x)
	}
	*r = run{gen: r.gen + 1}
	if len(j.freeRuns) < maxFree {
		j.freeRuns = append(j.freeRuns, r)
	}
	if w.empty() && w.slot.in == nil {
		j.freeWorkflow(w)
	}
}

// settle keeps a workflow that has no runs in the remembered queue, for its
// positions, and takes one that has runs out of it.
func (j *join) settle(w *workflow) {
	switch {
	case w.empty():
		j.place(w, &j.remembered)
	case w.slot.in != nil:
		remove(&w.slot)
	}
}

// freeWorkflow forgets a workflow that has no runs, and keeps it for reuse.
func (j *join) freeWorkflow(w *workflow) {
	j.workflows.remove(w)
	w.clearWaiting()
	more, ranges, waiting := w.more, w.seen.ranges[:0], w.waiting
	*w = workflow{more: more, seen: seen{ranges: ranges}, waiting: waiting}
	if len(j.freeWorkflows) < maxFree {
		j.freeWorkflows = append(j.freeWorkflows, w)
	}
}
