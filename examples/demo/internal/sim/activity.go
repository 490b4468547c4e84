package sim

import (
	"context"
	"fmt"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// agentTypes are the activities run by an agent, which write a transcript.
var agentTypes = map[string]bool{"welcome_tour": true, "summarise": true}

// dispatch claims outbox rows for the idle activity workers only: it
// takes a worker's slot before it claims a row, so while every worker is
// busy the rows stay pending in the outbox, which is the wait
// aion.activity.wait.duration and aion.activity.oldest_waiting_age measure
// (otelstore sees the claim). It claims when otelstore's outbox wake says
// rows were staged, when a worker becomes idle, and every 100 ms, since a
// wake is advisory.
func (s *Server) dispatch(ctx context.Context) {
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
			s.count("outbox.wakes", 1)
		case <-s.idle:
		case <-poll.C:
		}
		for s.claim(ctx) {
		}
	}
}

// claim takes the idle workers' slots, claims a row for each and hands the
// rows to the workers; it reports whether it claimed as many rows as it
// had slots (there may be more).
func (s *Server) claim(ctx context.Context) bool {
	n := 0
	for n < cap(s.slots) {
		select {
		case s.slots <- struct{}{}:
			n++
			continue
		default:
		}
		break
	}
	if n == 0 {
		return false // every worker is busy: the rows wait
	}
	rows, err := s.outbox.ClaimOutboxRows(ctx, n)
	mine := s.served(ctx, rows) // the rows of other nodes' shards go back to pending
	for range n - len(mine) {
		<-s.slots // not used
	}
	for _, row := range mine {
		s.work <- row // never blocks: a slot was taken for it
	}
	return err == nil && len(rows) == n && len(mine) == len(rows)
}

// activityWorker runs the activities it is handed, one at a time, each to
// its end: an agent's transcript, then its attempts. Then its slot is
// free for the next row.
func (s *Server) activityWorker(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case row := <-s.work:
			s.running.Add(1)
			actx, stop := s.runContext(ctx, row.RunID)
			if !s.live(actx, row) {
				s.count("activities.shed", 1) // its run closed while the row waited
			} else {
				if agentTypes[row.ActivityType] {
					until := s.transcript(actx, row)
					if d := time.Until(until); d > 0 {
						_ = s.pause(actx, d, d)
					}
				}
				if actx.Err() == nil {
					s.perform(actx, row)
				}
				if actx.Err() != nil && ctx.Err() == nil {
					s.count("activities.stopped", 1) // its run closed under it
				}
			}
			stop()
			s.running.Add(-1)
			<-s.slots
			select {
			case s.idle <- struct{}{}:
			default: // the dispatcher is already told
			}
		}
	}
}

// live reports whether the row's activity is still in flight in an open
// run, so that a worker spends no time on an activity whose run closed
// (timed out, say) while its row waited.
func (s *Server) live(ctx context.Context, row eventstore.OutboxRow) bool {
	if ctx.Err() != nil {
		return false
	}
	events, err := s.store.ReadHistory(ctx, row.WorkflowID)
	if err != nil {
		return false
	}
	h := fold(events)
	return h.running(row.RunID) && h.open[row.Ordinal]
}

