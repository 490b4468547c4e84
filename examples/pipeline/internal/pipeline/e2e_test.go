package pipeline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
)

const (
	// serviceName is the job of TestEndToEnd's demos: their service.name,
	// which the Collector's prometheus exporter turns into the job label.
	serviceName = "aionotel-e2e"
)

// TestEndToEnd runs the demo's OTLP telemetry through a Collector built from
// the official modules (collector-config.yaml) into a real Prometheus, and
// checks what a user of the dashboard and the alerts depends on: every
// catalog series arrives with its labels and the sender's job; every
// dashboard query returns data; the names equal those of the demo's own
// Prometheus endpoint; spans reach the Collector; Prometheus stores
// exemplars whose trace IDs are those of spans the Collector received;
// Prometheus evaluates the alert rules without error; log records cross the
// Collector's logs pipeline. Then the OTLP demo is stopped: the token totals
// it prints equal the sums of gen_ai_client_token_usage in Prometheus, and
// Jaeger, fed by the Collector's traces pipeline, holds workflow runs as
// traces (run span, activity spans, links to the store calls).
func TestEndToEnd(t *testing.T) {
	t.Parallel()
	r := newScenario(t, serviceName)
	ctx := r.context(10 * time.Minute)
	// Both run longer than the test needs; the test stops them.
	// 80 workers at 40 workflows a second: about 70 busy, so work waits
	// for a worker now and then, as at the demo's defaults.
	common := []string{"-duration", "10m", "-rate", "40", "-workers", "80", "-max-inflight", "24"}
	r.otlpDemo("demo-otlp", common...)
	// The same workload on the demo's own Prometheus endpoint, whose names
	// must be the Collector's.
	r.directDemo("demo-prometheus", common...)

	r.waitForCatalog(ctx)
	r.checkLabels(ctx)
	r.checkInstances(ctx, 1)
	r.checkDashboardQueries(ctx, demoUnfed())
	r.checkWait(ctx)
	r.checkSameNamesAsDirect(ctx)
	r.checkSpans(ctx)
	r.checkExemplars(ctx)
	r.checkDirectExemplars(ctx)
	r.checkRules(ctx)
	r.checkLogs(ctx)

	// What is only final once the OTLP demo has stopped and flushed.
	tokens := r.stopDemo("demo-otlp")
	r.checkTokens(ctx, tokens)
	r.checkWaitsPerDispatch(ctx)
	r.checkTimeline(ctx)
}

