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
// generations would share (and corrupt) one stream. The attempt is an axis
// too: a retry is a new attempt and gets a fresh stream, while a worker
// taking over an attempt mid-way (failover) keeps writing the same stream,
// which is what lets its re-deliveries be recognised. (Conformance rules
// "run-axis" and "attempts-disjoint".)
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

// Content is the kind-specific part of an [ActivityEvent]. The set is closed:
// the five kinds below, as values or non-nil pointers (stored as values), or
// a nil Content. Any other type, and a nil pointer, is refused by every
// [Store] and by the [Sequencer] (see [ValidateBatch]).
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

// Usage reports one model call: the tokens it consumed, which model and
// provider served it, and when it ran. It is what the GenAI semantic
// conventions' token metrics and inference spans need (package otelstore
// records them).
//
// The counts follow the conventions' inclusive rule, so that nothing is
// counted twice: InputTokens is every input token of the call, cached ones
// included (gen_ai.usage.input_tokens), and OutputTokens every output
// token, reasoning included (gen_ai.usage.output_tokens). The three
// breakdowns are parts of those totals, never additions to them:
//
//	CacheReadInputTokens + CacheCreationInputTokens <= InputTokens
//	ReasoningOutputTokens                           <= OutputTokens
//
// A provider that reports cached tokens apart from the rest (Anthropic's
// input_tokens excludes cache_read_input_tokens and
// cache_creation_input_tokens) is reported here as their sum in
// InputTokens; one that reports them inside its total (OpenAI's
// prompt_tokens) is reported as is. A zero breakdown means none, or not
// reported.
//
// The names are free text as the agent reports them; any of them may be
// empty when unknown. Every store keeps every field exactly as given
// (records written before a field existed read back with it zero);
// telemetry cleans and bounds the names, and ignores counts no model call
// reaches, before recording (see otelstore.NewKeyspace).
type Usage struct {
	// InputTokens is every input (prompt) token of the call, cached ones
	// included.
	InputTokens uint64
	// OutputTokens is every output (completion) token of the call,
	// reasoning ones included.
	OutputTokens uint64
	// CacheReadInputTokens is the part of InputTokens served from a
	// provider-managed cache (gen_ai.usage.cache_read.input_tokens).
	CacheReadInputTokens uint64
	// CacheCreationInputTokens is the part of InputTokens written to a
	// provider-managed cache (gen_ai.usage.cache_creation.input_tokens).
	CacheCreationInputTokens uint64
	// ReasoningOutputTokens is the part of OutputTokens spent on reasoning
	// (gen_ai.usage.reasoning.output_tokens).
	ReasoningOutputTokens uint64
	// Provider is the GenAI provider as the conventions'
	// gen_ai.provider.name names it: "openai", "anthropic", "aws.bedrock",
	// "gcp.vertex_ai" and so on.
	Provider string
	// RequestModel is the model the call asked for (gen_ai.request.model);
	// ResponseModel the one that answered (gen_ai.response.model), when the
	// provider says.
	RequestModel  string
	ResponseModel string
	// Operation is the conventions' gen_ai.operation.name of the call:
	// "chat", "text_completion", "generate_content", "embeddings" and so
	// on. Empty means "chat", the operation of an agent's turn.
	Operation string
	// StartedAt is when the call was sent; the event's EmittedAt is when
	// it ended (its answer, or its last chunk, came). Zero means unknown:
	// the call then has no duration.
	StartedAt time.Time
	// FirstChunkAt is when the first chunk of a streamed answer came, for
	// the conventions' time to first chunk. Zero for a call that was not
	// streamed, or when unknown.
	FirstChunkAt time.Time
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

// Store is the append-only transcript keyspace. The rules below are what
// the conformance package's TestKeyspace checks; each names its rule.
//
// Implementations are safe for concurrent use: of concurrent appends at one
// expected seq exactly one commits, and concurrent batches are never
// interleaved or torn ("concurrent-appends", "concurrent-batches"). They return
// ctx.Err() (or an error wrapping it) when the context is done before the
// call takes effect ("context-cancelled"). Zero workflow or run IDs are
// refused by every method with an error wrapping
// [eventstore.ErrInvalidArgument] ("zero-ids-refused").
//
// Nothing is shared between a Store and its caller: the caller may modify or
// reuse the events slice it passed to AppendEvents, and anything its events
// point to, once the call has returned, without changing what is stored; and
// it may keep and modify the records ReadFrom returned without changing the
// store or what later reads return ("records-are-copies").
type Store interface {
	// AppendEvents commits events, all of one stream, as one all-or-nothing
	// commit at expectedSeq: the i-th event gets StoreSeq expectedSeq+i
	// ("contiguous-seqs", "batch"). It returns the new head
	// (expectedSeq+len(events)).
	//
	// A stale expectedSeq returns a *eventstore.SequenceConflictError whose
	// Found is the actual head ("conflict-found-is-actual-head") and writes
	// nothing ("conflicted-batch-writes-nothing"). That holds for a batch
	// identical to the one already committed at expectedSeq too: a store
	// does not deduplicate retries, and a writer that does not know whether
	// its append landed reads the stream ("retried-batch-conflicts"). An
	// empty slice is a no-op returning expectedSeq ("empty-batch-noop"). A
	// batch that
	// [ValidateBatch] refuses gets its error and writes nothing: a batch
	// mixing streams [ErrMixedStreams] ("mixed-streams-refused"), one holding
	// an ephemeral event [ErrEphemeral] ("ephemeral-refused"), a zero workflow
	// or run ID, a nil pointer content or a content type outside the five
	// kinds an error wrapping eventstore.ErrInvalidArgument ("validation").
	// Every method's results agree, over long random sequences of good and
	// bad calls, with a reference model of this contract ("model"). On every error
	// the returned head is 0. Stored events have StoreSeq set and Persisted
	// true; a pointer content is stored as its value kind.
	AppendEvents(ctx context.Context, expectedSeq uint64, events []ActivityEvent) (uint64, error)

	// Head returns the stream's next StoreSeq, equal to the number of records
	// it holds: 0 for an unwritten stream ("head").
	Head(ctx context.Context, key StreamKey) (uint64, error)

	// ReadFrom returns the records with StoreSeq >= fromSeq in order, at most
	// limit of them (limit <= 0: all); past the head it returns none
	// ("read-from-resume"). Each record's Event has the StoreSeq of the record
	// and Persisted true. Its cost grows with what it returns, not with the
	// stream's length.
	ReadFrom(ctx context.Context, key StreamKey, fromSeq uint64, limit int) ([]Record, error)

	// ListStreams returns the streams of one run that hold at least one
	// record, ordered by (activity, attempt) as unsigned numbers, each with
	// its head ("list-order"); never another run's, even of the same
	// workflow ("list-run-scoping"); none for a run without streams
	// ("empty-listings"). Its cost grows with that run's streams, not with
	// the keyspace.
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
