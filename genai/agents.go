package genai

import (
	"container/list"
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/timeline"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/pairing"
)

// agents is the pending state of the GenAI telemetry: the attempts whose
// invoke_agent span is open (live) or was ended recently (ended), and the
// tool calls and results waiting for their other half. Both are bounded.
// Its methods are called with mu held and never call out: what they decide
// is returned as actions, which run after mu is released.
type agents struct {
	mu        sync.Mutex
	limit     int // live attempts, and ended ones, each
	toolLimit int
	byKey     map[keyspace.StreamKey]*attempt
	latest    map[activityKey]*attempt // the highest live attempt of an activity
	live      list.List                // of *attempt, least recently committed to first
	ended     list.List                // of *attempt, ended first first
	tools     list.List                // of *pendingTool, oldest first
}

func newAgents(limit, toolLimit int) agents {
	return agents{limit: limit, toolLimit: toolLimit, byKey: map[keyspace.StreamKey]*attempt{}, latest: map[activityKey]*attempt{}}
}

// activityKey is a stream key without the attempt.
type activityKey struct {
	workflowID eventstore.WorkflowID
	runID      eventstore.RunID
	activityID eventstore.ActivityID
}

func activityOf(k keyspace.StreamKey) activityKey {
	return activityKey{k.WorkflowID, k.RunID, k.ActivityID}
}

// attempt is one transcript stream: one attempt of one activity, one
// invoke_agent span.
type attempt struct {
	key     keyspace.StreamKey
	elem    *list.Element // in agents.live or agents.ended
	ended   bool
	touched time.Time // when a batch of it last committed (the clock's)

	// Set when the attempt is made, before it is shared, and never
	// changed: what starting its span needs.
	start         time.Time
	agentID, role string

	// once starts the span; span and sc are set inside it and read after
	// it by every goroutine.
	once sync.Once
	span trace.Span        // nil without a tracer
	sc   trace.SpanContext // the span's, or its parent's when there is none

	// Under agents.mu.
	last           time.Time
	totals         [numTokenFields]int64
	modelCalls     int64
	toolCalls      int64
	provider       string
	model          string
	mixedProviders bool
	mixedModels    bool
	tools          map[uint64]*list.Element // pending tool calls and results, by call ID hash
	msgs           pendingMessages
}

// pendingTool is a tool call or a tool result waiting for the other.
type pendingTool struct {
	att     *attempt
	id      uint64
	isCall  bool
	tool    *toolOpts // a call's
	callID  string    // cleaned
	at      time.Time
	isError bool            // a result's
	content attribute.Value // a call's arguments or a result's output, with content capture
}

// The kinds of action.
const (
	actUsage  = iota // a model call: points, inference span, details record
	actTool          // a tool execution: count, duration, execute_tool span
	actOrphan        // a result whose call never came: counted as _unknown
	actEnd           // an invoke_agent span ends
	actLegacy        // an old per-message log record (OptInDup)
)

// action is one thing plan decided and run does.
type action struct {
	kind int
	att  *attempt
	// actUsage
	usage usageAction
	// actTool: both; actOrphan: the result to count (nil for a call) and
	// whether the memory bound forgot it
	call, result *pendingTool
	evicted      bool
	// actEnd
	end *endInfo
	// actLegacy
	ev       *keyspace.ActivityEvent
	seq      uint64
	toolName string
	paired   bool
}

type usageAction struct {
	ev                     *keyspace.ActivityEvent
	seq                    uint64
	set                    *usageSet
	counts                 tokenCounts
	start, end, firstChunk time.Time
	in, out                []attribute.Value // content capture: the call's messages
}

type endInfo struct {
	at                    time.Time
	reason                string
	failed                bool
	totals                [numTokenFields]int64
	modelCalls, toolCalls int64
	provider, model       string
	evicted               bool
}

