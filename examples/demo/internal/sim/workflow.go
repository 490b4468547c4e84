package sim

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// workflowKinds are the simulated workflow types, started with weights
// 5:3:2.
var workflowKinds = []string{"checkout", "onboarding", "report"}

// Closing statuses a workflow body returns; "" means the run goes on.
const (
	completed      = "completed"
	failed         = "failed"
	cancelled      = "cancelled"
	timedOut       = "timed_out"
	continuedAsNew = "continued_as_new"
)

// note tells a workflow what another writer committed to its history.
type note struct {
	act     eventstore.ActivityID
	outcome string // an activity's outcome
	timer   eventstore.TimerID
	signal  string
}

// flow is one workflow's goroutine state.
type flow struct {
	s        *Server
	id       eventstore.WorkflowID
	kind     string
	run      eventstore.RunID
	runs     []eventstore.RunID
	deadline eventstore.TimerEntry
	next     eventstore.ActivityID
	inbox    chan note
	done     chan struct{}
	signals  []string // received, not yet consumed
	clients  sync.WaitGroup
}

// notify hands n to the workflow's goroutine, if it still runs.
func (s *Server) notify(ctx context.Context, wf eventstore.WorkflowID, n note) {
	v, ok := s.inboxes.Load(wf)
	if !ok {
		return
	}
	f := v.(*flow)
	select {
	case f.inbox <- n:
	case <-f.done:
	case <-ctx.Done():
	}
}

func (s *Server) runWorkflow(ctx context.Context, kind string) {
	id, ok := s.newWorkflowID()
	if !ok {
		return // the node serves no shard now
	}
	f := &flow{s: s, id: id, kind: kind, inbox: make(chan note, 8), done: make(chan struct{})}
	s.inboxes.Store(f.id, f)
	defer func() {
		s.closeRun(f.run)
		close(f.done)
		s.inboxes.Delete(f.id)
		f.clients.Wait()
		s.forget(f.id, f.runs)
	}()
	if err := f.startRun(ctx, nil); err != nil {
		return
	}
	var status string
	var err error
	switch kind {
	case "checkout":
		status, err = f.checkout(ctx)
	case "onboarding":
		status, err = f.onboarding(ctx)
	default:
		status, err = f.report(ctx)
	}
	if err == nil {
		err = f.close(ctx, status)
	}
	if err != nil { // stopped (or a store error): cancel what is left
		ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer stop()
		if f.close(ctx, cancelled) == nil {
			_, _ = s.outbox.SettleWorkflowOutboxRowsCancelled(ctx, f.id)
		}
	}
}

// checkout: reserve, charge, wait for the payment confirmation (or a
// cancellation, or nothing until the run times out), ship.
func (f *flow) checkout(ctx context.Context) (string, error) {
	if st, err := f.steps(ctx, "reserve_inventory"); st != "" || err != nil {
		return st, err
	}
	signal := "payment_confirmed"
	switch f.s.weighted(90, 5, 5) {
	case 1:
		signal = "cancel_order"
	case 2:
		signal = "" // the customer walks away: the run times out
	}
	f.client(ctx, signal)
	if st, err := f.steps(ctx, "charge_card"); st != "" || err != nil {
		return st, err
	}
	got, st, err := f.awaitSignal(ctx)
	if st != "" || err != nil {
		return st, err
	}
	if got == "cancel_order" {
		return cancelled, nil
	}
	if st, err := f.steps(ctx, "ship_order"); st != "" || err != nil {
		return st, err
	}
	return completed, nil
}

