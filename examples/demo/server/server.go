package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// ErrAlreadyRun is returned by [Server.Run] on a server that has already run:
// a Server runs once.
var ErrAlreadyRun = errors.New("server: Run called twice")

// Tuning of the machinery. They are not options: the workload's pace is set by
// the rate and the worker count.
const (
	timerPollInterval    = 20 * time.Millisecond
	dispatchPollInterval = 100 * time.Millisecond
	claimBatch           = 64
	maxCommitAttempts    = 16
	// backlogPerWorker bounds the workflow workers' queue, per worker, past
	// which the starter skips starts instead of piling up work.
	backlogPerWorker = 200
	// signalRetryChance is the probability that a client sends a signal
	// request twice.
	signalRetryChance = 0.3
	// failoverChance is the probability that an agent turn is written through
	// the other node's Sequencer, re-sending the previous turn.
	failoverChance = 0.15
)

// workflowTaskTime is how long a workflow task's code runs between reading
// the history and appending its decision.
var workflowTaskTime = [2]time.Duration{time.Millisecond, 5 * time.Millisecond}

// signalRetryAfter is how long after its first request a client retries.
var signalRetryAfter = [2]time.Duration{0, time.Millisecond}

// Server is the simulated workflow server. Make one with [New] and call
// [Server.Run] once. Its methods are safe for concurrent use; it must not be
// copied.
type Server struct {
	cfg     config
	rng     *lockedRand
	mem     *eventstore.Memory
	keys    keyspace.Store // as given to WithKeyspace, not instrumented
	store   countedStore
	tracker *pairing.Tracker
	// seqs are the Sequencers of two server nodes writing the same keyspace:
	// transcripts go through the first, except after a simulated failover.
	seqs    [2]*keyspace.Sequencer
	wake    chan struct{}
	wfPool  *pool
	actPool *pool
	delays  *delayQueue
	stats   counters
	ran     atomic.Bool
	begin   atomic.Pointer[time.Time]

	mu        sync.Mutex
	workflows map[eventstore.WorkflowID]*workflow
	firing    map[eventstore.TimerEntry]bool
}

// workflow is the server's handle on one workflow. The history in the store is
// the truth; this only carries hints.
type workflow struct {
	id  eventstore.WorkflowID
	typ string
	// runStart is the Seq of the current run's WorkflowStarted as last seen
	// (0: unknown): reads start there instead of at the beginning of the
	// chain.
	runStart atomic.Uint64
	// queued is set while a workflow task for it waits in the queue.
	queued atomic.Bool
}

// New makes a server: an eventstore.Memory and the transcript keyspace (a
// keyspace.Memory, or the store given to [WithKeyspace]), each wrapped by
// otelstore (New and NewKeyspace) on the configured providers, with one
// pairing tracker and an outbox wake channel. It fails only if a decorator or
// the tracker cannot be made.
func New(opts ...Option) (*Server, error) {
	cfg := newConfig(opts)
	s := &Server{
		cfg:       cfg,
		rng:       newLockedRand(cfg.seed),
		mem:       eventstore.NewMemory(),
		keys:      cfg.keys,
		wake:      make(chan struct{}, 1),
		wfPool:    newPool(),
		actPool:   newPool(),
		delays:    newDelayQueue(),
		workflows: map[eventstore.WorkflowID]*workflow{},
		firing:    map[eventstore.TimerEntry]bool{},
	}
	trackerOpts := []pairing.Option{pairing.WithMeterProvider(cfg.meterProvider)}
	if cfg.maxInFlight > 0 {
		trackerOpts = append(trackerOpts, pairing.WithMaxInFlight(cfg.maxInFlight))
	}
	tracker, err := pairing.New(trackerOpts...)
	if err != nil {
		return nil, fmt.Errorf("server: pairing tracker: %w", err)
	}
	s.tracker = tracker
	common := []otelstore.Option{
		otelstore.WithMeterProvider(cfg.meterProvider),
		otelstore.WithTracerProvider(cfg.tracerProvider),
		otelstore.WithNamespace(cfg.namespace),
	}
	store, err := otelstore.New(s.mem, append(common, otelstore.WithPairing(tracker), otelstore.WithOutboxWake(s.wake))...)
	if err != nil {
		return nil, fmt.Errorf("server: event store: %w", err)
	}
	outbox, ok := store.(eventstore.Outbox)
	if !ok {
		return nil, fmt.Errorf("server: the instrumented store hides the Outbox capability: %w", eventstore.ErrUnsupported)
	}
	s.store = countedStore{store: store, outbox: outbox, calls: &s.stats.storeCalls}
	keys, err := otelstore.NewKeyspace(s.keys, common...)
	if err != nil {
		return nil, fmt.Errorf("server: keyspace: %w", err)
	}
	counted := countedKeyspace{inner: keys, calls: &s.stats.keyspaceCalls}
	s.seqs = [2]*keyspace.Sequencer{keyspace.NewSequencer(counted), keyspace.NewSequencer(counted)}
	return s, nil
}

