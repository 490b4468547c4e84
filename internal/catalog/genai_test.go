package catalog

import (
	"strings"
	"testing"

	semconv141 "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
)

// TestGenAINamesMatchTheConventions checks the instruments this package
// attributes to v1.41.0 against that release's generated package: a name
// or unit spelled wrong, or an instrument v1.41.0 does not define claiming
// its schema URL, fails here.
func TestGenAINamesMatchTheConventions(t *testing.T) {
	values := []struct{ ours, theirs string }{
		{GenAIClientTokenUsage, genaiconv.ClientTokenUsage{}.Name()},
		{UnitToken, genaiconv.ClientTokenUsage{}.Unit()},
		{GenAIClientOperationDuration, genaiconv.ClientOperationDuration{}.Name()},
		{UnitSeconds, genaiconv.ClientOperationDuration{}.Unit()},
		{GenAIClientTimeToFirstChunk, genaiconv.ClientOperationTimeToFirstChunk{}.Name()},
		{UnitSeconds, genaiconv.ClientOperationTimeToFirstChunk{}.Unit()},
		{GenAISchemaURL, "https://opentelemetry.io/schemas/1.41.0"},
	}
	for _, v := range values {
		if v.ours != v.theirs {
			t.Errorf("name %q, the conventions say %q", v.ours, v.theirs)
		}
	}
	for _, v := range []struct{ ours, theirs string }{
		{GenAIOperationChat, "chat"}, {GenAIOperationExecuteTool, "execute_tool"}, {GenAIOperationInvokeAgent, "invoke_agent"},
		{GenAITokenInput, "input"}, {GenAITokenOutput, "output"},
		{string(GenAIUsageCacheRead), "gen_ai.usage.cache_read.input_tokens"},
		{string(GenAIUsageCacheCreation), "gen_ai.usage.cache_creation.input_tokens"},
		{string(GenAIUsageReasoning), "gen_ai.usage.reasoning.output_tokens"},
	} {
		if v.ours != v.theirs {
			t.Errorf("value %q, want %q", v.ours, v.theirs)
		}
	}
}

// TestGenAIDevNamesAreNotInTheRelease: the instruments attributed to the
// current, unreleased text carry GenAIDevSchemaURL because v1.41.0 lacks
// them; were a release to define them, they would move to its schema URL.
func TestGenAIDevNamesAreNotInTheRelease(t *testing.T) {
	released := map[string]bool{
		genaiconv.ClientTokenUsage{}.Name(): true, genaiconv.ClientOperationDuration{}.Name(): true,
		genaiconv.ClientOperationTimeToFirstChunk{}.Name(): true, genaiconv.ClientOperationTimePerOutputChunk{}.Name(): true,
		genaiconv.ServerRequestDuration{}.Name(): true, genaiconv.ServerTimePerOutputToken{}.Name(): true,
		genaiconv.ServerTimeToFirstToken{}.Name(): true,
	}
	for _, name := range []string{GenAIExecuteToolDuration, GenAIInvokeAgentDuration, GenAIInferenceInputTokens,
		GenAIInferenceOutputTokens, GenAIInferenceCacheReadTokens, GenAIInferenceCacheWriteTokens, GenAIInferenceReasoningTokens} {
		if released[name] {
			t.Errorf("%s is defined by v1.41.0: give it GenAISchemaURL", name)
		}
		if !strings.HasPrefix(name, "gen_ai.") {
			t.Errorf("%s is not a conventions name", name)
		}
	}
	if GenAIDevSchemaURL == GenAISchemaURL || !strings.HasPrefix(GenAIDevSchemaURL, "https://opentelemetry.io/schemas/") {
		t.Errorf("GenAIDevSchemaURL %q", GenAIDevSchemaURL)
	}
	if semconv141.SchemaURL == SchemaURL {
		t.Errorf("the store telemetry's schema URL %s should be a newer release than the GenAI one", SchemaURL)
	}
}