// waitForCatalog waits until Prometheus holds every series of the catalog
// the demo records (all but the engine modules') for the scenario's job.
func (r *e2e) waitForCatalog(ctx context.Context) {
	r.t.Helper()
	want := map[string]bool{}
	for _, m := range demoMetrics() {
		for _, s := range m.seriesNames() {
			want[s] = true
		}
	}
	r.waitFor(ctx, "every catalog series in Prometheus", 2*time.Minute, func(ctx context.Context) error {
		got, err := instant(ctx, r.prom, fmt.Sprintf(`count by (__name__) ({__name__=~"(aion|gen_ai)_.+", job=%q})`, r.job))
		if err != nil {
			return err
		}
		have := map[string]bool{}
		for _, s := range got {
			have[s.Labels["__name__"]] = true
		}
		var missing []string
		for name := range want {
			if !have[name] {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			sort.Strings(missing)
			return fmt.Errorf("missing %s", strings.Join(missing, ", "))
		}
		return nil
	})
}

// checkLabels checks every catalog series of the scenario's job in
// Prometheus: the catalog's labels (attribute names translated:
// aion.namespace -> aion_namespace), and none of any job carries the scrape
// job or no job, which would mean honor_labels lost the sender's
// service.name.
func (r *e2e) checkLabels(ctx context.Context) {
	r.t.Helper()
	for _, m := range catalogMetrics {
		name := m.seriesNames()[0]
		got, err := instant(ctx, r.prom, name)
		if err != nil {
			r.t.Fatalf("%s: %v", name, err)
		}
		allowed := map[string]bool{"__name__": true, "job": true, "instance": true, "le": true}
		for _, l := range append(append([]string{}, m.Labels...), m.Optional...) {
			allowed[l] = true
		}
		// One report per kind of problem, with an example series, not one per
		// series.
		problems := map[string]map[string]string{}
		report := func(problem string, labels map[string]string) {
			if problems[problem] == nil {
				problems[problem] = labels
			}
		}
		for _, s := range got {
			if job := s.Labels["job"]; job == "" || job == scrapeJob {
				report(fmt.Sprintf("job = %q, want the sender's service.name (never the scrape job %q)", job, scrapeJob), s.Labels)
			}
			if s.Labels["job"] != r.job {
				continue // another scenario's
			}
			for _, l := range m.Labels {
				if _, ok := s.Labels[l]; !ok {
					report("lacks label "+l, s.Labels)
				}
			}
			for l := range s.Labels {
				if !allowed[l] && !targetLabel(l) {
					report("has label "+l+", not in the catalog", s.Labels)
				}
			}
		}
		for problem, example := range problems {
			r.t.Errorf("%s: %s (e.g. %v)", name, problem, example)
		}
	}
}

// checkInstances checks what service.instance.id buys through the
// Collector: the catalog series of the scenario's job carry n distinct
// instance labels (one per demo process: its service.instance.id), none
// empty, and the exporter writes one target_info series for each of them
// (it writes none for a resource without an instance).
func (r *e2e) checkInstances(ctx context.Context, n int) {
	r.t.Helper()
	r.waitFor(ctx, "instance labels and target_info", time.Minute, func(ctx context.Context) error {
		got, err := instant(ctx, r.prom, fmt.Sprintf(`count by (instance) ({__name__=~"(aion|gen_ai)_.+", job=%q})`, r.job))
		if err != nil {
			return err
		}
		var instances []string
		for _, s := range got {
			instances = append(instances, s.Labels["instance"])
		}
		slices.Sort(instances)
		if len(instances) > n || slices.Contains(instances, "") {
			return permanent(fmt.Errorf("the series of job %s carry instances %q, want %d non-empty service.instance.id", r.job, instances, n))
		}
		if len(instances) < n {
			return fmt.Errorf("the series of job %s carry instances %q, want %d", r.job, instances, n)
		}
		info, err := instant(ctx, r.prom, fmt.Sprintf(`target_info{job=%q}`, r.job))
		if err != nil {
			return err
		}
		var infos []string
		for _, s := range info {
			infos = append(infos, s.Labels["instance"])
		}
		slices.Sort(infos)
		if !slices.Equal(infos, instances) {
			return fmt.Errorf("target_info{job=%q} has instances %q, want one series for each of %q", r.job, infos, instances)
		}
		return nil
	})
}

// checkDashboardQueries runs every query of the dashboard, its variables
// substituted as Grafana would, until each returns at least one finite
// value. The job variable's query must offer the scenario's job, which is
// then chosen; the namespace variable is resolved by its own query.
//
// unfed maps the catalog families the scenario's program has no facts for
// to the reason: a query that reads only those families is not waited
// for, and must still return nothing once the others have returned data,
// so a list that says more than the truth fails, as does a new panel that
// returns nothing. Every family listed must be read by some query. nil:
// every query must return data.
func (r *e2e) checkDashboardQueries(ctx context.Context, unfed map[string]string) {
	r.t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		r.t.Fatal(err)
	}
	all, err := dashboardQueries(raw, "${datasource}")
	if err != nil {
		r.t.Fatal(err)
	}
	queries, exempt := splitUnfed(r.t, all, unfed)
	vars, err := dashboardVariables(raw)
	if err != nil {
		r.t.Fatal(err)
	}
	// The query variables in order (namespace's query uses $job), each
	// resolved by its own label_values query, as Grafana does on load.
	resolved := e2eVariables("", "")
	for _, v := range vars {
		if v.Type != "query" {
			continue
		}
		q, err := substitute(v.Query, resolved)
		if err != nil {
			r.t.Fatalf("variable %s: %v", v.Name, err)
		}
		sel, label, err := labelValuesQuery(q)
		if err != nil {
			r.t.Fatal(err)
		}
		var values []string
		r.waitFor(ctx, v.Name+" variable values", time.Minute, func(ctx context.Context) error {
			got, _, _, err := r.prom.LabelValues(ctx, label, []string{sel}, time.Time{}, time.Time{})
			values = values[:0]
			for _, v := range got {
				values = append(values, regexp.QuoteMeta(string(v)))
			}
			if err == nil && len(values) == 0 {
				err = fmt.Errorf("label_values(%s, %s) is empty", sel, label)
			}
			// Other scenarios' jobs may be offered first: wait for this
			// one's, whose data is what the scenario checks.
			if err == nil && v.Name == "job" && !slices.Contains(values, regexp.QuoteMeta(r.job)) {
				err = fmt.Errorf("job variable values %v lack the sender's service.name %q", values, r.job)
			}
			return err
		})
		if v.Name == "job" {
			values = []string{regexp.QuoteMeta(r.job)}
		}
		resolved[v.Name] = strings.Join(values, "|")
	}
	for _, name := range []string{"job", "namespace"} {
		if resolved[name] == "" {
			r.t.Fatalf("the dashboard has no %s variable", name)
		}
	}
	values := resolved

	exprs := make([]string, len(queries))
	for i, q := range queries {
		if exprs[i], err = substitute(q.Expr, values); err != nil {
			r.t.Fatalf("panel %q: %v", q.Panel, err)
		}
	}
	pending := map[int]string{}
	for i := range queries {
		pending[i] = "not run"
	}
	r.waitFor(ctx, "every dashboard query returning data", 2*time.Minute, func(ctx context.Context) error {
		for i := range pending {
			got, err := instant(ctx, r.prom, exprs[i])
			if err != nil {
				if badQuery(err) {
					return permanent(fmt.Errorf("panel %q query %s %q: %w", queries[i].Panel, queries[i].RefID, exprs[i], err))
				}
				pending[i] = err.Error()
				continue
			}
			if hasFinite(got) {
				delete(pending, i)
			} else {
				pending[i] = fmt.Sprintf("%d series, none finite", len(got))
			}
		}
		if len(pending) == 0 {
			return nil
		}
		var lines []string
		for i, why := range pending {
			lines = append(lines, fmt.Sprintf("panel %q query %s (%s): %s", queries[i].Panel, queries[i].RefID, exprs[i], why))
		}
		sort.Strings(lines)
		return fmt.Errorf("%d of %d queries without data:\n\t%s", len(pending), len(queries), strings.Join(lines, "\n\t"))
	})
	r.checkUnfedQueries(ctx, exempt, values)
	r.t.Logf("all %d dashboard queries expected to return data did (job %s, namespaces %s); %d read only families the program cannot feed",
		len(queries), values["job"], values["namespace"], len(exempt))
}

