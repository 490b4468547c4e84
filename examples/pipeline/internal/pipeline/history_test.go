package pipeline

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/aionotel/aionotel/eventstore"
)

// script builds a history: each event gets the run and the time given,
// and its position.
type script struct {
	wf     eventstore.WorkflowID
	t0     time.Time
	events []eventstore.Event
}

func newScript() *script {
	return &script{wf: eventstore.NewWorkflowID(), t0: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)}
}

func (s *script) add(run eventstore.RunID, second int, ev eventstore.Event) {
	env := eventstore.Envelope{WorkflowID: s.wf, RunID: run, Seq: uint64(len(s.events) + 1), RecordedAt: s.t0.Add(time.Duration(second) * time.Second)}
	s.events = append(s.events, eventstore.WithEnvelope(ev, env))
}

func (s *script) at(second int) time.Time { return s.t0.Add(time.Duration(second) * time.Second) }

func TestFoldHistory(t *testing.T) {
	s := newScript()
	r1, r2 := eventstore.NewRunID(), eventstore.NewRunID()
	s.add(r1, 0, eventstore.WorkflowStarted{WorkflowType: "order"})
	s.add(r1, 1, eventstore.ActivityScheduled{ActivityID: 0, ActivityType: "charge"})
	s.add(r1, 1, eventstore.ActivityScheduled{ActivityID: 1, ActivityType: "reserve"})
	s.add(r1, 1, eventstore.ActivityScheduled{ActivityID: 1, ActivityType: "reserve"}) // a repeat
	s.add(r1, 2, eventstore.ActivityFailed{ActivityID: 0, Error: eventstore.ActivityError{Kind: eventstore.Retryable}})
	s.add(r1, 3, eventstore.ActivityCompleted{ActivityID: 0})
	s.add(r1, 4, eventstore.ActivityCancelled{ActivityID: 0}) // later: the first settles
	s.add(r1, 5, eventstore.WorkflowFailed{})                 // activity 1 abandoned
	s.add(r1, 6, eventstore.ActivityTimedOut{ActivityID: 1})  // after its settler
	s.add(r1, 7, eventstore.WorkflowReopened{})
	s.add(r1, 8, eventstore.ActivityScheduled{ActivityID: 2, ActivityType: "ship"})
	s.add(r1, 9, eventstore.ActivityFailed{ActivityID: 2, Error: eventstore.ActivityError{Kind: eventstore.Terminal}})
	s.add(r1, 10, eventstore.ActivityScheduled{ActivityID: 3, ActivityType: "notify"})
	s.add(r1, 11, eventstore.WorkflowContinuedAsNew{NewRunID: r2}) // its second close
	s.add(r2, 11, eventstore.WorkflowStarted{WorkflowType: "order"})
	s.add(r2, 12, eventstore.ActivityCompleted{ActivityID: 0}) // before its dispatch: none
	s.add(r2, 13, eventstore.ActivityScheduled{ActivityID: 0, ActivityType: "charge"})
	runs := foldHistory(s.wf, s.events)
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2: %+v", len(runs), runs)
	}
	first := runs[0]
	if first.Type != "order" || !first.Closed || first.Status != "failed" || !first.End.Equal(s.at(5)) || !first.Start.Equal(s.at(0)) || first.Open {
		t.Errorf("first run %+v: want order from 0 s to its first close at 5 s, failed, closed now", first)
	}
	want := []activityTruth{
		{ID: 0, Type: "charge", Dispatched: s.at(1), Settled: true, End: s.at(3), Outcome: "succeeded"},
		{ID: 1, Type: "reserve", Dispatched: s.at(1), Settled: true, End: s.at(5), Outcome: "abandoned"},
		{ID: 2, Type: "ship", Dispatched: s.at(8), Settled: true, End: s.at(9), Outcome: "failed"},
		{ID: 3, Type: "notify", Dispatched: s.at(10), Settled: true, End: s.at(11), Outcome: "abandoned"},
	}
	if len(first.Activities) != len(want) {
		t.Fatalf("first run's activities %+v, want %+v", first.Activities, want)
	}
	for i, w := range want {
		if g := first.Activities[i]; g != w {
			t.Errorf("activity %d: %+v, want %+v", i, g, w)
		}
	}
	second := runs[1]
	if second.Closed || !second.Open || len(second.Activities) != 1 || second.Activities[0].Settled {
		t.Errorf("second run %+v: want open with activity 0 in flight", second)
	}
	tr := summarise(runs)
	if d := diffCounts(map[string]float64{"charge": 1}, tr.InFlight); d != "" || tr.OpenRuns != 1 {
		t.Errorf("in flight %v, open runs %d: %s", tr.InFlight, tr.OpenRuns, d)
	}
	if d := diffCounts(map[string]float64{"succeeded": 1, "abandoned": 2, "failed": 1}, tr.Completed); d != "" {
		t.Errorf("completed: %s", d)
	}
}