// plan does the bookkeeping of a committed batch under the lock and
// returns what run must do, appended to acts.
func (g *Tracker) plan(acts []action, expectedSeq uint64, events []keyspace.ActivityEvent) []action {
	// Names are resolved before the lock: the caches have their own. A
	// batch of a turn's size needs no heap allocation for them.
	var setsBuf [16]*usageSet
	var toolsBuf [16]*toolOpts
	sets, tools := setsBuf[:0], toolsBuf[:0]
	// With content capture, tool arguments and output are parsed here too.
	var values []attribute.Value
	if g.content {
		values = make([]attribute.Value, len(events))
	}
	for i := range events {
		var set *usageSet
		var tool *toolOpts
		switch c := contentOf(events[i].Content).(type) {
		case keyspace.Usage:
			set = g.usageSetOf(g.usageKeyOf(c))
		case keyspace.ToolCall:
			tool = g.tools.Get(c.Name)
			if values != nil {
				values[i] = structured(c.Arguments)
			}
		case keyspace.ToolResult:
			if values != nil {
				values[i] = structured(c.Output)
			}
		}
		sets, tools = append(sets, set), append(tools, tool)
	}
	now := g.clock()
	ag := &g.agents
	ag.mu.Lock()
	defer ag.mu.Unlock()
	var a *attempt
	for i := range events {
		ev := &events[i]
		c := contentOf(ev.Content)
		if ev.Ephemeral || c == nil {
			continue // not a transcript entry, or nothing to say
		}
		if key := keyspace.KeyOf(*ev); a == nil || a.key != key {
			a = ag.touch(g, key, events, now, &acts)
		}
		a.saw(ev.EmittedAt)
		seq := expectedSeq + uint64(i)
		toolName, paired := "", false
		switch c := c.(type) {
		case keyspace.Usage:
			acts = append(acts, action{kind: actUsage, att: a})
			g.planUsage(&acts[len(acts)-1].usage, a, ev, seq, c, sets[i])
		case keyspace.ToolCall:
			pt := &pendingTool{att: a, id: maphash.String(g.seed, c.CallID), isCall: true, tool: tools[i],
				callID: attrvalue.String(c.CallID), at: ev.EmittedAt}
			if g.content {
				pt.content = values[i]
				a.msgs.addOutput(g.logger != nil, attribute.MapValue(
					attribute.String(catalog.PartType, catalog.PartToolCall), attribute.String(catalog.PartID, pt.callID),
					attribute.String(catalog.PartName, tools[i].name), attribute.KeyValue{Key: catalog.PartArguments, Value: pt.content}))
			}
			ag.toolCall(a, pt, &acts)
		case keyspace.ToolResult:
			pt := &pendingTool{att: a, id: maphash.String(g.seed, c.CallID), callID: attrvalue.String(c.CallID),
				at: ev.EmittedAt, isError: c.IsError}
			if g.content {
				pt.content = values[i]
				a.msgs.addInput(g.logger != nil, "tool", attribute.MapValue(
					attribute.String(catalog.PartType, catalog.PartToolResp), attribute.String(catalog.PartID, pt.callID),
					attribute.KeyValue{Key: catalog.PartResponse, Value: pt.content}))
			}
			toolName, paired = ag.toolResult(a, pt, &acts)
		case keyspace.Message:
			if g.content && g.logger != nil {
				part := attribute.MapValue(attribute.String(catalog.PartType, catalog.PartText),
					attribute.String(catalog.PartContent, content(c.Text)))
				if c.Role == "assistant" {
					a.msgs.addOutput(true, part)
				} else {
					a.msgs.addInput(true, attrvalue.String(c.Role), part)
				}
			}
		case keyspace.Status:
			if failed, terminal := catalog.TerminalStates[c.State]; terminal {
				ag.end(a, catalog.EndStatus, failed, &acts)
			}
		}
		if g.optIn.dup && g.logger != nil {
			acts = append(acts, action{kind: actLegacy, att: a, ev: ev, seq: seq, toolName: toolName, paired: paired})
		}
	}
	ag.expire(now, g.idle, &acts)
	return acts
}