// splitUnfed splits the dashboard's queries into those that read a family
// of the catalog not in unfed, and those that read only families in unfed.
// It fails the test if a family in unfed is read by no query or has no
// reason.
func splitUnfed(t *testing.T, all []dashboardQuery, unfed map[string]string) (fed, exempt []dashboardQuery) {
	t.Helper()
	read := map[string]bool{}
	for _, q := range all {
		used, problems := checkAgainstCatalog(q.Expr)
		if len(problems) > 0 || len(used) == 0 {
			t.Fatalf("panel %q query %s: reads no catalog family or not only catalog names: %q", q.Panel, q.RefID, problems)
		}
		only := true
		for _, m := range used {
			read[m.Name] = true
			if _, ok := unfed[m.Name]; !ok {
				only = false
			}
		}
		if only {
			exempt = append(exempt, q)
		} else {
			fed = append(fed, q)
		}
	}
	for name, why := range unfed {
		if !read[name] {
			t.Errorf("%s is listed as a family the program cannot feed, but no dashboard query reads it: drop it from the list", name)
		}
		if strings.TrimSpace(why) == "" {
			t.Errorf("%s is listed as a family the program cannot feed, without the reason", name)
		}
	}
	return fed, exempt
}

// checkUnfedQueries runs each query that reads only families the program
// cannot feed, once the others returned data: none may return a value, or
// the list of unfed families is wrong.
func (r *e2e) checkUnfedQueries(ctx context.Context, exempt []dashboardQuery, values map[string]string) {
	r.t.Helper()
	for _, q := range exempt {
		expr, err := substitute(q.Expr, values)
		if err != nil {
			r.t.Fatalf("panel %q: %v", q.Panel, err)
		}
		got, err := instant(ctx, r.prom, expr)
		if err != nil {
			r.t.Errorf("panel %q query %s %q: %v", q.Panel, q.RefID, expr, err)
			continue
		}
		if hasFinite(got) {
			r.t.Errorf("panel %q query %s returns data for job %s, but reads only families listed as ones the program cannot feed: %v",
				q.Panel, q.RefID, r.job, got)
		}
	}
}

