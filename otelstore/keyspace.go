package otelstore

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/aionotel/aionotel/eventstore"
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
// the db.system.name, the conflict status and the error classifier), and
// fails for a nil inner store ([ErrNilStore]) or an option it cannot honour
// ([ErrInvalidOption]).
func NewKeyspace(inner keyspace.Store, opts ...KeyspaceOption) (keyspace.Store, error) {
	cfg, err := buildConfig(inner, opts, KeyspaceOption.applyKeyspace, catalog.DefaultKeyspaceSystem)
	if err != nil {
		return nil, err
	}
	meter := newMeter(cfg)
	return &keyspaceStore{
		inner: inner,
		t:     newTelemetry(cfg, meter, firstKeyspaceOp, numOps, catalog.KeyspaceOperationDuration, "Duration of transcript keyspace calls."),
		batchSize: meter.Int64Histogram(catalog.KeyspaceAppendBatchSize, catalog.UnitEvent,
			"Events per committed keyspace append.", catalog.BatchSizeBoundaries),
		batchOpts: []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(cfg.attributes...))},
	}, nil
}

type keyspaceStore struct {
	inner     keyspace.Store
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
			catalog.ExpectedSeq.Int64(clampInt64(expectedSeq)),
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
		catalog.ActivityID.Int64(clampInt64(uint64(key.ActivityID))),
		catalog.Attempt.Int64(int64(key.Attempt)),
	}
}
