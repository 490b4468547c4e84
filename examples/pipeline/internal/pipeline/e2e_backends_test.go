package pipeline

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// demoStopGrace bounds the demo's shutdown: its drain, then at most 3 s of
// final flush.
const demoStopGrace = 30 * time.Second

// stopDemo stops the named demo (SIGINT: it drains and flushes its
// telemetry), requires a clean exit, and returns the token totals it
// printed.
func (r *e2e) stopDemo(name string) tokenTotals {
	r.t.Helper()
	r.mu.Lock()
	var p *process
	for _, q := range r.procs {
		if q.name == name {
			p = q
		}
	}
	if p != nil {
		if r.stopped == nil {
			r.stopped = map[*process]bool{}
		}
		r.stopped[p] = true
	}
	r.mu.Unlock()
	if p == nil {
		r.t.Fatalf("no program %s to stop", name)
	}
	p.stop(demoStopGrace)
	if err := p.exitErr(); err != nil {
		r.t.Fatalf("%s did not exit cleanly on SIGINT: %v", name, err)
	}
	out, err := os.ReadFile(p.logPath)
	if err != nil {
		r.t.Fatal(err)
	}
	totals, err := parseTokenTotals(string(out))
	if err != nil {
		r.t.Fatalf("%s: %v", name, err)
	}
	if len(totals) == 0 {
		r.t.Fatalf("%s printed no %q lines: its agents reported no token usage", name, "demo: gen_ai tokens")
	}
	r.t.Logf("%s stopped; token totals %v", name, totals)
	return totals
}

// checkLogs reads the Collector's own metrics: the OTLP receiver accepted
// log records and the logs pipeline's exporter sent them.
func (r *e2e) checkLogs(ctx context.Context) {
	r.t.Helper()
	r.waitFor(ctx, "log records through the Collector's logs pipeline", time.Minute, func(ctx context.Context) error {
		fams, err := scrape(ctx, "http://"+r.collectorMetrics+"/metrics")
		if err != nil {
			return err
		}
		for _, prefix := range []string{"otelcol_receiver_accepted_log_records", "otelcol_exporter_sent_log_records"} {
			if total, _ := sumFamilies(fams, prefix); total <= 0 {
				return fmt.Errorf("%s is %v", prefix, total)
			}
		}
		return nil
	})
}

// checkTokens waits until Prometheus' token sums, per request model and
// token type (input, output, cache_read, cache_creation, reasoning: see
// tokenQueries), equal the totals the stopped demo printed: every committed
// Usage event crossed OTLP, the Collector and the scrape, and nothing else
// was counted.
func (r *e2e) checkTokens(ctx context.Context, want tokenTotals) {
	r.t.Helper()
	queries := tokenQueries(fmt.Sprintf("job=%q", r.job))
	r.waitFor(ctx, "token sums in Prometheus equal to the demo's totals", time.Minute, func(ctx context.Context) error {
		have := tokenTotals{}
		for typ, q := range queries {
			got, err := instant(ctx, r.prom, q)
			if err != nil {
				return err
			}
			for _, s := range got {
				have[tokenKey{Model: s.Labels["gen_ai_request_model"], Type: typ}] = s.Value
			}
		}
		if diff := want.diff(have); diff != "" {
			return fmt.Errorf("%v:\n\t%s", queries, diff)
		}
		return nil
	})
}

