package pipeline

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// jaegerAPI reads traces back from Jaeger's query service through its HTTP
// API v3, whose answers are OTLP JSON: the spans exactly as the Collector
// exported them (raw_traces: no clock-skew or other adjustment).
type jaegerAPI struct {
	base string // http://host:port
}

// errNoTraces is Jaeger's 404: no trace matched (yet).
var errNoTraces = errors.New("jaeger: no traces found")

func (j jaegerAPI) get(ctx context.Context, path string, q url.Values) (ptrace.Traces, error) {
	u := j.base + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return ptrace.Traces{}, permanent(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ptrace.Traces{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return ptrace.Traces{}, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		return ptrace.Traces{}, errNoTraces
	case http.StatusBadRequest:
		return ptrace.Traces{}, permanent(fmt.Errorf("GET %s: %s: %s", u, resp.Status, bytes.TrimSpace(body)))
	default:
		return ptrace.Traces{}, fmt.Errorf("GET %s: %s: %s", u, resp.Status, bytes.TrimSpace(body))
	}
	return parseJaegerTraces(body)
}

// parseJaegerTraces decodes an API v3 answer: {"result": <OTLP JSON>}.
func parseJaegerTraces(body []byte) (ptrace.Traces, error) {
	var wrapper struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(body, &wrapper); err != nil {
		return ptrace.Traces{}, permanent(fmt.Errorf("jaeger answer: %w", err))
	}
	if len(wrapper.Result) == 0 {
		return ptrace.Traces{}, permanent(fmt.Errorf("jaeger answer without result: %.200s", body))
	}
	var u ptrace.JSONUnmarshaler
	td, err := u.UnmarshalTraces(wrapper.Result)
	if err != nil {
		return ptrace.Traces{}, permanent(fmt.Errorf("jaeger answer: %w", err))
	}
	return td, nil
}

// findTraces returns the traces with a span of operation (span name) by
// service, started within [from, to], at most n of them.
func (j jaegerAPI) findTraces(ctx context.Context, service, operation string, from, to time.Time, n int) (ptrace.Traces, error) {
	return j.get(ctx, "/api/v3/traces", url.Values{
		"query.service_name":   {service},
		"query.operation_name": {operation},
		"query.start_time_min": {from.UTC().Format(time.RFC3339Nano)},
		"query.start_time_max": {to.UTC().Format(time.RFC3339Nano)},
		"query.num_traces":     {fmt.Sprint(n)},
		"query.raw_traces":     {"true"},
	})
}

// trace returns every span Jaeger holds of one trace.
func (j jaegerAPI) trace(ctx context.Context, id pcommon.TraceID) (ptrace.Traces, error) {
	return j.get(ctx, "/api/v3/traces/"+hex.EncodeToString(id[:]), url.Values{"raw_traces": {"true"}})
}

// operations returns the span names Jaeger knows for service.
func (j jaegerAPI) operations(ctx context.Context, service string) ([]string, error) {
	u := j.base + "/api/v3/operations?" + url.Values{"service": {service}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, permanent(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	var ops struct {
		Operations []struct {
			Name string `json:"name"`
		} `json:"operations"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ops); err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	names := make([]string, 0, len(ops.Operations))
	for _, o := range ops.Operations {
		names = append(names, o.Name)
	}
	sort.Strings(names)
	return names, nil
}

// span is one span of a Jaeger answer, with what the checks read.
type span struct {
	Service          string
	TraceID          pcommon.TraceID
	SpanID, ParentID pcommon.SpanID
	Name             string
	Kind             ptrace.SpanKind
	Start, End       time.Time
	Attrs            map[string]string // values as strings (AsString)
	Links            []spanLink
	Events           []string // event names
	StatusCode       ptrace.StatusCode
	hasParent        bool
}

// spanRef is a link's target.
type spanRef struct {
	TraceID pcommon.TraceID
	SpanID  pcommon.SpanID
}

// spanLink is a link: its target and its aion.timeline.link role.
type spanLink struct {
	spanRef
	Role string
}

func (r spanRef) String() string {
	return hex.EncodeToString(r.TraceID[:]) + "/" + hex.EncodeToString(r.SpanID[:])
}

// flatten returns every span of td.
func flatten(td ptrace.Traces) []span {
	var out []span
	rss := td.ResourceSpans()
	for i := range rss.Len() {
		rs := rss.At(i)
		service := ""
		if v, ok := rs.Resource().Attributes().Get("service.name"); ok {
			service = v.AsString()
		}
		sss := rs.ScopeSpans()
		for j := range sss.Len() {
			ss := sss.At(j).Spans()
			for k := range ss.Len() {
				s := ss.At(k)
				sp := span{
					Service: service, TraceID: s.TraceID(), SpanID: s.SpanID(), ParentID: s.ParentSpanID(),
					Name: s.Name(), Kind: s.Kind(),
					Start: s.StartTimestamp().AsTime(), End: s.EndTimestamp().AsTime(),
					Attrs: map[string]string{}, StatusCode: s.Status().Code(),
					hasParent: !s.ParentSpanID().IsEmpty(),
				}
				for key, v := range s.Attributes().All() {
					sp.Attrs[key] = v.AsString()
				}
				for _, l := range s.Links().All() {
					link := spanLink{spanRef: spanRef{TraceID: l.TraceID(), SpanID: l.SpanID()}}
					if v, ok := l.Attributes().Get(linkRoleKey); ok {
						link.Role = v.AsString()
					}
					sp.Links = append(sp.Links, link)
				}
				for _, e := range s.Events().All() {
					sp.Events = append(sp.Events, e.Name())
				}
				out = append(out, sp)
			}
		}
	}
	return out
}

// Span names and attributes of the timeline (the library's catalog).
const (
	runSpanPrefix      = "workflow "
	activitySpanPrefix = "activity "
)

// runTrace is one workflow run's trace as Jaeger returned it.
type runTrace struct {
	Run        span
	Activities []span // the run span's children
	Agents     []span // the GenAI spans of agent transcripts (checkAgentSpans)
	// Children counts the activity spans that are children of the run span.
	Children int
	// Unparented counts the invoke_agent spans whose activity has no span
	// in the trace: a tracker past its bound evicts an activity and drops
	// its span (pairing.WithMaxInFlight), while the agent's span, made by
	// the keyspace decorator, is exported.
	Unparented int
}

// splitRunTraces groups spans by trace and checks each trace that holds a
// run span against what the timeline promises with pairing.NewIDGenerator
// installed (the demo installs it): one run span per trace, the trace's
// root, of internal kind, with the run's IDs; activity spans are internal
// children of the run span, never before the run, and inside its time
// unless they were dispatched after it ended (a reopened run's span ends at
// its first close), with the run's IDs and an activity ID; and no span of
// the trace has a parent the trace lacks (Jaeger flags such a trace as
// having a missing parent), but for an invoke_agent span whose activity has
// no span in the trace, which is counted (runTrace.Unparented). The GenAI
// spans of agent transcripts (those with gen_ai.operation.name) are set
// aside in Agents, for checkAgentSpans.
// It returns the traces that have a run span and a problem list for those
// that break a rule.
func splitRunTraces(spans []span) (traces []runTrace, problems []string) {
	byTrace := map[pcommon.TraceID][]span{}
	var order []pcommon.TraceID
	for _, s := range spans {
		if _, ok := byTrace[s.TraceID]; !ok {
			order = append(order, s.TraceID)
		}
		byTrace[s.TraceID] = append(byTrace[s.TraceID], s)
	}
	for _, id := range order {
		ts := byTrace[id]
		var runs []span
		ids := map[pcommon.SpanID]bool{}
		for _, s := range ts {
			ids[s.SpanID] = true
			if strings.HasPrefix(s.Name, runSpanPrefix) {
				runs = append(runs, s)
			}
		}
		if len(runs) == 0 {
			continue
		}
		tid := hex.EncodeToString(id[:])
		if len(runs) > 1 {
			problems = append(problems, fmt.Sprintf("trace %s: %d run spans, want one trace per run", tid, len(runs)))
			continue
		}
		run := runs[0]
		bad := func(format string, args ...any) {
			problems = append(problems, fmt.Sprintf("trace %s: ", tid)+fmt.Sprintf(format, args...))
		}
		if run.hasParent {
			bad("run span %q has the parent %s, want the trace's root (pairing.NewIDGenerator)", run.Name, run.ParentID)
		}
		activityIDs := map[string]bool{}
		for _, s := range ts {
			if strings.HasPrefix(s.Name, activitySpanPrefix) {
				activityIDs[s.Attrs["aion.activity.id"]] = true
			}
		}
		unparented := 0
		for _, s := range ts {
			switch {
			case !s.hasParent || ids[s.ParentID]:
			case s.Name == "invoke_agent" && isGenAISpan(s) && !activityIDs[s.Attrs["aion.activity.id"]]:
				unparented++ // its activity's span is missing: evicted (see runTrace)
			default:
				bad("span %q (%s) has the parent %s, which the trace lacks: a missing parent", s.Name, s.SpanID, s.ParentID)
			}
		}
		if run.Kind != ptrace.SpanKindInternal {
			bad("run span %q kind %s, want internal", run.Name, run.Kind)
		}
		for _, k := range []string{"aion.namespace", "aion.workflow.id", "aion.run.id", "aion.workflow.type", "aion.workflow.status"} {
			if run.Attrs[k] == "" {
				bad("run span %q lacks %s", run.Name, k)
			}
		}
		if got, want := run.Name, runSpanPrefix+run.Attrs["aion.workflow.type"]; got != want {
			bad("run span named %q, want %q (from aion.workflow.type)", got, want)
		}
		if run.End.Before(run.Start) {
			bad("run span ends (%s) before it starts (%s)", run.End, run.Start)
		}
		rt := runTrace{Run: run, Unparented: unparented}
		for _, s := range ts {
			if s.SpanID == run.SpanID {
				continue
			}
			if isGenAISpan(s) {
				rt.Agents = append(rt.Agents, s)
				continue
			}
			if !strings.HasPrefix(s.Name, activitySpanPrefix) {
				bad("span %q in the run's trace: only the run span, its activity spans and their agents' spans belong there", s.Name)
				continue
			}
			rt.Activities = append(rt.Activities, s)
			where := fmt.Sprintf("activity span %q (%s)", s.Name, s.Attrs["aion.activity.id"])
			if s.ParentID == run.SpanID {
				rt.Children++
			} else {
				bad("%s: parent %s, want the run span %s", where, s.ParentID, run.SpanID)
			}
			if s.Kind != ptrace.SpanKindInternal {
				bad("%s: kind %s, want internal", where, s.Kind)
			}
			for _, k := range []string{"aion.namespace", "aion.workflow.id", "aion.run.id"} {
				if s.Attrs[k] != run.Attrs[k] {
					bad("%s: %s = %q, the run span's is %q", where, k, s.Attrs[k], run.Attrs[k])
				}
			}
			for _, k := range []string{"aion.activity.id", "aion.activity.type", "aion.activity.outcome", "aion.activity.retry_count"} {
				if s.Attrs[k] == "" {
					bad("%s lacks %s", where, k)
				}
			}
			if got, want := s.Name, activitySpanPrefix+s.Attrs["aion.activity.type"]; got != want {
				bad("activity span named %q, want %q (from aion.activity.type)", got, want)
			}
			if s.Start.Before(run.Start) {
				bad("%s starts at %s, before its run (%s)", where, s.Start.Format(time.RFC3339Nano), run.Start.Format(time.RFC3339Nano))
			}
			// Dispatched before the run's (first) close, it is settled by
			// then at the latest.
			if !s.Start.After(run.End) && s.End.After(run.End) {
				bad("%s ends at %s, after its run (%s)", where, s.End.Format(time.RFC3339Nano), run.End.Format(time.RFC3339Nano))
			}
			if s.End.Before(s.Start) {
				bad("%s ends before it starts", where)
			}
		}
		traces = append(traces, rt)
	}
	return traces, problems
}

// storeCall reports whether s is the span of a store call that appends
// history: its name is its db.operation.name, "append" or one of the other
// appending operations ("append_with_outbox"), optionally followed by a
// target.
func storeCall(s span) bool {
	op := s.Attrs["db.operation.name"]
	return strings.HasPrefix(op, "append") && (s.Name == op || strings.HasPrefix(s.Name, op+" ")) &&
		s.Kind == ptrace.SpanKindClient
}

// linkRoleKey is the attribute of each timeline link that says what it
// points at, and the roles of the links to store calls: which end of the
// timeline span the call's history time bounds.
const linkRoleKey = "aion.timeline.link"

var (
	activityLinkRoles = map[string]bool{"scheduled": true, "settled": false} // role: bounds the start
	runLinkRoles      = map[string]bool{"started": true, "closed": false}
)

// checkCallLinks checks the links of a timeline span (a run span with
// runLinkRoles, an activity span with activityLinkRoles) against the spans
// they point at (targets; a missing one was not found in Jaeger): one link
// per role, each to an appending store-call span, and the span's times are
// those of the history those calls wrote: it starts no later than the call
// that wrote its first event ends, and ends no later than the call that
// wrote its last event ends (a RecordedAt is taken before or during the
// append that writes it). Links with other roles (previous_run, next_run)
// point at other runs and are left alone.
//
// unlinked reports a span without a link of the role that bounds its start
// (scheduled, started), which is not among the problems: a tracker whose
// memory bound evicted the live fact took it back from history later and
// knows no call that wrote it, so the caller holds such spans to the
// evictions the tracker counted.
func checkCallLinks(s span, roles map[string]bool, targets map[spanRef]span) (problems []string, unlinked bool) {
	where := fmt.Sprintf("span %q", s.Name)
	if id := s.Attrs["aion.activity.id"]; id != "" {
		where += " (activity " + id + ")"
	}
	seen := map[string]int{}
	for _, l := range s.Links {
		bounds, ok := roles[l.Role]
		if !ok {
			continue
		}
		seen[l.Role]++
		t, ok := targets[l.spanRef]
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: %s link %s leads to no span in Jaeger", where, l.Role, l.spanRef))
			continue
		}
		if !storeCall(t) {
			problems = append(problems, fmt.Sprintf("%s: %s link %s leads to span %q (kind %s, db.operation.name %q), want an append store call",
				where, l.Role, l.spanRef, t.Name, t.Kind, t.Attrs["db.operation.name"]))
			continue
		}
		if bounds && s.Start.After(t.End) {
			problems = append(problems, fmt.Sprintf("%s starts at %s, after the store call it is %s by ended (%s)",
				where, s.Start.Format(time.RFC3339Nano), l.Role, t.End.Format(time.RFC3339Nano)))
		}
		if !bounds && s.End.After(t.End) {
			problems = append(problems, fmt.Sprintf("%s ends at %s, after the store call it is %s by ended (%s)",
				where, s.End.Format(time.RFC3339Nano), l.Role, t.End.Format(time.RFC3339Nano)))
		}
	}
	for role, bounds := range roles {
		if seen[role] == 0 && bounds {
			unlinked = true
		} else if seen[role] != 1 {
			problems = append(problems, fmt.Sprintf("%s has %d %s links (aion.timeline.link), want one", where, seen[role], role))
		}
	}
	sort.Strings(problems)
	return problems, unlinked
}
