package catalog

import (
	"testing"

	"go.opentelemetry.io/otel/attribute"
	semconv141 "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
)

// TestGenAINamesMatchTheConventions checks the GenAI names spelled here
// against the last semconv package that declared them (v1.41.0).
func TestGenAINamesMatchTheConventions(t *testing.T) {
	keys := []struct{ ours, theirs attribute.Key }{
		{GenAIOperationName, semconv141.GenAIOperationNameKey},
		{GenAIProviderName, semconv141.GenAIProviderNameKey},
		{GenAIRequestModel, semconv141.GenAIRequestModelKey},
		{GenAIResponseModel, semconv141.GenAIResponseModelKey},
		{GenAITokenType, semconv141.GenAITokenTypeKey},
		{GenAIToolName, semconv141.GenAIToolNameKey},
		{GenAIToolCallID, semconv141.GenAIToolCallIDKey},
		{GenAIAgentID, semconv141.GenAIAgentIDKey},
		{GenAIUsageInput, semconv141.GenAIUsageInputTokensKey},
		{GenAIUsageOutput, semconv141.GenAIUsageOutputTokensKey},
	}
	for _, k := range keys {
		if k.ours != k.theirs {
			t.Errorf("key %q, the conventions say %q", k.ours, k.theirs)
		}
	}
	values := []struct{ ours, theirs string }{
		{GenAIOperationChat, semconv141.GenAIOperationNameChat.Value.AsString()},
		{GenAIOperationExecuteTool, semconv141.GenAIOperationNameExecuteTool.Value.AsString()},
		{GenAITokenInput, semconv141.GenAITokenTypeInput.Value.AsString()},
		{GenAITokenOutput, semconv141.GenAITokenTypeOutput.Value.AsString()},
		{GenAIClientTokenUsage, genaiconv.ClientTokenUsage{}.Name()},
		{UnitToken, genaiconv.ClientTokenUsage{}.Unit()},
		{GenAIClientOperationDuration, genaiconv.ClientOperationDuration{}.Name()},
		{UnitSeconds, genaiconv.ClientOperationDuration{}.Unit()},
	}
	for _, v := range values {
		if v.ours != v.theirs {
			t.Errorf("name %q, the conventions say %q", v.ours, v.theirs)
		}
	}
}
