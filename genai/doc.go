// Package genai turns agent transcripts into the telemetry of the
// OpenTelemetry GenAI semantic conventions, the way package pairing does
// for workflow histories: [keyspace.ActivityEvent] records in; GenAI
// spans, metrics and log records out.
//
//	tracker := genai.New(genai.WithMeterProvider(mp), genai.WithTracerProvider(tp),
//		genai.WithNamespace("payments"))
//	// after each commit of a transcript batch:
//	tracker.Observe(ctx, firstSeq, events)
//	// when the program stops, before its providers shut down:
//	tracker.EndAgentSpans()
//
// The otelstore keyspace decorator (otelstore.NewKeyspace) calls it for
// every committed AppendEvents; an engine that keeps its transcripts
// elsewhere calls [Tracker.Observe] after its own commits.
//
// # What an attempt becomes
//
// A transcript stream (one attempt of one activity) is one "invoke_agent"
// span, kind internal, child of the activity's span ([WithActivitySpans])
// or of its run's trace anchor. A [keyspace.Usage] is one model call: an
// inference span "{gen_ai.operation.name} {gen_ai.request.model}" (kind
// client, from StartedAt to EmittedAt, with its counts), token counts and,
// with StartedAt, a duration and time to first chunk. A [keyspace.ToolCall]
// and the [keyspace.ToolResult] of its CallID, in either order, are one
// "execute_tool {gen_ai.tool.name}" span, one aion.gen_ai.tool.calls and
// one gen_ai.execute_tool.duration. The invoke_agent span ends at the
// attempt's last event when a terminal [keyspace.Status] (completed,
// succeeded, failed, cancelled, canceled, timed_out) arrives, a later
// attempt of the activity starts, nothing arrives for
// [WithAgentIdleTimeout], the memory bound evicts it, or
// [Tracker.EndAgentSpans] is called (aion.gen_ai.invocation.end says
// which); it then carries the attempt's totals (aion.gen_ai.usage.total.*,
// model and tool call counts). With [WithTranscriptLogs] each model call is
// also a gen_ai.client.inference.operation.details record in the context
// of its inference span; content (messages, tool arguments and output)
// leaves only with [WithContentCapture], and never on metrics.
//
// Every span of the three kinds, every metric point and every log record
// carries aion.namespace ([WithNamespace]) and the [WithAttributes]
// attributes. invoke_agent carries gen_ai.provider.name and
// gen_ai.request.model only when every model call of the attempt named the
// same one (decided at its end, so neither is on it at its start). A model
// call that names no provider has gen_ai.provider.name "_unknown" (the
// conventions require the attribute), and counts as that name here: an
// attempt whose calls all name none has "_unknown" too, one that mixes
// named and unnamed calls has none.
//
// # Conventions
//
// The released names are those of semantic conventions v1.41.0, the last
// release holding gen_ai.*; the others come from the current, unreleased
// text of the semantic-conventions-genai repository ("dev" below), whose
// instruments carry its own schema URL. OTEL_SEMCONV_STABILITY_OPT_IN (read
// by New, or [WithSemConvStabilityOptIn]) is a comma-separated list:
// "gen_ai_latest_experimental" records the current text's names where it
// still moves, and "gen_ai/dup" adds, for this release, the names earlier
// aionotel builds emitted.
//
//	name                                              version   opt-in
//	gen_ai.client.token.usage (histogram)             v1.41.0   latest: not recorded
//	gen_ai.client.inference.usage.input_tokens,       dev       latest only (counters, gen_ai.token.modality)
//	  .output_tokens
//	gen_ai.client.inference.usage.cache_read.input_tokens,
//	  .cache_write.input_tokens, .reasoning.output_tokens
//	                                                  dev       always
//	gen_ai.client.operation.duration                  v1.41.0   latest: model calls on gen_ai.client.inference.duration;
//	                                                            dup: tool executions too (execute_tool)
//	gen_ai.client.inference.duration                  dev       latest only
//	gen_ai.client.operation.time_to_first_chunk       v1.41.0   latest: gen_ai.client.inference.time_to_first_chunk
//	gen_ai.execute_tool.duration,                     dev       none
//	  gen_ai.invoke_agent.duration
//	spans invoke_agent, {operation} {model},          v1.41.0   none
//	  execute_tool {tool}
//	gen_ai.usage.cache_write.input_tokens (spans,     dev       dup: v1.41.0's gen_ai.usage.cache_creation.input_tokens too
//	  records), the name its counter has
//	gen_ai.tool.call.arguments, .result               v1.41.0   none (a JSON object as a map value, else text)
//	gen_ai.client.inference.operation.details         v1.41.0   dup: the v1.36 per-message events too
//	aion.gen_ai.* (tool calls, evictions, refusals)   aionotel  none
//
// # Concurrency
//
// A [Tracker] is safe for concurrent use and must not be copied; its zero
// value is not ready (it records nothing, as a nil one). Each Observe does its bookkeeping under one short
// lock and makes its spans, points and records after releasing it, so no
// user code (providers, processors, samplers, the [ActivitySpanSource])
// runs under it; a panic of that code is reported to otel.Handle. Batches
// of one stream should be observed in commit order (the Tracker joins tool
// calls and results in any order, but takes a stream's attempt and times
// as they arrive), and each batch once: it does not deduplicate.
//
// # Limits
//
//   - Memory: at most [DefaultMaxAgentInvocations] open attempts (past it
//     the least recently observed ends: aion.gen_ai.agent.pairing.evicted)
//     and as many ended ones remembered, so that late events join them; at
//     most [DefaultMaxPendingToolCalls] tool calls and results waiting for
//     their other half (aion.gen_ai.tool.pairing.evicted); a result whose
//     call never comes counts as gen_ai.tool.name "_unknown" when its
//     attempt ends.
//   - Values: a token count above [MaxTokenCount] is recorded nowhere and
//     counted on aion.gen_ai.usage.refused by aion.gen_ai.usage.field (the
//     gen_ai.usage.* name of the refused count). Names are made valid
//     UTF-8 and cut to 256 bytes, and past 512 distinct values of one key
//     further ones are "_other"; content is cut to [MaxContentLen].
//   - An attribute of [WithAttributes] the Tracker cannot record is dropped
//     and reported to otel.Handle; New never fails.
//   - Instruments, spans and records carry the instrumentation scope
//     [ScopeName], also through the otelstore decorator.
package genai
