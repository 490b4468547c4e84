package pipeline

import (
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The wait for a worker on the timeline: an activity span carries one
// event per claim of its outbox row, at the claim's time, numbered from 1
// (otelstore's ClaimOutboxRows, pairing.Tracker.Claimed).
const (
	claimEvent = "aion.activity.claim"
	claimCount = "aion.activity.claim_count"
)

// claimedSpan is an activity span and its claim events.
type claimedSpan struct {
	Where      string // trace/span and name, for the problem list
	Start, End time.Time
	Claims     []claim
}

type claim struct {
	At    time.Time
	Count int64 // aion.activity.claim_count; 0 when missing
}

// claimedSpans returns the activity spans of td that have claim events.
func claimedSpans(td ptrace.Traces) []claimedSpan {
	var out []claimedSpan
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				if !strings.HasPrefix(s.Name(), activitySpanPrefix) {
					continue
				}
				tid, sid := s.TraceID(), s.SpanID()
				cs := claimedSpan{Where: fmt.Sprintf("%s/%s %q", hex.EncodeToString(tid[:]), hex.EncodeToString(sid[:]), s.Name()),
					Start: s.StartTimestamp().AsTime(), End: s.EndTimestamp().AsTime()}
				for _, e := range s.Events().All() {
					if e.Name() != claimEvent {
						continue
					}
					c := claim{At: e.Timestamp().AsTime()}
					if v, ok := e.Attributes().Get(claimCount); ok {
						c.Count = v.Int()
					}
					cs.Claims = append(cs.Claims, c)
				}
				if len(cs.Claims) > 0 {
					out = append(out, cs)
				}
			}
		}
	}
	return out
}

// checkClaims checks the claim events of an activity span against what the
// timeline promises: within the span (the wait, from its start to the
// first claim, then the run), in time order, numbered 1, 2, ... by
// aion.activity.claim_count.
func checkClaims(s claimedSpan) []string {
	var problems []string
	for i, c := range s.Claims {
		if c.Count != int64(i+1) {
			problems = append(problems, fmt.Sprintf("%s: claim event %d has %s %d, want %d", s.Where, i+1, claimCount, c.Count, i+1))
		}
		if c.At.Before(s.Start) || c.At.After(s.End) {
			problems = append(problems, fmt.Sprintf("%s: claim event %d at %s, outside the span (%s to %s)",
				s.Where, i+1, c.At.Format(time.RFC3339Nano), s.Start.Format(time.RFC3339Nano), s.End.Format(time.RFC3339Nano)))
		}
		if i > 0 && c.At.Before(s.Claims[i-1].At) {
			problems = append(problems, fmt.Sprintf("%s: claim event %d before claim event %d", s.Where, i+1, i))
		}
	}
	return problems
}