func hasFinite(samples []sample) bool {
	for _, s := range samples {
		if !math.IsNaN(s.Value) && !math.IsInf(s.Value, 0) {
			return true
		}
	}
	return false
}

// checkSameNamesAsDirect compares the aion_ families the Collector exposes
// with those the demo's own Prometheus endpoint serves: same names, types and
// label names, so the dashboard and the alerts work on either path.
func (r *e2e) checkSameNamesAsDirect(ctx context.Context) {
	r.t.Helper()
	r.waitFor(ctx, "same families through the Collector as from the demo's endpoint", time.Minute, func(ctx context.Context) error {
		viaCollector, err := scrape(ctx, "http://"+r.exporter+"/metrics")
		if err != nil {
			return err
		}
		direct, err := scrape(ctx, "http://"+r.direct+"/metrics")
		if err != nil {
			return err
		}
		a, b := shapes(direct, catalogPrefixes...), shapes(viaCollector, catalogPrefixes...)
		// The Collector's endpoint also holds what the cluster scenario's
		// nodes sent, with families the single demo never makes (resumes,
		// releases): compare the catalog's families only.
		inCatalog := map[string]bool{}
		for _, m := range demoMetrics() {
			inCatalog[m.Name] = true
		}
		// The demo's own endpoint may hold them too: its tracker's bound
		// forgets facts (aion.pairing.forgotten) and it fills gaps of
		// batches returning out of order (aion.pairing.resumed).
		notInCatalog := func(name string, _ familyShape) bool { return !inCatalog[name] }
		maps.DeleteFunc(a, notInCatalog)
		maps.DeleteFunc(b, notInCatalog)
		if len(a) != len(inCatalog) {
			return fmt.Errorf("the demo's endpoint has %d catalog families (%v), want %d: %v", len(a), catalogPrefixes, len(inCatalog), a)
		}
		if diffs := diffShapes("demo endpoint", a, "Collector", b); len(diffs) > 0 {
			return fmt.Errorf("the two paths differ:\n\t%s", strings.Join(diffs, "\n\t"))
		}
		return nil
	})
}

// checkSpans reads the Collector's own metrics: the OTLP receiver accepted
// spans and the traces pipeline's otlp_grpc/jaeger exporter sent them to
// Jaeger, without failures.
func (r *e2e) checkSpans(ctx context.Context) {
	r.t.Helper()
	r.waitFor(ctx, "spans through the Collector's traces pipeline into Jaeger", time.Minute, func(ctx context.Context) error {
		fams, err := scrape(ctx, "http://"+r.collectorMetrics+"/metrics")
		if err != nil {
			return err
		}
		if total, _ := sumFamilies(fams, "otelcol_receiver_accepted_spans"); total <= 0 {
			return fmt.Errorf("otelcol_receiver_accepted_spans is %v", total)
		}
		if sent := sumLabeled(fams, "otelcol_exporter_sent_spans", "exporter", jaegerExporter); sent <= 0 {
			return fmt.Errorf("otelcol_exporter_sent_spans{exporter=%q} is %v", jaegerExporter, sent)
		}
		if failed := sumLabeled(fams, "otelcol_exporter_send_failed_spans", "exporter", jaegerExporter); failed > 0 {
			return fmt.Errorf("otelcol_exporter_send_failed_spans{exporter=%q} is %v", jaegerExporter, failed)
		}
		return nil
	})
}