// checkTimeline reads workflow runs back from Jaeger: for each workflow
// type the demo ran (span names "workflow <type>"), up to 10 traces that
// hold a run span; each must be one run (the run span the trace's root,
// its activity spans as children within its time, no span whose parent the
// trace lacks: the demo installs pairing.NewIDGenerator), at least one
// run must have activity spans, and the links of every run and activity
// span must lead to the append store calls in Jaeger that bound its start
// and end. The agents' spans in those traces must be as checkAgentSpans
// says, and at least one invoke_agent span must have model-call and tool
// children.
func (r *e2e) checkTimeline(ctx context.Context) {
	r.t.Helper()
	var workflowOps []string
	r.waitFor(ctx, "run spans in Jaeger", time.Minute, func(ctx context.Context) error {
		ops, err := r.jaeger.operations(ctx, r.job)
		if err != nil {
			return err
		}
		workflowOps = workflowOps[:0]
		for _, op := range ops {
			if strings.HasPrefix(op, runSpanPrefix) {
				workflowOps = append(workflowOps, op)
			}
		}
		if len(workflowOps) == 0 {
			return fmt.Errorf("Jaeger knows the operations %v of %s, none a run span (%q...)", ops, r.job, runSpanPrefix)
		}
		return nil
	})
	since := time.Now().Add(-30 * time.Minute)
	var runs, activities, links, skipped, unlinkedRuns, unlinkedActs int
	var agents agentCounts
	r.waitFor(ctx, "workflow runs in Jaeger as the timeline promises", 2*time.Minute, func(ctx context.Context) error {
		var spans []span
		for _, op := range workflowOps {
			td, err := r.jaeger.findTraces(ctx, r.job, op, since, time.Now().Add(time.Minute), 10)
			if err == errNoTraces {
				continue
			}
			if err != nil {
				return err
			}
			spans = append(spans, flatten(td)...)
		}
		traces, problems := splitRunTraces(spans)
		runs, activities, links = len(traces), 0, 0
		children := 0
		targets := map[spanRef]span{}
		fetched := map[string]bool{}
		// The store calls the links point at: each in a trace of its own.
		for _, rt := range traces {
			for _, s := range append([]span{rt.Run}, rt.Activities...) {
				for _, l := range s.Links {
					tid := l.String()[:32]
					if fetched[tid] {
						continue
					}
					fetched[tid] = true
					td, err := r.jaeger.trace(ctx, l.TraceID)
					if err == errNoTraces {
						continue // reported by checkCallLinks
					}
					if err != nil {
						return err
					}
					for _, s := range flatten(td) {
						targets[spanRef{s.TraceID, s.SpanID}] = s
					}
				}
			}
		}
		agents = agentCounts{}
		unparented := 0
		for _, rt := range traces {
			if rt.Unparented > 0 {
				// Its agents' spans cannot all hang from an activity span:
				// allowed only because the demo's bound evicts activities.
				unparented += rt.Unparented
				continue
			}
			p, n := checkAgentSpans(rt)
			problems = append(problems, p...)
			agents.Invocations += n.Invocations
			agents.ModelCalls += n.ModelCalls
			agents.ToolCalls += n.ToolCalls
			agents.FailedTools += n.FailedTools
			agents.Complete += n.Complete
		}
		if unparented > 0 {
			evicted, err := r.promSum(ctx, fmt.Sprintf(`aion_activity_pairing_evicted_total{job=%q}`, r.job))
			if err != nil {
				return err
			}
			if evicted == 0 {
				problems = append(problems, fmt.Sprintf("%d invoke_agent spans have no activity span in their trace, and no activity was evicted", unparented))
			}
		}
		skipped = unparented
		if agents.Complete == 0 {
			problems = append(problems, fmt.Sprintf("%d run traces, none with an invoke_agent span that has model-call and tool children (%+v)", runs, agents))
		}
		unlinkedRuns, unlinkedActs = 0, 0
		for _, rt := range traces {
			p, unlinked := checkCallLinks(rt.Run, runLinkRoles, targets)
			problems = append(problems, p...)
			unlinkedRuns += b2i(unlinked)
			activities += len(rt.Activities)
			children += rt.Children
			for _, a := range rt.Activities {
				links += len(a.Links)
				p, unlinked := checkCallLinks(a, activityLinkRoles, targets)
				problems = append(problems, p...)
				unlinkedActs += b2i(unlinked)
			}
		}
		// A span without a link to the call that wrote its first event is
		// one whose fact the tracker's bound evicted (the demo runs with a
		// small one) and history gave back: no more of them than evictions.
		for _, u := range []struct {
			n      int
			metric string
		}{{unlinkedRuns, "aion_workflow_pairing_evicted_total"}, {unlinkedActs, "aion_activity_pairing_evicted_total"}} {
			if u.n == 0 {
				continue
			}
			evicted, err := r.promSum(ctx, fmt.Sprintf(`%s{job=%q}`, u.metric, r.job))
			if err != nil {
				return err
			}
			if float64(u.n) > evicted {
				problems = append(problems, fmt.Sprintf("%d spans have no link to the call that wrote their first event, more than the %v evictions %s counted", u.n, evicted, u.metric))
			}
		}
		if children == 0 {
			problems = append(problems, fmt.Sprintf("%d run traces of %v, none with activity spans that are the run span's children", runs, workflowOps))
		}
		if len(problems) > 0 {
			sort.Strings(problems)
			if len(problems) > 20 {
				problems = append(problems[:20], fmt.Sprintf("... and %d more", len(problems)-20))
			}
			return fmt.Errorf("%d problems:\n\t%s", len(problems), strings.Join(problems, "\n\t"))
		}
		return nil
	})
	r.t.Logf("Jaeger: %d runs of %v, %d activity spans, %d links to store calls, all as the timeline promises; agents: %+v "+
		"(%d invoke_agent spans of evicted activities left out; %d run and %d activity spans of evicted facts without their first link)",
		runs, workflowOps, activities, links, agents, skipped, unlinkedRuns, unlinkedActs)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
