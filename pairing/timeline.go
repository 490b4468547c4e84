package pairing

import (
	"context"
	"encoding/binary"
	"sync"
	"sync/atomic"
	"weak"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/livetracer"
	"github.com/aionotel/aionotel/internal/timeline"
	"github.com/aionotel/aionotel/internal/version"
)

// spans makes the timeline: a run span from a run's start to its close, an
// activity span from a dispatch to its settlement, each at the times of
// history. A nil *spans makes none.
//
// Whether span IDs are derived (the provider's ID generator is the one of
// [NewIDGenerator]) is learned from the spans themselves: a span asks for
// its derived IDs through its context, and gets them only from that
// generator. While they are, a run span is a true root whose IDs are the
// run's [timeline.Root], and activity spans are its children whichever
// order the facts came in. While they are not, a run span is a child of
// that root context (an anchor that is never exported), and an activity
// span a child of its run span when this tracker holds it, else of the
// anchor.
//
// The tracer comes from a livetracer.Source: a fixed provider's, or the
// global provider's at each use, nil while that records nothing (the
// global default, before a program installs one). While it is nil the
// join prepares no span work at all (see followers).
type spans struct {
	src   *livetracer.Source
	ids   atomic.Int32
	roots rootCache
	// following is set once the join is registered with the followers.
	following atomic.Bool
}

// What the spans taught about the provider's IDs.
const (
	idsUnknown int32 = iota
	idsDerived
	idsRandom
)

func newSpans(tp trace.TracerProvider, on bool) *spans {
	if !on || (tp != nil && livetracer.Quiet(tp)) {
		return nil // nothing would be recorded, at the cost of allocations
	}
	return &spans{src: livetracer.New(tp, ScopeName, trace.WithInstrumentationVersion(version.Version),
		trace.WithSchemaURL(catalog.SchemaURL))}
}

// idRequest asks the ID generator of [NewIDGenerator] for a span's derived
// IDs: a run span's (as a root) or an activity span's (in its run's trace).
type idRequest struct {
	run   bool
	trace trace.TraceID
	span  trace.SpanID
}

type idRequestKey struct{}

// internalKind is the kind of every timeline span, made once: an option
// built per span would cost an allocation.
var internalKind = trace.WithSpanKind(trace.SpanKindInternal)

// Link attributes, one set per role.
var (
	linkScheduled = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkScheduled)}
	linkSettled   = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkSettled)}
	linkStarted   = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkStarted)}
	linkClosed    = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkClosed)}
	linkNextRun   = []attribute.KeyValue{catalog.TimelineLink.String(catalog.LinkNextRun)}
)

func rootOf(k Key) trace.SpanContext { return timeline.Root(k.Namespace, k.WorkflowID, k.RunID) }

// rootCache keeps what the spans of recent runs share: the run's trace
// root, a SHA-256 of its IDs and the costliest step of an activity span
// (every activity of a run needs it while its run span is not held here),
// and its IDs as attribute values. A two-way set-associative table of 512
// immutable entries (at most about 150 KiB with the entries): a lookup is
// at most two atomic loads and comparisons, a miss computes the entry and
// replaces one of its two slots' (BenchmarkRunRoots compares it with
// computing every time and with a map under a mutex). Once a span of a
// run is opened, the join's run keeps its entry (run.ids), and the run's
// later spans skip the lookup.
type rootCache [512]atomic.Pointer[runIDs]

// runIDs is what the spans of one run share.
type runIDs struct {
	namespace string
	wf        eventstore.WorkflowID
	run       eventstore.RunID
	root      trace.SpanContext
	// wfAttr and runAttr are aion.workflow.id and aion.run.id.
	wfAttr, runAttr attribute.KeyValue
}

// mix is the finaliser of MurmurHash3: every input bit moves the output's
// low byte, the slot index, so IDs that differ in a few bytes (sequential,
// or made by a test) still spread.
func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	return x ^ x>>33
}

