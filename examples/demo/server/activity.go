package server

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// attemptRun is one activity being worked on by the activity workers, from
// its claimed outbox row to its last attempt. Its fields are touched by one
// task at a time: each task plans the next through the delay queue.
type attemptRun struct {
	row     eventstore.OutboxRow
	w       *workflow
	in      activityInput
	spec    *activitySpec
	attempt uint32
	// Agent transcript state of the current attempt.
	turn      int
	workerSeq uint64
	lastTurn  []keyspace.ActivityEvent
}

// runDispatcher claims pending outbox rows and hands them to the activity
// workers. The decorator wakes it (WithOutboxWake) after every commit that
// staged rows; it also polls, since a wake is only advisory.
func (s *Server) runDispatcher(ctx context.Context) {
	poll := time.NewTicker(dispatchPollInterval)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		case <-poll.C:
		}
		for {
			rows, err := s.store.ClaimOutboxRows(ctx, claimBatch)
			if err != nil {
				s.fail(ctx, err)
				break
			}
			for _, row := range rows {
				s.actPool.submit(func(ctx context.Context) { s.startActivity(ctx, row) })
			}
			if len(rows) < claimBatch {
				break
			}
		}
	}
}

func (s *Server) startActivity(ctx context.Context, row eventstore.OutboxRow) {
	in, err := decodeActivityInput(row.Input)
	if err != nil {
		s.fail(ctx, err)
		return
	}
	spec := activitySpecs[row.ActivityType]
	if spec == nil {
		s.fail(ctx, fmt.Errorf("server: unknown activity type %q", row.ActivityType))
		return
	}
	s.beginAttempt(&attemptRun{row: row, w: s.lookup(row.WorkflowID, ""), in: in, spec: spec, attempt: 1})
}

// beginAttempt plans the work of the current attempt: a plain activity
// finishes after its work time; an agent runs its turns first.
func (s *Server) beginAttempt(a *attemptRun) {
	if a.spec.agent {
		a.turn, a.workerSeq, a.lastTurn = 0, 0, nil
		s.later(s.rng.between(a.spec.work), s.actPool, func(ctx context.Context) { s.agentTurn(ctx, a) })
		return
	}
	s.later(s.finishDelay(a, s.rng.between(a.spec.work)), s.actPool, func(ctx context.Context) { s.finishAttempt(ctx, a) })
}

// finishDelay is the time until an attempt reports: work for most plans, past
// the activity's timeout for the one that times out.
func (s *Server) finishDelay(a *attemptRun, work time.Duration) time.Duration {
	if a.in.Plan == planTimeout {
		return a.spec.timeout + s.rng.between(ms(100, 300))
	}
	return work
}

// result is what the current attempt reports, following the plan, and
// whether another attempt follows.
func (a *attemptRun) result(env eventstore.Envelope) (ev eventstore.Event, retry bool) {
	id := a.row.Ordinal
	switch a.in.Plan {
	case planRetry:
		if int(a.attempt) <= a.in.Retries {
			return eventstore.ActivityFailed{Envelope: env, ActivityID: id, Attempt: a.attempt, Error: eventstore.ActivityError{
				Kind:    eventstore.Retryable,
				Message: "upstream unavailable (503)",
			}}, true
		}
	case planFail:
		return eventstore.ActivityFailed{Envelope: env, ActivityID: id, Attempt: a.attempt, Error: eventstore.ActivityError{
			Kind:    eventstore.Terminal,
			Message: a.row.ActivityType + ": request rejected (422)",
		}}, false
	case planCancel:
		return eventstore.ActivityCancelled{Envelope: env, ActivityID: id, Attempt: a.attempt}, false
	}
	return eventstore.ActivityCompleted{
		Envelope:   env,
		ActivityID: id,
		Attempt:    a.attempt,
		Result:     jsonPayload(map[string]string{"status": "ok"}),
	}, false
}

// finishAttempt records the attempt's result, if the activity is still open
// at this attempt in the current open run; otherwise the result is late (the
// activity timed out, or was cancelled with its workflow) and dropped. A
// retryable failure plans the next attempt; an end retires the activity's
// timeout timer and wakes the workflow.
func (s *Server) finishAttempt(ctx context.Context, a *attemptRun) {
	late, retry := false, false
	d, err := s.commit(ctx, a.w, actorActivity, func(st *runState, now time.Time) *decision {
		d := newDecision(st, now)
		act := st.activity(a.row.Ordinal)
		late = st.run != a.row.RunID || st.status.Closed() || act == nil || !act.open() || act.attempt != a.attempt
		if !late {
			var ev eventstore.Event
			ev, retry = a.result(d.env(st.run))
			d.add(ev)
		}
		return d
	})
	switch {
	case err != nil:
		s.fail(ctx, err)
	case late:
		s.stats.lateResults.Add(1)
	case d == nil:
	case retry:
		a.attempt++
		s.delays.after(s.rng.between(a.spec.backoff), func() { s.beginAttempt(a) })
	default:
		_, err := s.store.RetireTimer(ctx, eventstore.TimerEntry{
			WorkflowID: a.row.WorkflowID,
			TimerID:    eventstore.TimerID(a.in.Timer),
			FireAt:     a.in.FireAt,
			ArmedSeq:   a.in.ArmedSeq,
		})
		s.fail(ctx, err)
		s.wakeWorkflow(a.w)
	}
}

