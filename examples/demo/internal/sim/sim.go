// Package sim is the demo's simulated workflow server: just enough of a
// durable workflow engine, on an event store wrapped by otelstore (the
// in-memory one, or Config.Store: a cluster node's, see Cluster), to move
// every instrument of the aionotel telemetry catalog.
//
// Each workflow runs in its own goroutine and writes its history through
// [Server.commit], the optimistic read-decide-append loop every writer uses:
// activity workers, the timer poller, signalling clients and the scheduler
// all append to the same histories, so writers race and the store refuses
// the loser with a sequence conflict, which the loser resolves by reading
// again and deciding again. Activities are dispatched through the store's
// outbox: the decision that schedules them stages one row each in the same
// commit, and otelstore.WithOutboxWake wakes the dispatcher, which claims
// rows only for the idle workers of a fixed pool (Config.Workers), so work
// waits in the outbox while all are busy. Agent
// activities write their transcripts through two keyspace.Sequencers (two
// simulated nodes) into a keyspace wrapped by otelstore.NewKeyspace.
//
// Closed workflows are removed after the retention (Config.Retention) with
// eventstore.Memory.PruneClosed (a given store keeps them), and their
// transcripts, when the keyspace is the in-memory one, with
// keyspace.Memory.DeleteRun: the memory levels off.
//
// # Load
//
// The server stays healthy when the machine cannot keep up: no work is
// spent on a run that has closed. A run that closes (timed out, failed,
// cancelled) cancels its outbox rows still waiting, so no worker claims
// them; a worker checks, before it starts an activity, that its run is
// open and the activity still in flight, and stops an activity (without
// reporting it) as soon as its run closes. A backlog therefore lasts at
// most a run timeout (Config.RunTimeout), and what waits is bounded by the
// rate times that timeout. The default pool (DefaultWorkers) is sized from
// the rate: on an idle machine work waits for a worker now and then, and
// briefly. The pairing tracker remembers about 50 s of closed runs, so the
// heap levels off within minutes (TestSoakHeapFlat).
//
// A Server runs once; Stats may be called at any time from any goroutine.
package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// Config is what a Server runs with. The zero values of the numbers take
// the defaults named on each field.
type Config struct {
	MeterProvider  metric.MeterProvider // required
	TracerProvider trace.TracerProvider // required
	// LoggerProvider receives one log record per model call a transcript
	// commits (otelstore.WithTranscriptLogs); nil: no log records.
	LoggerProvider log.LoggerProvider
	// ContentCapture lets message text and tool arguments and output into
	// the log records (otelstore.WithContentCapture).
	ContentCapture bool
	// Keyspace receives the transcripts. Nil: a keyspace.Memory owned by the
	// server, whose closed runs are pruned like the histories. A given
	// keyspace keeps its transcripts; the caller closes it after Run.
	Keyspace keyspace.Store
	// KeyspaceSystem is the keyspace's db.system.name ("": otelstore's
	// default).
	KeyspaceSystem string
	Rate           float64 // workflows started per second; 0: 20
	// Workers is the activity worker pool: each runs one activity at a
	// time, from its claim to its result, and rows wait in the outbox while
	// all are busy; 0: DefaultWorkers(Rate).
	Workers     int
	MaxInFlight int           // pairing.WithMaxInFlight; 0: the tracker's default
	Seed        uint64        // seeds every random draw
	Drain       time.Duration // how long started workflows may finish after Run's context ends
	Retention   time.Duration // how long a closed workflow is kept; 0: 10s
	// RunTimeout is each run's execution timeout, a durable timer: a run
	// still open then closes as timed out; 0: DefaultRunTimeout.
	RunTimeout time.Duration
	// Store holds the histories. Nil: an eventstore.Memory owned by the
	// server, whose closed workflows are pruned after the retention. A
	// given store must have the Outbox capability; it keeps its histories.
	Store eventstore.Store
	// StoreSystem is the store's db.system.name ("": otelstore's default).
	StoreSystem string
	// Cluster is the node the server runs on when it shares Store with
	// other servers (see Cluster); nil: the server serves every workflow.
	Cluster Cluster
	// ResumeReports receives what each resume of the decorator did
	// (otelstore.WithResumeReports); nil: nothing is reported.
	ResumeReports func(pairing.ResumeReport, error)
}

// DefaultWorkers is the activity worker pool without Config.Workers at a
// rate of workflows per second: two workers per workflow started per
// second, at least 4 (40 at the default rate). On an idle machine work
// then waits for a worker now and then, for tens to hundreds of
// milliseconds; on a loaded one the waits grow, and rows of runs that
// close meanwhile are shed (see Load).
func DefaultWorkers(rate float64) int {
	return min(1024, max(4, int(math.Ceil(2*rate))))
}

