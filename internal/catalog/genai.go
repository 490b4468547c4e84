package catalog

import (
	"go.opentelemetry.io/otel/attribute"
	semconv141 "go.opentelemetry.io/otel/semconv/v1.41.0"
)

// GenAI telemetry derived from committed transcripts (otelstore.NewKeyspace).
//
// Two versions of the GenAI semantic conventions are followed:
//
//   - semantic conventions v1.41.0, the last published release that holds
//     the gen_ai.* names (the semconv Go packages dropped them in v1.42.0,
//     the conventions moved to their own repository): the token histogram,
//     the usage attributes with the cache and reasoning breakdowns, the
//     inference, execute_tool and invoke_agent spans, the inference-details
//     event and the model-call durations. Their keys are that package's;
//     their instruments, spans and events carry [GenAISchemaURL].
//   - the current text of the semantic-conventions-genai repository, which
//     has no release yet (its registry says [GenAIDevSchemaURL]): the tool
//     and agent durations and the per-category token counters, which v1.41.0
//     does not define. Their instruments carry GenAIDevSchemaURL.
//
// Names the conventions do not define keep the aion. prefix.
const (
	GenAISchemaURL    = semconv141.SchemaURL
	GenAIDevSchemaURL = "https://opentelemetry.io/schemas/gen-ai-dev/1.42.0-dev"
)

// Instrument names of v1.41.0 (GenAISchemaURL).
const (
	// GenAIClientTokenUsage is the token histogram: one point per Usage and
	// gen_ai.token.type (input, output).
	GenAIClientTokenUsage = "gen_ai.client.token.usage"
	// GenAIClientOperationDuration is a model call's duration: a Usage's
	// StartedAt to its EmittedAt. (Before, tool executions were recorded
	// here too; that survives behind OptInDup.)
	GenAIClientOperationDuration = "gen_ai.client.operation.duration"
	// GenAIClientTimeToFirstChunk is a streamed model call's StartedAt to
	// its FirstChunkAt.
	GenAIClientTimeToFirstChunk = "gen_ai.client.operation.time_to_first_chunk"
)

// Instrument names of the current text (GenAIDevSchemaURL).
const (
	// GenAIExecuteToolDuration is a tool execution's duration: a ToolCall's
	// EmittedAt to its ToolResult's.
	GenAIExecuteToolDuration = "gen_ai.execute_tool.duration"
	// GenAIInvokeAgentDuration is an agent invocation's duration: the
	// invoke_agent span's.
	GenAIInvokeAgentDuration = "gen_ai.invoke_agent.duration"
	// The per-category token counters, by gen_ai.token.modality. The three
	// breakdowns are parts of the input and output counts. Input and output
	// replace gen_ai.client.token.usage behind OptInLatest; the breakdowns
	// are recorded by default (no v1.41.0 instrument counts them).
	GenAIInferenceInputTokens      = "gen_ai.client.inference.usage.input_tokens"
	GenAIInferenceOutputTokens     = "gen_ai.client.inference.usage.output_tokens"
	GenAIInferenceCacheReadTokens  = "gen_ai.client.inference.usage.cache_read.input_tokens"
	GenAIInferenceCacheWriteTokens = "gen_ai.client.inference.usage.cache_write.input_tokens"
	GenAIInferenceReasoningTokens  = "gen_ai.client.inference.usage.reasoning.output_tokens"
	// The model-call durations of the current text, which take the
	// inference case over from gen_ai.client.operation.duration and its
	// time to first chunk (recorded instead of them behind OptInLatest).
	GenAIClientInferenceDuration    = "gen_ai.client.inference.duration"
	GenAIClientInferenceTimeToFirst = "gen_ai.client.inference.time_to_first_chunk"
	// GenAIUsageCacheWrite is the current text's name of the input tokens
	// written to a provider-managed cache, on spans and records, the
	// concept its counter GenAIInferenceCacheWriteTokens counts (v1.41.0
	// called it GenAIUsageCacheCreation, emitted beside it behind
	// OptInDup).
	GenAIUsageCacheWrite attribute.Key = "gen_ai.usage.cache_write.input_tokens"
	GenAITokenModality   attribute.Key = "gen_ai.token.modality"
	// GenAIModalityUnknown is the modality of every count: a Usage does not
	// break its tokens down by modality.
	GenAIModalityUnknown = "unknown"
)

