package pipeline

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// timelineFixture builds, as OTLP, one run's trace the way the timeline
// promises it with pairing.NewIDGenerator (a root run span, two activity spans,
// each linked to the append calls that scheduled and settled it, in traces
// of their own) and lets mutate break it first.
type timelineFixture struct {
	t0                               time.Time
	run, act1, act2                  ptrace.Span
	sched1, settle1, sched2, settle2 ptrace.Span
	started, closed                  ptrace.Span
	spans                            ptrace.SpanSlice // where mutate may add spans
}

func newTimelineFixture(mutate func(f *timelineFixture)) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "svc")
	ss := rs.ScopeSpans().AppendEmpty().Spans()
	f := &timelineFixture{t0: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), spans: ss}
	at := func(d time.Duration) pcommon.Timestamp { return pcommon.NewTimestampFromTime(f.t0.Add(d)) }
	runTrace := pcommon.TraceID{1, 2, 3}
	mk := func(trace pcommon.TraceID, id byte, parent pcommon.SpanID, name string, kind ptrace.SpanKind, start, end time.Duration) ptrace.Span {
		s := ss.AppendEmpty()
		s.SetTraceID(trace)
		s.SetSpanID(pcommon.SpanID{id})
		s.SetParentSpanID(parent)
		s.SetName(name)
		s.SetKind(kind)
		s.SetStartTimestamp(at(start))
		s.SetEndTimestamp(at(end))
		return s
	}
	ids := func(s ptrace.Span) {
		s.Attributes().PutStr("aion.namespace", "default")
		s.Attributes().PutStr("aion.workflow.id", "wf-1")
		s.Attributes().PutStr("aion.run.id", "run-1")
	}
	f.run = mk(runTrace, 10, pcommon.SpanID{}, "workflow order", ptrace.SpanKindInternal, 0, 10*time.Second)
	ids(f.run)
	f.run.Attributes().PutStr("aion.workflow.type", "order")
	f.run.Attributes().PutStr("aion.workflow.status", "completed")
	act := func(id byte, typ string, start, end time.Duration) ptrace.Span {
		s := mk(runTrace, id, f.run.SpanID(), "activity "+typ, ptrace.SpanKindInternal, start, end)
		ids(s)
		s.Attributes().PutStr("aion.activity.id", "a"+string('0'+id))
		s.Attributes().PutStr("aion.activity.type", typ)
		s.Attributes().PutStr("aion.activity.outcome", "succeeded")
		s.Attributes().PutInt("aion.activity.retry_count", 0)
		return s
	}
	f.act1 = act(1, "charge", time.Second, 3*time.Second)
	f.act2 = act(2, "ship", 4*time.Second, 9*time.Second)
	call := func(trace byte, start, end time.Duration) ptrace.Span {
		s := mk(pcommon.TraceID{trace}, 50+trace, pcommon.SpanID{}, "append_with_outbox", ptrace.SpanKindClient, start, end)
		s.Attributes().PutStr("db.operation.name", "append_with_outbox")
		return s
	}
	// The store sets RecordedAt before or during the call.
	f.sched1 = call(1, time.Second+time.Millisecond, time.Second+5*time.Millisecond)
	f.settle1 = call(2, 3*time.Second-time.Millisecond, 3*time.Second+time.Millisecond)
	f.sched2 = call(3, 4*time.Second, 4*time.Second+time.Millisecond)
	f.settle2 = call(4, 9*time.Second, 9*time.Second+time.Millisecond)
	link := func(from, to ptrace.Span, role string) {
		l := from.Links().AppendEmpty()
		l.SetTraceID(to.TraceID())
		l.SetSpanID(to.SpanID())
		l.Attributes().PutStr("aion.timeline.link", role)
	}
	f.started = call(5, -time.Millisecond, time.Millisecond)
	f.closed = call(6, 10*time.Second, 10*time.Second+time.Millisecond)
	link(f.run, f.started, "started")
	link(f.run, f.closed, "closed")
	link(f.run, f.run, "previous_run") // another run's span: not checked
	link(f.act1, f.sched1, "scheduled")
	link(f.act1, f.settle1, "settled")
	link(f.act2, f.sched2, "scheduled")
	link(f.act2, f.settle2, "settled")
	if mutate != nil {
		mutate(f)
	}
	return td
}

