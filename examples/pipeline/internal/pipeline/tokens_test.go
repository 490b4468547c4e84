package pipeline

import (
	"maps"
	"strings"
	"testing"
)

func TestParseTokenTotals(t *testing.T) {
	testCases := []struct {
		name    string
		out     string
		want    tokenTotals
		wantErr string
	}{
		{
			name: "lines among others",
			out: "demo: started\r\ndemo: gen_ai tokens model=gpt-4o type=input total=1200\n" +
				"demo: gen_ai tokens model=gpt-4o type=output total=300\n" +
				"demo: gen_ai tokens model=claude-x type=input total=0\nsummary\n",
			want: tokenTotals{{"gpt-4o", "input"}: 1200, {"gpt-4o", "output"}: 300, {"claude-x", "input"}: 0},
		},
		{name: "none", out: "demo: done\n", want: tokenTotals{}},
		{
			name: "every type",
			out: "demo: gen_ai tokens model=m type=input total=10\ndemo: gen_ai tokens model=m type=output total=5\n" +
				"demo: gen_ai tokens model=m type=cache_read total=4\ndemo: gen_ai tokens model=m type=cache_creation total=0\n" +
				"demo: gen_ai tokens model=m type=reasoning total=2\n",
			want: tokenTotals{{"m", "input"}: 10, {"m", "output"}: 5, {"m", "cache_read"}: 4, {"m", "cache_creation"}: 0, {"m", "reasoning"}: 2},
		},
		{name: "unknown type", out: "demo: gen_ai tokens model=m type=cached total=1\n", wantErr: "malformed"},
		{name: "negative", out: "demo: gen_ai tokens model=m type=input total=-1\n", wantErr: "malformed"},
		{name: "trailing text", out: "demo: gen_ai tokens model=m type=input total=1 tokens\n", wantErr: "malformed"},
		{name: "twice", out: "demo: gen_ai tokens model=m type=input total=1\ndemo: gen_ai tokens model=m type=input total=2\n", wantErr: "twice"},
		{name: "beyond float precision", out: "demo: gen_ai tokens model=m type=input total=9007199254740993\n", wantErr: "out of range"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseTokenTotals(tc.out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestTokenQueries: one query per printed type, each summing by request
// model the series the README and the dashboard name for it, within the
// matcher.
func TestTokenQueries(t *testing.T) {
	q := tokenQueries(`job="j"`)
	want := map[string]string{
		"input":          `sum by (gen_ai_request_model) (gen_ai_client_token_usage_sum{job="j", gen_ai_token_type="input"})`,
		"output":         `sum by (gen_ai_request_model) (gen_ai_client_token_usage_sum{job="j", gen_ai_token_type="output"})`,
		"cache_read":     `sum by (gen_ai_request_model) (gen_ai_client_inference_usage_cache_read_input_tokens_total{job="j"})`,
		"cache_creation": `sum by (gen_ai_request_model) (gen_ai_client_inference_usage_cache_write_input_tokens_total{job="j"})`,
		"reasoning":      `sum by (gen_ai_request_model) (gen_ai_client_inference_usage_reasoning_output_tokens_total{job="j"})`,
	}
	if !maps.Equal(q, want) {
		t.Errorf("queries %v, want %v", q, want)
	}
	series := catalogSeries()
	for typ, expr := range q {
		name := expr[strings.Index(expr, ") (")+3 : strings.Index(expr, "{")]
		if _, ok := series[name]; !ok {
			t.Errorf("%s: %s is not a catalog series", typ, name)
		}
	}
}

func TestTokenTotalsDiff(t *testing.T) {
	want := tokenTotals{{"a", "input"}: 10, {"a", "output"}: 5}
	if d := want.diff(tokenTotals{{"a", "input"}: 10, {"a", "output"}: 5}); d != "" {
		t.Errorf("equal totals: diff %q", d)
	}
	d := want.diff(tokenTotals{{"a", "input"}: 11, {"b", "input"}: 1})
	for _, w := range []string{"model=a type=input: 11, want 10", "model=a type=output: want 5, no series", "model=b type=input: 1, not printed"} {
		if !strings.Contains(d, w) {
			t.Errorf("diff %q lacks %q", d, w)
		}
	}
}
