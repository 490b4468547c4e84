package server

import (
	"context"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// startOne records a WorkflowStarted for a new workflow of typ, the way the
// starter does, without running the server.
func startOne(t *testing.T, srv *Server, typ string) *workflow {
	t.Helper()
	w := srv.lookup(srv.rng.workflowID(), typ)
	run := srv.rng.runID()
	d, err := srv.commit(t.Context(), w, actorStarter, func(st *runState, now time.Time) *decision {
		d := newDecision(st, now)
		i := d.add(eventstore.WorkflowStarted{Envelope: d.env(run), WorkflowType: typ, Input: jsonPayload(startInput{Generation: 1})})
		d.newRunStart = d.seqOf(i)
		return d
	})
	if err != nil || d == nil {
		t.Fatalf("start: %v", err)
	}
	return w
}

func history(t *testing.T, srv *Server, w *workflow) []eventstore.Event {
	t.Helper()
	events, err := srv.mem.ReadHistory(t.Context(), w.id)
	if err != nil {
		t.Fatal(err)
	}
	return events
}

func TestSendSignal(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	w := startOne(t, srv, typeCheckout)

	srv.sendSignal(ctx, w, signalPayment, "req-1")
	srv.sendSignal(ctx, w, signalPayment, "req-1") // the client's retry
	srv.sendSignal(ctx, w, signalNote, "req-2")
	if got := kinds(history(t, srv, w)); got != "WorkflowStarted,SignalReceived,SignalReceived" {
		t.Errorf("history %s: want the retried request recorded once", got)
	}
	if srv.stats.signalsDuplicate.Load() != 1 || !w.queued.Load() {
		t.Errorf("duplicates %d, workflow queued %v", srv.stats.signalsDuplicate.Load(), w.queued.Load())
	}

	if _, err := srv.commit(ctx, w, actorRunner, func(st *runState, now time.Time) *decision {
		d := newDecision(st, now)
		d.add(eventstore.WorkflowCompleted{Envelope: d.env(st.run)})
		return d
	}); err != nil {
		t.Fatal(err)
	}
	srv.sendSignal(ctx, w, signalNote, "req-3")
	if srv.stats.signalsRejected.Load() != 1 || len(history(t, srv, w)) != 4 {
		t.Errorf("a signal to a closed workflow was not refused: %s", kinds(history(t, srv, w)))
	}
}

func TestPauseAndResume(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	w := startOne(t, srv, typeOnboarding)
	srv.pauseWorkflow(ctx, w)
	srv.pauseWorkflow(ctx, w) // already paused: nothing to do
	if srv.delays.pending() != 1 {
		t.Errorf("%d resumes planned, want 1", srv.delays.pending())
	}
	srv.resumeWorkflow(ctx, w)
	srv.resumeWorkflow(ctx, w) // running again: nothing to do
	if got := kinds(history(t, srv, w)); got != "WorkflowStarted,WorkflowPaused,WorkflowResumed" {
		t.Errorf("history %s", got)
	}
}

// TestCommitRetriesFromTheConflict makes a second writer land between a
// writer's read and its append: the append conflicts, the writer reads what it
// missed and builds again on the new head.
func TestCommitRetriesFromTheConflict(t *testing.T) {
	srv, err := New()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	w := startOne(t, srv, typeCheckout)
	var heads []uint64
	var signalsSeen []int
	d, err := srv.commit(ctx, w, actorSignal, func(st *runState, now time.Time) *decision {
		heads = append(heads, st.head)
		signalsSeen = append(signalsSeen, st.signals[signalNote])
		if len(heads) == 1 {
			// Another writer appends meanwhile.
			if err := srv.store.Append(ctx, w.id, []eventstore.Event{eventstore.SignalReceived{Envelope: eventstore.Envelope{RunID: st.run}, SignalName: signalNote}}, st.head); err != nil {
				t.Fatal(err)
			}
		}
		d := newDecision(st, now)
		d.add(eventstore.SignalReceived{Envelope: d.env(st.run), SignalName: signalPayment})
		return d
	})
	if err != nil || d == nil {
		t.Fatalf("commit: %v", err)
	}
	if len(heads) != 2 || heads[0] != 1 || heads[1] != 2 || signalsSeen[1] != 1 {
		t.Errorf("built at heads %v seeing %v notes: want 1 then 2, the second seeing the other writer's note", heads, signalsSeen)
	}
	if srv.stats.conflicts[actorSignal].Load() != 1 || d.head != 2 {
		t.Errorf("conflicts %d, committed at %d", srv.stats.conflicts[actorSignal].Load(), d.head)
	}
	if got := kinds(history(t, srv, w)); got != "WorkflowStarted,SignalReceived,SignalReceived" {
		t.Errorf("history %s", got)
	}
}
