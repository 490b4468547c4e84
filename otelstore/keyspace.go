package otelstore

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/keyspace"
)

// NewKeyspace wraps a transcript keyspace the way [New] wraps an event store:
// every call gets a span named after its operation ("append_events", with a
// target as for New) and an aion.keyspace.operation.duration point, both
// with db.operation.name, db.system.name ("aion.keyspace" unless
// [WithDBSystem] says otherwise: "postgresql" for a pgstore keyspace) and
// aion.namespace ([WithKeyspaceNamespace]); every committed batch gets an
// aion.keyspace.append.batch_size point with aion.namespace. Span
// attributes are the stream's coordinates (aion.workflow.id, aion.run.id,
// aion.activity.id, aion.activity.attempt), and for AppendEvents
// aion.store.expected_seq and aion.store.event_count. Results and errors
// are inner's, unchanged; Unwrap on the result returns inner. It takes the
// options that concern it ([KeyspaceOption]: the providers, the span
// filter, the extra attributes, the db.system.name, the conflict status and
// the error classifier, and the GenAI ones below), and fails for a nil
// inner store ([ErrNilStore]) or an option it cannot honour
// ([ErrInvalidOption]).
//
// # GenAI telemetry
//
// The events of every committed AppendEvents (never those of a refused,
// conflicting or failed call: behind a [keyspace.Sequencer], as the README
// wires it, a re-delivery the Sequencer drops records nothing) become the
// telemetry of the OpenTelemetry GenAI conventions, on by default: semantic
// conventions v1.41.0, the last release that holds them, and where it is
// silent the current text of the semantic-conventions-genai repository
// (gen_ai.execute_tool.duration, gen_ai.invoke_agent.duration, the token
// breakdown counters). Each instrument carries the schema URL of the text
// that defines it. Every metric point and GenAI span has aion.namespace and
// the [WithAttributes] attributes.
//
// A [keyspace.Usage] is one model call:
//
//   - gen_ai.client.token.usage, two points (gen_ai.token.type input and
//     output, an int64 histogram with the conventions' boundaries), by
//     gen_ai.operation.name ("chat" when empty), gen_ai.provider.name
//     ("_unknown" when empty), gen_ai.request.model and
//     gen_ai.response.model (when given);
//   - the breakdowns, one counter each with gen_ai.token.modality "unknown":
//     gen_ai.client.inference.usage.cache_read.input_tokens,
//     .cache_write.input_tokens (a Usage's CacheCreationInputTokens) and
//     .reasoning.output_tokens; they are parts of the input and output
//     counts, so sums across instruments count nothing twice;
//   - with StartedAt, gen_ai.client.operation.duration (StartedAt to
//     EmittedAt), and with FirstChunkAt too,
//     gen_ai.client.operation.time_to_first_chunk;
//   - an inference span "{gen_ai.operation.name} {gen_ai.request.model}",
//     kind client, from StartedAt (EmittedAt when unknown: it is not
//     guessed) to EmittedAt, with the names, gen_ai.usage.input_tokens and
//     output_tokens, the breakdowns that are not zero
//     (gen_ai.usage.cache_read.input_tokens, cache_creation.input_tokens,
//     reasoning.output_tokens) and gen_ai.response.time_to_first_chunk.
//
// A count above [MaxTokenCount] is refused: recorded nowhere, counted on
// aion.gen_ai.usage.refused; the call's other counts are recorded.
//
// A [keyspace.ToolCall] and the [keyspace.ToolResult] of the same stream and
// CallID, committed in either order, are one tool execution: one
// aion.gen_ai.tool.calls (gen_ai.operation.name execute_tool,
// gen_ai.tool.name, error.type _OTHER for IsError), one
// gen_ai.execute_tool.duration point (EmittedAt to EmittedAt, 0 if the
// result's is earlier; none if either is zero), and an "execute_tool
// {gen_ai.tool.name}" span, kind internal, over the same times, with
// gen_ai.tool.call.id and, for IsError, status Error and error.type. At
// most [DefaultMaxPendingToolCalls] calls and results wait for their other
// half; past it the oldest is forgotten (aion.gen_ai.tool.pairing.evicted).
// A result whose call never commits is counted as gen_ai.tool.name
// "_unknown" when its attempt ends; a call whose result never commits is
// not counted.
//
// Each stream (one attempt of one activity) is one "invoke_agent" span,
// kind internal, the parent of its inference and execute_tool spans and
// the child of the activity's span ([WithActivitySpans]; without a valid
// one, of its run's trace anchor). It starts at the earliest time of the
// stream's first committed batch and carries gen_ai.agent.id (the
// AgentID), aion.agent.role and the stream's coordinates, and at its end
// the attempt's totals under aion.gen_ai.usage.total.* (so that a backend
// summing gen_ai.usage.* over spans counts each model call once),
// aion.gen_ai.invocation.model_calls and tool_calls, its provider and model
// when they were one, and aion.gen_ai.invocation.end saying what ended it;
// its gen_ai.invoke_agent.duration point is recorded then. A transcript has
// no end marker, so the span ends, at the attempt's last committed event
// (never before its start), when the first of these happens:
//
//   - a [keyspace.Status] with State "completed", "succeeded", "failed",
//     "cancelled", "canceled" or "timed_out" commits ("status"; failed and
//     timed_out set status Error and error.type _OTHER);
//   - a later attempt of the same activity commits ("next_attempt");
//   - nothing commits to it for [WithAgentIdleTimeout] (default
//     [DefaultAgentIdleTimeout]), noticed at the next committed batch
//     ("idle");
//   - more than [DefaultMaxAgentInvocations] attempts are open: the one
//     committed to least recently ends ("evicted", counted on
//     aion.gen_ai.agent.pairing.evicted);
//   - the program calls EndAgentSpans on the returned keyspace ("flushed").
//
// Events committed after that join the ended span (as many ended attempts
// are remembered); their usage is recorded, but not in the span's totals.
//
// With [WithTranscriptLogs], every model call is also a
// gen_ai.client.inference.operation.details log record (severity INFO,
// timestamp its EmittedAt) in the context of its inference span, with its
// names and counts, the stream's coordinates, aion.keyspace.store_seq,
// gen_ai.agent.id and aion.agent.role.
//
// Content (message text, tool arguments and output) leaves only with
// [WithContentCapture]: on the details record as gen_ai.input.messages
// (the messages and tool results committed since the attempt's previous
// model call) and gen_ai.output.messages (its assistant messages and tool
// calls), and on the execute_tool span as gen_ai.tool.call.arguments and
// gen_ai.tool.call.result. Metrics never carry content. Names (provider,
// models, operation, tool) are made valid UTF-8 and cut to 256 bytes; past
// 512 distinct values of one key, further ones are recorded as "_other".
// Ephemeral events are not transcript entries and record nothing.
//
// OTEL_SEMCONV_STABILITY_OPT_IN (read here, or given by
// [WithSemConvStabilityOptIn]) is a comma-separated list:
// "gen_ai_latest_experimental", the conventions' own value, records the
// current text's gen_ai.client.inference.usage.input_tokens and
// output_tokens counters (by gen_ai.token.modality) instead of
// gen_ai.client.token.usage, whose replacement that text is still
// settling; "gen_ai/dup" adds, for this release, what earlier aionotel
// builds emitted: tool durations on gen_ai.client.operation.duration
// (gen_ai.operation.name execute_tool), and with WithTranscriptLogs one
// record per committed event named as the deprecated per-message events
// (gen_ai.user.message, gen_ai.system.message, gen_ai.assistant.message,
// gen_ai.tool.message) or aion.gen_ai.usage and aion.gen_ai.status.
//
// The pending state is bounded as said above; the bookkeeping of a batch
// takes one short lock and calls no user code under it.
func NewKeyspace(inner keyspace.Store, opts ...KeyspaceOption) (keyspace.Store, error) {
	cfg, err := buildConfig(inner, opts, KeyspaceOption.applyKeyspace, catalog.DefaultKeyspaceSystem)
	if err != nil {
		return nil, err
	}
	meter := newMeter(cfg)
	return &keyspaceStore{
		inner: inner,
		genai: newGenAI(cfg),
		t:     newTelemetry(cfg, meter, firstKeyspaceOp, numOps, catalog.KeyspaceOperationDuration, "Duration of transcript keyspace calls."),
		batchSize: meter.Int64Histogram(catalog.KeyspaceAppendBatchSize, catalog.UnitEvent,
			"Events per committed keyspace append.", catalog.BatchSizeBoundaries),
		batchOpts: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(
			append([]attribute.KeyValue{catalog.Namespace.String(cfg.keyspaceNamespace)}, cfg.attributes...)...))},
	}, nil
}

