package server

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// TestCountedStoreCountsEachCall checks that every forwarding method counts
// one call and reaches the store (its result shows).
func TestCountedStoreCountsEachCall(t *testing.T) {
	ctx := context.Background()
	mem := eventstore.NewMemory()
	var n atomic.Int64
	c := countedStore{store: mem, outbox: mem, calls: &n}
	wf, run := eventstore.WorkflowID{1}, eventstore.RunID{1}
	at := time.Unix(100, 0)
	calls := []struct {
		name string
		call func() error
	}{
		{"Append", func() error {
			return c.Append(ctx, wf, []eventstore.Event{eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: run}}}, 0)
		}},
		{"AppendWithOutbox", func() error {
			return c.AppendWithOutbox(ctx, wf, []eventstore.Event{eventstore.ActivityScheduled{Envelope: eventstore.Envelope{RunID: run}}}, 1,
				[]eventstore.OutboxRow{{RunID: run, Ordinal: 0}})
		}},
		{"ReadHistoryFrom", func() error { ev, err := c.ReadHistoryFrom(ctx, wf, 1); return want(len(ev) == 2, err) }},
		{"ListActive", func() error { ids, err := c.ListActive(ctx); return want(len(ids) == 1, err) }},
		{"ListPaused", func() error { ids, err := c.ListPaused(ctx); return want(len(ids) == 0, err) }},
		{"ScheduleTimer", func() error { return c.ScheduleTimer(ctx, wf, "t", at, 2) }},
		{"ExpiredTimers", func() error { ts, err := c.ExpiredTimers(ctx, at); return want(len(ts) == 1, err) }},
		{"RetireTimer", func() error {
			r, err := c.RetireTimer(ctx, eventstore.TimerEntry{WorkflowID: wf, TimerID: "t", FireAt: at, ArmedSeq: 2})
			return want(r == eventstore.TimerRetired, err)
		}},
		{"PutPackageWithRoutes", func() error {
			return c.PutPackageWithRoutes(ctx, eventstore.PackageRecord{WorkflowType: "w", ContentHash: "h"}, []string{"w"})
		}},
		{"ListPackageRoutes", func() error { r, err := c.ListPackageRoutes(ctx); return want(len(r) == 1, err) }},
		{"ClaimOutboxRows", func() error { r, err := c.ClaimOutboxRows(ctx, 5); return want(len(r) == 1, err) }},
		{"CountClaimedOutboxRows", func() error { k, err := c.CountClaimedOutboxRows(ctx); return want(k == 1, err) }},
		{"SettleWorkflowOutboxRowsCancelled", func() error { k, err := c.SettleWorkflowOutboxRowsCancelled(ctx, wf); return want(len(k) == 1, err) }},
	}
	for i, call := range calls {
		if err := call.call(); err != nil {
			t.Fatalf("%s: %v", call.name, err)
		}
		if n.Load() != int64(i+1) {
			t.Fatalf("after %s: %d calls counted, want %d", call.name, n.Load(), i+1)
		}
	}
}

func TestCountedKeyspaceCountsEachCall(t *testing.T) {
	ctx := context.Background()
	var n atomic.Int64
	c := countedKeyspace{inner: keyspace.NewMemory(), calls: &n}
	ev := keyspace.ActivityEvent{WorkflowID: eventstore.WorkflowID{1}, RunID: eventstore.RunID{1}, Content: keyspace.Message{Text: "hi"}}
	key := keyspace.KeyOf(ev)
	if _, err := c.AppendEvents(ctx, 0, []keyspace.ActivityEvent{ev}); err != nil {
		t.Fatal(err)
	}
	if h, err := c.Head(ctx, key); err != nil || h != 1 {
		t.Fatalf("Head = %d, %v", h, err)
	}
	if r, err := c.ReadFrom(ctx, key, 0, 0); err != nil || len(r) != 1 {
		t.Fatalf("ReadFrom = %d records, %v", len(r), err)
	}
	if s, err := c.ListStreams(ctx, key.WorkflowID, key.RunID); err != nil || len(s) != 1 {
		t.Fatalf("ListStreams = %d streams, %v", len(s), err)
	}
	if n.Load() != 4 {
		t.Errorf("%d calls counted, want 4", n.Load())
	}
}

// want turns a failed expectation into an error.
func want(ok bool, err error) error {
	if err != nil {
		return err
	}
	if !ok {
		return errUnexpected
	}
	return nil
}

var errUnexpected = errorString("unexpected result")

type errorString string

func (e errorString) Error() string { return string(e) }
