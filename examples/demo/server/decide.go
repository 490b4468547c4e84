package server

import (
	"fmt"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// timerArm is a timer a decision arms: its TimerScheduled event is
// decision.events[index], so its armed Seq is the decision's head+1+index.
type timerArm struct {
	id     eventstore.TimerID
	fireAt time.Time
	index  int
}

// decision is one batch a writer appends at an expected head, with what must
// happen after it committed.
type decision struct {
	workflow eventstore.WorkflowID
	head     uint64 // the expected head the batch was built against
	now      time.Time
	events   []eventstore.Event
	rows     []eventstore.OutboxRow
	arms     []timerArm
	retire   []eventstore.TimerEntry
	// closes is the status the batch closes the run with ("" if it does not).
	closes eventstore.WorkflowStatus
	// newRunStart is the Seq of the WorkflowStarted of the run a
	// continue-as-new batch opens (0 if none).
	newRunStart uint64
	// abandoned counts the activities left open by a run-closing batch
	// (a workflow timeout): the decorator settles them as abandoned.
	abandoned int
	// settleRows asks for the workflow's open outbox rows to be cancelled.
	settleRows bool
}

func newDecision(st *runState, now time.Time) *decision {
	return &decision{workflow: st.workflow, head: st.head, now: now}
}

func (d *decision) empty() bool { return d == nil || (len(d.events) == 0 && len(d.rows) == 0) }

// env is the envelope of an event of run: the server's clock and the run, the
// Seq being the store's to stamp.
func (d *decision) env(run eventstore.RunID) eventstore.Envelope {
	return eventstore.Envelope{WorkflowID: d.workflow, RunID: run, RecordedAt: d.now}
}

// add appends ev and returns its index in the batch.
func (d *decision) add(ev eventstore.Event) int {
	d.events = append(d.events, ev)
	return len(d.events) - 1
}

// seqOf is the Seq the event at index will get.
func (d *decision) seqOf(index int) uint64 { return d.head + 1 + uint64(index) }

func (d *decision) arm(run eventstore.RunID, id eventstore.TimerID, fireAt time.Time) int {
	i := d.add(eventstore.TimerScheduled{Envelope: d.env(run), TimerID: id, FireAt: fireAt})
	d.arms = append(d.arms, timerArm{id: id, fireAt: fireAt, index: i})
	return i
}

func (d *decision) retireTimer(st *runState, id eventstore.TimerID) {
	if t := st.timers[id]; t != nil && !t.fired {
		d.retire = append(d.retire, eventstore.TimerEntry{WorkflowID: st.workflow, TimerID: id, FireAt: t.fireAt, ArmedSeq: t.armedSeq})
	}
}

// stepStatus is where a workflow step stands.
type stepStatus uint8

const (
	stepDone stepStatus = iota + 1
	stepWaiting
	stepFailed
)

// decide is the workflow runner's decision: given the current run, what to
// append next. It handles, in order: the execution timeout, activity
// timeouts, a cancellation request, then the steps of the workflow's program
// as far as they can go without waiting, and finally completion or
// continue-as-new. A run that is not running (paused, closed) gets nothing.
func (s *Server) decide(st *runState, now time.Time) *decision {
	d := newDecision(st, now)
	spec := workflowSpecs[st.typ]
	if st.status != eventstore.StatusRunning || spec == nil {
		return d
	}

	exec := execTimerID(st.gen, st.reopens)
	if t := st.timers[exec]; t == nil {
		d.arm(st.run, exec, now.Add(spec.execTimeout))
	} else if t.fired {
		for _, a := range st.acts {
			if a.open() {
				d.abandoned++
			}
		}
		d.add(eventstore.WorkflowTimedOut{Envelope: d.env(st.run)})
		s.closeRun(d, st, nil, eventstore.StatusTimedOut)
		return d
	}

	// ended records the activities this decision ends, with their outcome.
	ended := map[eventstore.ActivityID]string{}
	for _, a := range st.acts {
		if t := st.timers[eventstore.TimerID(a.in.Timer)]; a.open() && t != nil && t.fired {
			d.add(eventstore.ActivityTimedOut{Envelope: d.env(st.run), ActivityID: a.id, Attempt: a.attempt})
			ended[a.id] = outcomeTimedOut
		}
	}

	if spec.cancelSignal != "" && st.signals[spec.cancelSignal] > 0 {
		s.cancelOpen(d, st, ended)
		d.add(eventstore.WorkflowCancelled{Envelope: d.env(st.run), Reason: "the customer cancelled the order"})
		s.closeRun(d, st, ended, eventstore.StatusCancelled)
		return d
	}

	for i, stp := range spec.steps {
		switch s.advance(d, st, spec, i, stp, ended) {
		case stepDone:
			continue
		case stepWaiting:
			return d
		case stepFailed:
			failed := st.failure(i, stp, ended)
			s.cancelOpen(d, st, ended)
			d.add(eventstore.WorkflowFailed{
				Envelope: d.env(st.run),
				Message:  fmt.Sprintf("step %d: activity %s %s", i+1, failed.typ, outcomeOf(failed, ended)),
			})
			s.closeRun(d, st, ended, eventstore.StatusFailed)
			return d
		}
	}

	if st.gen < spec.generations {
		next := s.rng.runID()
		in := startInput{Generation: st.gen + 1, Customer: fmt.Sprintf("tenant-%d", s.rng.intN(50))}
		d.add(eventstore.WorkflowContinuedAsNew{Envelope: d.env(st.run), NewRunID: next, Input: jsonPayload(in)})
		s.closeRun(d, st, ended, eventstore.StatusContinuedAsNew)
		i := d.add(eventstore.WorkflowStarted{
			Envelope:       d.env(next),
			WorkflowType:   st.typ,
			Input:          jsonPayload(in),
			PackageVersion: packageHash(st.typ),
		})
		d.newRunStart = d.seqOf(i)
		d.arm(next, execTimerID(in.Generation, 0), now.Add(spec.execTimeout))
		return d
	}
	d.add(eventstore.WorkflowCompleted{Envelope: d.env(st.run), Result: jsonPayload(map[string]int{"generation": st.gen})})
	s.closeRun(d, st, ended, eventstore.StatusCompleted)
	return d
}

// advance moves step stp (index i) as far as it goes, adding to d, and says
// where it stands.
func (s *Server) advance(d *decision, st *runState, spec *workflowSpec, i int, stp step, ended map[eventstore.ActivityID]string) stepStatus {
	switch stp.kind {
	case stepActivities:
		if st.failure(i, stp, ended) != nil {
			return stepFailed
		}
		status := stepDone
		for slot, typ := range stp.acts {
			a := st.latest(i, slot)
			switch {
			case a == nil:
				s.schedule(d, st, i, slot, typ)
				status = stepWaiting
			case outcomeOf(a, ended) == "":
				status = stepWaiting
			}
		}
		return status
	case stepSleep:
		id := sleepTimerID(st.gen, i)
		t := st.timers[id]
		if t == nil {
			d.arm(st.run, id, d.now.Add(s.rng.between(stp.sleep)))
			return stepWaiting
		}
		if t.fired {
			return stepDone
		}
		return stepWaiting
	case stepSignal:
		if st.signals[stp.signal] >= occurrences(spec.steps[:i+1], func(o step) bool { return o.kind == stepSignal && o.signal == stp.signal }) {
			return stepDone
		}
		return stepWaiting
	case stepTrigger:
		if st.triggers >= occurrences(spec.steps[:i+1], func(o step) bool { return o.kind == stepTrigger }) {
			return stepDone
		}
		return stepWaiting
	}
	return stepWaiting
}

// failure returns an activity of step i that ended without success, if the
// step is not optional: that fails the workflow.
func (st *runState) failure(i int, stp step, ended map[eventstore.ActivityID]string) *actState {
	if stp.kind != stepActivities || stp.optional {
		return nil
	}
	for slot := range stp.acts {
		if a := st.latest(i, slot); a != nil {
			if o := outcomeOf(a, ended); o != "" && o != outcomeSucceeded {
				return a
			}
		}
	}
	return nil
}

func outcomeOf(a *actState, ended map[eventstore.ActivityID]string) string {
	if o, ok := ended[a.id]; ok {
		return o
	}
	return a.outcome
}

func occurrences(steps []step, match func(step) bool) int {
	n := 0
	for _, o := range steps {
		if match(o) {
			n++
		}
	}
	return n
}

// schedule adds an activity for a step's slot: the ActivityScheduled event,
// its outbox row (same commit) and the TimerScheduled of its timeout.
func (s *Server) schedule(d *decision, st *runState, stepIdx, slot int, typ string) {
	spec := activitySpecs[typ]
	id := eventstore.ActivityID(len(st.acts))
	for _, ev := range d.events {
		if _, ok := ev.(eventstore.ActivityScheduled); ok {
			id++
		}
	}
	in := activityInput{
		Step:   stepIdx,
		Slot:   slot,
		Plan:   plans[s.rng.pick(spec.weights[:])],
		Timer:  string(activityTimerID(st.gen, id)),
		FireAt: d.now.Add(spec.timeout),
	}
	if in.Plan == planRetry {
		in.Retries = 1 + s.rng.intN(2)
	}
	if spec.agent {
		in.Turns = spec.turns[0] + s.rng.intN(spec.turns[1]-spec.turns[0]+1)
	}
	// The timeout timer's TimerScheduled follows the ActivityScheduled.
	in.ArmedSeq = d.seqOf(len(d.events) + 1)
	input := jsonPayload(in)
	d.add(eventstore.ActivityScheduled{
		Envelope:     d.env(st.run),
		ActivityID:   id,
		ActivityType: typ,
		Input:        input,
		TaskQueue:    taskQueue(spec),
	})
	d.arm(st.run, eventstore.TimerID(in.Timer), in.FireAt)
	d.rows = append(d.rows, eventstore.OutboxRow{
		DispatchKey:  eventstore.DispatchKey(st.workflow, st.run, id),
		WorkflowID:   st.workflow,
		RunID:        st.run,
		Ordinal:      id,
		ActivityType: typ,
		Input:        input,
		CreatedAt:    d.now,
	})
}

func taskQueue(spec *activitySpec) string {
	if spec.agent {
		return "agents"
	}
	return "default"
}

// cancelOpen adds an ActivityCancelled for every activity still open.
func (s *Server) cancelOpen(d *decision, st *runState, ended map[eventstore.ActivityID]string) {
	for _, a := range st.acts {
		if outcomeOf(a, ended) == "" {
			d.add(eventstore.ActivityCancelled{Envelope: d.env(st.run), ActivityID: a.id, Attempt: a.attempt})
			ended[a.id] = outcomeCancelled
		}
	}
}

// closeRun marks d as closing the run with status and retires the timers the
// run no longer needs: the execution timeout and the timeouts of the
// activities this decision ends (the workers retire those of the activities
// they end). A run left with open activities has its outbox rows cancelled.
func (s *Server) closeRun(d *decision, st *runState, ended map[eventstore.ActivityID]string, status eventstore.WorkflowStatus) {
	d.closes = status
	d.retireTimer(st, execTimerID(st.gen, st.reopens))
	for _, a := range st.acts {
		if _, ok := ended[a.id]; ok || a.open() {
			d.retireTimer(st, eventstore.TimerID(a.in.Timer))
		}
	}
	if d.abandoned > 0 {
		d.settleRows = true
	}
}