// get returns the shared values of run (namespace, wf, run).
func (c *rootCache) get(namespace string, wf eventstore.WorkflowID, run eventstore.RunID) *runIDs {
	le := binary.LittleEndian
	h := mix(le.Uint64(wf[:8]) ^ mix(le.Uint64(wf[8:])^mix(le.Uint64(run[:8])^mix(le.Uint64(run[8:])))))
	// Two-way: a run may sit in either of two slots, so that two runs in
	// use together rarely evict each other.
	a, b := &c[h%uint64(len(c))], &c[(h>>32)%uint64(len(c))]
	for _, slot := range [2]*atomic.Pointer[runIDs]{a, b} {
		if e := slot.Load(); e != nil && e.run == run && e.wf == wf && e.namespace == namespace {
			return e
		}
	}
	e := &runIDs{namespace: namespace, wf: wf, run: run, root: timeline.Root(namespace, wf, run),
		wfAttr: catalog.WorkflowID.String(wf.String()), runAttr: catalog.RunID.String(run.String())}
	if a.Load() != nil && (b.Load() == nil || h&(1<<16) != 0) {
		a = b
	}
	a.Store(e)
	return e
}

// runIDs returns what the spans of w's run share: as the join held them,
// else from the cache, kept in w for the join to hold.
func (s *spans) runIDs(w *spanWork) *runIDs {
	if w.ids == nil {
		w.ids = s.roots.get(w.key.Namespace, w.key.WorkflowID, w.key.RunID)
	}
	return w.ids
}

// tracer returns the tracer the spans of the call that took lk are made
// with, nil if none records; when
// the provider changed, what the spans taught about its IDs is forgotten.
func (s *spans) tracer(lk *livetracer.Lookup) trace.Tracer {
	tr := s.src.TracerAt(lk)
	if s.src.Changed() {
		s.ids.Store(idsUnknown)
	}
	return tr
}

// Trackers whose timeline follows the global provider have their joins
// prepare span work only while that provider records: every call, before
// it takes its join's lock, looks at the provider (getEffects calls
// syncFollowers; a decorated store call's tracker call shares the store
// call's look), and when whether it records changed since the last look,
// every such join is told. So a program that never installs a
// provider pays nothing for the timeline, and the first call after
// otel.SetTracerProvider already makes spans: an activity in flight then
// gets its span whole at its settlement, a run at its close.
var followers struct {
	n     atomic.Int32 // joins registered, read without the lock
	state atomic.Int32 // followUnknown, followQuiet or followRecords, as last told
	mu    sync.Mutex
	joins []weak.Pointer[join]
}

const (
	followUnknown int32 = iota
	followQuiet
	followRecords
)

// follow registers t's join with the followers, once, and tells it the
// provider's state now.
func (t *Tracker) follow() {
	s := t.spans
	if s == nil || !s.src.Global() || s.following.Load() || !s.following.CompareAndSwap(false, true) {
		return
	}
	followers.mu.Lock()
	defer followers.mu.Unlock()
	live := followers.joins[:0]
	for _, w := range followers.joins {
		if w.Value() != nil {
			live = append(live, w)
		}
	}
	followers.joins = append(live, weak.Make(t.join))
	followers.n.Store(int32(len(followers.joins)))
	on := livetracer.GlobalRecords()
	followers.state.Store(followState(on))
	for _, w := range followers.joins {
		if j := w.Value(); j != nil {
			j.mu.Lock()
			j.spans = on
			j.mu.Unlock()
		}
	}
}

func followState(on bool) int32 {
	if on {
		return followRecords
	}
	return followQuiet
}

// syncFollowers tells the registered joins whether the global provider
// records, if that changed since they were last told. Locks are taken in
// one order: the followers', then each join's.
func syncFollowers(lk *livetracer.Lookup) {
	if followers.n.Load() == 0 || followState(livetracer.GlobalRecordsAt(lk)) == followers.state.Load() {
		return
	}
	followers.mu.Lock()
	defer followers.mu.Unlock()
	// A fresh look, under the lock: the last look wins, so a call that
	// took its look before a provider was installed cannot tell the joins
	// it records nothing after a later call told them it records.
	on := livetracer.GlobalRecords()
	followers.state.Store(followState(on))
	for _, w := range followers.joins {
		if j := w.Value(); j != nil {
			j.mu.Lock()
			j.spans = on
			j.mu.Unlock()
		}
	}
}