// planUsage adds a model call to its attempt and returns what recording it
// needs.
func (g *Tracker) planUsage(ua *usageAction, a *attempt, ev *keyspace.ActivityEvent, seq uint64, u keyspace.Usage, set *usageSet) {
	*ua = usageAction{ev: ev, seq: seq, set: set, counts: countsOf(u), end: ev.EmittedAt,
		start: u.StartedAt, firstChunk: u.FirstChunkAt}
	if ua.end.IsZero() {
		ua.end = ua.start
	}
	if ua.start.After(ua.end) {
		ua.start = ua.end // a call cannot end before it starts: two clocks apart
	}
	if !ua.start.IsZero() && ua.firstChunk.Before(ua.start) {
		ua.firstChunk = time.Time{}
	}
	a.modelCalls++
	for f := range numTokenFields {
		a.totals[f] = saturatingAdd(a.totals[f], ua.counts.n[f])
	}
	switch {
	case a.provider == "":
		a.provider = set.key.provider
	case a.provider != set.key.provider:
		a.mixedProviders = true
	}
	switch {
	case a.model == "":
		a.model = set.key.requestModel
	case a.model != set.key.requestModel:
		a.mixedModels = true
	}
	if g.content && g.logger != nil {
		ua.in, ua.out = a.msgs.take()
	}
}

func saturatingAdd(a, b int64) int64 {
	if a > 1<<63-1-b {
		return 1<<63 - 1
	}
	return a + b
}

// touch returns the attempt of key, making it when it is new: the attempt
// an activity had before it ends, and past the bound the live attempt
// committed to least recently ends.
func (ag *agents) touch(g *Tracker, key keyspace.StreamKey, events []keyspace.ActivityEvent, now time.Time, acts *[]action) *attempt {
	if a, ok := ag.byKey[key]; ok {
		if !a.ended {
			a.touched = now
			ag.live.MoveToBack(a.elem)
		}
		return a
	}
	a := &attempt{key: key, touched: now, tools: map[uint64]*list.Element{}}
	a.start, a.agentID, a.role = batchStart(events, key)
	if a.start.IsZero() {
		a.start = now
	}
	a.last = a.start
	a.elem = ag.live.PushBack(a)
	ag.byKey[key] = a
	ak := activityOf(key)
	switch prev := ag.latest[ak]; {
	case prev == nil:
		ag.latest[ak] = a
	case prev.key.Attempt < key.Attempt:
		// Attempts of an activity run one after the other: a later one
		// committing means the earlier one is over.
		ag.end(prev, catalog.EndNextAttempt, false, acts)
		ag.latest[ak] = a
	}
	for ag.live.Len() > ag.limit {
		ag.end(ag.live.Front().Value.(*attempt), catalog.EndEvicted, false, acts)
	}
	return a
}

// batchStart returns the earliest time among the batch's events of key
// (their EmittedAt, and a Usage's StartedAt), and the first agent ID and
// agent role they name.
func batchStart(events []keyspace.ActivityEvent, key keyspace.StreamKey) (start time.Time, agentID, role string) {
	for i := range events {
		ev := &events[i]
		if ev.Ephemeral || keyspace.KeyOf(*ev) != key {
			continue
		}
		times := [2]time.Time{ev.EmittedAt}
		if u, ok := contentOf(ev.Content).(keyspace.Usage); ok {
			times[1] = u.StartedAt
		}
		for _, t := range times {
			if !t.IsZero() && (start.IsZero() || t.Before(start)) {
				start = t
			}
		}
		if agentID == "" {
			agentID = ev.AgentID
		}
		if role == "" {
			role = ev.AgentRole
		}
	}
	return start, agentID, role
}

// saw extends the attempt to t.
func (a *attempt) saw(t time.Time) {
	if t.After(a.last) {
		a.last = t
	}
}

// end ends a live attempt: its span is to end at its last event (never
// before its start), its results still waiting for their call are counted
// as calls of an unknown tool, and it is remembered as ended so that late
// events join its span.
func (ag *agents) end(a *attempt, reason string, failed bool, acts *[]action) {
	if a.ended {
		return
	}
	a.ended = true
	ag.live.Remove(a.elem)
	a.elem = ag.ended.PushBack(a)
	if ak := activityOf(a.key); ag.latest[ak] == a {
		delete(ag.latest, ak)
	}
	ag.flushResults(a, acts)
	info := &endInfo{at: a.last, reason: reason, failed: failed, totals: a.totals, modelCalls: a.modelCalls,
		toolCalls: a.toolCalls, evicted: reason == catalog.EndEvicted}
	if info.at.Before(a.start) {
		info.at = a.start
	}
	if !a.mixedProviders {
		info.provider = a.provider
	}
	if !a.mixedModels {
		info.model = a.model
	}
	*acts = append(*acts, action{kind: actEnd, att: a, end: info})
	for ag.ended.Len() > ag.limit {
		old := ag.ended.Remove(ag.ended.Front()).(*attempt)
		delete(ag.byKey, old.key)
		ag.flushResults(old, acts)
		for id, e := range old.tools { // calls whose result never came
			ag.tools.Remove(e)
			delete(old.tools, id)
		}
	}
}