// perform plays an activity's attempts: most succeed, some fail retryably
// once first, a few fail terminally, are cancelled downstream or time out.
func (s *Server) perform(ctx context.Context, row eventstore.OutboxRow) {
	env := eventstore.Envelope{RunID: row.RunID}
	attempt := uint32(1)
	outcome := []string{"succeeded", "retried", "failed", "cancelled", "timed_out"}[s.weighted(82, 8, 4, 3, 3)]
	if outcome == "retried" {
		if s.pause(ctx, 20*time.Millisecond, 200*time.Millisecond) != nil {
			return
		}
		ev := eventstore.ActivityFailed{Envelope: env, ActivityID: row.Ordinal, Attempt: attempt,
			Error: eventstore.ActivityError{Kind: eventstore.Retryable, Message: "connection reset"}}
		if seq, err := s.report(ctx, row, ev); seq == 0 || err != nil {
			return
		}
		s.count("activities.retried", 1)
		attempt, outcome = 2, "succeeded"
	}
	if s.pause(ctx, 20*time.Millisecond, 800*time.Millisecond) != nil {
		return
	}
	var ev eventstore.Event
	switch outcome {
	case "succeeded":
		ev = eventstore.ActivityCompleted{Envelope: env, ActivityID: row.Ordinal, Attempt: attempt}
	case "failed":
		ev = eventstore.ActivityFailed{Envelope: env, ActivityID: row.Ordinal, Attempt: attempt,
			Error: eventstore.ActivityError{Kind: eventstore.Terminal, Message: "card declined"}}
	case "cancelled":
		ev = eventstore.ActivityCancelled{Envelope: env, ActivityID: row.Ordinal, Attempt: attempt}
	default:
		ev = eventstore.ActivityTimedOut{Envelope: env, ActivityID: row.Ordinal, Attempt: attempt}
	}
	if seq, err := s.report(ctx, row, ev); seq > 0 && err == nil {
		s.count("activities."+outcome, 1)
		s.notify(ctx, row.WorkflowID, note{act: row.Ordinal, outcome: outcome})
	}
}

// transcriptTimeout bounds one agent transcript's appends.
const transcriptTimeout = 5 * time.Second

// report appends an activity's result, unless its run closed meanwhile
// (then the decorator has settled it as abandoned) or it already ended.
func (s *Server) report(ctx context.Context, row eventstore.OutboxRow, ev eventstore.Event) (uint64, error) {
	return s.commit(ctx, row.WorkflowID, nil, func(h history) *decision {
		if !h.running(row.RunID) || !h.open[row.Ordinal] {
			return nil
		}
		return &decision{events: []eventstore.Event{ev}}
	})
}

// models are the simulated agents' models: the request model, the
// provider (gen_ai.provider.name) and the model version that answers, and
// how each bills a call: whether a call's input is read from the
// provider's prompt cache after the first turn, whether the first turn
// writes it there (Anthropic reports cache writes, OpenAI and Gemini do
// not), and whether the model reasons before it answers.
var models = []struct {
	request, provider, response   string
	cacheRead, cacheWrite, reason bool
}{
	{"gpt-4o", "openai", "gpt-4o-2024-08-06", true, false, false},
	{"claude-sonnet-4", "anthropic", "claude-sonnet-4-20250514", true, true, true},
	{"gemini-2.5-flash", "gcp.gemini", "gemini-2.5-flash", true, false, true},
}

// tools are the simulated agents' tools.
var tools = []string{"lookup_account", "search_orders", "send_email"}