type keyspaceStore struct {
	inner     keyspace.Store
	genai     *genai
	t         *telemetry
	batchSize metric.Int64Histogram
	batchOpts []metric.RecordOption
}

var _ keyspace.Store = (*keyspaceStore)(nil)

// Unwrap returns the wrapped keyspace.
func (k *keyspaceStore) Unwrap() keyspace.Store { return k.inner }

// EndAgentSpans ends the invoke_agent span of every attempt still open, at
// its last committed event's time (aion.gen_ai.invocation.end "flushed"),
// and records its gen_ai.invoke_agent.duration. A program that stops calls
// it before it shuts its tracer provider down, so that no agent span is
// lost; events committed later open new spans. It is safe to call at any
// time, from any goroutine, any number of times. The keyspace returned by
// [NewKeyspace] has it:
//
//	if e, ok := ks.(interface{ EndAgentSpans() }); ok {
//		e.EndAgentSpans()
//	}
func (k *keyspaceStore) EndAgentSpans() { k.genai.endAll(context.Background()) }

func (k *keyspaceStore) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (head uint64, err error) {
	c := k.t.begin(ctx, opKeyspaceAppendEvents)
	defer c.end(&err)
	if c.recording() {
		seqs := []attribute.KeyValue{
			catalog.ExpectedSeq.Int64(attrvalue.Int64(expectedSeq)),
			catalog.EventCount.Int(len(events)),
		}
		if len(events) > 0 {
			c.annotate(append(streamAttrs(keyspace.KeyOf(events[0])), seqs...)...)
		} else {
			c.annotate(seqs...)
		}
	}
	head, err = k.inner.AppendEvents(c.ctx, expectedSeq, events)
	c.finish(err)
	if err == nil && len(events) > 0 {
		k.batchSize.Record(c.ctx, int64(len(events)), k.batchOpts...)
		k.genai.observe(c.ctx, expectedSeq, events)
	}
	return head, err
}

