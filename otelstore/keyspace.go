package otelstore

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/genai"
	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/keyspace"
)

// DefaultMaxPendingToolCalls is [genai.DefaultMaxPendingToolCalls], the
// bound of the tool calls and results waiting for their other half.
const DefaultMaxPendingToolCalls = genai.DefaultMaxPendingToolCalls

// DefaultMaxAgentInvocations is [genai.DefaultMaxAgentInvocations], the
// bound of the attempts with an open invoke_agent span.
const DefaultMaxAgentInvocations = genai.DefaultMaxAgentInvocations

// DefaultAgentIdleTimeout is [genai.DefaultAgentIdleTimeout], the default
// of [WithAgentIdleTimeout].
const DefaultAgentIdleTimeout = genai.DefaultAgentIdleTimeout

// MaxTokenCount is [genai.MaxTokenCount]: a larger count of a committed
// Usage is refused and counted on aion.gen_ai.usage.refused.
const MaxTokenCount = genai.MaxTokenCount

// MaxContentLen is [genai.MaxContentLen], the bound of one captured content
// text ([WithContentCapture]).
const MaxContentLen = genai.MaxContentLen

// Keyspace is a transcript keyspace decorated by [NewKeyspace]: the
// keyspace.Store it wraps, with its telemetry.
type Keyspace interface {
	keyspace.Store
	// Unwrap returns the wrapped keyspace.
	Unwrap() keyspace.Store
	// EndAgentSpans ends the invoke_agent span of every attempt still
	// open and records its duration (see [genai.Tracker.EndAgentSpans]):
	// a program calls it when it stops, before it shuts its tracer and
	// meter providers down, so that no agent span is lost. It is safe to
	// call at any time, from any goroutine, any number of times; events
	// committed later open new spans.
	EndAgentSpans()
}

// NewKeyspace wraps a transcript keyspace the way [New] wraps an event store:
// every call gets a span named after its operation ("append_events", with a
// target as for New) and an aion.keyspace.operation.duration point, both
// with db.operation.name, db.system.name ("aion.keyspace" unless
// [WithDBSystem] says otherwise: "postgresql" for a pgstore keyspace) and
// aion.namespace ([WithNamespace]); every committed batch gets an
// aion.keyspace.append.batch_size point with aion.namespace. Span
// attributes are the stream's coordinates (aion.workflow.id, aion.run.id,
// aion.activity.id, aion.activity.attempt), and for AppendEvents
// aion.store.expected_seq and aion.store.event_count. Results and errors
// are inner's, unchanged; Unwrap on the result returns inner. It takes the
// options that concern it ([KeyspaceOption]: the providers, the span
// filter, the namespace, the extra attributes, the db.system.name, the
// conflict status and the error classifier, and the GenAI ones below), and
// fails for a nil inner store ([ErrNilStore]) or an option it cannot
// honour ([ErrInvalidOption]).
//
// The events of every committed AppendEvents (never those of a refused,
// conflicting or failed call: behind a [keyspace.Sequencer], as the README
// wires it, a re-delivery the Sequencer drops records nothing) are handed
// to a [genai.Tracker], which turns them into the telemetry of the GenAI
// conventions, on by default: token usage, model-call, tool and agent
// durations, an invoke_agent span per attempt with its model-call and
// execute_tool spans, and, with [WithTranscriptLogs], log records. The
// genai package doc says what is emitted, under which names and
// conventions. The tracker gets the decorator's meter, tracer and logger
// providers, its namespace and [WithAttributes] attributes, and the GenAI
// options: [WithTranscriptLogs], [WithContentCapture], [WithActivitySpans],
// [WithAgentIdleTimeout] and [WithSemConvStabilityOptIn]. A program that
// keeps its transcripts elsewhere uses a genai.Tracker directly.
//
// When the program stops, it calls EndAgentSpans on the returned
// [Keyspace] before shutting its providers down.
func NewKeyspace(inner keyspace.Store, opts ...KeyspaceOption) (Keyspace, error) {
	cfg, err := buildConfig(inner, opts, KeyspaceOption.applyKeyspace, catalog.DefaultKeyspaceSystem)
	if err != nil {
		return nil, err
	}
	meter := newMeter(cfg)
	return &keyspaceStore{
		inner:   inner,
		tracker: genai.New(genaiOptions(cfg)...),
		t:       newTelemetry(cfg, meter, firstKeyspaceOp, numOps, catalog.KeyspaceOperationDuration, "Duration of transcript keyspace calls."),
		batchSize: meter.Int64Histogram(catalog.KeyspaceAppendBatchSize, catalog.UnitEvent,
			"Events per committed keyspace append.", catalog.BatchSizeBoundaries),
		batchOpts: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(
			append([]attribute.KeyValue{catalog.Namespace.String(cfg.keyspaceNamespace)}, cfg.attributes...)...))},
	}, nil
}

// genaiOptions are the options of the decorator's GenAI tracker: what the
// decorator's options said, given once.
func genaiOptions(cfg *config) []genai.Option {
	opts := []genai.Option{
		genai.WithMeterProvider(cfg.meterProvider),
		genai.WithTracerProvider(cfg.tracerProvider),
		genai.WithLoggerProvider(cfg.loggerProvider),
		genai.WithNamespace(cfg.keyspaceNamespace),
		genai.WithAttributes(cfg.attributes...),
		genai.WithTranscriptLogs(cfg.transcriptLogs),
		genai.WithContentCapture(cfg.contentCapture),
		genai.WithActivitySpans(cfg.activitySpans),
		genai.WithAgentIdleTimeout(cfg.agentIdle),
	}
	if cfg.optIn != nil {
		opts = append(opts, genai.WithSemConvStabilityOptIn(*cfg.optIn))
	}
	return opts
}

type keyspaceStore struct {
	inner     keyspace.Store
	tracker   *genai.Tracker
	t         *telemetry
	batchSize metric.Int64Histogram
	batchOpts []metric.RecordOption
}

var _ Keyspace = (*keyspaceStore)(nil)

func (k *keyspaceStore) Unwrap() keyspace.Store { return k.inner }

func (k *keyspaceStore) EndAgentSpans() { k.tracker.EndAgentSpans() }

func (k *keyspaceStore) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (head uint64, err error) {
	c := k.t.begin(ctx, opKeyspaceAppendEvents)
	defer c.end(&err)
	if c.recording() {
		seqs := []attribute.KeyValue{
			catalog.ExpectedSeq.Int64(attrvalue.Int64(expectedSeq)),
			catalog.EventCount.Int(len(events)),
		}
		if len(events) > 0 {
			c.annotate(append(catalog.StreamAttrs(keyspace.KeyOf(events[0])), seqs...)...)
		} else {
			c.annotate(seqs...)
		}
	}
	head, err = k.inner.AppendEvents(c.ctx, expectedSeq, events)
	c.finish(err)
	if err == nil && len(events) > 0 {
		k.batchSize.Record(c.ctx, int64(len(events)), k.batchOpts...)
		k.tracker.Observe(c.ctx, expectedSeq, events)
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
		c.annotate(catalog.StreamAttrs(key)...)
	}
}