// flushResults counts the attempt's results still waiting for their call.
func (ag *agents) flushResults(a *attempt, acts *[]action) {
	for id, e := range a.tools {
		if pt := e.Value.(*pendingTool); !pt.isCall {
			ag.tools.Remove(e)
			delete(a.tools, id)
			*acts = append(*acts, action{kind: actOrphan, att: a, result: pt})
		}
	}
}

// expire ends the live attempts nothing was committed to for idle.
func (ag *agents) expire(now time.Time, idle time.Duration, acts *[]action) {
	for e := ag.live.Front(); e != nil; e = ag.live.Front() {
		a := e.Value.(*attempt)
		if now.Sub(a.touched) < idle {
			return
		}
		ag.end(a, catalog.EndIdle, false, acts)
	}
}

// endAll ends every live attempt.
func (ag *agents) endAll(acts *[]action) {
	for e := ag.live.Front(); e != nil; e = ag.live.Front() {
		ag.end(e.Value.(*attempt), catalog.EndFlushed, false, acts)
	}
}

// toolCall pairs a committed tool call with its waiting result, or makes
// it wait. A second call with a waiting call's ID replaces it.
func (ag *agents) toolCall(a *attempt, pt *pendingTool, acts *[]action) {
	if e, ok := a.tools[pt.id]; ok {
		ag.tools.Remove(e)
		delete(a.tools, pt.id)
		if other := e.Value.(*pendingTool); !other.isCall {
			a.toolCalls++
			*acts = append(*acts, action{kind: actTool, att: a, call: pt, result: other})
			return
		}
	}
	ag.wait(a, pt, acts)
}

// toolResult pairs a committed tool result with its waiting call, or makes
// it wait (of an ended attempt, it is counted at once as a call of an
// unknown tool). It returns the recorded tool name and whether the call
// was found, for the old log records.
func (ag *agents) toolResult(a *attempt, pt *pendingTool, acts *[]action) (string, bool) {
	if e, ok := a.tools[pt.id]; ok {
		other := e.Value.(*pendingTool)
		ag.tools.Remove(e)
		delete(a.tools, pt.id)
		if other.isCall {
			a.toolCalls++
			*acts = append(*acts, action{kind: actTool, att: a, call: other, result: pt})
			return other.tool.name, true
		}
		// A second result for one call ID: the first is counted alone.
		*acts = append(*acts, action{kind: actOrphan, att: a, result: other})
	}
	if a.ended {
		*acts = append(*acts, action{kind: actOrphan, att: a, result: pt})
		return "", false
	}
	ag.wait(a, pt, acts)
	return "", false
}

// wait remembers a call or result until its other half commits; past the
// bound the oldest is forgotten (a result is then counted as a call of an
// unknown tool) and counted as evicted.
func (ag *agents) wait(a *attempt, pt *pendingTool, acts *[]action) {
	a.tools[pt.id] = ag.tools.PushBack(pt)
	for ag.tools.Len() > ag.toolLimit {
		old := ag.tools.Remove(ag.tools.Front()).(*pendingTool)
		delete(old.att.tools, old.id)
		act := action{kind: actOrphan, att: old.att, evicted: true}
		if !old.isCall {
			act.result = old
		}
		*acts = append(*acts, act)
	}
}