func (k *keyspaceStore) Head(ctx context.Context, key keyspace.StreamKey) (_ uint64, err error) {
	c := k.t.begin(ctx, opKeyspaceHead)
	defer c.end(&err)
	c.stream(key)
	return k.inner.Head(c.ctx, key)
}

func (k *keyspaceStore) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) (_ []keyspace.Record, err error) {
	c := k.t.begin(ctx, opKeyspaceReadFrom)
	defer c.end(&err)
	c.stream(key)
	return k.inner.ReadFrom(c.ctx, key, fromSeq, limit)
}

func (k *keyspaceStore) ListStreams(ctx context.Context, workflowID eventstore.WorkflowID, runID eventstore.RunID) (_ []keyspace.StreamSummary, err error) {
	c := k.t.begin(ctx, opKeyspaceListStreams)
	defer c.end(&err)
	if c.recording() {
		c.annotate(
			catalog.WorkflowID.String(workflowID.String()),
			catalog.RunID.String(runID.String()))
	}
	return k.inner.ListStreams(c.ctx, workflowID, runID)
}

// stream puts a stream's coordinates on the span, if it is recording.
func (c *call) stream(key keyspace.StreamKey) {
	if c.recording() {
		c.annotate(streamAttrs(key)...)
	}
}

// streamAttrs are a stream's coordinates as span attributes.
func streamAttrs(key keyspace.StreamKey) []attribute.KeyValue {
	return []attribute.KeyValue{
		catalog.WorkflowID.String(key.WorkflowID.String()),
		catalog.RunID.String(key.RunID.String()),
		catalog.ActivityID.Int64(attrvalue.Int64(uint64(key.ActivityID))),
		catalog.Attempt.Int64(int64(key.Attempt)),
	}
}
