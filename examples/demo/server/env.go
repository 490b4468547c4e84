package server

import (
	"context"
	"fmt"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// The world around the server: clients starting workflows and sending
// signals, operators pausing, resuming and reopening them, and schedules
// firing. Each is a task on the workflow workers, planned through the delay
// queue, and each writes through commit like any other writer, so each can
// lose a race and retry.

var typeWeights = func() []int {
	w := make([]int, len(workflowTypes))
	for i, t := range workflowTypes {
		w[i] = workflowSpecs[t].weight
	}
	return w
}()

// runStarter starts workflows at the configured rate until ctx is done. After
// a stall it does not catch up by more than one second's worth, and it skips
// starts while the workflow workers' backlog is too long.
func (s *Server) runStarter(ctx context.Context) {
	interval := max(time.Duration(float64(time.Second)/s.cfg.rate), 5*time.Millisecond)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	begin := time.Now()
	burst := max(1, int(s.cfg.rate))
	started := 0
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			due := int(s.cfg.rate * now.Sub(begin).Seconds())
			if due-started > burst {
				started = due - burst
			}
			for ; started < due; started++ {
				if s.wfPool.backlog() > backlogPerWorker*s.cfg.workers {
					s.stats.startsSkipped.Add(1)
					continue
				}
				s.startWorkflow()
			}
		}
	}
}

// startWorkflow records a new workflow's WorkflowStarted (and its execution
// timeout), plans what the outside world will do to it, and queues its first
// workflow task.
func (s *Server) startWorkflow() {
	typ := workflowTypes[s.rng.pick(typeWeights)]
	spec := workflowSpecs[typ]
	w := s.lookup(s.rng.workflowID(), typ)
	run := s.rng.runID()
	in := startInput{Generation: 1, Customer: fmt.Sprintf("customer-%d", s.rng.intN(10000))}
	s.wfPool.submit(func(ctx context.Context) {
		d, err := s.commit(ctx, w, actorStarter, func(st *runState, now time.Time) *decision {
			d := newDecision(st, now)
			if !st.run.IsZero() {
				return d
			}
			i := d.add(eventstore.WorkflowStarted{
				Envelope:       d.env(run),
				WorkflowType:   typ,
				Input:          jsonPayload(in),
				PackageVersion: packageHash(typ),
			})
			d.newRunStart = d.seqOf(i)
			d.arm(run, execTimerID(1, 0), now.Add(spec.execTimeout))
			return d
		})
		if err != nil || d == nil {
			s.fail(ctx, err)
			return
		}
		s.planWorld(w, spec)
		s.wakeWorkflow(w)
	})
}

// planWorld plans the signals, the operator's pause and the schedule of a
// new workflow.
func (s *Server) planWorld(w *workflow, spec *workflowSpec) {
	for _, sp := range spec.signals {
		if !s.rng.chance(sp.chance) {
			continue
		}
		request := fmt.Sprintf("%x", s.rng.uuid())
		at := s.rng.between(sp.after)
		s.later(at, s.wfPool, func(ctx context.Context) { s.sendSignal(ctx, w, sp.name, request) })
		if s.rng.chance(signalRetryChance) {
			// The client's first request timed out on its side and it sent
			// the same request again: both race to the history.
			s.later(at+s.rng.between(signalRetryAfter), s.wfPool, func(ctx context.Context) { s.sendSignal(ctx, w, sp.name, request) })
		}
	}
	if s.rng.chance(spec.pause) {
		s.later(s.rng.between(ms(50, 800)), s.wfPool, func(ctx context.Context) { s.pauseWorkflow(ctx, w) })
	}
	if spec.schedule[1] > 0 {
		s.planTrigger(w, spec)
	}
}

// sendSignal delivers a signal to the workflow's current run; a closed
// workflow refuses it. The request ID makes a client's retry idempotent: a
// request already in the run's history is not recorded again.
func (s *Server) sendSignal(ctx context.Context, w *workflow, name, request string) {
	refused, duplicate := false, false
	d, err := s.commit(ctx, w, actorSignal, func(st *runState, now time.Time) *decision {
		d := newDecision(st, now)
		refused = st.run.IsZero() || st.status.Closed()
		duplicate = !refused && st.requests[request]
		if !refused && !duplicate {
			d.add(eventstore.SignalReceived{
				Envelope:   d.env(st.run),
				SignalName: name,
				Input:      jsonPayload(signalInput{RequestID: request}),
			})
		}
		return d
	})
	switch {
	case err != nil:
		s.fail(ctx, err)
	case refused:
		s.stats.signalsRejected.Add(1)
	case duplicate:
		s.stats.signalsDuplicate.Add(1)
	case d != nil:
		s.wakeWorkflow(w)
	}
}

// pauseWorkflow is an operator pausing a running workflow for a while; a
// paused run records what happens to it but decides nothing until resumed.
func (s *Server) pauseWorkflow(ctx context.Context, w *workflow) {
	d, err := s.commit(ctx, w, actorOperator, func(st *runState, now time.Time) *decision {
		d := newDecision(st, now)
		if st.status == eventstore.StatusRunning {
			d.add(eventstore.WorkflowPaused{Envelope: d.env(st.run), Reason: "operator: holding for a manual review"})
		}
		return d
	})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	if d != nil {
		s.later(s.rng.between(ms(100, 500)), s.wfPool, func(ctx context.Context) { s.resumeWorkflow(ctx, w) })
	}
}

