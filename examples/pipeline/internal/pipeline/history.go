package pipeline

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// The cluster scenario's truth: what the histories in the database say the
// telemetry must be, by the rules of the pairing package (package doc,
// "A join of facts"), applied in history order.

// runTruth is one run as its workflow's history says.
type runTruth struct {
	Workflow eventstore.WorkflowID
	Run      eventstore.RunID
	Type     string
	Start    time.Time
	// Closed runs have End and Status from their first close (a reopened
	// run's span ends there).
	Closed     bool
	End        time.Time
	Status     string
	Open       bool // open now: not closed since its start or its last reopen
	Activities []activityTruth
}

// activityTruth is one activity of a run: its dispatch, and its settler
// (its first terminal, or the run's close as abandoned), if any.
type activityTruth struct {
	ID         eventstore.ActivityID
	Type       string
	Dispatched time.Time
	Settled    bool
	End        time.Time
	Outcome    string // succeeded, failed, cancelled, timed_out, abandoned
}

// foldHistory returns the runs of one workflow's history, in order, by
// history position:
//   - WorkflowStarted starts a run; its first closing event (completed,
//     failed, cancelled, timed out, continued as new) ends its span and
//     gives its status (a reopened run's span ends there);
//   - ActivityScheduled dispatches an activity of its run (a repeat changes
//     nothing);
//   - an activity's settler is the earliest event after its dispatch among
//     its terminals (ActivityCompleted succeeded, a terminal ActivityFailed
//     failed, ActivityCancelled cancelled, ActivityTimedOut timed_out; a
//     retryable failure settles nothing) and its run's closes (abandoned);
//     until then it is in flight.
func foldHistory(wf eventstore.WorkflowID, events []eventstore.Event) []runTruth {
	var runs []runTruth
	index := map[eventstore.RunID]int{}
	runOf := func(id eventstore.RunID) *runTruth {
		i, ok := index[id]
		if !ok {
			return nil
		}
		return &runs[i]
	}
	activity := func(r *runTruth, id eventstore.ActivityID) *activityTruth {
		for i := range r.Activities {
			if r.Activities[i].ID == id {
				return &r.Activities[i]
			}
		}
		return nil
	}
	settle := func(ev eventstore.Event, id eventstore.ActivityID, outcome string) {
		r := runOf(ev.EventEnvelope().RunID)
		if r == nil {
			return
		}
		if a := activity(r, id); a != nil && !a.Settled {
			a.Settled, a.End, a.Outcome = true, ev.EventEnvelope().RecordedAt, outcome
		}
	}
	for _, ev := range events {
		env := ev.EventEnvelope()
		switch e := ev.(type) {
		case eventstore.WorkflowStarted:
			if _, ok := index[env.RunID]; !ok {
				index[env.RunID] = len(runs)
				runs = append(runs, runTruth{Workflow: wf, Run: env.RunID, Type: e.WorkflowType, Start: env.RecordedAt, Open: true})
			}
		case eventstore.WorkflowReopened:
			if r := runOf(env.RunID); r != nil {
				r.Open = true
			}
		case eventstore.WorkflowCompleted, eventstore.WorkflowFailed, eventstore.WorkflowCancelled,
			eventstore.WorkflowTimedOut, eventstore.WorkflowContinuedAsNew:
			r := runOf(env.RunID)
			if r == nil {
				continue
			}
			r.Open = false
			if !r.Closed {
				r.Closed, r.End, r.Status = true, env.RecordedAt, closeStatus(ev)
			}
			for i := range r.Activities {
				if a := &r.Activities[i]; !a.Settled {
					a.Settled, a.End, a.Outcome = true, env.RecordedAt, "abandoned"
				}
			}
		case eventstore.ActivityScheduled:
			if r := runOf(env.RunID); r != nil && activity(r, e.ActivityID) == nil {
				r.Activities = append(r.Activities, activityTruth{ID: e.ActivityID, Type: e.ActivityType, Dispatched: env.RecordedAt})
			}
		case eventstore.ActivityCompleted:
			settle(ev, e.ActivityID, "succeeded")
		case eventstore.ActivityFailed:
			if e.Error.Kind == eventstore.Terminal {
				settle(ev, e.ActivityID, "failed")
			}
		case eventstore.ActivityCancelled:
			settle(ev, e.ActivityID, "cancelled")
		case eventstore.ActivityTimedOut:
			settle(ev, e.ActivityID, "timed_out")
		}
	}
	return runs
}

func closeStatus(ev eventstore.Event) string {
	switch ev.(type) {
	case eventstore.WorkflowCompleted:
		return "completed"
	case eventstore.WorkflowFailed:
		return "failed"
	case eventstore.WorkflowCancelled:
		return "cancelled"
	case eventstore.WorkflowTimedOut:
		return "timed_out"
	default:
		return "continued_as_new"
	}
}

// truth is what every history of a store says, summed.
type truth struct {
	Runs []runTruth
	// InFlight counts the activities in flight by type; Completed the
	// settled ones by outcome.
	InFlight  map[string]float64
	Completed map[string]float64
	OpenRuns  int
}

// readTruth reads every workflow's history from store (one listing, one
// read per workflow; reads only) and folds them.
func readTruth(ctx context.Context, store eventstore.Store) (truth, error) {
	ids, err := store.ListWorkflowIDs(ctx)
	if err != nil {
		return truth{}, fmt.Errorf("listing the workflows: %w", err)
	}
	var runs []runTruth
	for _, id := range ids {
		events, err := store.ReadHistory(ctx, id)
		if err != nil {
			return truth{}, fmt.Errorf("reading workflow %s: %w", id, err)
		}
		runs = append(runs, foldHistory(id, events)...)
	}
	return summarise(runs), nil
}

func summarise(runs []runTruth) truth {
	t := truth{Runs: runs, InFlight: map[string]float64{}, Completed: map[string]float64{}}
	for _, r := range runs {
		if r.Open {
			t.OpenRuns++
		}
		for _, a := range r.Activities {
			if a.Settled {
				t.Completed[a.Outcome]++
			} else {
				t.InFlight[a.Type]++
			}
		}
	}
	return t
}

// diffCounts describes how got differs from want (missing keys are 0), or
// "" when they agree.
func diffCounts(want, got map[string]float64) string {
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var out []string
	for k := range keys {
		if want[k] != got[k] {
			out = append(out, fmt.Sprintf("%s: %v, want %v", k, got[k], want[k]))
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprint(out)
}

func total(m map[string]float64) float64 {
	var n float64
	for _, v := range m {
		n += v
	}
	return n
}