// onboarding: create the account, two activities in parallel, a durable
// nap, an agent's welcome tour, the customer's profile, a welcome e-mail.
func (f *flow) onboarding(ctx context.Context) (string, error) {
	for _, step := range [][]string{{"create_account"}, {"provision_workspace", "configure_billing"}} {
		if st, err := f.steps(ctx, step...); st != "" || err != nil {
			return st, err
		}
	}
	if st, err := f.sleep(ctx, "nap", 50*time.Millisecond+time.Duration(f.s.weighted(1, 1, 1))*100*time.Millisecond); st != "" || err != nil {
		return st, err
	}
	f.client(ctx, "profile_completed")
	if st, err := f.steps(ctx, "welcome_tour"); st != "" || err != nil {
		return st, err
	}
	if _, st, err := f.awaitSignal(ctx); st != "" || err != nil {
		return st, err
	}
	if st, err := f.steps(ctx, "send_welcome_email"); st != "" || err != nil {
		return st, err
	}
	return completed, nil
}

// report: fired by its schedule, an agent summarises and a report is
// published; then the run continues as new, for three runs.
func (f *flow) report(ctx context.Context) (string, error) {
	for gen := 1; ; gen++ {
		if _, err := f.s.commit(ctx, f.id, nil, func(h history) *decision {
			if !h.running(f.run) {
				return nil
			}
			return &decision{events: []eventstore.Event{eventstore.ScheduleTriggered{Envelope: f.env(), ScheduleID: "hourly-report"}}}
		}); err != nil {
			return "", err
		}
		f.s.count("schedules.fired", 1)
		if st, err := f.steps(ctx, "summarise", "collect_figures"); st != "" || err != nil {
			return st, err
		}
		if st, err := f.steps(ctx, "publish_report"); st != "" || err != nil {
			return st, err
		}
		if gen == 3 {
			return completed, nil
		}
		if err := f.startRun(ctx, f.runs); err != nil {
			return "", err
		}
	}
}

func (f *flow) env() eventstore.Envelope { return eventstore.Envelope{RunID: f.run} }

// startRun appends the WorkflowStarted of a new run, with its execution
// timeout; after the first run it continues the current one as new.
func (f *flow) startRun(ctx context.Context, previous []eventstore.RunID) error {
	old, run := f.run, eventstore.NewRunID()
	timer := eventstore.TimerID(fmt.Sprintf("run-timeout-%d", len(previous)+1))
	fireAt := time.Now().Add(f.s.cfg.RunTimeout)
	seq, err := f.s.commit(ctx, f.id, nil, func(h history) *decision {
		var events []eventstore.Event
		if previous != nil {
			if !h.running(old) {
				return nil
			}
			events = append(events, eventstore.WorkflowContinuedAsNew{Envelope: f.env(), NewRunID: run})
		} else if h.started {
			return nil
		}
		env := eventstore.Envelope{RunID: run}
		return &decision{events: append(events,
			eventstore.WorkflowStarted{Envelope: env, WorkflowType: f.kind},
			eventstore.TimerScheduled{Envelope: env, TimerID: timer, FireAt: fireAt})}
	})
	if err != nil {
		return err
	}
	if seq == 0 {
		return fmt.Errorf("workflow %s: run closed under it", f.id)
	}
	f.s.closeRun(old)
	f.s.openRun(run)
	if previous != nil {
		f.s.count("workflows."+continuedAsNew, 1)
		f.retireDeadline(ctx)
		seq++ // the timer follows WorkflowContinuedAsNew and WorkflowStarted
	}
	f.s.count("workflows.started", 1)
	f.run, f.runs, f.next = run, append(f.runs, run), 0 // even if arming the timeout fails: this run is open
	f.deadline = eventstore.TimerEntry{WorkflowID: f.id, TimerID: timer, FireAt: fireAt, ArmedSeq: seq + 1}
	return f.s.store.ScheduleTimer(ctx, f.id, timer, fireAt, seq+1)
}

func (f *flow) retireDeadline(ctx context.Context) {
	d := f.deadline
	_, _ = f.s.store.RetireTimer(ctx, f.id, d.TimerID, d.FireAt, d.ArmedSeq)
}