// turnAppendTimeout bounds one transcript append, which shutdown does not
// cancel.
const turnAppendTimeout = 5 * time.Second

// agentTurn is one turn of a simulated LLM agent: its transcript events go
// through the Sequencer in one Append. Sometimes the turn goes through the
// other node's Sequencer and re-sends the previous turn first, as a worker
// does after reconnecting to another node: the Sequencer drops the
// re-delivered events, and the first node meets a sequence conflict on its
// next append and retries.
func (s *Server) agentTurn(ctx context.Context, a *attemptRun) {
	a.turn++
	events := s.transcriptTurn(a)
	batch, seq := events, s.seqs[0]
	if a.turn > 1 && s.rng.chance(failoverChance) {
		batch, seq = append(slices.Clone(a.lastTurn), events...), s.seqs[1]
	}
	// A turn handed to the Sequencer is finished even when the run is being
	// stopped: cancelling it midway could leave a durable backend's commit
	// done but unreported, and the summary would undercount what is stored.
	appendCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), turnAppendTimeout)
	res, err := seq.Append(appendCtx, batch)
	cancel()
	s.stats.transcriptBatches.Add(1)
	s.stats.ephemeral.Add(int64(len(res.Ephemeral)))
	for _, r := range res.Streams {
		s.stats.transcriptEvents.Add(int64(r.Written))
		s.stats.transcriptDuplicates.Add(int64(r.Duplicates))
	}
	s.fail(ctx, err)
	a.lastTurn = a.lastTurn[:0]
	for _, ev := range events {
		if !ev.Ephemeral {
			a.lastTurn = append(a.lastTurn, ev)
		}
	}
	if a.turn < a.in.Turns {
		s.later(s.rng.between(a.spec.work), s.actPool, func(ctx context.Context) { s.agentTurn(ctx, a) })
		return
	}
	s.later(s.finishDelay(a, s.rng.between(ms(2, 10))), s.actPool, func(ctx context.Context) { s.finishAttempt(ctx, a) })
}

// Canned agent material, by activity type.
var agentScripts = map[string]struct {
	prompt, tool, args string
	replies            []string
}{
	"agent_welcome_tour": {
		prompt:  "Walk the new customer through the workspace and the first project.",
		tool:    "workspace.describe",
		args:    `{"section":"projects"}`,
		replies: []string{"Let me look at what the workspace holds.", "The workspace has a starter project; I will show its board.", "Tour done: projects, board and invitations covered."},
	},
	"agent_summarize": {
		prompt:  "Summarise yesterday's orders and flag anomalies.",
		tool:    "metrics.query",
		args:    `{"metric":"orders","window":"24h"}`,
		replies: []string{"Fetching the order metrics for the last day.", "Refund rate is above its weekly median; checking by region.", "Summary ready: volume steady, refunds up in one region."},
	},
}

// transcriptTurn builds the events of the attempt's current turn: the task
// (first turn), an ephemeral status, the agent's message, a tool call and its
// result, token usage, and on the last turn a final ephemeral status.
func (s *Server) transcriptTurn(a *attemptRun) []keyspace.ActivityEvent {
	script := agentScripts[a.row.ActivityType]
	now := s.cfg.now()
	event := func(c keyspace.Content, ephemeral bool) keyspace.ActivityEvent {
		a.workerSeq++
		return keyspace.ActivityEvent{
			WorkflowID: a.row.WorkflowID,
			RunID:      a.row.RunID,
			ActivityID: a.row.Ordinal,
			Attempt:    a.attempt,
			AgentID:    "agent/" + a.row.ActivityType,
			AgentRole:  a.spec.role,
			EmittedAt:  now,
			WorkerSeq:  a.workerSeq,
			Ephemeral:  ephemeral,
			Content:    c,
		}
	}
	var out []keyspace.ActivityEvent
	if a.turn == 1 {
		out = append(out, event(keyspace.Message{Role: "user", Text: script.prompt}, false))
	}
	callID := fmt.Sprintf("call-%d-%d", a.attempt, a.turn)
	reply := script.replies[min(a.turn-1, len(script.replies)-1)]
	out = append(out,
		event(keyspace.Status{State: "thinking", Detail: fmt.Sprintf("turn %d", a.turn)}, true),
		event(keyspace.Message{Role: "assistant", Text: reply}, false),
		event(keyspace.ToolCall{CallID: callID, Name: script.tool, Arguments: script.args}, false),
		event(keyspace.ToolResult{CallID: callID, Output: `{"rows":` + fmt.Sprint(1+s.rng.intN(40)) + `}`, IsError: s.rng.chance(0.1)}, false),
		event(keyspace.Usage{InputTokens: uint64(200 + s.rng.intN(1000)), OutputTokens: uint64(50 + s.rng.intN(350))}, false),
	)
	if a.turn == a.in.Turns {
		out = append(out, event(keyspace.Status{State: "done"}, true))
	}
	return out
}
