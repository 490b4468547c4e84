package catalog

import "go.opentelemetry.io/otel/attribute"

// GenAI telemetry derived from committed transcripts (otelstore.NewKeyspace).
//
// The GenAI semantic conventions left the semconv Go packages after
// v1.41.0 (v1.42.0 removed every gen_ai declaration; the conventions live in
// their own repository now), so the v1.43.0 package this module uses has
// none of these names. They are spelled here as the conventions spell them;
// a test checks each against the last semconv package that declared it
// (v1.41.0). Names the conventions do not define keep the aion. prefix.

// Instrument names.
const (
	// GenAIClientTokenUsage is the conventions' token histogram: one point
	// per committed Usage and token type.
	GenAIClientTokenUsage = "gen_ai.client.token.usage"
	// GenAIClientOperationDuration is the conventions' operation duration,
	// recorded for tool executions (gen_ai.operation.name execute_tool):
	// from a ToolCall's EmittedAt to its ToolResult's.
	GenAIClientOperationDuration = "gen_ai.client.operation.duration"
	// GenAIToolCalls counts tool calls whose result committed, by tool name
	// and, for a failed one, error.type. The conventions have no tool-call
	// counter.
	GenAIToolCalls = "aion.gen_ai.tool.calls"
	// GenAIToolPairingEvicted counts tool calls whose pending entry the
	// decorator's memory bound dropped before their result arrived.
	GenAIToolPairingEvicted = "aion.gen_ai.tool.pairing.evicted"
)

// Units.
const (
	UnitToken = "{token}"
	UnitCall  = "{call}"
)

// Attribute keys the GenAI conventions define.
const (
	GenAIOperationName        attribute.Key = "gen_ai.operation.name"
	GenAIProviderName         attribute.Key = "gen_ai.provider.name"
	GenAIRequestModel         attribute.Key = "gen_ai.request.model"
	GenAIResponseModel        attribute.Key = "gen_ai.response.model"
	GenAITokenType            attribute.Key = "gen_ai.token.type"
	GenAIToolName             attribute.Key = "gen_ai.tool.name"
	GenAIToolCallID           attribute.Key = "gen_ai.tool.call.id"
	GenAIAgentID              attribute.Key = "gen_ai.agent.id"
	GenAIUsageInput           attribute.Key = "gen_ai.usage.input_tokens"
	GenAIUsageOutput          attribute.Key = "gen_ai.usage.output_tokens"
	GenAIToolCallArgs         attribute.Key = "gen_ai.tool.call.arguments"
	GenAIToolCallResult       attribute.Key = "gen_ai.tool.call.result"
	GenAIConversationID       attribute.Key = "gen_ai.conversation.id"
	GenAIOperationChat                      = "chat"
	GenAIOperationExecuteTool               = "execute_tool"
	GenAITokenInput                         = "input"
	GenAITokenOutput                        = "output"
)

// Attribute keys of aionotel's own on GenAI log records.
const (
	AgentRole attribute.Key = "aion.agent.role"
	StoreSeq  attribute.Key = "aion.keyspace.store_seq"
)

// Event names of the log records, one per committed transcript event. A
// Message is the conventions' per-message event of its role (the v1.36
// events, which describe exactly one message; the newer
// gen_ai.client.inference.operation.details describes a whole inference
// request, which a transcript entry is not): user, system (also
// "developer"), tool, and assistant for every other role. A ToolCall is an
// assistant message carrying the call, a ToolResult a tool message. Usage
// and Status have no event in the conventions.
const (
	EventUserMessage      = "gen_ai.user.message"
	EventSystemMessage    = "gen_ai.system.message"
	EventAssistantMessage = "gen_ai.assistant.message"
	EventToolMessage      = "gen_ai.tool.message"
	EventUsage            = "aion.gen_ai.usage"
	EventStatus           = "aion.gen_ai.status"
)

// Body fields of the log records (the v1.36 events' body shape).
const (
	BodyRole      = "role"
	BodyContent   = "content"
	BodyID        = "id"
	BodyToolCalls = "tool_calls"
	BodyType      = "type"
	BodyFunction  = "function"
	BodyName      = "name"
	BodyArguments = "arguments"
	BodyState     = "state"
	BodyDetail    = "detail"
	BodyIsError   = "is_error"
	ToolTypeFunc  = "function"
)

// TokenUsageBoundaries are the explicit bucket boundaries the conventions
// advise for gen_ai.client.token.usage.
var TokenUsageBoundaries = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}

// GenAIDurationBoundaries are the explicit bucket boundaries, in seconds,
// the conventions advise for gen_ai.client.operation.duration.
var GenAIDurationBoundaries = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
