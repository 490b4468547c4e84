package keyspace

import (
	"context"
	"fmt"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// StreamKey addresses one transcript stream: one attempt of one activity of
// one run of a workflow. The run is a required axis: activity positions
// restart at 0 in every run of a continue-as-new chain, so without it two
// generations would share (and corrupt) one stream.
type StreamKey struct {
	WorkflowID eventstore.WorkflowID
	RunID      eventstore.RunID
	ActivityID eventstore.ActivityID
	Attempt    uint32
}

// NewStreamKey returns the key of the given coordinates.
func NewStreamKey(workflowID eventstore.WorkflowID, runID eventstore.RunID, activityID eventstore.ActivityID, attempt uint32) StreamKey {
	return StreamKey{WorkflowID: workflowID, RunID: runID, ActivityID: activityID, Attempt: attempt}
}

// KeyOf returns the stream an event belongs to.
func KeyOf(ev ActivityEvent) StreamKey {
	return StreamKey{WorkflowID: ev.WorkflowID, RunID: ev.RunID, ActivityID: ev.ActivityID, Attempt: ev.Attempt}
}

// Validate returns an error wrapping [eventstore.ErrInvalidArgument] when the
// key has a zero workflow or run ID.
func (k StreamKey) Validate() error {
	if k.WorkflowID.IsZero() {
		return fmt.Errorf("%w: keyspace: zero workflow id", eventstore.ErrInvalidArgument)
	}
	if k.RunID.IsZero() {
		return fmt.Errorf("%w: keyspace: zero run id", eventstore.ErrInvalidArgument)
	}
	return nil
}

// String returns "workflow/run/activity/attempt".
func (k StreamKey) String() string {
	return fmt.Sprintf("%s/%s/%d/%d", k.WorkflowID, k.RunID, uint64(k.ActivityID), k.Attempt)
}

// ActivityEvent is one entry of an agent transcript.
type ActivityEvent struct {
	WorkflowID eventstore.WorkflowID
	RunID      eventstore.RunID
	ActivityID eventstore.ActivityID
	Attempt    uint32

	AgentID   string
	AgentRole string
	EmittedAt time.Time
	// WorkerSeq is the emitting worker's own sequence number for the event;
	// with AgentID it identifies a re-delivery of the same event.
	WorkerSeq uint64
	// StoreSeq is the event's position in its stream, set by the store;
	// meaningful only when Persisted is true.
	StoreSeq  uint64
	Persisted bool
	// Ephemeral events are forwarded live and never stored.
	Ephemeral bool

	// Content is one of [Message], [ToolCall], [ToolResult], [Status], [Usage].
	Content Content
}

// Content is the kind-specific part of an [ActivityEvent]. The set is closed.
type Content interface {
	// ContentKind returns the kind's name: "message", "tool_call",
	// "tool_result", "status" or "usage".
	ContentKind() string
}

// Message is text said by a participant of the conversation.
type Message struct {
	Role string
	Text string
}

// ToolCall is the agent invoking a tool.
type ToolCall struct {
	CallID    string
	Name      string
	Arguments string
}

// ToolResult is a tool's answer to a ToolCall with the same CallID.
type ToolResult struct {
	CallID  string
	Output  string
	IsError bool
}

// Status is a progress report, typically ephemeral.
type Status struct {
	State  string
	Detail string
}

// Usage reports tokens consumed.
type Usage struct {
	InputTokens  uint64
	OutputTokens uint64
}

func (Message) ContentKind() string    { return "message" }
func (ToolCall) ContentKind() string   { return "tool_call" }
func (ToolResult) ContentKind() string { return "tool_result" }
func (Status) ContentKind() string     { return "status" }
func (Usage) ContentKind() string      { return "usage" }

// Record is a persisted event: Event.StoreSeq equals StoreSeq and
// Event.Persisted is true.
type Record struct {
	StoreSeq uint64
	Event    ActivityEvent
}

// StreamSummary is one stream of a run with its head (the next StoreSeq, equal
// to the number of records it holds).
type StreamSummary struct {
	Key  StreamKey
	Head uint64
}

var (
	// ErrMixedStreams is returned by [Store.AppendEvents] for a batch whose
	// events belong to more than one stream. Nothing is written. It matches
	// [eventstore.ErrInvalidArgument] too.
	ErrMixedStreams = fmt.Errorf("keyspace: batch mixes streams: %w", eventstore.ErrInvalidArgument)

	// ErrEphemeral is returned by [Store.AppendEvents] for a batch holding an
	// ephemeral event, which is for live forwarding only. Nothing is written.
	// It matches [eventstore.ErrInvalidArgument] too.
	ErrEphemeral = fmt.Errorf("keyspace: ephemeral event in batch: %w", eventstore.ErrInvalidArgument)
)

// Store is the append-only transcript keyspace.
//
// Implementations are safe for concurrent use and return ctx.Err() (or an
// error wrapping it) when the context is done before the call takes effect.
type Store interface {
	// AppendEvents commits events, all of one stream, as one all-or-nothing
	// commit at expectedSeq: the i-th event gets StoreSeq expectedSeq+i. It
	// returns the new head (expectedSeq+len(events)). A stale expectedSeq
	// returns a *eventstore.SequenceConflictError whose Found is the actual
	// head. An empty slice is a no-op returning expectedSeq. A batch mixing
	// streams returns ErrMixedStreams, one holding an ephemeral event
	// ErrEphemeral, a zero workflow or run ID eventstore.ErrInvalidArgument; in
	// every refusal nothing is written.
	AppendEvents(ctx context.Context, expectedSeq uint64, events []ActivityEvent) (uint64, error)

	// Head returns the stream's next StoreSeq: 0 for an unwritten stream.
	Head(ctx context.Context, key StreamKey) (uint64, error)

	// ReadFrom returns the records with StoreSeq >= fromSeq in order, at most
	// limit of them (limit <= 0: all). Past the head it returns none. Its cost
	// grows with what it returns, not with the stream's length.
	ReadFrom(ctx context.Context, key StreamKey, fromSeq uint64, limit int) ([]Record, error)

	// ListStreams returns the streams of one run ordered by (activity,
	// attempt), each with its head; never another run's. Its cost grows with
	// that run's streams, not with the keyspace.
	ListStreams(ctx context.Context, workflowID eventstore.WorkflowID, runID eventstore.RunID) ([]StreamSummary, error)
}

// AppendEvent appends one event at expectedSeq through s.AppendEvents and
// returns the StoreSeq it got (expectedSeq). It is a convenience for a caller
// holding a single event; N events belong in one AppendEvents call, which is
// one commit instead of N.
func AppendEvent(ctx context.Context, s Store, expectedSeq uint64, ev ActivityEvent) (uint64, error) {
	if _, err := s.AppendEvents(ctx, expectedSeq, []ActivityEvent{ev}); err != nil {
		return 0, err
	}
	return expectedSeq, nil
}
