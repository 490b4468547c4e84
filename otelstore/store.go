package otelstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
)

// ErrNilStore is returned by [New] and [NewKeyspace] when given no store to
// wrap: a nil interface, or a nil pointer, map, slice, func or channel behind
// it.
var ErrNilStore = errors.New("otelstore: nil inner store")

// New wraps inner so that every call is traced and timed and every committed
// lifecycle event is counted. The returned store implements exactly the
// optional capabilities ([eventstore.Outbox], [eventstore.ShardOwner]) that
// inner implements, forwards every call once with its arguments unchanged,
// and returns inner's results and error values unchanged. Unwrap on the
// result returns inner.
//
// Spans: one per timed call, of kind client, named after its operation
// ("append"), or "append <target>" when WithAttributes gives a
// db.collection.name (the target) or else a db.namespace
// ([WithSpanNameFormatter] names them otherwise); created with
// db.operation.name, db.system.name, aion.namespace and the WithAttributes
// attributes, where a sampler sees them, and given, where the call has
// them, aion.workflow.id, aion.store.expected_seq, aion.store.event_count
// and aion.store.outbox_row_count. A failed call sets error.type and status
// Error with the error text, as the semantic conventions' guidance on
// recording errors says (an exception event only with
// [WithExceptionEvents]); a sequence conflict adds aion.store.found_seq,
// and with [WithConflictAsError](false) keeps status Unset. The duration goes to aion.store.operation.duration
// with db.operation.name, db.system.name, aion.namespace, the
// WithAttributes attributes and error.type (failures only), recorded with
// the span's context so that an exemplar points at it. The three
// ShardOwner methods that cannot fail are forwarded only.
//
// Lifecycle: only after an Append or AppendWithOutbox succeeded are its
// events observed. WorkflowStarted counts aion.workflows.started by type;
// the five run-closing events count aion.workflows.completed by status and
// settle the run's activities still in flight as abandoned;
// WorkflowReopened, SignalReceived (delivery "resident") and
// ScheduleTriggered count their counters; ActivityScheduled is a pairing
// dispatch and ActivityCompleted, a Terminal ActivityFailed,
// ActivityCancelled and ActivityTimedOut its terminals, while a Retryable
// ActivityFailed counts a retry. Pairing keys are (namespace, the appended
// workflow, the event's run, activity); an event with a zero RecordedAt is
// observed at the time of observation. Nothing of the caller's events slice
// is kept after the call returns, nor of its context but the span context
// (for exemplars of a batch observed later).
//
// Outbox: the rows an AppendWithOutbox staged, once observed, and the rows
// a ClaimOutboxRows returned, at the time it returned, are the wait for a
// worker: aion.activity.wait.duration (dispatch to first claim, once per
// dispatch), aion.activity.oldest_waiting_age (rows staged, not claimed)
// and an aion.activity.claim event per claim on the activity span (see
// [pairing.Tracker.Claimed]); a claim span carries the rows it claimed.
//
// Timeline (on by default, [WithTimelineSpans]): the tracker also rebuilds
// each run as spans with the times of its history. WorkflowStarted starts
// the run span "workflow <type>", its closing event ends it (status Error
// for failed and timed_out); ActivityScheduled starts the activity span
// "activity <type>", a child of the run span, which its first terminal (or
// the run's close, as abandoned) ends, with retryable failures as
// aion.activity.retry events. Span start and end are the events'
// RecordedAt. Each links to the append spans that wrote its first and last
// events (aion.timeline.link says which); a continue-as-new chain is one
// trace per run, each linked to the next, each trace ID derived from the
// run; with the ID generator of pairing.NewIDGenerator installed, span IDs
// are derived too and every run's trace is one tree (see the pairing
// package). A reopened run's span ends at its first close. The tracker
// also records aion.workflow.duration and the
// aion.activity.oldest_inflight_age gauge.
//
// Order: each committed batch is handed to the tracker, with its first
// position (expectedSeq+1), when its append returns. Appends to one
// workflow may return in any order, through one decorator or several
// sharing a tracker ([WithPairing]): the tracker joins the facts by their
// positions, so the telemetry is the one history order gives (a close
// observed before a terminal committed ahead of it does not settle that
// activity as abandoned). The decorator holds no lock of its own.
//
// Restarts and handoffs: a gap is filled, not waited for. An append to a
// workflow past what the tracker has seen of it (after a restart, an
// adoption, another node's write) makes the tracker read that workflow's
// history once from the inner store, in the background (at most 4 reads
// at once, without spans; see the pairing package, "A gap is filled"),
// so that New alone is right after a restart and a handoff: the
// terminals, retries and closes committed here record their completions,
// durations and spans at history's times, nothing is counted twice, and
// a history that cannot be read counts on aion.pairing.resumed with its
// error.type. [Resume] is then a warm-up: it takes the open runs and the
// activities in flight from history (pairing.Tracker.Resume), so the
// gauges are what history says before the first write to each workflow.
// [Flush] waits for the background reads pending (the resumes of shards
// it started serving, then the fills): a process calls it before it shuts
// its providers down, so that what they were to record is recorded. A node
// that dies or lets a shard go while one of its fills is pending
// loses what that fill was to record, as it loses the spans its exporter
// held. Over a
// [eventstore.ShardOwner] whose shard count the decorator knows
// ([WithShardCount], or a ShardCount method of the store), the decorator
// also follows the shards it serves: in its enumeration scope and, once it
// has run an election, held. A shard it starts serving (an acquisition, a
// scope widened) is resumed in the background ([WithResumeReports] says
// when); one it stops serving (the scope narrowed, the node's first
// election, which leaves out the shards it did not win, IsCurrentOwner
// says it is not held, a write to one of its workflows refused with
// [eventstore.ErrNotOwner]) is released, whether it was resumed or served
// from the start (before any scope or election every shard is): its
// activities give their gauge
// slots back without a completion and their spans are dropped unended, for
// the node that adopted it to export (aion.pairing.released). One window
// stays: between a node's death and the adoption of its shards, the dead
// node's last exported gauge may still be summed.
//
// An append that returns its context's error (context.Canceled or
// context.DeadlineExceeded) may have committed: the decorator reads the
// positions it asked for back from the inner store (with a context of its
// own, at most a second) and, when they hold its batch, records it as
// committed here; the caller still gets the error unchanged.
//
// New fails for a nil inner store ([ErrNilStore]), for an option it cannot
// honour ([ErrInvalidOption]) and when it cannot make the pairing tracker.
// Trouble creating instruments is reported to otel.Handle and never fails
// New or a later call.
func New(inner eventstore.Store, opts ...Option) (eventstore.Store, error) {
	cfg, err := buildConfig(inner, opts, Option.apply, catalog.DefaultStoreSystem)
	if err != nil {
		return nil, err
	}
	meter := newMeter(cfg)
	gate := newAppending()
	life, err := newLifecycle(cfg, meter, fillReader(inner, gate))
	if err != nil {
		return nil, err
	}
	t := newTelemetry(cfg, meter, 0, firstKeyspaceOp, catalog.StoreOperationDuration, "Duration of event store calls.")
	c := &core{inner: inner, t: t, life: life, wake: cfg.outboxWake, handle: cfg.handle, appending: gate}

	outbox, hasOutbox := inner.(eventstore.Outbox)
	shards, hasShards := inner.(eventstore.ShardOwner)
	batch, hasBatch := inner.(eventstore.HistoriesReader)
	if hasShards {
		c.handoff = newHandoff(cfg, inner, life) // nil without a shard count
	}
	o, sh, h := outboxMethods{c, outbox}, shardMethods{c, shards}, historiesMethods{c, batch}
	switch {
	case hasOutbox && hasShards && hasBatch:
		return &outboxShardHistoriesStore{c, o, sh, h}, nil
	case hasOutbox && hasShards:
		return &outboxShardStore{c, o, sh}, nil
	case hasOutbox && hasBatch:
		return &outboxHistoriesStore{c, o, h}, nil
	case hasShards && hasBatch:
		return &shardHistoriesStore{c, sh, h}, nil
	case hasOutbox:
		return &outboxStore{c, o}, nil
	case hasShards:
		return &shardStore{c, sh}, nil
	case hasBatch:
		return &historiesStore{c, h}, nil
	default:
		return &plainStore{c}, nil
	}
}

