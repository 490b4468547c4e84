package pairing

import (
	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// Key names one activity dispatch: the activity's position in one run of one
// workflow, in one namespace. The run axis matters: a continue-as-new chain
// keeps its workflow ID and restarts activity positions at 0, so two
// generations with the same (workflow, activity) are different keys.
//
// Key is comparable. The empty Namespace is the same namespace as "default":
// Key{Namespace: ""} and Key{Namespace: "default"} name the same entry.
type Key struct {
	Namespace  string // "" is treated as "default"
	WorkflowID eventstore.WorkflowID
	RunID      eventstore.RunID
	ActivityID eventstore.ActivityID
}

// normalize spells the empty namespace "default".
func (k *Key) normalize() {
	if k.Namespace == "" {
		k.Namespace = catalog.DefaultNamespace
	}
}

// namespaceOf maps the empty namespace to "default".
func namespaceOf(ns string) string {
	if ns == "" {
		return catalog.DefaultNamespace
	}
	return ns
}

// Outcome is how a paired activity ended; it is recorded as the
// aion.activity.outcome attribute of the completed counter and the duration
// histogram. Only the constants below are valid.
type Outcome string

// The outcomes. The first four come from the activity's own terminal event;
// [OutcomeAbandoned] is what [Tracker.AbandonRun] records for entries whose
// run ended without one.
const (
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeFailed    Outcome = "failed"
	OutcomeCancelled Outcome = "cancelled"
	OutcomeTimedOut  Outcome = "timed_out"
	OutcomeAbandoned Outcome = "abandoned"
)

// outcomes lists the valid outcomes; an outcome's index here is its slot in
// the per-type attribute cache.
var outcomes = [...]Outcome{OutcomeSucceeded, OutcomeFailed, OutcomeCancelled, OutcomeTimedOut, OutcomeAbandoned}

const numOutcomes = len(outcomes)

// index returns o's position in outcomes, or -1 for an invalid outcome.
func (o Outcome) index() int {
	switch o {
	case OutcomeSucceeded:
		return 0
	case OutcomeFailed:
		return 1
	case OutcomeCancelled:
		return 2
	case OutcomeTimedOut:
		return 3
	case OutcomeAbandoned:
		return 4
	}
	return -1
}

// abandonedIndex is the index of OutcomeAbandoned.
const abandonedIndex = 4

// statuses are the closing statuses of a run, in the order of the
// per-workflow-type option cache.
var statuses = [...]eventstore.WorkflowStatus{
	eventstore.StatusCompleted, eventstore.StatusFailed, eventstore.StatusCancelled,
	eventstore.StatusTimedOut, eventstore.StatusContinuedAsNew,
}

const numStatuses = len(statuses)

// statusIndex returns s's position in statuses, or -1 if s does not close a
// run.
func statusIndex(s eventstore.WorkflowStatus) int {
	for i, c := range statuses {
		if c == s {
			return i
		}
	}
	return -1
}