// DefaultRunTimeout is each run's execution timeout without
// Config.RunTimeout: about five times what a run takes on an idle
// machine, so that only the runs meant to time out (a customer who never
// confirms) do, unless the machine is badly overloaded.
const DefaultRunTimeout = 10 * time.Second

// Server is one simulated workflow server. It must not be copied.
type Server struct {
	cfg      Config
	mem      *eventstore.Memory
	store    eventstore.Store  // the histories, decorated
	outbox   eventstore.Outbox // store's Outbox capability
	keysMem  *keyspace.Memory  // nil for a keyspace given in Config
	tokens   *tokenCounter     // between the Sequencers and the decorated keyspace
	agents   interface{ EndAgentSpans() }
	nodes    [2]*keyspace.Sequencer
	wake     chan struct{}
	work     chan eventstore.OutboxRow // claimed rows, to the workers
	slots    chan struct{}             // a worker's slot, taken before its row is claimed
	idle     chan struct{}             // a worker became idle: claim again
	inboxes  sync.Map                  // eventstore.WorkflowID -> chan note
	open     sync.Map                  // eventstore.RunID -> context.Context, cancelled when the run closes
	running  atomic.Int64
	rngMu    sync.Mutex
	rng      *rand.Rand
	statsMu  sync.Mutex
	stats    map[string]int64
	closedMu sync.Mutex
	closed   []closedRuns // oldest first
}

// closedRuns is a finished workflow whose transcripts await pruning.
type closedRuns struct {
	at   time.Time
	wf   eventstore.WorkflowID
	runs []eventstore.RunID
}

// New builds a server: the stores, their decorators, one pairing tracker.
func New(cfg Config) (*Server, error) {
	if cfg.MeterProvider == nil || cfg.TracerProvider == nil {
		return nil, errors.New("sim: meter and tracer providers are required")
	}
	if cfg.Rate <= 0 {
		cfg.Rate = 20
	}
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers(cfg.Rate)
	}
	if cfg.Retention <= 0 {
		cfg.Retention = 10 * time.Second
	}
	if cfg.RunTimeout <= 0 {
		cfg.RunTimeout = DefaultRunTimeout
	}
	s := &Server{
		cfg:   cfg,
		wake:  make(chan struct{}, 1),
		work:  make(chan eventstore.OutboxRow, cfg.Workers),
		slots: make(chan struct{}, cfg.Workers),
		idle:  make(chan struct{}, 1),
		rng:   rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		stats: map[string]int64{},
	}
	// The tracker remembers closed runs and their workflows (about 2.4 a
	// second per workflow started per second) to recognise repeats and
	// late facts: here about 50 s of them, not the default 65,536 entries,
	// which take the better part of an hour to fill at the default rate
	// and hold tens of MiB, so that the heap levels off within minutes.
	remembered := max(1024, int(120*cfg.Rate))
	tracker, err := pairing.New(pairing.WithMeterProvider(cfg.MeterProvider), pairing.WithTracerProvider(cfg.TracerProvider),
		pairing.WithMaxInFlight(cfg.MaxInFlight), pairing.WithMaxRemembered(remembered))
	if err != nil {
		return nil, err
	}
	mp, tp := otelstore.WithMeterProvider(cfg.MeterProvider), otelstore.WithTracerProvider(cfg.TracerProvider)
	histories := cfg.Store
	if histories == nil {
		s.mem = eventstore.NewMemory()
		histories = s.mem
	}
	opts := []otelstore.Option{mp, tp, otelstore.WithPairing(tracker), otelstore.WithOutboxWake(s.wake), otelstore.WithResumeReports(cfg.ResumeReports)}
	if cfg.StoreSystem != "" {
		opts = append(opts, otelstore.WithDBSystem(cfg.StoreSystem))
	}
	s.store, err = otelstore.New(histories, opts...)
	if err != nil {
		return nil, err
	}
	var ok bool
	if s.outbox, ok = s.store.(eventstore.Outbox); !ok { // otelstore keeps the inner store's Outbox
		return nil, errors.New("sim: the store has no outbox (eventstore.Outbox)")
	}
	inner := cfg.Keyspace
	if inner == nil {
		s.keysMem = keyspace.NewMemory()
		inner = s.keysMem
	}
	kopts := []otelstore.KeyspaceOption{mp, tp, otelstore.WithContentCapture(cfg.ContentCapture)}
	if cfg.KeyspaceSystem != "" {
		kopts = append(kopts, otelstore.WithDBSystem(cfg.KeyspaceSystem))
	}
	if cfg.LoggerProvider != nil {
		kopts = append(kopts, otelstore.WithLoggerProvider(cfg.LoggerProvider), otelstore.WithTranscriptLogs(true))
	}
	// The log records join the live activity span the shared tracker
	// keeps, else their run's trace.
	kopts = append(kopts, otelstore.WithActivitySpans(tracker))
	keys, err := otelstore.NewKeyspace(inner, kopts...)
	if err != nil {
		return nil, err
	}
	s.tokens = &tokenCounter{Store: keys, totals: map[TokenKey]uint64{}}
	s.agents, _ = keys.(interface{ EndAgentSpans() })
	cache := keyspace.WithMaxCachedStreams(256) // a transcript is written within one activity
	s.nodes = [2]*keyspace.Sequencer{keyspace.NewSequencer(s.tokens, cache), keyspace.NewSequencer(s.tokens, cache)}
	return s, nil
}