// checkExemplars waits until Prometheus stores, on a catalog histogram, an
// exemplar whose trace_id is the trace of a span the Collector received:
// exemplars survive the OTLP path, the exporter's OpenMetrics and the scrape,
// and point at traces that exist.
func (r *e2e) checkExemplars(ctx context.Context) {
	r.t.Helper()
	since := time.Now().Add(-10 * time.Minute)
	r.waitFor(ctx, "an exemplar of a received trace", time.Minute, func(ctx context.Context) error {
		results, err := r.prom.QueryExemplars(ctx, fmt.Sprintf(`{__name__=~"aion_.+_bucket", job=%q}`, r.job), since, time.Now())
		if err != nil {
			if badQuery(err) {
				return permanent(err)
			}
			return err
		}
		if len(results) == 0 {
			return errors.New("Prometheus holds no exemplar on aion_ buckets")
		}
		traces, err := receivedTraceIDs(r.spansLog())
		if err != nil {
			return err
		}
		if len(traces) == 0 {
			return fmt.Errorf("no span in %s yet", r.spansLog())
		}
		n, sample := 0, ""
		for _, res := range results {
			for _, e := range res.Exemplars {
				n++
				id := string(e.Labels["trace_id"])
				if traces[id] {
					r.t.Logf("exemplar trace_id %s on %v is a trace the Collector received", id, res.SeriesLabels)
					return nil
				}
				sample = id
			}
		}
		return fmt.Errorf("%d exemplars on aion_ buckets (e.g. trace_id %q), none of the %d traces the Collector received", n, sample, len(traces))
	})
}

// checkDirectExemplars scrapes the demo's own Prometheus endpoint as
// Prometheus does, asking for OpenMetrics, and waits for an exemplar on a
// catalog histogram bucket: the other export path keeps exemplars too.
func (r *e2e) checkDirectExemplars(ctx context.Context) {
	r.t.Helper()
	r.waitFor(ctx, "an exemplar on the demo's own endpoint", time.Minute, func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.direct+"/metrics", nil)
		if err != nil {
			return permanent(err)
		}
		req.Header.Set("Accept", "application/openmetrics-text;version=1.0.0")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
			return permanent(fmt.Errorf("the demo's endpoint answers OpenMetrics with Content-Type %q: no exemplars", ct))
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return err
		}
		for line := range strings.SplitSeq(string(body), "\n") {
			if strings.HasPrefix(line, "aion_") && strings.Contains(line, "_bucket{") && directExemplar.MatchString(line) {
				return nil
			}
		}
		return errors.New("no aion_ bucket with a trace_id exemplar yet")
	})
}

// directExemplar is an OpenMetrics exemplar with a trace ID.
var directExemplar = regexp.MustCompile(` # \{[^}]*trace_id="[0-9a-f]{32}"`)

// traceIDLine is how the debug exporter's detailed output shows a span's
// trace ID.
var traceIDLine = regexp.MustCompile(`Trace ID\s+: ([0-9a-f]{32})`)

// receivedTraceIDs returns the trace IDs of the spans in a debug exporter
// output file; a missing file is no spans yet.
func receivedTraceIDs(path string) (map[string]bool, error) {
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, m := range traceIDLine.FindAllSubmatch(raw, -1) {
		ids[string(m[1])] = true
	}
	return ids, nil
}

// checkRules waits until Prometheus has evaluated every alert rule of
// alerts.yml on the real data, and checks none failed to evaluate.
func (r *e2e) checkRules(ctx context.Context) {
	r.t.Helper()
	r.waitFor(ctx, "alert rules evaluated", time.Minute, func(ctx context.Context) error {
		rules, err := r.prom.Rules(ctx, nil)
		if err != nil {
			return err
		}
		n := 0
		for _, g := range rules.Groups {
			for _, rule := range g.Rules {
				a, ok := rule.(promv1.AlertingRule)
				if !ok {
					continue
				}
				n++
				switch a.Health {
				case promv1.RuleHealthGood:
				case promv1.RuleHealthBad:
					return permanent(fmt.Errorf("rule %s: %s", a.Name, a.LastError))
				default:
					return fmt.Errorf("rule %s not evaluated yet (%s)", a.Name, a.Health)
				}
			}
		}
		if want := len(alertNames(r.t)); n != want {
			return permanent(fmt.Errorf("Prometheus loaded %d alerting rules, alerts.yml has %d", n, want))
		}
		return nil
	})
}