// The eight shapes New returns, one per capability combination: the
// methods every store has (core), plus those of each capability inner has.
type (
	plainStore  struct{ *core }
	outboxStore struct {
		*core
		outboxMethods
	}
	shardStore struct {
		*core
		shardMethods
	}
	historiesStore struct {
		*core
		historiesMethods
	}
	outboxShardStore struct {
		*core
		outboxMethods
		shardMethods
	}
	outboxHistoriesStore struct {
		*core
		outboxMethods
		historiesMethods
	}
	shardHistoriesStore struct {
		*core
		shardMethods
		historiesMethods
	}
	outboxShardHistoriesStore struct {
		*core
		outboxMethods
		shardMethods
		historiesMethods
	}
)

// The capabilities each shape promises beyond Store.
var (
	_ eventstore.Store           = (*plainStore)(nil)
	_ eventstore.Outbox          = (*outboxStore)(nil)
	_ eventstore.ShardOwner      = (*shardStore)(nil)
	_ eventstore.HistoriesReader = (*historiesStore)(nil)
	_ eventstore.Outbox          = (*outboxShardStore)(nil)
	_ eventstore.ShardOwner      = (*outboxShardStore)(nil)
	_ eventstore.Outbox          = (*outboxHistoriesStore)(nil)
	_ eventstore.HistoriesReader = (*outboxHistoriesStore)(nil)
	_ eventstore.ShardOwner      = (*shardHistoriesStore)(nil)
	_ eventstore.HistoriesReader = (*shardHistoriesStore)(nil)
	_ eventstore.Outbox          = (*outboxShardHistoriesStore)(nil)
	_ eventstore.ShardOwner      = (*outboxShardHistoriesStore)(nil)
	_ eventstore.HistoriesReader = (*outboxShardHistoriesStore)(nil)
)