// Run starts workflows at the configured rate until ctx ends, lets the
// started ones finish for the drain time, then cancels those still open and
// returns once every goroutine has stopped. Every activity is then settled:
// no aion.inflight_activities slot stays taken.
func (s *Server) Run(ctx context.Context) {
	// A server resumes its telemetry from the store's history before it
	// serves: the activities a previous process left in flight are in the
	// gauges again, and their terminals are recorded when they commit. (The
	// in-memory store starts empty, so there is nothing to resume here; a
	// durable store would have it.)
	// On a cluster the decorator resumes each shard as the node acquires
	// it.
	if s.cfg.Cluster == nil {
		if report, err := otelstore.Resume(ctx, s.store); err == nil {
			s.count("resume.workflows", int64(report.Workflows))
		}
	}
	hard, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	var loops, flows sync.WaitGroup
	loops.Go(func() { s.dispatch(hard) })
	loops.Go(func() { s.pollTimers(hard) })
	loops.Go(func() { s.prune(hard) })
	for range s.cfg.Workers {
		loops.Go(func() { s.activityWorker(hard) })
	}

	tick := time.NewTicker(time.Duration(float64(time.Second) / s.cfg.Rate))
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-tick.C:
			kind := workflowKinds[s.weighted(5, 3, 2)]
			flows.Go(func() { s.runWorkflow(hard, kind) })
		}
	}
	tick.Stop()

	done := make(chan struct{})
	go func() { flows.Wait(); close(done) }()
	drain := time.NewTimer(s.cfg.Drain)
	select {
	case <-done:
	case <-drain.C:
	}
	drain.Stop()
	stop() // open workflows cancel themselves
	<-done
	loops.Wait()
	s.cancelOrphans(ctx)
	if s.agents != nil {
		// A transcript cut short has no "completed" status: its agent
		// span ends here, before the exporters flush.
		s.agents.EndAgentSpans()
	}
}

// Flush waits, within ctx, for the histories the telemetry decorator
// reads in the background (a write to a workflow another node or an
// earlier process began: otelstore.Flush), so that a stopping server
// records the completions and spans they hold before its providers shut
// down.
func (s *Server) Flush(ctx context.Context) error {
	return otelstore.Flush(ctx, s.store)
}

// Stats returns a copy of the server's counts, by name.
func (s *Server) Stats() map[string]int64 {
	s.statsMu.Lock()
	defer s.statsMu.Unlock()
	out := make(map[string]int64, len(s.stats)+1)
	for k, v := range s.stats {
		out[k] = v
	}
	out["activities.running"] = s.running.Load()
	return out
}