// Instrument names of aionotel's own.
const (
	// GenAIToolCalls counts tool executions by tool name and, for a failed
	// one, error.type. The conventions have no tool-call counter.
	GenAIToolCalls = "aion.gen_ai.tool.calls"
	// GenAIToolPairingEvicted counts tool calls and results the decorator's
	// memory bound dropped before their other half arrived.
	GenAIToolPairingEvicted = "aion.gen_ai.tool.pairing.evicted"
	// GenAIAgentPairingEvicted counts agent invocations whose span the
	// memory bound ended before their attempt did.
	GenAIAgentPairingEvicted = "aion.gen_ai.agent.pairing.evicted"
	// GenAIUsageRefused counts token counts above the plausibility bound,
	// by the count that held it (UsageField); they are recorded nowhere.
	GenAIUsageRefused = "aion.gen_ai.usage.refused"
)

// Units.
const (
	UnitToken = "{token}"
	UnitCall  = "{call}"
	UnitCount = "{count}"
)

// Attribute keys the conventions define (v1.41.0).
const (
	GenAIOperationName      = semconv141.GenAIOperationNameKey
	GenAIProviderName       = semconv141.GenAIProviderNameKey
	GenAIRequestModel       = semconv141.GenAIRequestModelKey
	GenAIResponseModel      = semconv141.GenAIResponseModelKey
	GenAITokenType          = semconv141.GenAITokenTypeKey
	GenAIToolName           = semconv141.GenAIToolNameKey
	GenAIToolCallID         = semconv141.GenAIToolCallIDKey
	GenAIToolCallArgs       = semconv141.GenAIToolCallArgumentsKey
	GenAIToolCallResult     = semconv141.GenAIToolCallResultKey
	GenAIAgentID            = semconv141.GenAIAgentIDKey
	GenAIUsageInput         = semconv141.GenAIUsageInputTokensKey
	GenAIUsageOutput        = semconv141.GenAIUsageOutputTokensKey
	GenAIUsageCacheRead     = semconv141.GenAIUsageCacheReadInputTokensKey
	GenAIUsageCacheCreation = semconv141.GenAIUsageCacheCreationInputTokensKey
	GenAIUsageReasoning     = semconv141.GenAIUsageReasoningOutputTokensKey
	GenAITimeToFirstChunk   = semconv141.GenAIResponseTimeToFirstChunkKey
	GenAIInputMessages      = semconv141.GenAIInputMessagesKey
	GenAIOutputMessages     = semconv141.GenAIOutputMessagesKey
)

// Attribute values the conventions define.
var (
	GenAIOperationChat        = semconv141.GenAIOperationNameChat.Value.AsString()
	GenAIOperationExecuteTool = semconv141.GenAIOperationNameExecuteTool.Value.AsString()
	GenAIOperationInvokeAgent = semconv141.GenAIOperationNameInvokeAgent.Value.AsString()
	GenAITokenInput           = semconv141.GenAITokenTypeInput.Value.AsString()
	GenAITokenOutput          = semconv141.GenAITokenTypeOutput.Value.AsString()
)

// UsageField is aion.gen_ai.usage.refused's own attribute: which count of
// a model call was refused, named as the gen_ai.usage.* span attribute
// that would have carried it, without the prefix (gen_ai.token.type's enum
// has only input and output).
const UsageField attribute.Key = "aion.gen_ai.usage.field"

// The values of UsageField.
const (
	UsageFieldInput      = "input_tokens"
	UsageFieldOutput     = "output_tokens"
	UsageFieldCacheRead  = "cache_read.input_tokens"
	UsageFieldCacheWrite = "cache_write.input_tokens"
	UsageFieldReasoning  = "reasoning.output_tokens"
)

// Attribute keys of aionotel's own.
const (
	AgentRole attribute.Key = "aion.agent.role"
	StoreSeq  attribute.Key = "aion.keyspace.store_seq"
	// The attempt's totals on its invoke_agent span, apart from the
	// conventions' gen_ai.usage.* keys so that a backend summing those over
	// spans counts each model call once (on its inference span).
	AgentTotalInput      attribute.Key = "aion.gen_ai.usage.total.input_tokens"
	AgentTotalOutput     attribute.Key = "aion.gen_ai.usage.total.output_tokens"
	AgentTotalCacheRead  attribute.Key = "aion.gen_ai.usage.total.cache_read.input_tokens"
	AgentTotalCacheWrite attribute.Key = "aion.gen_ai.usage.total.cache_write.input_tokens"
	AgentTotalReasoning  attribute.Key = "aion.gen_ai.usage.total.reasoning.output_tokens"
	AgentModelCalls      attribute.Key = "aion.gen_ai.invocation.model_calls"
	AgentToolCalls       attribute.Key = "aion.gen_ai.invocation.tool_calls"
	// AgentEnd says what ended an invoke_agent span: one of the End* values.
	AgentEnd attribute.Key = "aion.gen_ai.invocation.end"
)

