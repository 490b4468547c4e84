package genai

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"

	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/keyspace"
)

// emitDetails sends the gen_ai.client.inference.operation.details record
// of one model call, in the context of its inference span: the call's
// names and plausible counts, the stream's coordinates and, with content
// capture, the messages committed since the attempt's previous call
// (gen_ai.input.messages) and the answer (gen_ai.output.messages).
func (g *Tracker) emitDetails(ctx context.Context, a *attempt, u *usageAction) {
	if !g.logger.Enabled(ctx, log.EnabledParameters{Severity: log.SeverityInfo, EventName: catalog.EventInferenceDetails}) {
		return
	}
	rec := g.record(u.ev, catalog.EventInferenceDetails, u.seq)
	rec.AddAttributes(g.usageCounts(u.set.key.attrs(), u)...)
	if len(u.in) > 0 {
		rec.AddAttributes(attribute.Slice(string(catalog.GenAIInputMessages), u.in...))
	}
	if len(u.out) > 0 {
		rec.AddAttributes(attribute.Slice(string(catalog.GenAIOutputMessages), u.out...))
	}
	g.logger.Emit(ctx, rec)
}

// record returns a record named name of the committed event ev at store
// seq seq: severity INFO, timestamp its EmittedAt, the base attributes and
// the stream's coordinates.
func (g *Tracker) record(ev *keyspace.ActivityEvent, name string, seq uint64) log.Record {
	var rec log.Record
	rec.SetEventName(name)
	rec.SetSeverity(log.SeverityInfo)
	rec.SetSeverityText("INFO")
	if !ev.EmittedAt.IsZero() {
		rec.SetTimestamp(ev.EmittedAt)
	}
	rec.SetObservedTimestamp(g.clock())
	rec.AddAttributes(g.base...)
	rec.AddAttributes(catalog.StreamAttrs(keyspace.KeyOf(*ev))...)
	rec.AddAttributes(catalog.StoreSeq.Int64(attrvalue.Int64(seq)))
	if ev.AgentID != "" {
		rec.AddAttributes(catalog.GenAIAgentID.String(attrvalue.String(ev.AgentID)))
	}
	if ev.AgentRole != "" {
		rec.AddAttributes(catalog.AgentRole.String(attrvalue.String(ev.AgentRole)))
	}
	return rec
}

// emitLegacy sends the record an earlier aionotel build sent for one
// committed transcript event (behind OTEL_SEMCONV_STABILITY_OPT_IN
// gen_ai/dup): the v1.36 per-message events, and aion.gen_ai.usage and
// aion.gen_ai.status. seq is its store seq; toolName and paired say what
// the pairing found for a result. Content (message text, tool arguments and
// output, status state and detail) goes into the body only with content
// capture on.
func (g *Tracker) emitLegacy(ctx context.Context, ev *keyspace.ActivityEvent, seq uint64, toolName string, paired bool) {
	var (
		name  string
		body  []attribute.KeyValue
		attrs []attribute.KeyValue
	)
	switch c := contentOf(ev.Content).(type) {
	case keyspace.Message:
		name = messageEvent(c.Role)
		body = append(body, attribute.String(catalog.BodyRole, attrvalue.String(c.Role)))
		if g.content {
			body = append(body, attribute.String(catalog.BodyContent, content(c.Text)))
		}
	case keyspace.ToolCall:
		name = catalog.EventAssistantMessage
		function := []attribute.KeyValue{attribute.String(catalog.BodyName, attrvalue.String(c.Name))}
		if g.content {
			function = append(function, attribute.String(catalog.BodyArguments, content(c.Arguments)))
		}
		body = append(body,
			attribute.String(catalog.BodyRole, "assistant"),
			attribute.Slice(catalog.BodyToolCalls, attribute.MapValue(
				attribute.String(catalog.BodyID, attrvalue.String(c.CallID)),
				attribute.String(catalog.BodyType, catalog.ToolTypeFunc),
				attribute.Map(catalog.BodyFunction, function...))))
		attrs = append(attrs,
			catalog.GenAIToolCallID.String(attrvalue.String(c.CallID)),
			catalog.GenAIToolName.String(attrvalue.String(c.Name)))
	case keyspace.ToolResult:
		name = catalog.EventToolMessage
		body = append(body,
			attribute.String(catalog.BodyRole, "tool"),
			attribute.String(catalog.BodyID, attrvalue.String(c.CallID)),
			attribute.Bool(catalog.BodyIsError, c.IsError))
		if g.content {
			body = append(body, attribute.String(catalog.BodyContent, content(c.Output)))
		}
		attrs = append(attrs, catalog.GenAIToolCallID.String(attrvalue.String(c.CallID)))
		if paired {
			attrs = append(attrs, catalog.GenAIToolName.String(toolName))
		}
		if c.IsError {
			attrs = append(attrs, catalog.ErrorType.String(catalog.OtherError))
		}
	case keyspace.Usage:
		name = catalog.EventUsage
		attrs = append(attrs, g.usageKeyOf(c).attrs()...)
		counts := countsOf(c)
		if !counts.refused[fieldInput] {
			attrs = append(attrs, catalog.GenAIUsageInput.Int64(counts.n[fieldInput]))
		}
		if !counts.refused[fieldOutput] {
			attrs = append(attrs, catalog.GenAIUsageOutput.Int64(counts.n[fieldOutput]))
		}
	case keyspace.Status:
		name = catalog.EventStatus
		if g.content {
			body = append(body,
				attribute.String(catalog.BodyState, content(c.State)),
				attribute.String(catalog.BodyDetail, content(c.Detail)))
		}
	default:
		return
	}
	if !g.logger.Enabled(ctx, log.EnabledParameters{Severity: log.SeverityInfo, EventName: name}) {
		return
	}
	rec := g.record(ev, name, seq)
	rec.SetBody(attribute.MapValue(body...))
	rec.AddAttributes(attrs...)
	g.logger.Emit(ctx, rec)
}

// messageEvent is the v1.36 event name of a message said by role.
func messageEvent(role string) string {
	switch role {
	case "user":
		return catalog.EventUserMessage
	case "system", "developer":
		return catalog.EventSystemMessage
	case "tool":
		return catalog.EventToolMessage
	default:
		return catalog.EventAssistantMessage
	}
}

// content is captured text made exportable: valid UTF-8, at most
// MaxContentLen bytes.
func content(s string) string { return attrvalue.Cut(s, MaxContentLen) }