func TestDiffCounts(t *testing.T) {
	if d := diffCounts(map[string]float64{"a": 1, "b": 0}, map[string]float64{"a": 1}); d != "" {
		t.Errorf("a missing key is 0: %s", d)
	}
	if d := diffCounts(map[string]float64{"a": 1}, map[string]float64{"a": 2, "c": 1}); !strings.Contains(d, "a: 2, want 1") || !strings.Contains(d, "c: 1, want 0") {
		t.Errorf("got %q", d)
	}
}

func TestWithParam(t *testing.T) {
	got, err := withParam("postgres://u:p@h:5432/db?sslmode=disable", "search_path", "s1")
	if err != nil || got != "postgres://u:p@h:5432/db?search_path=s1&sslmode=disable" {
		t.Errorf("URL: %q, %v", got, err)
	}
	if got, _ := withParam("host=h dbname=db", "application_name", "x"); got != "host=h dbname=db application_name=x" {
		t.Errorf("key=value: %q", got)
	}
}

// clusterSpans are the spans Jaeger would return for the closed runs as
// the timeline promises them (IDs made up, unique).
func clusterSpans(runs []runTruth) []span {
	var out []span
	for i, r := range runs {
		if !r.Closed {
			continue
		}
		trace := pcommon.TraceID{byte(i + 1)}
		run := span{TraceID: trace, SpanID: pcommon.SpanID{byte(i + 1), 0xff}, Name: runSpanPrefix + r.Type, Kind: ptrace.SpanKindInternal,
			Start: r.Start, End: r.End, Attrs: map[string]string{"aion.workflow.id": r.Workflow.String(), "aion.run.id": r.Run.String(),
				"aion.workflow.status": r.Status}}
		out = append(out, run)
		for j, a := range r.Activities {
			out = append(out, span{TraceID: trace, SpanID: pcommon.SpanID{byte(i + 1), byte(j)}, ParentID: run.SpanID, hasParent: true,
				Name: activitySpanPrefix + a.Type, Kind: ptrace.SpanKindInternal, Start: a.Dispatched, End: a.End,
				Attrs: map[string]string{"aion.workflow.id": r.Workflow.String(), "aion.run.id": r.Run.String(),
					"aion.activity.id": fmt.Sprint(uint64(a.ID)), "aion.activity.outcome": a.Outcome}})
		}
	}
	return out
}

