package pipeline

import (
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// claimFixture is a trace with one activity span from 10s to 20s and claim
// events at the given seconds with the given counts, and a run span with a
// claim-named event that is no activity's.
func claimFixture(at []float64, counts []int64) ptrace.Traces {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	ts := func(s float64) pcommon.Timestamp {
		return pcommon.NewTimestampFromTime(t0.Add(time.Duration(s * float64(time.Second))))
	}
	td := ptrace.NewTraces()
	spans := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	run := spans.AppendEmpty()
	run.SetName("workflow trip")
	run.Events().AppendEmpty().SetName(claimEvent)
	act := spans.AppendEmpty()
	act.SetName("activity charge")
	act.SetTraceID(pcommon.TraceID{1})
	act.SetSpanID(pcommon.SpanID{2})
	act.SetStartTimestamp(ts(10))
	act.SetEndTimestamp(ts(20))
	act.Events().AppendEmpty().SetName("aion.activity.retry")
	for i, s := range at {
		e := act.Events().AppendEmpty()
		e.SetName(claimEvent)
		e.SetTimestamp(ts(s))
		if counts[i] > 0 {
			e.Attributes().PutInt(claimCount, counts[i])
		}
	}
	return td
}

func TestCheckClaims(t *testing.T) {
	testCases := []struct {
		name   string
		at     []float64
		counts []int64
		want   []string // substrings, one per problem
	}{
		{name: "one claim", at: []float64{12}, counts: []int64{1}},
		{name: "a re-claim", at: []float64{12, 15}, counts: []int64{1, 2}},
		{name: "at the span's ends", at: []float64{10, 20}, counts: []int64{1, 2}},
		{name: "numbered from 0", at: []float64{12}, counts: []int64{0}, want: []string{"claim_count 0, want 1"}},
		{name: "before the dispatch", at: []float64{9}, counts: []int64{1}, want: []string{"outside the span"}},
		{name: "after the end", at: []float64{21}, counts: []int64{1}, want: []string{"outside the span"}},
		{name: "out of order", at: []float64{15, 12}, counts: []int64{1, 2}, want: []string{"claim event 2 before claim event 1"}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			spans := claimedSpans(claimFixture(tc.at, tc.counts))
			if len(spans) != 1 || len(spans[0].Claims) != len(tc.at) {
				t.Fatalf("claimedSpans = %+v, want the activity span with %d claims", spans, len(tc.at))
			}
			got := checkClaims(spans[0])
			if len(got) != len(tc.want) {
				t.Fatalf("checkClaims = %q, want %d problems like %q", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
	if got := claimedSpans(claimFixture(nil, nil)); len(got) != 0 {
		t.Errorf("claimedSpans of a trace without claims = %+v, want none", got)
	}
}