// Run runs the server until ctx is done, then drains and returns the summary.
//
// Draining: no workflow is started any more; for the drain grace
// ([WithDrainGrace]) the started ones go on and may finish; then every
// goroutine stops and each workflow still open has its outbox rows
// cancelled, its open activities cancelled (ActivityCancelled) and is itself
// cancelled (WorkflowCancelled), so that the in-flight gauge is back at zero
// when Run returns. The drain runs on a context that is not cancelled with
// ctx.
//
// Run returns an error only if the server could not start (registering its
// workflow packages failed) or has already run ([ErrAlreadyRun]). Unexpected
// store errors while running are counted in [Summary].Errors.
func (s *Server) Run(ctx context.Context) (Summary, error) {
	if !s.ran.CompareAndSwap(false, true) {
		return Summary{}, ErrAlreadyRun
	}
	begin := time.Now()
	s.begin.Store(&begin)
	// Registration is part of starting up: a stop requested meanwhile does
	// not cancel it (the run then ends at once and drains nothing).
	if err := s.registerPackages(context.WithoutCancel(ctx)); err != nil {
		return Summary{}, err
	}

	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	var wg sync.WaitGroup
	s.wfPool.start(work, s.cfg.workers, &wg)
	s.actPool.start(work, s.cfg.workers, &wg)
	wg.Go(func() { s.delays.run(work) })
	wg.Go(func() { s.runDispatcher(work) })
	wg.Go(func() { s.runTimerPoller(work) })

	s.runStarter(ctx) // returns when ctx is done
	s.awaitFinished(s.cfg.drainGrace)
	stopWork()
	s.wfPool.close()
	s.actPool.close()
	wg.Wait()

	drain := context.WithoutCancel(ctx)
	s.cancelRemaining(drain)
	return s.summary(drain, time.Since(begin)), nil
}

// Stats returns a live snapshot, for a progress display.
func (s *Server) Stats() Stats {
	var elapsed time.Duration
	if b := s.begin.Load(); b != nil {
		elapsed = time.Since(*b)
	}
	return Stats{
		Elapsed:           elapsed,
		WorkflowsStarted:  s.stats.workflowsStarted.Load(),
		WorkflowsFinished: s.stats.completed.Load() + s.stats.failed.Load() + s.stats.cancelled.Load() + s.stats.timedOut.Load() - s.stats.reopened.Load(),
		ActivitiesRunning: s.tracker.InFlight(),
		StoreCalls:        s.stats.storeCalls.Load() + s.stats.keyspaceCalls.Load(),
		Conflicts:         s.stats.totalConflicts(),
	}
}

// packageHash is the content hash of a workflow type's (simulated) package,
// recorded as WorkflowStarted.PackageVersion.
func packageHash(typ string) string {
	sum := sha256.Sum256([]byte("aionotel-demo/" + typ + "/v1"))
	return hex.EncodeToString(sum[:8])
}

