package pipeline

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// tokenKey is one series of the token check: a request model and a token
// type, one of tokenTypes.
type tokenKey struct{ Model, Type string }

// tokenTypes are the token types the demo prints, each with the PromQL
// selector of the series that must sum to its totals: input and output are
// gen_ai.client.token.usage by gen_ai.token.type (input includes the cached
// tokens, output the reasoning ones), the others the GenAI conventions'
// breakdown counters (cache_creation is what they call a cache write).
var tokenTypes = []struct{ Type, Selector string }{
	{"input", `gen_ai_client_token_usage_sum{%s, gen_ai_token_type="input"}`},
	{"output", `gen_ai_client_token_usage_sum{%s, gen_ai_token_type="output"}`},
	{"cache_read", `gen_ai_client_inference_usage_cache_read_input_tokens_total{%s}`},
	{"cache_creation", `gen_ai_client_inference_usage_cache_write_input_tokens_total{%s}`},
	{"reasoning", `gen_ai_client_inference_usage_reasoning_output_tokens_total{%s}`},
}

// tokenQueries returns, per token type, the PromQL query of its totals by
// request model among the series that match (a label matcher such as
// job="aionotel-e2e").
func tokenQueries(match string) map[string]string {
	out := make(map[string]string, len(tokenTypes))
	for _, tt := range tokenTypes {
		out[tt.Type] = "sum by (gen_ai_request_model) (" + fmt.Sprintf(tt.Selector, match) + ")"
	}
	return out
}

// tokenTotals are token counts by model and type.
type tokenTotals map[tokenKey]float64

// tokenLine is the line the demo prints at shutdown for each model and
// token type: the total of the tokens its committed Usage events carried.
var tokenLine = regexp.MustCompile(`^demo: gen_ai tokens model=(\S+) type=(input|output|cache_read|cache_creation|reasoning) total=(\d+)$`)

// parseTokenTotals reads the demo's token lines from its output. A line
// that starts like one but does not match, or a model and type printed
// twice, is an error: the check would compare against the wrong numbers.
func parseTokenTotals(out string) (tokenTotals, error) {
	totals := tokenTotals{}
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if !strings.HasPrefix(line, "demo: gen_ai tokens") {
			continue
		}
		m := tokenLine.FindStringSubmatch(line)
		if m == nil {
			return nil, fmt.Errorf("malformed token line %q, want %q", line,
				"demo: gen_ai tokens model=<model> type=<input|output|cache_read|cache_creation|reasoning> total=<n>")
		}
		n, err := strconv.ParseUint(m[3], 10, 53)
		if err != nil {
			return nil, fmt.Errorf("token line %q: %w", line, err)
		}
		k := tokenKey{Model: m[1], Type: m[2]}
		if _, dup := totals[k]; dup {
			return nil, fmt.Errorf("token line %q: model %s type %s printed twice", line, k.Model, k.Type)
		}
		totals[k] = float64(n)
	}
	return totals, nil
}

// diff describes how got differs from want, one line per series; "" when
// they are equal.
func (want tokenTotals) diff(got tokenTotals) string {
	keys := map[tokenKey]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	var lines []string
	for k := range keys {
		w, inWant := want[k]
		g, inGot := got[k]
		switch {
		case !inGot:
			lines = append(lines, fmt.Sprintf("model=%s type=%s: want %v, no series", k.Model, k.Type, w))
		case !inWant:
			lines = append(lines, fmt.Sprintf("model=%s type=%s: %v, not printed by the demo", k.Model, k.Type, g))
		case w != g:
			lines = append(lines, fmt.Sprintf("model=%s type=%s: %v, want %v", k.Model, k.Type, g, w))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n\t")
}