// StatNames returns the names of stats in order.
func StatNames(stats map[string]int64) []string {
	names := make([]string, 0, len(stats))
	for k := range stats {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}

func (s *Server) count(name string, n int64) {
	s.statsMu.Lock()
	s.stats[name] += n
	s.statsMu.Unlock()
}

// weighted draws an index with the given weights.
func (s *Server) weighted(weights ...int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	s.rngMu.Lock()
	n := s.rng.IntN(total)
	s.rngMu.Unlock()
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	return len(weights) - 1
}

func (s *Server) chance(percent int) bool { return s.weighted(percent, 100-percent) == 0 }

// pause waits between lo and hi (simulated work or think time), or until
// ctx ends.
func (s *Server) pause(ctx context.Context, lo, hi time.Duration) error {
	s.rngMu.Lock()
	d := lo + time.Duration(s.rng.Int64N(int64(hi-lo)+1))
	s.rngMu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// history is what writers need to know of a workflow's history to decide.
type history struct {
	head    uint64
	run     eventstore.RunID
	started bool
	closed  bool
	open    map[eventstore.ActivityID]bool // scheduled, not ended
	seen    map[string]bool                // signal request IDs
}

func fold(events []eventstore.Event) history {
	h := history{head: uint64(len(events)), open: map[eventstore.ActivityID]bool{}, seen: map[string]bool{}}
	for _, ev := range events {
		switch e := ev.(type) {
		case eventstore.WorkflowStarted:
			h.run, h.started, h.closed = e.RunID, true, false
			clear(h.open)
		case eventstore.WorkflowReopened:
			h.closed = false
		case eventstore.WorkflowCompleted, eventstore.WorkflowFailed, eventstore.WorkflowCancelled,
			eventstore.WorkflowTimedOut, eventstore.WorkflowContinuedAsNew:
			h.closed = true
		case eventstore.ActivityScheduled:
			h.open[e.ActivityID] = true
		case eventstore.ActivityCompleted:
			delete(h.open, e.ActivityID)
		case eventstore.ActivityFailed:
			if e.Error.Kind == eventstore.Terminal {
				delete(h.open, e.ActivityID)
			}
		case eventstore.ActivityCancelled:
			delete(h.open, e.ActivityID)
		case eventstore.ActivityTimedOut:
			delete(h.open, e.ActivityID)
		case eventstore.SignalReceived:
			h.seen[string(e.Input.Data)] = true
		}
	}
	return h
}

// running reports whether the history's current run is run and open.
func (h history) running(run eventstore.RunID) bool { return h.started && !h.closed && h.run == run }

// decision is what a writer appends: events, and outbox rows staged with
// them.
type decision struct {
	events []eventstore.Event
	rows   []eventstore.OutboxRow
}

// commit is the optimistic write loop: read the history, decide, append at
// the head read; on a sequence conflict read again and decide again. A nil
// decision (the run closed meanwhile, the signal is a duplicate) writes
// nothing and returns head 0. afterRead, if not nil, runs once after the
// first read: racing writers use it to read the same head. It returns the
// Seq of the first appended event.
func (s *Server) commit(ctx context.Context, wf eventstore.WorkflowID, afterRead func(), decide func(history) *decision) (uint64, error) {
	for attempt := 0; ; attempt++ {
		events, err := s.store.ReadHistory(ctx, wf)
		if err != nil {
			return 0, err
		}
		h := fold(events)
		if afterRead != nil && attempt == 0 {
			afterRead()
		}
		d := decide(h)
		if d == nil {
			return 0, nil
		}
		now := time.Now()
		for i, ev := range d.events {
			env := ev.EventEnvelope()
			env.RecordedAt = now
			d.events[i] = eventstore.WithEnvelope(ev, env)
		}
		for i := range d.rows {
			d.rows[i].CreatedAt = now
		}
		err = s.append(wf, func() error {
			return s.outbox.AppendWithOutbox(ctx, eventstore.RecorderToken(), wf, d.events, h.head, d.rows)
		})
		if err == nil {
			return h.head + 1, nil
		}
		if !errors.Is(err, eventstore.ErrSequenceConflict) || attempt == 20 {
			return 0, fmt.Errorf("append to %s: %w", wf, err)
		}
		s.count("store.conflicts", 1)
	}
}

// barrier lets n goroutines continue only once all have arrived, or their
// context ended.
type barrier struct {
	n  atomic.Int32
	ch chan struct{}
}

func newBarrier(n int32) *barrier {
	b := &barrier{ch: make(chan struct{})}
	b.n.Store(n)
	return b
}

func (b *barrier) wait(ctx context.Context) {
	if b.n.Add(-1) == 0 {
		close(b.ch)
	}
	select {
	case <-b.ch:
	case <-ctx.Done():
	}
}

// prune removes closed workflows older than the retention, and their
// transcripts from the server's own keyspace.
func (s *Server) prune(ctx context.Context) {
	tick := time.NewTicker(s.cfg.Retention / 4)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		cutoff := time.Now().Add(-s.cfg.Retention)
		if s.mem != nil {
			s.count("workflows.pruned", int64(s.mem.PruneClosed(cutoff)))
		}
		s.closedMu.Lock()
		i := 0
		for ; i < len(s.closed) && s.closed[i].at.Before(cutoff); i++ {
			for _, run := range s.closed[i].runs {
				s.keysMem.DeleteRun(s.closed[i].wf, run)
			}
		}
		s.closed = append(s.closed[:0], s.closed[i:]...)
		s.closedMu.Unlock()
	}
}

// forget records a finished workflow for the transcript retention.
func (s *Server) forget(wf eventstore.WorkflowID, runs []eventstore.RunID) {
	if s.keysMem == nil {
		return
	}
	s.closedMu.Lock()
	s.closed = append(s.closed, closedRuns{at: time.Now(), wf: wf, runs: runs})
	s.closedMu.Unlock()
}
