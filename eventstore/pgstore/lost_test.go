package pgstore_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
)

// TestLostConnectionLosesNothingAcknowledged: an append whose backend is
// terminated mid-transaction (after its locks and reads, before its writes)
// returns an error and writes nothing; every append acknowledged before
// stays; the store goes on, on a new connection, at the same expected seq.
// The same holds for a context cancelled at that point.
func TestLostConnectionLosesNothingAcknowledged(t *testing.T) {
	testCases := []struct {
		name      string
		interrupt func(t *testing.T, pid uint32, cancel context.CancelFunc)
		wantErr   func(error) bool
	}{
		{"backend terminated", func(t *testing.T, pid uint32, _ context.CancelFunc) {
			var ok bool
			if err := testPool(t).QueryRow(context.Background(), `SELECT pg_terminate_backend($1)`, int32(pid)).Scan(&ok); err != nil || !ok {
				t.Errorf("pg_terminate_backend(%d) = %v, %v", pid, ok, err)
			}
		}, func(err error) bool { return err != nil }},
		{"context cancelled", func(_ *testing.T, _ uint32, cancel context.CancelFunc) { cancel() },
			func(err error) bool { return errors.Is(err, context.Canceled) }},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			s, _, _ := newStore(t)
			ctx := context.Background()
			wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
			acked := []eventstore.Event{started(wf, run), signal(run, "one"), signal(run, "two")}
			for i, ev := range acked {
				if err := s.Append(ctx, token, wf, []eventstore.Event{ev}, uint64(i)); err != nil {
					t.Fatal(err)
				}
			}
			row := eventstore.OutboxRow{RunID: run, Ordinal: 0, ActivityType: "charge"}

			callCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			var once sync.Once
			pgstore.SetHooksForTest(s, nil, func(pid uint32) { once.Do(func() { tc.interrupt(t, pid, cancel) }) })
			err := s.AppendWithOutbox(callCtx, token, wf, []eventstore.Event{
				eventstore.ActivityScheduled{Envelope: eventstore.Envelope{RunID: run}, ActivityType: "charge"},
				eventstore.ActivityCompleted{Envelope: eventstore.Envelope{RunID: run}},
			}, 3, []eventstore.OutboxRow{row})
			if !tc.wantErr(err) {
				t.Fatalf("interrupted append returned %v", err)
			}

			h, err := s.ReadHistory(ctx, wf)
			if err != nil {
				t.Fatalf("reading after the interruption: %v", err)
			}
			if len(h) != len(acked) {
				t.Fatalf("history after the interrupted append has %d events, want the %d acknowledged", len(h), len(acked))
			}
			for i, ev := range h {
				if ev.EventEnvelope().Seq != uint64(i+1) {
					t.Fatalf("event %d has seq %d", i, ev.EventEnvelope().Seq)
				}
			}
			if rows, err := s.ClaimOutboxRows(ctx, 10); err != nil || len(rows) != 0 {
				t.Fatalf("the interrupted append staged rows: %+v, %v", rows, err)
			}
			// The retry at the same expected seq commits.
			if err := s.AppendWithOutbox(ctx, token, wf, []eventstore.Event{signal(run, "retry")}, 3, []eventstore.OutboxRow{row}); err != nil {
				t.Fatalf("retrying after the interruption: %v", err)
			}
			wantHead(t, s, wf, 4)
		})
	}
}

// TestWaitingAppendEndsWithItsContext: an append waiting for the row lock of
// its workflow, which another session's transaction holds, returns its
// context's error when the context ends (it does not wait on), writes
// nothing, and the same append succeeds once the lock is gone. So does a
// cancellation of the workflow's outbox rows waiting the same way.
func TestWaitingAppendEndsWithItsContext(t *testing.T) {
	s, pool, schema := newStore(t)
	ctx := context.Background()
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	if err := s.Append(ctx, token, wf, []eventstore.Event{started(wf, run)}, 0); err != nil {
		t.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM `+table(schema, "aionotel_workflows")+` WHERE workflow_id = $1 FOR UPDATE`, wf.String()); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := s.Append(short, token, wf, []eventstore.Event{signal(run, "late")}, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Append behind a held lock = %v, want context.DeadlineExceeded", err)
	}
	if _, err := s.SettleWorkflowOutboxRowsCancelled(short, wf); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("SettleWorkflowOutboxRowsCancelled behind a held lock = %v, want context.DeadlineExceeded", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, token, wf, []eventstore.Event{signal(run, "late")}, 1); err != nil {
		t.Fatalf("the same append after the lock was released = %v", err)
	}
	if h, err := s.ReadHistory(ctx, wf); err != nil || len(h) != 2 {
		t.Fatalf("history = %d events, %v; want 2", len(h), err)
	}
}