// The values of AgentEnd.
const (
	EndStatus      = "status"       // a terminal Status of the attempt
	EndNextAttempt = "next_attempt" // a later attempt of the activity committed
	EndIdle        = "idle"         // nothing committed for the idle timeout
	EndEvicted     = "evicted"      // the memory bound
	EndFlushed     = "flushed"      // the program ended every pending span
)

// TerminalStates are the Status states that end an attempt's invoke_agent
// span; the value says whether the attempt failed (status Error).
var TerminalStates = map[string]bool{
	"completed": false, "succeeded": false,
	"failed": true, "cancelled": false, "canceled": false, "timed_out": true,
}

// EventInferenceDetails is the conventions' event of one model call, with
// gen_ai.input.messages and gen_ai.output.messages when content capture is
// on.
const EventInferenceDetails = "gen_ai.client.inference.operation.details"

// The parts of gen_ai.input.messages and gen_ai.output.messages (the
// conventions' JSON schemas, as structured log attribute values).
const (
	MsgRole         = "role"
	MsgParts        = "parts"
	MsgFinishReason = "finish_reason"
	PartType        = "type"
	PartContent     = "content"
	PartID          = "id"
	PartName        = "name"
	PartArguments   = "arguments"
	PartResponse    = "response"
	PartText        = "text"
	PartToolCall    = "tool_call"
	PartToolResp    = "tool_call_response"
	FinishStop      = "stop"
	FinishToolCall  = "tool_call"
)

// Span names: the operation, then (inference, execute_tool) a space and
// the model or tool name.
const SpanInvokeAgent = "invoke_agent"

// OTEL_SEMCONV_STABILITY_OPT_IN and the values NewKeyspace reads from it
// (a comma-separated list).
const (
	OptInEnv = "OTEL_SEMCONV_STABILITY_OPT_IN"
	// OptInLatest is the conventions' own value: the newest names where
	// they are still moving, instead of the current ones.
	OptInLatest = "gen_ai_latest_experimental"
	// OptInDup adds, for one release, the names earlier aionotel builds
	// emitted (the per-message log events, tool durations on
	// gen_ai.client.operation.duration), after the conventions' "/dup"
	// values of the HTTP and database migrations.
	OptInDup = "gen_ai/dup"
)

// The per-message log events and their body (the v1.36 conventions, since
// deprecated), emitted only behind OptInDup.
const (
	EventUserMessage      = "gen_ai.user.message"
	EventSystemMessage    = "gen_ai.system.message"
	EventAssistantMessage = "gen_ai.assistant.message"
	EventToolMessage      = "gen_ai.tool.message"
	EventUsage            = "aion.gen_ai.usage"
	EventStatus           = "aion.gen_ai.status"

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
// the conventions advise for gen_ai.client.operation.duration, the time to
// first chunk and gen_ai.execute_tool.duration.
var GenAIDurationBoundaries = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}

// InvokeAgentBoundaries are the explicit bucket boundaries, in seconds, the
// conventions advise for gen_ai.invoke_agent.duration.
var InvokeAgentBoundaries = []float64{0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6}

// GenAIKeys are the attribute keys the GenAI telemetry sets itself, on
// metrics, spans or log records: a WithAttributes attribute may not use
// one (nor aion.namespace and the stream's coordinates).
var GenAIKeys = []attribute.Key{
	GenAIOperationName, GenAIProviderName, GenAIRequestModel, GenAIResponseModel, GenAITokenType,
	GenAIToolName, GenAITokenModality, GenAIToolCallID, GenAIToolCallArgs, GenAIToolCallResult,
	GenAIAgentID, GenAIUsageInput, GenAIUsageOutput, GenAIUsageCacheRead, GenAIUsageCacheCreation,
	GenAIUsageCacheWrite, GenAIUsageReasoning, GenAITimeToFirstChunk, GenAIInputMessages,
	GenAIOutputMessages, AgentRole, StoreSeq, AgentTotalInput, AgentTotalOutput, AgentTotalCacheRead,
	AgentTotalCacheWrite, AgentTotalReasoning, AgentModelCalls, AgentToolCalls, AgentEnd, UsageField,
}
