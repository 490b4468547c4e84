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
// with db.operation.name and db.system.name ("aion.keyspace" unless
// [WithDBSystem] says otherwise: "postgresql" for a pgstore keyspace) but
// no aion.namespace; every committed batch gets an
// aion.keyspace.append.batch_size point. Span attributes are the stream's
// coordinates (aion.workflow.id, aion.run.id, aion.activity.id,
// aion.activity.attempt), and for AppendEvents aion.store.expected_seq and
// aion.store.event_count. Results and errors are inner's, unchanged; Unwrap
// on the result returns inner. It takes the options that concern it
// ([KeyspaceOption]: the providers, the span filter, the extra attributes,
// the db.system.name, the conflict status and the error classifier, and
// the GenAI ones below), and fails for a nil inner store ([ErrNilStore]) or an option it cannot honour
// ([ErrInvalidOption]).
//
// # GenAI telemetry
//
// The events of every committed AppendEvents (never those of a refused,
// conflicting or failed call: wrapped by a [keyspace.Sequencer], as the
// README wires it, the decorator sees only what the Sequencer commits, so a
// re-delivery it drops records nothing) become GenAI telemetry by the
// OpenTelemetry GenAI conventions, on by default:
//
//   - a [keyspace.Usage]: two gen_ai.client.token.usage points (an int64
//     histogram, {token}, the conventions' advised boundaries), one per
//     gen_ai.token.type (input, output), with gen_ai.operation.name (the
//     Usage's Operation, "chat" when empty), gen_ai.provider.name ("_unknown"
//     when empty: the conventions require both), gen_ai.request.model and
//     gen_ai.response.model when given, aion.namespace
//     ([WithKeyspaceNamespace]) and the [WithAttributes] attributes;
//   - a [keyspace.ToolResult]: one aion.gen_ai.tool.calls, by gen_ai.tool.name
//     (its ToolCall's, "_unknown" when that call was not seen here) with
//     gen_ai.operation.name execute_tool and, for IsError, error.type
//     _OTHER; and, when its ToolCall (same stream and CallID) was seen, a
//     gen_ai.client.operation.duration point of the time between their
//     EmittedAt (0 if the result's is earlier; none if either is zero; no
//     gen_ai.provider.name: the agent runs a tool, not a provider). At most [DefaultMaxPendingToolCalls] calls wait for their
//     result; past it the oldest is forgotten and counted on
//     aion.gen_ai.tool.pairing.evicted. A call whose result never commits
//     is not counted.
//
// Names (provider, models, operation, tool) are made valid UTF-8 and cut to
// 256 bytes; past 512 distinct values of one key, further ones are recorded
// as "_other". Ephemeral events are not transcript entries and record
// nothing.
//
// With [WithTranscriptLogs], every committed event with a content also
// becomes one log record (severity INFO, timestamp its EmittedAt), named as
// the conventions' per-message events: a Message gen_ai.user.message,
// gen_ai.system.message, gen_ai.tool.message or gen_ai.assistant.message by
// its role; a ToolCall gen_ai.assistant.message with its call in the body's
// tool_calls; a ToolResult gen_ai.tool.message; a Usage aion.gen_ai.usage
// (gen_ai.usage.input_tokens and output_tokens); a Status aion.gen_ai.status.
// Records carry the stream's coordinates, store seq, gen_ai.agent.id and
// aion.agent.role, and are emitted in the context of the activity's live
// span ([WithActivitySpans]) or else its run's trace anchor. Message text,
// tool arguments and output and status text are in the body only with
// [WithContentCapture]; spans and metrics never carry them.
func NewKeyspace(inner keyspace.Store, opts ...KeyspaceOption) (keyspace.Store, error) {
	cfg, err := buildConfig(inner, opts, KeyspaceOption.applyKeyspace, catalog.DefaultKeyspaceSystem)
	if err != nil {
		return nil, err
	}
	meter := newMeter(cfg)
	return &keyspaceStore{
		inner: inner,
		genai: newGenAI(cfg, meter),
		t:     newTelemetry(cfg, meter, firstKeyspaceOp, numOps, catalog.KeyspaceOperationDuration, "Duration of transcript keyspace calls."),
		batchSize: meter.Int64Histogram(catalog.KeyspaceAppendBatchSize, catalog.UnitEvent,
			"Events per committed keyspace append.", catalog.BatchSizeBoundaries),
		batchOpts: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(cfg.attributes...))},
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