func TestCompareTimeline(t *testing.T) {
	s := newScript()
	r1, r2 := eventstore.NewRunID(), eventstore.NewRunID()
	s.add(r1, 0, eventstore.WorkflowStarted{WorkflowType: "order"})
	s.add(r1, 1, eventstore.ActivityScheduled{ActivityID: 0, ActivityType: "charge"})
	s.add(r1, 2, eventstore.ActivityCompleted{ActivityID: 0})
	s.add(r1, 3, eventstore.ActivityScheduled{ActivityID: 1, ActivityType: "ship"})
	s.add(r1, 4, eventstore.WorkflowContinuedAsNew{NewRunID: r2})
	s.add(r2, 4, eventstore.WorkflowStarted{WorkflowType: "order"})
	s.add(r2, 5, eventstore.ActivityScheduled{ActivityID: 0, ActivityType: "charge"})
	runs := foldHistory(s.wf, s.events)
	tr := summarise(runs)
	if p, _ := compareTimeline(tr, clusterSpans(runs), nil); len(p) > 0 {
		t.Fatalf("the timeline as promised reported:\n%s", strings.Join(p, "\n"))
	}
	// What a killed node may have lost is excused when missing, never
	// when doubled.
	lost := func(run runTruth, _ bool, end time.Time) bool { return run.Run == r1 }
	if p, n := compareTimeline(tr, clusterSpans(runs)[1:], lost); len(p) > 0 || n != 1 {
		t.Errorf("a lost run span: %d excused, problems %v; want 1 excused", n, p)
	}
	if p, _ := compareTimeline(tr, append(clusterSpans(runs), clusterSpans(runs)[0]), lost); len(p) == 0 {
		t.Error("a doubled run span was excused")
	}
	testCases := []struct {
		name   string
		mutate func([]span) []span
		want   string
	}{
		{"run span missing", func(sp []span) []span { return sp[1:] }, "has 0 run spans of it, want 1"},
		{"run span twice", func(sp []span) []span { return append(sp, sp[0]) }, "has 2 run spans of it"},
		{"activity span missing", func(sp []span) []span { return append(sp[:1], sp[2:]...) }, "activity 0 (charge): Jaeger has 0 spans of it"},
		{"activity span twice", func(sp []span) []span { return append(sp, sp[1]) }, "activity 0 (charge): Jaeger has 2 spans of it"},
		{"run span late", func(sp []span) []span { sp[0].End = sp[0].End.Add(time.Millisecond); return sp }, "run span from"},
		{"run span a microsecond off", func(sp []span) []span { sp[0].Start = sp[0].Start.Add(time.Microsecond); return sp }, ""},
		{"activity span early", func(sp []span) []span { sp[1].Start = sp[1].Start.Add(-time.Second); return sp }, "span from"},
		{"wrong status", func(sp []span) []span { sp[0].Attrs["aion.workflow.status"] = "completed"; return sp }, `status "completed", history "continued_as_new"`},
		{"wrong outcome", func(sp []span) []span { sp[2].Attrs["aion.activity.outcome"] = "succeeded"; return sp }, `outcome "succeeded", history "abandoned"`},
		{"run span not a root", func(sp []span) []span { sp[0].hasParent, sp[0].ParentID = true, sp[1].SpanID; return sp }, "want an internal root"},
		{"activity under another span", func(sp []span) []span { sp[2].ParentID = sp[1].SpanID; return sp }, "want the run span"},
		{"a missing parent", func(sp []span) []span { sp[2].ParentID = pcommon.SpanID{9, 9}; return sp }, "which the trace lacks"},
		{"a span of an open run", func(sp []span) []span {
			extra := sp[0]
			extra.TraceID, extra.SpanID = pcommon.TraceID{42}, pcommon.SpanID{42}
			extra.Attrs = map[string]string{"aion.workflow.id": s.wf.String(), "aion.run.id": r2.String()}
			return append(sp, extra)
		}, "is open in history, Jaeger has 1 run spans of it"},
		{"a run no history has", func(sp []span) []span {
			extra := sp[0]
			extra.TraceID, extra.SpanID = pcommon.TraceID{43}, pcommon.SpanID{43}
			extra.Attrs = map[string]string{"aion.workflow.id": "w", "aion.run.id": "r"}
			return append(sp, extra)
		}, "which no history has"},
		{"an activity no history has", func(sp []span) []span {
			extra := sp[1]
			extra.SpanID = pcommon.SpanID{44}
			extra.Attrs = map[string]string{"aion.workflow.id": s.wf.String(), "aion.run.id": r1.String(), "aion.activity.id": "7"}
			return append(sp, extra)
		}, "spans of activity 7, which history lacks"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			spans := clusterSpans(runs)
			for i := range spans { // a deep copy of the attributes
				attrs := map[string]string{}
				for k, v := range spans[i].Attrs {
					attrs[k] = v
				}
				spans[i].Attrs = attrs
			}
			problems, _ := compareTimeline(tr, tc.mutate(spans), nil)
			if tc.want == "" {
				if len(problems) > 0 {
					t.Errorf("want no problem, got:\n%s", strings.Join(problems, "\n"))
				}
				return
			}
			for _, p := range problems {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("no problem mentions %q; got:\n%s", tc.want, strings.Join(problems, "\n"))
		})
	}
}