// close appends the run's closing event.
func (f *flow) close(ctx context.Context, status string) error {
	var ev eventstore.Event
	switch status {
	case completed:
		ev = eventstore.WorkflowCompleted{Envelope: f.env()}
	case failed:
		ev = eventstore.WorkflowFailed{Envelope: f.env(), Message: "a required activity failed"}
	case timedOut:
		ev = eventstore.WorkflowTimedOut{Envelope: f.env()}
	default:
		ev = eventstore.WorkflowCancelled{Envelope: f.env()}
	}
	seq, err := f.s.commit(ctx, f.id, nil, func(h history) *decision {
		if !h.running(f.run) {
			return nil
		}
		return &decision{events: []eventstore.Event{ev}}
	})
	if err != nil {
		return err
	}
	f.s.closeRun(f.run) // its activities stop
	if seq > 0 {
		f.s.count("workflows."+status, 1)
		if status != completed {
			// Rows still waiting (a sibling of a failed activity, all of a
			// run that timed out) are never claimed.
			_, _ = f.s.outbox.SettleWorkflowOutboxRowsCancelled(ctx, f.id)
		}
	}
	f.retireDeadline(ctx)
	return nil
}

// steps schedules activities in one decision, staging an outbox row for
// each, and waits for their outcomes. It returns the status that closes the
// run at the first activity that did not succeed ("" when all did). A
// failed step is sometimes reopened by an operator and run again.
func (f *flow) steps(ctx context.Context, types ...string) (string, error) {
	for {
		st, err := f.schedule(ctx, types)
		if st != failed || err != nil || !f.s.chance(30) {
			return st, err
		}
		if err := f.close(ctx, failed); err != nil {
			return "", err
		}
		seq, err := f.s.commit(ctx, f.id, nil, func(h history) *decision {
			if !h.started || !h.closed || h.run != f.run {
				return nil
			}
			return &decision{events: []eventstore.Event{eventstore.WorkflowReopened{Envelope: f.env(), Reason: "operator retry"}}}
		})
		if err != nil || seq == 0 {
			return "", fmt.Errorf("workflow %s: reopen: %w", f.id, err)
		}
		f.s.count("workflows.reopened", 1)
		f.s.openRun(f.run)
		f.deadline.FireAt = time.Now().Add(f.s.cfg.RunTimeout)
		if err := f.s.store.ScheduleTimer(ctx, f.id, f.deadline.TimerID, f.deadline.FireAt, f.deadline.ArmedSeq); err != nil {
			return "", err
		}
	}
}

func (f *flow) schedule(ctx context.Context, types []string) (string, error) {
	d := &decision{}
	waiting := map[eventstore.ActivityID]bool{}
	for _, typ := range types {
		id := f.next
		f.next++
		waiting[id] = true
		d.events = append(d.events, eventstore.ActivityScheduled{Envelope: f.env(), ActivityID: id, ActivityType: typ, TaskQueue: "default"})
		d.rows = append(d.rows, eventstore.OutboxRow{DispatchKey: eventstore.DispatchKey(f.id, f.run, id), WorkflowID: f.id, RunID: f.run, Ordinal: id, ActivityType: typ})
	}
	seq, err := f.s.commit(ctx, f.id, nil, func(h history) *decision {
		if !h.running(f.run) {
			return nil
		}
		return d
	})
	if err != nil || seq == 0 {
		return "", fmt.Errorf("workflow %s: schedule: %w", f.id, err)
	}
	for len(waiting) > 0 {
		n, st, err := f.await(ctx)
		if st != "" || err != nil {
			return st, err
		}
		if !waiting[n.act] || n.outcome == "" {
			continue
		}
		delete(waiting, n.act)
		switch n.outcome {
		case "failed", "cancelled", "timed_out":
			return n.outcome, nil
		}
	}
	return "", nil
}

// await returns the next note, or the status timedOut when the run's
// timeout fired, or ctx's error.
func (f *flow) await(ctx context.Context) (note, string, error) {
	for {
		select {
		case <-ctx.Done():
			return note{}, "", ctx.Err()
		case n := <-f.inbox:
			switch {
			case n.timer == f.deadline.TimerID:
				return n, timedOut, nil
			case n.signal != "":
				f.signals = append(f.signals, n.signal)
			default:
				return n, "", nil
			}
		}
	}
}