// registerPackages stores one package per workflow type and routes the type
// to it, as a server does when it boots.
func (s *Server) registerPackages(ctx context.Context) error {
	for _, typ := range workflowTypes {
		rec := eventstore.PackageRecord{WorkflowType: typ, ContentHash: packageHash(typ), Data: []byte("simulated package " + typ), CreatedAt: s.cfg.now()}
		if err := s.store.PutPackageWithRoutes(ctx, rec, []string{typ}); err != nil {
			return fmt.Errorf("server: register package %s: %w", typ, err)
		}
	}
	if _, err := s.store.ListPackageRoutes(ctx); err != nil {
		return fmt.Errorf("server: list package routes: %w", err)
	}
	return nil
}

// lookup returns the handle of a workflow, making one if needed.
func (s *Server) lookup(id eventstore.WorkflowID, typ string) *workflow {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := s.workflows[id]
	if w == nil {
		w = &workflow{id: id, typ: typ}
		s.workflows[id] = w
	}
	return w
}

// fail counts an unexpected error, unless it is the server's own shutdown
// cancelling a call.
func (s *Server) fail(ctx context.Context, err error) {
	if err == nil || ctx.Err() != nil {
		return
	}
	s.stats.recordError(err)
}

// later runs t on p once d has passed.
func (s *Server) later(d time.Duration, p *pool, t task) {
	s.delays.after(d, func() { p.submit(t) })
}

// commit is the optimistic-concurrency loop every writer of a history goes
// through. It reads the workflow's current run, asks build for a batch
// against that state and appends it at the head it read. When another writer
// got there first, the append fails with a *eventstore.SequenceConflictError:
// commit counts it, reads the events it missed (up to conflict.Found and any
// after), folds them in and asks build again, now at the new head. build may
// return an empty decision (nothing to do, or no longer valid): commit then
// returns nil. After a successful append it arms and retires the decision's
// timers and cancels outbox rows as asked.
func (s *Server) commit(ctx context.Context, w *workflow, who actor, build func(st *runState, now time.Time) *decision) (*decision, error) {
	from := max(w.runStart.Load(), 1)
	events, err := s.store.ReadHistoryFrom(ctx, w.id, from)
	if err != nil {
		return nil, err
	}
	st := newRunState(w.id)
	st.head = from - 1
	st.applyAll(events)
	for attempt := 1; ; attempt++ {
		if st.err != nil {
			return nil, st.err
		}
		d := build(st, s.cfg.now())
		if d.empty() {
			return nil, nil
		}
		err := s.append(ctx, d)
		if err == nil {
			s.afterCommit(ctx, w, d)
			return d, nil
		}
		var conflict *eventstore.SequenceConflictError
		if !errors.As(err, &conflict) {
			return nil, err
		}
		s.stats.conflict(who)
		if attempt == maxCommitAttempts {
			return nil, fmt.Errorf("server: workflow %s: gave up after %d conflicts: %w", w.id, attempt, err)
		}
		missed, err := s.store.ReadHistoryFrom(ctx, w.id, st.head+1)
		if err != nil {
			return nil, err
		}
		st.applyAll(missed)
		if st.head < conflict.Found {
			return nil, fmt.Errorf("server: workflow %s: read up to %d after a conflict that found head %d", w.id, st.head, conflict.Found)
		}
	}
}

func (s *Server) append(ctx context.Context, d *decision) error {
	if len(d.rows) > 0 {
		return s.store.AppendWithOutbox(ctx, d.workflow, d.events, d.head, d.rows)
	}
	return s.store.Append(ctx, d.workflow, d.events, d.head)
}

func (s *Server) afterCommit(ctx context.Context, w *workflow, d *decision) {
	if d.newRunStart > 0 {
		w.runStart.Store(d.newRunStart)
	}
	s.stats.observe(d)
	for _, a := range d.arms {
		s.fail(ctx, s.store.ScheduleTimer(ctx, w.id, a.id, a.fireAt, d.seqOf(a.index)))
	}
	for _, t := range d.retire {
		_, err := s.store.RetireTimer(ctx, t)
		s.fail(ctx, err)
	}
	if d.settleRows {
		_, err := s.store.SettleWorkflowOutboxRowsCancelled(ctx, w.id)
		s.fail(ctx, err)
	}
}