// core carries the Store methods every shape has.
type core struct {
	inner eventstore.Store
	t     *telemetry
	life  *lifecycle
	wake  chan<- struct{}
	// handoff follows the shards a ShardOwner serves; nil for other stores.
	handoff *handoff
	// handle receives what goes wrong outside the caller's result.
	handle func(error)
	// appending holds gap fills back while this decorator's own appends to
	// their workflow are still returning.
	appending *appending
}

// Unwrap returns the wrapped store.
func (s *core) Unwrap() eventstore.Store { return s.inner }

// Append forwards to the inner store; once it committed, the events are
// observed as lifecycle metrics and pairing facts. Nothing of events is
// kept after Append returns.
func (s *core) Append(ctx context.Context, token eventstore.WriteToken, workflowID eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	return s.observedAppend(ctx, opAppend, workflowID, events, expectedSeq, nil, false, func(ctx context.Context) error {
		return s.inner.Append(ctx, token, workflowID, events, expectedSeq)
	})
}

// observedAppend is the body of Append and AppendWithOutbox (outbox,
// staging rows): the timed call, then, once it committed, the observation
// of what it committed, the rows staged and the outbox wake, outside the
// timed window.
func (s *core) observedAppend(ctx context.Context, op opID, workflowID eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64, rows []eventstore.OutboxRow, outbox bool, commit func(context.Context) error) (err error) {
	if s.appending != nil {
		s.appending.begin(workflowID)
		defer s.appending.end(workflowID) // after the observation below
	}
	c := s.t.begin(ctx, op)
	defer c.end(&err)
	if c.recording() {
		perCall := [...]attribute.KeyValue{
			catalog.WorkflowID.String(workflowID.String()),
			catalog.ExpectedSeq.Int64(attrvalue.Int64(expectedSeq)),
			catalog.EventCount.Int(len(events)),
			catalog.OutboxRowCount.Int(len(rows)),
		}
		if !outbox {
			c.annotate(perCall[:3]...)
		} else {
			c.annotate(perCall[:]...)
		}
	}
	err = commit(c.ctx)
	c.finish(err)
	if err != nil {
		if errors.Is(err, eventstore.ErrNotOwner) {
			s.handoff.refused(c.ctx, workflowID)
		}
		if mayHaveCommitted(err) {
			if stored := s.committedBatch(c.ctx, workflowID, events, expectedSeq); stored != nil {
				s.life.observe(c.ctx, c.lookup, workflowID, expectedSeq+1, stored, s.handoff.observes(workflowID))
			}
		}
		return err
	}
	s.life.observe(c.ctx, c.lookup, workflowID, expectedSeq+1, events, s.handoff.observes(workflowID))
	if len(rows) > 0 {
		s.staged(ctx, c.lookup, workflowID, rows)
		if s.wake != nil {
			s.sendWake()
		}
	}
	return nil
}

// sendWake makes the one non-blocking wake send. A channel the caller closed
// would make the send panic after the rows committed, and the caller would
// take the committed append for a failed one; the panic is reported to the
// error handler instead.
func (s *core) sendWake() {
	defer func() {
		if r := recover(); r != nil {
			s.handle(fmt.Errorf("otelstore: WithOutboxWake: the wake channel is closed: %v", r))
		}
	}()
	select {
	case s.wake <- struct{}{}:
	default: // a wake is already pending: wakes coalesce
	}
}

func (s *core) ReadHistory(ctx context.Context, workflowID eventstore.WorkflowID) (_ []eventstore.Event, err error) {
	c := s.t.begin(ctx, opReadHistory)
	defer c.end(&err)
	c.workflow(workflowID)
	return s.inner.ReadHistory(c.ctx, workflowID)
}

func (s *core) ReadHistoryFrom(ctx context.Context, workflowID eventstore.WorkflowID, fromSeq uint64) (_ []eventstore.Event, err error) {
	c := s.t.begin(ctx, opReadHistoryFrom)
	defer c.end(&err)
	c.workflow(workflowID)
	return s.inner.ReadHistoryFrom(c.ctx, workflowID, fromSeq)
}