func (f *flow) awaitSignal(ctx context.Context) (string, string, error) {
	for len(f.signals) == 0 {
		if _, st, err := f.await(ctx); st != "" || err != nil {
			return "", st, err
		}
	}
	sig := f.signals[0]
	f.signals = f.signals[1:]
	return sig, "", nil
}

// sleep arms a durable timer and waits for it to fire.
func (f *flow) sleep(ctx context.Context, id eventstore.TimerID, d time.Duration) (string, error) {
	fireAt := time.Now().Add(d)
	seq, err := f.s.commit(ctx, f.id, nil, func(h history) *decision {
		if !h.running(f.run) {
			return nil
		}
		return &decision{events: []eventstore.Event{eventstore.TimerScheduled{Envelope: f.env(), TimerID: id, FireAt: fireAt}}}
	})
	if err != nil || seq == 0 {
		return "", fmt.Errorf("workflow %s: timer: %w", f.id, err)
	}
	if err := f.s.store.ScheduleTimer(ctx, f.id, id, fireAt, seq); err != nil {
		return "", err
	}
	for {
		n, st, err := f.await(ctx)
		if st != "" || err != nil || n.timer == id {
			return st, err
		}
	}
}

// client sends the signal after a while, twice at once (a client retry with
// the same request ID): the two appends race at the same head, one of them
// meets a sequence conflict, reads again and drops its signal as a
// duplicate. An empty name sends nothing.
func (f *flow) client(ctx context.Context, name string) {
	if name == "" {
		return
	}
	run, s := f.run, f.s
	req := fmt.Sprintf("%s/%s/%d", f.id, name, len(f.runs))
	f.clients.Go(func() {
		if s.pause(ctx, 10*time.Millisecond, 300*time.Millisecond) != nil {
			return
		}
		race := newBarrier(2)
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				seq, err := s.commit(ctx, f.id, func() { race.wait(ctx) }, func(h history) *decision {
					if !h.running(run) || h.seen[req] {
						return nil
					}
					return &decision{events: []eventstore.Event{eventstore.SignalReceived{Envelope: eventstore.Envelope{RunID: run},
						SignalName: name, Input: eventstore.Payload{ContentType: "text/plain", Data: []byte(req)}}}}
				})
				switch {
				case err != nil:
				case seq > 0:
					s.count("signals.delivered", 1)
					s.notify(ctx, f.id, note{signal: name})
				default:
					s.count("signals.dropped", 1)
				}
			})
		}
		wg.Wait()
	})
}

// openRun records that run is open in this server: the context of its
// activities (runContext) ends when closeRun is called for it.
func (s *Server) openRun(run eventstore.RunID) {
	ctx, cancel := context.WithCancel(context.Background())
	if old, loaded := s.open.Swap(run, runLife{ctx, cancel}); loaded {
		old.(runLife).cancel()
	}
}

// closeRun ends the context of run's activities: they stop and report
// nothing.
func (s *Server) closeRun(run eventstore.RunID) {
	if v, ok := s.open.LoadAndDelete(run); ok {
		v.(runLife).cancel()
	}
}

// runContext returns a context for an activity of run: ctx, also ended
// when the run closes in this server. A run this server does not know
// (an orphan taken over) gets ctx; the worker's liveness check guards it.
func (s *Server) runContext(ctx context.Context, run eventstore.RunID) (context.Context, context.CancelFunc) {
	c, cancel := context.WithCancel(ctx)
	v, ok := s.open.Load(run)
	if !ok {
		return c, cancel
	}
	stop := context.AfterFunc(v.(runLife).ctx, cancel)
	return c, func() { stop(); cancel() }
}

// runLife is an open run's context and its cancellation.
type runLife struct {
	ctx    context.Context
	cancel context.CancelFunc
}
