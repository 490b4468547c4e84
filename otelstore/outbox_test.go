package otelstore_test

import (
	"context"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
)

// Capability shapes cut out of a Memory, which has both.
type (
	plainOnly  struct{ eventstore.Store }
	outboxOnly struct {
		plainOnly
		eventstore.Outbox
	}
	shardsOnly struct {
		plainOnly
		eventstore.ShardOwner
	}
	outboxShard struct {
		plainOnly
		eventstore.Outbox
		eventstore.ShardOwner
	}
)

// The decorator has exactly the inner store's capabilities, in all four
// combinations: hiding Outbox would silently stop fan-out staging, claiming a
// capability the inner store lacks would be a lie.
func TestCapabilitiesPreserved(t *testing.T) {
	m := eventstore.NewMemory()
	testCases := []struct {
		name               string
		inner              eventstore.Store
		wantOutbox, wantSO bool
	}{
		{"plain", plainOnly{m}, false, false},
		{"outbox", outboxOnly{plainOnly{m}, m}, true, false},
		{"shard owner", shardsOnly{plainOnly{m}, m}, false, true},
		{"both", outboxShard{plainOnly{m}, m, m}, true, true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := otelstore.New(tc.inner)
			if err != nil {
				t.Fatal(err)
			}
			_, gotOutbox := s.(eventstore.Outbox)
			_, gotSO := s.(eventstore.ShardOwner)
			if gotOutbox != tc.wantOutbox || gotSO != tc.wantSO {
				t.Errorf("Outbox=%v ShardOwner=%v, want %v %v", gotOutbox, gotSO, tc.wantOutbox, tc.wantSO)
			}
		})
	}
}

// stageRow appends a WorkflowStarted with the given outbox rows at expectedSeq.
func stageRow(t *testing.T, s eventstore.Store, wf eventstore.WorkflowID, run eventstore.RunID, expectedSeq uint64, rows []eventstore.OutboxRow) error {
	t.Helper()
	ev := []eventstore.Event{eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "checkout"}}
	return outbox(s).AppendWithOutbox(context.Background(), eventstore.RecorderToken(), wf, ev, expectedSeq, rows)
}

func row(wf eventstore.WorkflowID, run eventstore.RunID) []eventstore.OutboxRow {
	return []eventstore.OutboxRow{{WorkflowID: wf, RunID: run, Ordinal: 0, ActivityType: "charge", Input: payload}}
}

// Seed rule: a successful AppendWithOutbox that staged a row wakes the
// dispatcher once; wakes coalesce in a one-slot channel.
func TestOutboxWakeOnSuccessfulStage(t *testing.T) {
	wake := make(chan struct{}, 1)
	s := newHarness(t).wrap(t, eventstore.NewMemory(), otelstore.WithOutboxWake(wake))
	for range 2 {
		wf, run := ids()
		if err := stageRow(t, s, wf, run, 0, row(wf, run)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-wake:
	default:
		t.Fatal("a successful non-empty stage did not wake the dispatcher")
	}
	select {
	case <-wake:
		t.Fatal("two wakes were delivered to a one-slot channel; they must coalesce")
	default:
	}
}

// Seed rule: no wake for an empty row slice, nor for a failed append.
func TestOutboxNoWake(t *testing.T) {
	testCases := []struct {
		name        string
		expectedSeq uint64
		rows        func(eventstore.WorkflowID, eventstore.RunID) []eventstore.OutboxRow
		wantErr     bool
	}{
		{"empty row slice", 0, func(eventstore.WorkflowID, eventstore.RunID) []eventstore.OutboxRow { return nil }, false},
		{"failed append", 9, row, true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			wake := make(chan struct{}, 1)
			s := newHarness(t).wrap(t, eventstore.NewMemory(), otelstore.WithOutboxWake(wake))
			wf, run := ids()
			err := stageRow(t, s, wf, run, tc.expectedSeq, tc.rows(wf, run))
			if (err != nil) != tc.wantErr {
				t.Fatalf("AppendWithOutbox: %v, want error %v", err, tc.wantErr)
			}
			select {
			case <-wake:
				t.Fatal("woken, but nothing was staged")
			default:
			}
		})
	}
}

// A full wake channel never blocks the append.
func TestOutboxWakeNeverBlocks(t *testing.T) {
	wake := make(chan struct{}) // unbuffered, nobody receiving
	s := newHarness(t).wrap(t, eventstore.NewMemory(), otelstore.WithOutboxWake(wake))
	wf, run := ids()
	if err := stageRow(t, s, wf, run, 0, row(wf, run)); err != nil {
		t.Fatal(err)
	}
}

// AppendWithOutbox feeds the lifecycle metrics like Append.
func TestAppendWithOutboxObservesLifecycle(t *testing.T) {
	h := newHarness(t)
	s := h.wrap(t, eventstore.NewMemory())
	wf, run := ids()
	if err := stageRow(t, s, wf, run, 0, row(wf, run)); err != nil {
		t.Fatal(err)
	}
	h.assertSum(t, "aion.workflows.started", true, point(1, ns, otelstore.AttrWorkflowType.String("checkout")))
	assertSpanAttr(t, h.spans.Ended()[0], otelstore.AttrOutboxRowCount.Int(1))
}