// run does what plan decided, without any lock: spans, points, records.
func (g *Tracker) run(ctx context.Context, acts []action) {
	var in *attempt // the attempt whose span inCtx carries
	var inCtx context.Context
	for i := range acts {
		act := &acts[i]
		if act.kind == actUsage || act.kind == actTool || act.kind == actLegacy {
			if act.att != in {
				in, inCtx = act.att, g.within(ctx, act.att)
			}
		}
		switch act.kind {
		case actUsage:
			g.runUsage(inCtx, act.att, &act.usage)
		case actTool:
			g.runTool(inCtx, act.call, act.result)
		case actOrphan:
			if act.evicted {
				g.toolEvicted.Add(ctx, 1, g.baseOpts...)
			}
			if act.result != nil {
				unknown := g.tools.Get("")
				opt := unknown.calls
				if act.result.isError {
					opt = unknown.callsFailed
				}
				g.toolCalls.Add(ctx, 1, opt...)
			}
		case actEnd:
			g.runEnd(ctx, act.att, act.end)
		case actLegacy:
			g.emitLegacy(inCtx, act.ev, act.seq, act.toolName, act.paired)
		}
	}
}

// within returns ctx carrying the attempt's invoke_agent span (or, without
// one, its parent), starting the span first if no one has.
func (g *Tracker) within(ctx context.Context, a *attempt) context.Context {
	a.once.Do(func() { g.startAttempt(ctx, a) })
	sc := a.sc
	if !sc.IsValid() {
		sc = timeline.Anchor(g.namespace, a.key.WorkflowID, a.key.RunID)
	}
	return trace.ContextWithSpanContext(ctx, sc)
}

// startAttempt starts the attempt's invoke_agent span at its start, as a
// child of the activity's span ([WithActivitySpans]) or, when no valid one
// is known, of its run's anchor.
func (g *Tracker) startAttempt(ctx context.Context, a *attempt) {
	var parent trace.SpanContext
	if g.spans != nil {
		parent = g.spans.ActivitySpanContext(pairing.Key{Namespace: g.namespace, WorkflowID: a.key.WorkflowID,
			RunID: a.key.RunID, ActivityID: a.key.ActivityID})
	}
	if !parent.IsValid() {
		parent = timeline.Anchor(g.namespace, a.key.WorkflowID, a.key.RunID)
	}
	a.sc = parent
	if g.tracer == nil {
		return
	}
	// The provider and model are not known yet: they are set at the end,
	// when every model call of the attempt named the same one.
	_, span := g.tracer.Start(trace.ContextWithSpanContext(ctx, parent), catalog.SpanInvokeAgent, internalSpan,
		trace.WithTimestamp(a.start), trace.WithAttributes(
			catalog.GenAIOperationName.String(catalog.GenAIOperationInvokeAgent)))
	a.span = span
	if sc := span.SpanContext(); sc.IsValid() {
		a.sc = sc
	}
	if !span.IsRecording() {
		return
	}
	attrs := append(slices.Clone(g.base), catalog.StreamAttrs(a.key)...)
	if a.agentID != "" {
		attrs = append(attrs, catalog.GenAIAgentID.String(attrvalue.String(a.agentID)))
	}
	if a.role != "" {
		attrs = append(attrs, catalog.AgentRole.String(attrvalue.String(a.role)))
	}
	span.SetAttributes(attrs...)
}

var (
	internalSpan = trace.WithSpanKind(trace.SpanKindInternal)
	clientSpanK  = trace.WithSpanKind(trace.SpanKindClient)
)

// runUsage records a model call: its inference span, from its StartedAt (or
// its end, when unknown) to its EmittedAt, its metric points, with the span
// as exemplar, and its details record. ctx carries the attempt's span.
func (g *Tracker) runUsage(ctx context.Context, a *attempt, u *usageAction) {
	end := u.end
	if end.IsZero() {
		end = g.clock()
	}
	start := u.start
	if start.IsZero() {
		start = end
	}
	if g.tracer != nil {
		var span trace.Span
		ctx, span = g.tracer.Start(ctx, u.set.spanName, clientSpanK, trace.WithTimestamp(start), u.set.spanStart)
		if span.IsRecording() {
			span.SetAttributes(g.usageCounts(nil, u)...)
		}
		span.End(trace.WithTimestamp(end))
	}
	g.recordUsage(ctx, u)
	if g.logger != nil {
		g.emitDetails(ctx, a, u)
	}
}

