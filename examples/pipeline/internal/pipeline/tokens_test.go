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
