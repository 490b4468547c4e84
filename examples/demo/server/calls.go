package server

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// countedStore is the server's handle on the instrumented event store: it
// forwards the calls the server makes and counts them for the progress line
// and the summary. (The decorator's own metrics count them too; this count
// needs no metric reader.)
type countedStore struct {
	store  eventstore.Store
	outbox eventstore.Outbox
	calls  *atomic.Int64
}

func (c countedStore) Append(ctx context.Context, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	c.calls.Add(1)
	return c.store.Append(ctx, eventstore.RecorderToken(), wf, events, expectedSeq)
}

func (c countedStore) AppendWithOutbox(ctx context.Context, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64, rows []eventstore.OutboxRow) error {
	c.calls.Add(1)
	return c.outbox.AppendWithOutbox(ctx, eventstore.RecorderToken(), wf, events, expectedSeq, rows)
}

func (c countedStore) ReadHistoryFrom(ctx context.Context, wf eventstore.WorkflowID, fromSeq uint64) ([]eventstore.Event, error) {
	c.calls.Add(1)
	return c.store.ReadHistoryFrom(ctx, wf, fromSeq)
}

func (c countedStore) ListActive(ctx context.Context) ([]eventstore.WorkflowID, error) {
	c.calls.Add(1)
	return c.store.ListActive(ctx)
}

func (c countedStore) ListPaused(ctx context.Context) ([]eventstore.WorkflowID, error) {
	c.calls.Add(1)
	return c.store.ListPaused(ctx)
}

func (c countedStore) ScheduleTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, fireAt time.Time, armedSeq uint64) error {
	c.calls.Add(1)
	return c.store.ScheduleTimer(ctx, wf, id, fireAt, armedSeq)
}

func (c countedStore) ExpiredTimers(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
	c.calls.Add(1)
	return c.store.ExpiredTimers(ctx, asOf)
}

func (c countedStore) RetireTimer(ctx context.Context, t eventstore.TimerEntry) (eventstore.TimerRetirement, error) {
	c.calls.Add(1)
	return c.store.RetireTimer(ctx, t.WorkflowID, t.TimerID, t.FireAt, t.ArmedSeq)
}

func (c countedStore) PutPackageWithRoutes(ctx context.Context, rec eventstore.PackageRecord, types []string) error {
	c.calls.Add(1)
	return c.store.PutPackageWithRoutes(ctx, rec, types)
}

func (c countedStore) ListPackageRoutes(ctx context.Context) ([]eventstore.PackageRoute, error) {
	c.calls.Add(1)
	return c.store.ListPackageRoutes(ctx)
}

func (c countedStore) ClaimOutboxRows(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
	c.calls.Add(1)
	return c.outbox.ClaimOutboxRows(ctx, limit)
}

func (c countedStore) CountClaimedOutboxRows(ctx context.Context) (int, error) {
	c.calls.Add(1)
	return c.outbox.CountClaimedOutboxRows(ctx)
}

func (c countedStore) SettleWorkflowOutboxRowsCancelled(ctx context.Context, wf eventstore.WorkflowID) ([]string, error) {
	c.calls.Add(1)
	return c.outbox.SettleWorkflowOutboxRowsCancelled(ctx, wf)
}

// countedKeyspace counts the keyspace calls the Sequencers make.
type countedKeyspace struct {
	inner keyspace.Store
	calls *atomic.Int64
}

var _ keyspace.Store = countedKeyspace{}

func (c countedKeyspace) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	c.calls.Add(1)
	return c.inner.AppendEvents(ctx, expectedSeq, events)
}

func (c countedKeyspace) Head(ctx context.Context, key keyspace.StreamKey) (uint64, error) {
	c.calls.Add(1)
	return c.inner.Head(ctx, key)
}

func (c countedKeyspace) ReadFrom(ctx context.Context, key keyspace.StreamKey, fromSeq uint64, limit int) ([]keyspace.Record, error) {
	c.calls.Add(1)
	return c.inner.ReadFrom(ctx, key, fromSeq, limit)
}

func (c countedKeyspace) ListStreams(ctx context.Context, wf eventstore.WorkflowID, run eventstore.RunID) ([]keyspace.StreamSummary, error) {
	c.calls.Add(1)
	return c.inner.ListStreams(ctx, wf, run)
}