// usageCounts appends a model call's plausible counts (a breakdown only
// when it is not zero; the cache write also under v1.41.0's name behind
// OptInDup) and its time to first chunk.
func (g *Tracker) usageCounts(attrs []attribute.KeyValue, u *usageAction) []attribute.KeyValue {
	c := &u.counts
	for f, key := range [numTokenFields]attribute.Key{catalog.GenAIUsageInput, catalog.GenAIUsageOutput,
		catalog.GenAIUsageCacheRead, catalog.GenAIUsageCacheWrite, catalog.GenAIUsageReasoning} {
		if !c.refused[f] && (f <= fieldOutput || c.n[f] > 0) {
			attrs = append(attrs, key.Int64(c.n[f]))
			if f == fieldCacheWrite && g.optIn.dup {
				attrs = append(attrs, catalog.GenAIUsageCacheCreation.Int64(c.n[f]))
			}
		}
	}
	if !u.start.IsZero() && !u.firstChunk.IsZero() {
		attrs = append(attrs, catalog.GenAITimeToFirstChunk.Float64(seconds(u.start, u.firstChunk)))
	}
	return attrs
}

// runTool records a tool execution: its count, its execute_tool span from
// the call's EmittedAt to the result's (status Error for an error result),
// and its duration when both times are known. ctx carries the attempt's
// span.
func (g *Tracker) runTool(ctx context.Context, call, result *pendingTool) {
	tool := call.tool
	calls, exec := tool.calls, tool.exec
	if result.isError {
		calls, exec = tool.callsFailed, tool.execFailed
	}
	start, end := call.at, result.at
	timed := !start.IsZero() && !end.IsZero()
	if start.IsZero() {
		start = end
	}
	if end.IsZero() {
		end = start
	}
	if start.IsZero() {
		start = g.clock()
		end = start
	}
	if end.Before(start) {
		end = start // a result stamped before its call took no measurable time
	}
	if g.tracer != nil {
		var span trace.Span
		ctx, span = g.tracer.Start(ctx, tool.spanName, internalSpan, trace.WithTimestamp(start), tool.spanStart)
		if span.IsRecording() {
			attrs := []attribute.KeyValue{catalog.GenAIToolCallID.String(call.callID)}
			if g.content {
				attrs = append(attrs, attribute.KeyValue{Key: catalog.GenAIToolCallArgs, Value: call.content},
					attribute.KeyValue{Key: catalog.GenAIToolCallResult, Value: result.content})
			}
			if result.isError {
				attrs = append(attrs, catalog.ErrorType.String(catalog.OtherError))
				span.SetStatus(codes.Error, "")
			}
			span.SetAttributes(attrs...)
		}
		span.End(trace.WithTimestamp(end))
	}
	g.toolCalls.Add(ctx, 1, calls...)
	if timed {
		d := seconds(start, end)
		g.toolDuration.Record(ctx, d, exec...)
		if g.optIn.dup {
			old := tool.oldCall
			if result.isError {
				old = tool.oldFailed
			}
			g.toolOld.Record(ctx, d, old...)
		}
	}
}

// runEnd ends an attempt's invoke_agent span with the attempt's totals and
// records its duration.
func (g *Tracker) runEnd(ctx context.Context, a *attempt, e *endInfo) {
	ctx = g.within(ctx, a)
	if e.evicted {
		g.agentEvicted.Add(ctx, 1, g.baseOpts...)
	}
	opt := g.agentOK
	if e.failed {
		opt = g.agentFailed
	}
	g.agentDuration.Record(ctx, seconds(a.start, e.at), opt...)
	if a.span == nil {
		return
	}
	if a.span.IsRecording() {
		attrs := []attribute.KeyValue{
			catalog.AgentEnd.String(e.reason),
			catalog.AgentModelCalls.Int64(e.modelCalls),
			catalog.AgentToolCalls.Int64(e.toolCalls),
			catalog.AgentTotalInput.Int64(e.totals[fieldInput]),
			catalog.AgentTotalOutput.Int64(e.totals[fieldOutput]),
			catalog.AgentTotalCacheRead.Int64(e.totals[fieldCacheRead]),
			catalog.AgentTotalCacheWrite.Int64(e.totals[fieldCacheWrite]),
			catalog.AgentTotalReasoning.Int64(e.totals[fieldReasoning]),
		}
		if e.provider != "" {
			attrs = append(attrs, catalog.GenAIProviderName.String(e.provider))
		}
		if e.model != "" {
			attrs = append(attrs, catalog.GenAIRequestModel.String(e.model))
		}
		if e.failed {
			attrs = append(attrs, catalog.ErrorType.String(catalog.OtherError))
			a.span.SetStatus(codes.Error, "")
		}
		a.span.SetAttributes(attrs...)
	}
	a.span.End(trace.WithTimestamp(e.at))
}

