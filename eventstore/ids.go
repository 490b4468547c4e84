package eventstore

import (
	"fmt"
	"strconv"

	"github.com/google/uuid"
)

// WorkflowID names one workflow for its whole life, across every run of a
// continue-as-new chain. It is a comparable value type, usable as a map key;
// the zero value names no workflow and every store refuses it.
type WorkflowID uuid.UUID

// RunID names one run (generation) of a workflow. A continue-as-new chain keeps
// its WorkflowID and gets a new RunID per generation. The zero value names no
// run.
type RunID uuid.UUID

// ActivityID is an activity's sequence position in its run: the first activity
// a run schedules is 0. Positions restart at 0 in each new run, which is why
// every activity key also carries the RunID.
type ActivityID uint64

// TimerID names a timer within its workflow.
type TimerID string

// NewWorkflowID returns a fresh random (version 4) WorkflowID.
func NewWorkflowID() WorkflowID { return WorkflowID(uuid.New()) }

// NewRunID returns a fresh random (version 4) RunID.
func NewRunID() RunID { return RunID(uuid.New()) }

// ParseWorkflowID parses the canonical UUID text form. A malformed string
// returns a *ParseIDError.
func ParseWorkflowID(s string) (WorkflowID, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return WorkflowID{}, &ParseIDError{Kind: "workflow", Input: s, Err: err}
	}
	return WorkflowID(u), nil
}

// ParseRunID parses the canonical UUID text form. A malformed string returns a
// *ParseIDError.
func ParseRunID(s string) (RunID, error) {
	u, err := uuid.Parse(s)
	if err != nil {
		return RunID{}, &ParseIDError{Kind: "run", Input: s, Err: err}
	}
	return RunID(u), nil
}

// String returns the canonical UUID text form.
func (id WorkflowID) String() string { return uuid.UUID(id).String() }

// IsZero reports whether id is the zero value, which names no workflow.
func (id WorkflowID) IsZero() bool { return id == WorkflowID{} }

// String returns the canonical UUID text form.
func (id RunID) String() string { return uuid.UUID(id).String() }

// IsZero reports whether id is the zero value, which names no run.
func (id RunID) IsZero() bool { return id == RunID{} }

// String returns the decimal sequence position.
func (id ActivityID) String() string { return strconv.FormatUint(uint64(id), 10) }

// ParseIDError is returned by [ParseWorkflowID] and [ParseRunID] for a string
// that is not a UUID. It matches [ErrInvalidArgument] with errors.Is.
type ParseIDError struct {
	Kind  string // "workflow" or "run"
	Input string // the rejected text
	Err   error  // the parser's own error
}

func (e *ParseIDError) Error() string {
	return fmt.Sprintf("eventstore: invalid %s id %q: %v", e.Kind, e.Input, e.Err)
}

// Unwrap returns the parser's error.
func (e *ParseIDError) Unwrap() error { return e.Err }

// Is makes a *ParseIDError match [ErrInvalidArgument].
func (e *ParseIDError) Is(target error) bool { return target == ErrInvalidArgument }