func (s *Server) resumeWorkflow(ctx context.Context, w *workflow) {
	d, err := s.commit(ctx, w, actorOperator, func(st *runState, now time.Time) *decision {
		d := newDecision(st, now)
		if st.status == eventstore.StatusPaused {
			d.add(eventstore.WorkflowResumed{Envelope: d.env(st.run)})
		}
		return d
	})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	if d != nil {
		s.wakeWorkflow(w)
	}
}

// planReopen has an operator reopen a failed workflow, sometimes.
func (s *Server) planReopen(w *workflow, spec *workflowSpec) {
	if !s.rng.chance(spec.reopen) {
		return
	}
	s.later(s.rng.between(ms(100, 400)), s.wfPool, func(ctx context.Context) {
		d, err := s.commit(ctx, w, actorOperator, func(st *runState, now time.Time) *decision {
			d := newDecision(st, now)
			if st.status == eventstore.StatusFailed && st.reopens == 0 {
				d.add(eventstore.WorkflowReopened{Envelope: d.env(st.run), Reason: "operator: retrying after a fix"})
			}
			return d
		})
		if err != nil {
			s.fail(ctx, err)
			return
		}
		if d != nil {
			if spec.schedule[1] > 0 {
				s.planTrigger(w, spec)
			}
			s.wakeWorkflow(w)
		}
	})
}

// planTrigger plans the next firing of a workflow's schedule.
func (s *Server) planTrigger(w *workflow, spec *workflowSpec) {
	s.later(s.rng.between(spec.schedule), s.wfPool, func(ctx context.Context) { s.fireSchedule(ctx, w, spec) })
}

// fireSchedule records a ScheduleTriggered on the workflow and plans the next
// one; the schedule stops once the workflow is closed.
func (s *Server) fireSchedule(ctx context.Context, w *workflow, spec *workflowSpec) {
	stopped := false
	d, err := s.commit(ctx, w, actorScheduler, func(st *runState, now time.Time) *decision {
		d := newDecision(st, now)
		stopped = st.run.IsZero() || st.status.Closed()
		if !stopped {
			d.add(eventstore.ScheduleTriggered{Envelope: d.env(st.run), ScheduleID: "report/" + w.id.String()[:8]})
		}
		return d
	})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	if stopped {
		return
	}
	if d != nil {
		s.wakeWorkflow(w)
	}
	s.planTrigger(w, spec)
}

// wakeWorkflow queues a workflow task, unless one is already queued. A task
// that is running does not count: a second one may start and race it.
func (s *Server) wakeWorkflow(w *workflow) {
	if w.queued.CompareAndSwap(false, true) {
		s.wfPool.submit(func(ctx context.Context) {
			w.queued.Store(false)
			s.runWorkflow(ctx, w)
		})
	}
}

// runWorkflow is a workflow task: fold the current run, decide, append.
//
// Between reading the history and appending, the workflow's code runs
// (simulated: a short pause). Whatever lands in the meantime (an activity
// result, a signal, a timer, another task of the same workflow) makes the
// append conflict, and commit decides again from the new head.
func (s *Server) runWorkflow(ctx context.Context, w *workflow) {
	d, err := s.commit(ctx, w, actorRunner, func(st *runState, now time.Time) *decision {
		d := s.decide(st, now)
		if !d.empty() {
			pause(ctx, s.rng.between(workflowTaskTime))
		}
		return d
	})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	if d == nil {
		return
	}
	switch d.closes {
	case eventstore.StatusFailed:
		if spec := workflowSpecs[w.typ]; spec != nil {
			s.planReopen(w, spec)
		}
	case eventstore.StatusContinuedAsNew:
		s.wakeWorkflow(w)
	}
}

// runTimerPoller asks the store for expired timers and fires each on a
// workflow worker, until ctx is done.
func (s *Server) runTimerPoller(ctx context.Context) {
	tick := time.NewTicker(timerPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		due, err := s.store.ExpiredTimers(ctx, s.cfg.now())
		if err != nil {
			s.fail(ctx, err)
			continue
		}
		for _, e := range due {
			s.mu.Lock()
			busy := s.firing[e]
			s.firing[e] = true
			s.mu.Unlock()
			if busy {
				continue
			}
			s.wfPool.submit(func(ctx context.Context) {
				s.fireTimer(ctx, e)
				s.mu.Lock()
				delete(s.firing, e)
				s.mu.Unlock()
			})
		}
	}
}

// fireTimer records TimerFired for a timer still armed in the current open
// run, retires the timer in the store whatever it found, and wakes the
// workflow.
func (s *Server) fireTimer(ctx context.Context, e eventstore.TimerEntry) {
	w := s.lookup(e.WorkflowID, "")
	d, err := s.commit(ctx, w, actorTimer, func(st *runState, now time.Time) *decision {
		d := newDecision(st, now)
		t := st.timers[e.TimerID]
		if t != nil && !t.fired && t.armedSeq == e.ArmedSeq && !st.status.Closed() {
			d.add(eventstore.TimerFired{Envelope: d.env(st.run), TimerID: e.TimerID})
		}
		return d
	})
	if err != nil {
		s.fail(ctx, err)
		return
	}
	_, err = s.store.RetireTimer(ctx, e)
	s.fail(ctx, err)
	if d != nil {
		s.wakeWorkflow(w)
	}
}

// pause waits for d, or until ctx is done.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
