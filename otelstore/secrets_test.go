package otelstore_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
)

// secret is put in every payload, input, result, message and transcript text;
// it must never reach an exported attribute, span name, event or status.
const secret = "s3cr3t-card-4242"

func TestNoPayloadInTelemetry(t *testing.T) {
	h := newHarness(t)
	s := h.wrap(t, eventstore.NewMemory())
	ctx := context.Background()
	wf, run := ids()
	p := eventstore.Payload{ContentType: "text/plain", Data: []byte(secret)}
	e := env(run, 0)
	events := []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: e, WorkflowType: "checkout", Input: p, PackageVersion: "v1"},
		eventstore.SignalReceived{Envelope: e, SignalName: "approve", Input: p},
		eventstore.ActivityScheduled{Envelope: e, ActivityID: 0, ActivityType: "charge", Input: p},
		eventstore.ActivityFailed{Envelope: e, ActivityID: 0, Error: eventstore.ActivityError{Kind: eventstore.Retryable, Message: secret, Details: p}},
		eventstore.ActivityCompleted{Envelope: e, ActivityID: 0, Result: p},
		eventstore.WorkflowFailed{Envelope: e, Message: secret, Details: p},
	}
	rows := []eventstore.OutboxRow{{WorkflowID: wf, RunID: run, Ordinal: 1, ActivityType: "charge", Input: p}}
	if err := outbox(s).AppendWithOutbox(ctx, eventstore.RecorderToken(), wf, events, 0, rows); err != nil {
		t.Fatal(err)
	}
	// A failing call too: its error is recorded on the span.
	_ = s.Append(ctx, eventstore.RecorderToken(), wf, events, 0)
	if _, err := s.ReadHistory(ctx, wf); err != nil {
		t.Fatal(err)
	}
	if err := s.PutPackage(ctx, eventstore.PackageRecord{WorkflowType: "checkout", ContentHash: "h", Data: []byte(secret)}); err != nil {
		t.Fatal(err)
	}

	ks, err := otelstore.NewKeyspace(keyspace.NewMemory(), h.keyspaceOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	// A whole agent attempt, with the secret in every text a transcript
	// holds: its invoke_agent, inference and execute_tool spans (and the
	// failed tool's status) are scanned too.
	attempt := agentEvents(wf, run,
		keyspace.Message{Role: "user", Text: secret},
		keyspace.ToolCall{CallID: "c1", Name: "charge", Arguments: secret},
		keyspace.ToolResult{CallID: "c1", Output: secret, IsError: true},
		keyspace.ToolCall{CallID: "c2", Name: "lookup", Arguments: `{"card":"` + secret + `"}`},
		keyspace.ToolResult{CallID: "c2", Output: secret},
		keyspace.Message{Role: "assistant", Text: secret},
		keyspace.Usage{InputTokens: 10, OutputTokens: 5, CacheReadInputTokens: 2, ReasoningOutputTokens: 1, Provider: "openai",
			RequestModel: "gpt-4o", StartedAt: t0.Add(-time.Second), FirstChunkAt: t0},
		keyspace.Status{State: secret, Detail: secret},
		keyspace.Status{State: "failed", Detail: secret},
	)
	if _, err := ks.AppendEvents(ctx, 0, attempt); err != nil {
		t.Fatal(err)
	}
	if _, err := ks.ReadFrom(ctx, keyspace.KeyOf(attempt[0]), 0, 0); err != nil {
		t.Fatal(err)
	}
	genAISpans := 0
	for _, sp := range h.spans.Ended() {
		if n := sp.Name(); n == "invoke_agent" || n == "chat gpt-4o" || strings.HasPrefix(n, "execute_tool ") {
			genAISpans++
		}
	}
	if genAISpans != 4 {
		t.Fatalf("%d GenAI spans, want invoke_agent, one inference and two execute_tool spans", genAISpans)
	}

	var seen int
	check := func(where string, kvs []attribute.KeyValue) {
		for _, kv := range kvs {
			seen++
			if strings.Contains(kv.Value.String(), secret) {
				t.Errorf("%s: attribute %s carries the payload", where, kv.Key)
			}
		}
	}
	for _, sp := range h.spans.Ended() {
		check("span "+sp.Name(), sp.Attributes())
		for _, ev := range sp.Events() {
			check("span event "+ev.Name, ev.Attributes)
		}
		if strings.Contains(sp.Name()+sp.Status().Description, secret) {
			t.Errorf("span %s name or status carries the payload", sp.Name())
		}
	}
	for name, m := range h.metrics(t) {
		for _, attrs := range pointAttrs(m) {
			check("metric "+name, attrs.ToSlice())
		}
	}
	if seen < 50 {
		t.Fatalf("scanned only %d attributes; the scan is not looking at the telemetry", seen)
	}
}