// timelineProblems runs the checks the end-to-end test runs on what Jaeger
// answers: the run traces, then every activity's links.
func timelineProblems(t *testing.T, td ptrace.Traces) (traces []runTrace, problems []string) {
	t.Helper()
	var m ptrace.JSONMarshaler
	raw, err := m.MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	parsed, err := parseJaegerTraces([]byte(`{"result":` + string(raw) + `}`))
	if err != nil {
		t.Fatal(err)
	}
	spans := flatten(parsed)
	traces, problems = splitRunTraces(spans)
	targets := map[spanRef]span{}
	for _, s := range spans {
		targets[spanRef{s.TraceID, s.SpanID}] = s
	}
	check := func(s span, roles map[string]bool) {
		p, unlinked := checkCallLinks(s, roles, targets)
		problems = append(problems, p...)
		if unlinked { // the fixture's tracker evicted nothing
			problems = append(problems, fmt.Sprintf("span %q has no link to the call that wrote its first event", s.Name))
		}
	}
	for _, rt := range traces {
		check(rt.Run, runLinkRoles)
		for _, a := range rt.Activities {
			check(a, activityLinkRoles)
		}
	}
	return traces, problems
}

func TestTimelineChecks(t *testing.T) {
	traces, problems := timelineProblems(t, newTimelineFixture(nil))
	if len(problems) > 0 {
		t.Fatalf("the timeline's own shape reported:\n%s", strings.Join(problems, "\n"))
	}
	if len(traces) != 1 || len(traces[0].Activities) != 2 || traces[0].Children != 2 || traces[0].Run.Name != "workflow order" {
		t.Fatalf("got %+v, want one run trace with two activities, children of the run span", traces)
	}
	// A run reopened after it closed: its later activities are the run
	// span's children after its end (it ends at the first close).
	traces, problems = timelineProblems(t, newTimelineFixture(func(f *timelineFixture) {
		f.act2.SetStartTimestamp(f.run.EndTimestamp() + 1)
		f.sched2.SetEndTimestamp(f.act2.StartTimestamp())
		f.act2.SetEndTimestamp(f.run.EndTimestamp() + 5)
		f.settle2.SetEndTimestamp(f.act2.EndTimestamp())
	}))
	if len(problems) > 0 || len(traces) != 1 || traces[0].Children != 2 {
		t.Fatalf("reopened run: %+v\n%s", traces, strings.Join(problems, "\n"))
	}
	// An agent's span whose activity's span is missing (evicted past the
	// tracker's bound) is counted, not reported.
	traces, problems = timelineProblems(t, newTimelineFixture(func(f *timelineFixture) {
		s := f.spans.AppendEmpty()
		f.act1.CopyTo(s)
		s.SetSpanID(pcommon.SpanID{60})
		s.SetParentSpanID(pcommon.SpanID{61})
		s.SetName("invoke_agent")
		s.Attributes().PutStr("gen_ai.operation.name", "invoke_agent")
		s.Attributes().PutStr("aion.activity.id", "a9")
	}))
	if len(traces) != 1 || traces[0].Unparented != 1 || len(problems) > 0 {
		t.Fatalf("agent of an evicted activity: %d traces, %+v\n%s", len(traces), traces, strings.Join(problems, "\n"))
	}
	a := traces[0].Activities[0]
	if a.Service != "svc" || a.Attrs["aion.activity.retry_count"] != "0" || len(a.Links) != 2 ||
		!a.Start.Equal(time.Date(2026, 12, 1, 10, 0, 1, 0, time.UTC)) {
		t.Errorf("first activity parsed as %+v", a)
	}

	testCases := []struct {
		name   string
		mutate func(f *timelineFixture)
		want   string
	}{
		{"run span under an anchor", func(f *timelineFixture) { f.run.SetParentSpanID(pcommon.SpanID{99}) }, "want the trace's root"},
		{"run span under an exported span", func(f *timelineFixture) { f.run.SetParentSpanID(f.act2.SpanID()) }, "want the trace's root"},
		{"a missing parent", func(f *timelineFixture) { f.run.SetParentSpanID(pcommon.SpanID{99}) }, "which the trace lacks"},
		{"a model call whose agent span is missing", func(f *timelineFixture) {
			s := f.spans.AppendEmpty()
			f.act1.CopyTo(s)
			s.SetSpanID(pcommon.SpanID{60})
			s.SetParentSpanID(pcommon.SpanID{61})
			s.SetName("chat gpt-4o")
			s.Attributes().PutStr("gen_ai.operation.name", "chat")
		}, "(3c00000000000000) has the parent 3d00000000000000, which the trace lacks"},
		{"an agent span whose activity's span is there but not its parent", func(f *timelineFixture) {
			s := f.spans.AppendEmpty()
			f.act1.CopyTo(s)
			s.SetSpanID(pcommon.SpanID{60})
			s.SetParentSpanID(pcommon.SpanID{61})
			s.SetName("invoke_agent")
			s.Attributes().PutStr("gen_ai.operation.name", "invoke_agent")
		}, "(3c00000000000000) has the parent 3d00000000000000, which the trace lacks"},
		{"run span of kind server", func(f *timelineFixture) { f.run.SetKind(ptrace.SpanKindServer) }, "kind Server, want internal"},
		{"run span without status", func(f *timelineFixture) { f.run.Attributes().Remove("aion.workflow.status") }, "lacks aion.workflow.status"},
		{"run span misnamed", func(f *timelineFixture) { f.run.SetName("workflow other") }, `want "workflow order"`},
		{"two run spans in one trace", func(f *timelineFixture) { f.act2.SetName("workflow ship") }, "2 run spans"},
		{"activity not a child of the run", func(f *timelineFixture) { f.act1.SetParentSpanID(pcommon.SpanID{98}) }, "want the run span"},
		{"activity under another span", func(f *timelineFixture) { f.act1.SetParentSpanID(f.act2.SpanID()) }, "want the run span"},
		{"activity of another run", func(f *timelineFixture) { f.act1.Attributes().PutStr("aion.run.id", "run-2") }, `aion.run.id = "run-2"`},
		{"activity without ID", func(f *timelineFixture) { f.act2.Attributes().Remove("aion.activity.id") }, "lacks aion.activity.id"},
		{"activity without retry count", func(f *timelineFixture) { f.act2.Attributes().Remove("aion.activity.retry_count") }, "lacks aion.activity.retry_count"},
		{"activity before its run", func(f *timelineFixture) { f.act1.SetStartTimestamp(f.run.StartTimestamp() - 1) }, "before its run"},
		{"activity after its run", func(f *timelineFixture) { f.act2.SetEndTimestamp(f.run.EndTimestamp() + 1) }, "after its run"},
		{"activity without links", func(f *timelineFixture) { f.act2.Links().RemoveIf(func(ptrace.SpanLink) bool { return true }) }, "has 0 settled links"},
		{"activity without its scheduled link", func(f *timelineFixture) {
			f.act2.Links().RemoveIf(func(l ptrace.SpanLink) bool { v, _ := l.Attributes().Get(linkRoleKey); return v.Str() == "scheduled" })
		}, "has no link to the call that wrote its first event"},
		{"run without its started link", func(f *timelineFixture) {
			f.run.Links().RemoveIf(func(l ptrace.SpanLink) bool { v, _ := l.Attributes().Get(linkRoleKey); return v.Str() == "started" })
		}, "has no link to the call that wrote its first event"},
		{"activity link without role", func(f *timelineFixture) { f.act2.Links().At(1).Attributes().Clear() }, "has 0 settled links"},
		{"link to a missing span", func(f *timelineFixture) { f.act2.Links().At(0).SetSpanID(pcommon.SpanID{77}) }, "leads to no span"},
		{"link to a read", func(f *timelineFixture) { f.sched2.Attributes().PutStr("db.operation.name", "read_history") }, "want an append store call"},
		{"link to a server span", func(f *timelineFixture) { f.sched2.SetKind(ptrace.SpanKindServer) }, "want an append store call"},
		{"start after the scheduling call", func(f *timelineFixture) {
			f.act1.SetStartTimestamp(f.sched1.EndTimestamp() + 1)
		}, "after the store call it is scheduled by ended"},
		{"end after the settling call", func(f *timelineFixture) {
			f.act1.SetEndTimestamp(f.settle1.EndTimestamp() + 1)
		}, "after the store call it is settled by ended"},
		{"run start after its starting call", func(f *timelineFixture) {
			f.started.SetEndTimestamp(f.run.StartTimestamp() - 1)
		}, "after the store call it is started by ended"},
		{"run without its closing link", func(f *timelineFixture) {
			f.run.Links().RemoveIf(func(l ptrace.SpanLink) bool { return l.SpanID() == f.closed.SpanID() })
		}, "has 0 closed links"},
		{"run end after its closing call", func(f *timelineFixture) {
			f.closed.SetEndTimestamp(f.run.EndTimestamp() - 1)
		}, "after the store call it is closed by ended"},
		{"stray span in the run's trace", func(f *timelineFixture) { f.act2.SetName("append") }, `span "append" in the run's trace`},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			_, problems := timelineProblems(t, newTimelineFixture(tc.mutate))
			for _, p := range problems {
				if strings.Contains(p, tc.want) {
					return
				}
			}
			t.Errorf("no problem mentions %q; got:\n%s", tc.want, strings.Join(problems, "\n"))
		})
	}
}

func TestParseJaegerTraces(t *testing.T) {
	for _, body := range []string{`not json`, `{"error":{"httpCode":500}}`, `{"result":{"resourceSpans":3}}`} {
		if _, err := parseJaegerTraces([]byte(body)); err == nil {
			t.Errorf("parseJaegerTraces(%q) accepted", body)
		}
	}
}