// EndAgentSpans ends the invoke_agent span of every attempt still open, at
// its last event's time (aion.gen_ai.invocation.end "flushed"), and
// records its gen_ai.invoke_agent.duration. A program that stops calls it
// before it shuts its tracer and meter providers down, so that no agent
// span is lost; events observed later open new spans. It is safe to call
// at any time, from any goroutine, any number of times; on a nil or zero
// Tracker it does nothing.
func (g *Tracker) EndAgentSpans() {
	if !g.ready() {
		return
	}
	ctx := context.Background()
	defer func() {
		if r := recover(); r != nil {
			g.handle(fmt.Errorf("genai: ending the agent spans: panic: %v", r))
		}
	}()
	var acts []action
	g.agents.mu.Lock()
	g.agents.endAll(&acts)
	g.agents.mu.Unlock()
	g.run(ctx, acts)
}

// pendingMessages is the content committed since an attempt's last model
// call, for the next call's details record: what it was given (input) and
// what it answered (output parts). At most maxPendingContent bytes of text
// wait; later parts are dropped.
type pendingMessages struct {
	in    []attribute.Value // messages
	out   []attribute.Value // parts of one assistant message
	tool  bool              // out holds a tool call
	bytes int
}

// maxPendingContent bounds the content text that waits per attempt.
const maxPendingContent = 4 * MaxContentLen

func (m *pendingMessages) fits(part attribute.Value) bool {
	n := textLen(part)
	if m.bytes+n > maxPendingContent {
		return false
	}
	m.bytes += n
	return true
}

// addInput adds a message of role with one part, when on.
func (m *pendingMessages) addInput(on bool, role string, part attribute.Value) {
	if !on || !m.fits(part) {
		return
	}
	m.in = append(m.in, attribute.MapValue(attribute.String(catalog.MsgRole, role),
		attribute.Slice(catalog.MsgParts, part)))
}

// addOutput adds a part to the assistant's answer, when on.
func (m *pendingMessages) addOutput(on bool, part attribute.Value) {
	if !on || !m.fits(part) {
		return
	}
	for _, kv := range part.AsMap() {
		if kv.Key == catalog.PartType && kv.Value.AsString() == catalog.PartToolCall {
			m.tool = true
		}
	}
	m.out = append(m.out, part)
}

// take returns the input messages and the output message (none when the
// answer is empty) and starts over.
func (m *pendingMessages) take() (in, out []attribute.Value) {
	in = m.in
	if len(m.out) > 0 {
		finish := catalog.FinishStop
		if m.tool {
			finish = catalog.FinishToolCall
		}
		out = []attribute.Value{attribute.MapValue(
			attribute.String(catalog.MsgRole, "assistant"),
			attribute.Slice(catalog.MsgParts, m.out...),
			attribute.String(catalog.MsgFinishReason, finish))}
	}
	*m = pendingMessages{}
	return in, out
}

// textLen is the length of the text in v: its strings, also inside maps
// and slices.
func textLen(v attribute.Value) int {
	switch v.Type() {
	case attribute.STRING:
		return len(v.AsString())
	case attribute.MAP:
		n := 0
		for _, kv := range v.AsMap() {
			n += len(kv.Key) + textLen(kv.Value)
		}
		return n
	case attribute.SLICE:
		n := 0
		for _, e := range v.AsSlice() {
			n += textLen(e)
		}
		return n
	}
	return 0
}