// startActivity opens the span of an activity now in flight; nil if no
// span can be made.
func (s *spans) startActivity(ctx context.Context, lk *livetracer.Lookup, e *effect, w *spanWork) trace.Span {
	if s == nil {
		return nil
	}
	tr := s.tracer(lk)
	if tr == nil {
		return nil
	}
	span, run := s.openActivity(ctx, tr, e, w)
	if span.IsRecording() {
		span.SetAttributes(run.wfAttr, run.runAttr, catalog.ActivityID.Int64(attrvalue.Int64(uint64(w.key.ActivityID))))
		if w.start.span.IsValid() {
			span.AddLink(trace.Link{SpanContext: w.start.spanContext(), Attributes: linkScheduled})
		}
	}
	return span
}

// openActivity starts an activity span at its dispatch, as a child of its
// run span (or the run's root), and returns it with its run's IDs.
func (s *spans) openActivity(ctx context.Context, tr trace.Tracer, e *effect, w *spanWork) (trace.Span, *runIDs) {
	k := &w.key
	run := s.runIDs(w)
	ids := s.ids.Load()
	parent := run.root
	if ids != idsDerived && w.parent.span.IsValid() {
		parent = w.parent.spanContext()
	}
	ctx = trace.ContextWithSpanContext(ctx, parent)
	var want trace.SpanID
	if ids != idsRandom { // ask for the derived ID, and learn whether it comes
		want = timeline.ActivitySpanID(k.Namespace, k.WorkflowID, k.RunID, k.ActivityID)
		ctx = context.WithValue(ctx, idRequestKey{}, idRequest{trace: run.root.TraceID(), span: want})
	}
	_, span := tr.Start(ctx, e.ta.spanName, internalKind, e.ta.spanStart, trace.WithTimestamp(timeOf(e.from)))
	if want.IsValid() {
		if sc := span.SpanContext(); sc.IsValid() {
			if sc.SpanID() == want {
				s.ids.Store(idsDerived)
			} else {
				s.ids.Store(idsRandom)
			}
		}
	}
	return span, run
}

// outcomeAttrs are the aion.activity.outcome attributes, indexed as
// outcomes.
var outcomeAttrs = func() (a [numOutcomes]attribute.KeyValue) {
	for i, o := range outcomes {
		a[i] = catalog.ActivityOutcome.String(string(o))
	}
	return a
}()

// settle ends a settled activity's span, or makes it whole from its
// dispatch when it has none: outcome, the claims of its outbox row and its
// retries as events at their times, a link to the call that wrote the
// settling fact, status Error for failed and timed_out.
func (s *spans) settle(ctx context.Context, lk *livetracer.Lookup, e *effect, w *spanWork, retryTimes, claimTimes []int64) {
	if s == nil {
		return
	}
	span := e.span
	if span == nil { // made whole: every attribute in one call
		tr := s.tracer(lk)
		if tr == nil {
			return
		}
		var run *runIDs
		if span, run = s.openActivity(ctx, tr, e, w); !span.IsRecording() {
			span.End()
			return
		}
		span.SetAttributes(run.wfAttr, run.runAttr, catalog.ActivityID.Int64(attrvalue.Int64(uint64(w.key.ActivityID))),
			outcomeAttrs[e.outcome], catalog.RetryCount.Int64(int64(e.retries)))
		if w.start.span.IsValid() {
			span.AddLink(trace.Link{SpanContext: w.start.spanContext(), Attributes: linkScheduled})
		}
	} else {
		if !span.IsRecording() {
			span.End() // nothing is recorded: spare the options
			return
		}
		span.SetAttributes(outcomeAttrs[e.outcome], catalog.RetryCount.Int64(int64(e.retries)))
		if w.lateStart && w.start.span.IsValid() {
			span.AddLink(trace.Link{SpanContext: w.start.spanContext(), Attributes: linkScheduled})
		}
	}
	end := max(e.to, e.from)
	for i, at := range claimTimes { // within the span: a clock apart from history's may put one outside
		span.AddEvent(catalog.ClaimEvent, trace.WithTimestamp(timeOf(min(max(at, e.from), end))),
			trace.WithAttributes(catalog.ClaimCount.Int64(int64(i+1))))
	}
	for i, at := range retryTimes {
		span.AddEvent(catalog.RetryEvent, trace.WithTimestamp(timeOf(at)),
			trace.WithAttributes(catalog.RetryCount.Int64(int64(i+1))))
	}
	if outcome := outcomes[e.outcome]; outcome == OutcomeFailed || outcome == OutcomeTimedOut {
		span.SetStatus(codes.Error, string(outcome))
	}
	if w.end.span.IsValid() {
		span.AddLink(trace.Link{SpanContext: w.end.spanContext(), Attributes: linkSettled})
	}
	span.End(trace.WithTimestamp(timeOf(end)))
}