// transcript writes an agent's three turns through the Sequencers of two
// nodes. The second turn goes through the other node, which re-sends the
// first turn as a worker does after reconnecting elsewhere: the re-sent
// events are dropped as duplicates. The first node's cached head is then
// stale, so its third turn meets a sequence conflict and retries.
//
// Each turn is a user message, a status (ephemeral), a tool call and its
// result (one in eight fails), the assistant's answer and the model call's
// usage; the agent uses one of three models for the whole transcript. The
// model call starts when the tool's result is in and streams its answer;
// its input grows turn by turn, and what the previous turns sent is read
// from the provider's cache (a caching model), the first turn writing it
// there (a model that reports cache writes); a reasoning model spends part
// of its output on reasoning. The last turn ends with a stored "completed"
// status, which ends the attempt's invoke_agent span.
//
// A transcript once started is finished even when the server stops: its
// appends run on a context that stopping does not cancel, bounded by
// transcriptTimeout, so a slow durable keyspace is never cut off mid-turn.
//
// It returns the time of the transcript's last event.
func (s *Server) transcript(ctx context.Context, row eventstore.OutboxRow) time.Time {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), transcriptTimeout)
	defer cancel()
	agent := "agent-" + row.ActivityType
	model := models[s.weighted(5, 3, 2)]
	var failed [3]bool
	var tool [3]string
	for i := range failed {
		failed[i] = s.chance(12)
		tool[i] = tools[s.weighted(5, 3, 2)]
	}
	start := time.Now()
	// Emitted 10 ms apart: a tool call takes 10 ms, a model call 20 ms. The
	// times are fixed per turn, so a re-sent event is the same event.
	const step = 10 * time.Millisecond
	end := start.Add(2*6*step + 6*step)
	turn := func(n uint64) []keyspace.ActivityEvent {
		callID := fmt.Sprintf("call-%d", n)
		output := "found"
		if failed[n] {
			output = "upstream timeout"
		}
		first := start.Add(time.Duration(n) * 6 * step)
		at := func(i int) time.Time { return first.Add(time.Duration(i) * step) }
		usage := keyspace.Usage{InputTokens: 120 + 40*n, OutputTokens: 40 + n, Provider: model.provider,
			RequestModel: model.request, ResponseModel: model.response, Operation: "chat",
			StartedAt: at(3), FirstChunkAt: at(3).Add(step / 2)}
		if model.cacheRead && n > 0 {
			usage.CacheReadInputTokens = 120 + 40*(n-1) // what the previous turn sent
		}
		if model.cacheWrite && n == 0 {
			usage.CacheCreationInputTokens = 100
		}
		if model.reason {
			usage.ReasoningOutputTokens = 24 + 8*n
			usage.OutputTokens += usage.ReasoningOutputTokens // output includes reasoning
		}
		contents := []keyspace.Content{
			keyspace.Message{Role: "user", Text: fmt.Sprintf("step %d, please", n+1)},
			keyspace.Status{State: "thinking"},
			keyspace.ToolCall{CallID: callID, Name: tool[n], Arguments: `{"q":"account"}`},
			keyspace.ToolResult{CallID: callID, Output: output, IsError: failed[n]},
			keyspace.Message{Role: "assistant", Text: "done"},
			usage,
		}
		if n == 2 {
			contents = append(contents, keyspace.Status{State: "completed"})
		}
		events := make([]keyspace.ActivityEvent, len(contents))
		for i, c := range contents {
			st, isStatus := c.(keyspace.Status)
			events[i] = keyspace.ActivityEvent{WorkflowID: row.WorkflowID, RunID: row.RunID, ActivityID: row.Ordinal, Attempt: 1,
				AgentID: agent, AgentRole: "assistant", EmittedAt: at(i), WorkerSeq: n*8 + uint64(i),
				Ephemeral: isStatus && st.State == "thinking", Content: c}
		}
		return events
	}
	for i, batch := range [][]keyspace.ActivityEvent{turn(0), append(turn(0), turn(1)...), turn(2)} {
		res, err := s.nodes[i%2].Append(ctx, batch)
		if err != nil {
			s.count("transcript.errors", 1)
			return end
		}
		for _, st := range res.Streams {
			s.count("transcript.events", int64(st.Written))
			s.count("transcript.redelivered", int64(st.Duplicates))
		}
	}
	for _, f := range failed {
		if f {
			s.count("transcript.tool_errors", 1)
		}
	}
	return end
}

// pollTimers fires the expired timers every 20 ms: TimerFired in the
// history, then RetireTimer, then a note to the workflow.
func (s *Server) pollTimers(ctx context.Context) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		timers, err := s.store.ExpiredTimers(ctx, time.Now())
		if err != nil {
			continue
		}
		for _, t := range timers {
			seq, err := s.commit(ctx, t.WorkflowID, nil, func(h history) *decision {
				if !h.started || h.closed {
					return nil
				}
				return &decision{events: []eventstore.Event{eventstore.TimerFired{Envelope: eventstore.Envelope{RunID: h.run}, TimerID: t.TimerID}}}
			})
			if err != nil {
				continue
			}
			_, _ = s.store.RetireTimer(ctx, t.WorkflowID, t.TimerID, t.FireAt, t.ArmedSeq)
			if seq > 0 {
				s.count("timers.fired", 1)
				s.notify(ctx, t.WorkflowID, note{timer: t.TimerID})
				s.orphanTimer(ctx, t)
			}
		}
	}
}