func (s *core) ReadRunChain(ctx context.Context, workflowID eventstore.WorkflowID) (_ []eventstore.RunSummary, err error) {
	c := s.t.begin(ctx, opReadRunChain)
	defer c.end(&err)
	c.workflow(workflowID)
	return s.inner.ReadRunChain(c.ctx, workflowID)
}

func (s *core) ListWorkflowIDs(ctx context.Context) (_ []eventstore.WorkflowID, err error) {
	c := s.t.begin(ctx, opListWorkflowIDs)
	defer c.end(&err)
	return s.inner.ListWorkflowIDs(c.ctx)
}

func (s *core) ListActive(ctx context.Context) (_ []eventstore.WorkflowID, err error) {
	c := s.t.begin(ctx, opListActive)
	defer c.end(&err)
	return s.inner.ListActive(c.ctx)
}

func (s *core) ListPaused(ctx context.Context) (_ []eventstore.WorkflowID, err error) {
	c := s.t.begin(ctx, opListPaused)
	defer c.end(&err)
	return s.inner.ListPaused(c.ctx)
}

func (s *core) StreamHeads(ctx context.Context) (_ []eventstore.StreamHead, err error) {
	c := s.t.begin(ctx, opStreamHeads)
	defer c.end(&err)
	return s.inner.StreamHeads(c.ctx)
}

func (s *core) Query(ctx context.Context, filter eventstore.WorkflowFilter) (_ []eventstore.WorkflowSummary, err error) {
	c := s.t.begin(ctx, opQuery)
	defer c.end(&err)
	return s.inner.Query(c.ctx, filter)
}

func (s *core) ScheduleTimer(ctx context.Context, workflowID eventstore.WorkflowID, timerID eventstore.TimerID, fireAt time.Time, armedSeq uint64) (err error) {
	c := s.t.begin(ctx, opScheduleTimer)
	defer c.end(&err)
	c.workflow(workflowID)
	return s.inner.ScheduleTimer(c.ctx, workflowID, timerID, fireAt, armedSeq)
}

func (s *core) ExpiredTimers(ctx context.Context, asOf time.Time) (_ []eventstore.TimerEntry, err error) {
	c := s.t.begin(ctx, opExpiredTimers)
	defer c.end(&err)
	return s.inner.ExpiredTimers(c.ctx, asOf)
}

func (s *core) RetireTimer(ctx context.Context, workflowID eventstore.WorkflowID, timerID eventstore.TimerID, fireAt time.Time, armedSeq uint64) (_ eventstore.TimerRetirement, err error) {
	c := s.t.begin(ctx, opRetireTimer)
	defer c.end(&err)
	c.workflow(workflowID)
	return s.inner.RetireTimer(c.ctx, workflowID, timerID, fireAt, armedSeq)
}

func (s *core) PutPackage(ctx context.Context, record eventstore.PackageRecord) (err error) {
	c := s.t.begin(ctx, opPutPackage)
	defer c.end(&err)
	return s.inner.PutPackage(c.ctx, record)
}

func (s *core) PutPackageWithRoutes(ctx context.Context, record eventstore.PackageRecord, routeWorkflowTypes []string) (err error) {
	c := s.t.begin(ctx, opPutPackageWithRoutes)
	defer c.end(&err)
	return s.inner.PutPackageWithRoutes(c.ctx, record, routeWorkflowTypes)
}

func (s *core) ListPackages(ctx context.Context) (_ []eventstore.PackageRecord, err error) {
	c := s.t.begin(ctx, opListPackages)
	defer c.end(&err)
	return s.inner.ListPackages(c.ctx)
}

func (s *core) DeletePackage(ctx context.Context, workflowType, contentHash string) (err error) {
	c := s.t.begin(ctx, opDeletePackage)
	defer c.end(&err)
	return s.inner.DeletePackage(c.ctx, workflowType, contentHash)
}

func (s *core) PutPackageRoute(ctx context.Context, workflowType, contentHash string) (err error) {
	c := s.t.begin(ctx, opPutPackageRoute)
	defer c.end(&err)
	return s.inner.PutPackageRoute(c.ctx, workflowType, contentHash)
}

func (s *core) ListPackageRoutes(ctx context.Context) (_ []eventstore.PackageRoute, err error) {
	c := s.t.begin(ctx, opListPackageRoutes)
	defer c.end(&err)
	return s.inner.ListPackageRoutes(c.ctx)
}

// workflow puts the workflow ID on the span, if it is recording. It is
// small enough to be inlined: a call without a span pays a comparison.
func (c *call) workflow(workflowID eventstore.WorkflowID) {
	if c.span != nil {
		c.annotateWorkflow(workflowID)
	}
}

func (c *call) annotateWorkflow(workflowID eventstore.WorkflowID) {
	if c.span.IsRecording() {
		c.annotate(catalog.WorkflowID.String(workflowID.String()))
	}
}