// startRun opens the span of a run now open; nil if no span can be made.
func (s *spans) startRun(ctx context.Context, lk *livetracer.Lookup, e *effect, w *spanWork) trace.Span {
	if s == nil {
		return nil
	}
	tr := s.tracer(lk)
	if tr == nil {
		return nil
	}
	return s.openRun(ctx, tr, e, w)
}

// openRun starts a run span at its start, linked to the call that wrote
// the start: a root with the run's derived IDs when the provider derives
// them, else a child of the run's anchor. Until the tracker knows, it
// tries the root first and, if the IDs come back random, drops that span
// unended (so it is never exported) and starts the child.
func (s *spans) openRun(ctx context.Context, tr trace.Tracer, e *effect, w *spanWork) trace.Span {
	run := s.runIDs(w)
	root := run.root
	name, attrs := e.wa.spanName, e.wa.spanStart
	var span trace.Span
	if s.ids.Load() != idsRandom {
		ctx := context.WithValue(ctx, idRequestKey{}, idRequest{run: true, trace: root.TraceID(), span: root.SpanID()})
		_, span = tr.Start(ctx, name, internalKind, attrs, trace.WithTimestamp(timeOf(e.from)), trace.WithNewRoot())
		if sc := span.SpanContext(); sc.TraceID() != root.TraceID() || sc.SpanID() != root.SpanID() {
			s.ids.Store(idsRandom)
			span = nil // a random trace: dropped unended
		}
	}
	if span == nil {
		_, span = tr.Start(trace.ContextWithSpanContext(ctx, root), name, internalKind, attrs, trace.WithTimestamp(timeOf(e.from)))
	}
	if !span.IsRecording() {
		return span
	}
	span.SetAttributes(run.wfAttr, run.runAttr)
	if w.start.span.IsValid() {
		span.AddLink(trace.Link{SpanContext: w.start.spanContext(), Attributes: linkStarted})
	}
	return span
}

// close ends a closed run's span, or makes it whole from its start when it
// has none: status, a link to the call that wrote the close and, for a
// continue-as-new, to the next run's root. It returns the span it made
// whole, if any.
func (s *spans) close(ctx context.Context, lk *livetracer.Lookup, e *effect, w *spanWork) (made trace.Span) {
	if s == nil || e.wa == nil {
		return nil
	}
	span := e.span
	if span == nil {
		tr := s.tracer(lk)
		if tr == nil {
			return nil
		}
		span = s.openRun(ctx, tr, e, w)
		made = span
	}
	if !span.IsRecording() {
		span.End()
		return made
	}
	if made == nil && w.lateStart && w.start.span.IsValid() {
		span.AddLink(trace.Link{SpanContext: w.start.spanContext(), Attributes: linkStarted})
	}
	status := statuses[e.status]
	span.SetAttributes(catalog.WorkflowStatus.String(string(status)))
	if status == eventstore.StatusFailed || status == eventstore.StatusTimedOut {
		span.SetStatus(codes.Error, string(status))
	}
	if w.end.span.IsValid() {
		span.AddLink(trace.Link{SpanContext: w.end.spanContext(), Attributes: linkClosed})
	}
	if wf, run, ok := w.nextRun(); ok {
		span.AddLink(trace.Link{SpanContext: timeline.Root(w.key.Namespace, wf, run), Attributes: linkNextRun})
	}
	span.End(trace.WithTimestamp(timeOf(max(e.to, e.from))))
	return made
}