// awaitFinished waits until no workflow is open or grace has passed.
func (s *Server) awaitFinished(grace time.Duration) {
	if grace <= 0 {
		return
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for s.stats.open.Load() > 0 {
		select {
		case <-deadline.C:
			return
		case <-tick.C:
		}
	}
}

// cancelRemaining cancels every workflow still open, once every goroutine of
// the server has stopped: its outbox rows, its open activities, then the
// workflow itself.
func (s *Server) cancelRemaining(ctx context.Context) {
	active, err := s.store.ListActive(ctx)
	s.fail(ctx, err)
	paused, err := s.store.ListPaused(ctx)
	s.fail(ctx, err)
	for _, id := range append(active, paused...) {
		_, err := s.store.SettleWorkflowOutboxRowsCancelled(ctx, id)
		s.fail(ctx, err)
		w := s.lookup(id, "")
		d, err := s.commit(ctx, w, actorShutdown, func(st *runState, now time.Time) *decision {
			d := newDecision(st, now)
			if st.run.IsZero() || st.status.Closed() {
				return d
			}
			ended := map[eventstore.ActivityID]string{}
			s.cancelOpen(d, st, ended)
			d.add(eventstore.WorkflowCancelled{Envelope: d.env(st.run), Reason: "the server is shutting down"})
			s.closeRun(d, st, ended, eventstore.StatusCancelled)
			return d
		})
		s.fail(ctx, err)
		if d != nil {
			s.stats.cancelledAtShutdown.Add(1)
		}
	}
}

func (s *Server) summary(ctx context.Context, elapsed time.Duration) Summary {
	c := &s.stats
	sum := Summary{
		Elapsed:              elapsed,
		WorkflowsStarted:     c.workflowsStarted.Load(),
		Completed:            c.completed.Load(),
		Failed:               c.failed.Load(),
		Cancelled:            c.cancelled.Load(),
		TimedOut:             c.timedOut.Load(),
		ContinuedAsNew:       c.runsContinued.Load(),
		Reopened:             c.reopened.Load(),
		Paused:               c.paused.Load(),
		Resumed:              c.resumed.Load(),
		CancelledAtShutdown:  c.cancelledAtShutdown.Load(),
		Dispatched:           c.dispatched.Load(),
		Succeeded:            c.succeeded.Load(),
		ActivitiesFailed:     c.actFailed.Load(),
		ActivitiesCancelled:  c.actCancelled.Load(),
		ActivitiesTimedOut:   c.actTimedOut.Load(),
		Abandoned:            c.abandoned.Load(),
		Retried:              c.retried.Load(),
		LateResults:          c.lateResults.Load(),
		InFlightAtEnd:        s.tracker.InFlight(),
		Signals:              c.signals.Load(),
		SignalsRejected:      c.signalsRejected.Load(),
		SignalsDuplicate:     c.signalsDuplicate.Load(),
		SchedulesFired:       c.schedules.Load(),
		TimersFired:          c.timersFired.Load(),
		Conflicts:            c.totalConflicts(),
		ConflictsByActor:     map[string]int64{},
		TranscriptEvents:     c.transcriptEvents.Load(),
		TranscriptDuplicates: c.transcriptDuplicates.Load(),
		EphemeralEvents:      c.ephemeral.Load(),
		TranscriptBatches:    c.transcriptBatches.Load(),
		StartsSkipped:        c.startsSkipped.Load(),
	}
	for a := range numActors {
		if n := c.conflicts[a].Load(); n > 0 {
			sum.ConflictsByActor[a.String()] = n
		}
	}
	active, err := s.store.ListActive(ctx)
	s.fail(ctx, err)
	paused, err := s.store.ListPaused(ctx)
	s.fail(ctx, err)
	sum.OpenAtEnd = int64(len(active) + len(paused))
	claimed, err := s.store.CountClaimedOutboxRows(ctx)
	s.fail(ctx, err)
	sum.ClaimedRowsAtEnd = claimed
	// Read the call counts last: the summary's own calls are in them.
	sum.StoreCalls = c.storeCalls.Load()
	sum.KeyspaceCalls = c.keyspaceCalls.Load()
	sum.Errors = c.errCount.Load()
	c.errMu.Lock()
	sum.FirstError = c.firstErr
	c.errMu.Unlock()
	return sum
}
