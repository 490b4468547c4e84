package otelstore_test

import (
	"context"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
)

// cancelledCommits is a store whose Append, once armed, answers
// context.Canceled: after committing the batch (commit), or without
// writing it.
type cancelledCommits struct {
	eventstore.Store
	armed  *bool
	commit bool
}

func (c cancelledCommits) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
	if !*c.armed {
		return c.Store.Append(ctx, tok, wf, evs, exp)
	}
	if c.commit {
		if err := c.Store.Append(ctx, tok, wf, evs, exp); err != nil {
			return err
		}
	}
	return context.Canceled
}

// An append whose context ended while it ran may have committed. When the
// positions it asked for hold its batch, the decorator records it as
// committed here (its completion, duration and spans); when they do not
// (nothing written, or another writer's batch), it records nothing.
func TestAppendCommittedDespiteItsContext(t *testing.T) {
	ctx, tok := context.Background(), eventstore.RecorderToken()
	for _, tc := range []struct {
		name      string
		commit    bool
		other     bool // another writer's batch holds the positions
		completed int64
	}{
		{"committed", true, false, 1},
		{"not written", false, false, 0},
		{"another writer's batch there", false, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := eventstore.NewMemory()
			h := newHarness(t)
			armed := false
			s := h.wrap(t, cancelledCommits{m, &armed, tc.commit})
			wf, run := ids()
			if err := s.Append(ctx, tok, wf, []eventstore.Event{
				eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "flow"},
				eventstore.ActivityScheduled{Envelope: env(run, time.Second), ActivityID: 0, ActivityType: "charge"},
			}, 0); err != nil {
				t.Fatal(err)
			}
			armed = true
			if tc.other {
				if err := m.Append(ctx, tok, wf, []eventstore.Event{
					eventstore.ActivityFailed{Envelope: env(run, 2*time.Second), ActivityID: 0, Error: eventstore.ActivityError{Kind: eventstore.Terminal}},
				}, 2); err != nil {
					t.Fatal(err)
				}
			}
			err := s.Append(ctx, tok, wf, []eventstore.Event{
				eventstore.ActivityCompleted{Envelope: env(run, 4*time.Second), ActivityID: 0},
			}, 2)
			if err != context.Canceled {
				t.Fatalf("Append = %v, want the store's context.Canceled unchanged", err)
			}
			m2 := h.metrics(t)
			var got int64
			if d, ok := m2["aion.activities.completed"].Data.(metricdata.Sum[int64]); ok {
				for _, p := range d.DataPoints {
					got += p.Value
				}
			}
			if got != tc.completed {
				t.Errorf("aion.activities.completed = %d, want %d", got, tc.completed)
			}
			spans := 0
			for _, sp := range h.spans.Ended() {
				if sp.Name() == "activity charge" {
					spans++
				}
			}
			if spans != int(tc.completed) {
				t.Errorf("%d activity spans ended, want %d", spans, tc.completed)
			}
			if tc.completed > 0 {
				if d := histogramSum(t, m2["aion.activity.duration"]); d != 3 {
					t.Errorf("activity duration %v, want 3 s", d)
				}
			}
		})
	}
}
