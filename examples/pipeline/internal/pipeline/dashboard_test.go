package pipeline

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
)

// dashboardPath is the dashboard users import, relative to this directory.
var dashboardPath = filepath.Join("..", "..", "..", "grafana", "aionotel-overview.json")

func readDashboard(t testing.TB) []byte {
	t.Helper()
	raw, err := os.ReadFile(dashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// validateDashboard checks raw against the Grafana dashboard schema of the
// foundation SDK: a strict unmarshal (unknown fields, wrong types and missing
// required fields are errors; panel options and Prometheus targets are
// checked by their plugin schemas), then Validate. Both report success as an
// empty cog.BuildErrors, which is a non-nil error value, so success is "no
// build error", not "err == nil".
func validateDashboard(raw []byte) []string {
	plugins.RegisterDefaultPlugins()
	var problems []string
	collect := func(stage string, err error) {
		if err == nil {
			return
		}
		if be, ok := err.(cog.BuildErrors); ok {
			for _, e := range be {
				problems = append(problems, stage+": "+e.Error())
			}
			return
		}
		problems = append(problems, stage+": "+err.Error())
	}
	// The JSON model Grafana 11 and 12 import is the classic one; the v2
	// schema the SDK now prefers is another format.
	//lint:ignore SA1019 examples/grafana is a classic dashboard, checked as one
	var d dashboard.Dashboard
	collect("strict unmarshal", d.UnmarshalJSONStrict(raw))
	collect("validate", d.Validate())
	return problems
}

func TestDashboardSchema(t *testing.T) {
	if problems := validateDashboard(readDashboard(t)); len(problems) > 0 {
		t.Fatalf("dashboard does not match the Grafana schema:\n%s", strings.Join(problems, "\n"))
	}
}

// TestDashboardSchemaRejects shows the schema check is strict: each mutation
// of the real dashboard must be reported.
func TestDashboardSchemaRejects(t *testing.T) {
	testCases := []struct {
		name   string
		mutate func(d map[string]any)
	}{
		{"unknown top-level field", func(d map[string]any) { d["panelz"] = []any{} }},
		{"schemaVersion missing", func(d map[string]any) { delete(d, "schemaVersion") }},
		{"fiscal year month out of range", func(d map[string]any) { d["fiscalYearStartMonth"] = 12 }},
		{"panel with a misspelled field", func(d map[string]any) {
			d["panels"].([]any)[1].(map[string]any)["titel"] = "x"
		}},
		{"prometheus target with an unknown field", func(d map[string]any) {
			p := d["panels"].([]any)[1].(map[string]any)
			p["targets"].([]any)[0].(map[string]any)["expression"] = "up"
		}},
		{"timeseries option of the wrong type", func(d map[string]any) {
			for _, p := range d["panels"].([]any) {
				if pm := p.(map[string]any); pm["type"] == "timeseries" {
					pm["options"].(map[string]any)["legend"] = "bottom"
					return
				}
			}
		}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			var d map[string]any
			if err := json.Unmarshal(readDashboard(t), &d); err != nil {
				t.Fatal(err)
			}
			tc.mutate(d)
			raw, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			if problems := validateDashboard(raw); len(problems) == 0 {
				t.Error("mutated dashboard accepted")
			}
		})
	}
}

func TestDashboardQueries(t *testing.T) {
	const ds = `{"type":"prometheus","uid":"${datasource}"}`
	testCases := []struct {
		name     string
		json     string
		want     []dashboardQuery
		wantErrs []string // substrings of the error
	}{
		{
			name: "panels and collapsed rows",
			json: `{"panels":[
				{"type":"timeseries","title":"a","datasource":` + ds + `,"targets":[{"refId":"A","expr":"x"},{"refId":"B","expr":"y","hide":true}]},
				{"type":"row","title":"r","panels":[
					{"type":"stat","title":"b","datasource":` + ds + `,"targets":[{"refId":"A","expr":"z","datasource":` + ds + `}]}]}]}`,
			want: []dashboardQuery{{Panel: "a", RefID: "A", Expr: "x"}, {Panel: "b", RefID: "A", Expr: "z"}},
		},
		{
			name:     "empty expression",
			json:     `{"panels":[{"type":"stat","title":"b","datasource":` + ds + `,"targets":[{"refId":"A","expr":" "}]}]}`,
			wantErrs: []string{`panel "b" target "A": empty expr`},
		},
		{
			name:     "panel without queries",
			json:     `{"panels":[{"type":"stat","title":"b","datasource":` + ds + `}]}`,
			wantErrs: []string{`panel "b" has no query`},
		},
		{
			name: "hard-coded datasource",
			json: `{"panels":[
				{"type":"stat","title":"b","datasource":{"type":"prometheus","uid":"P1"},"targets":[{"refId":"A","expr":"x"}]},
				{"type":"stat","title":"c","datasource":` + ds + `,"targets":[{"refId":"A","expr":"x","datasource":{"type":"loki","uid":"${datasource}"}}]}]}`,
			wantErrs: []string{`panel "b": datasource`, `panel "c" target "A": datasource`},
		},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := dashboardQueries([]byte(tc.json), "${datasource}")
			if len(tc.wantErrs) > 0 {
				if err == nil {
					t.Fatalf("no error, want %q", tc.wantErrs)
				}
				for _, w := range tc.wantErrs {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSubstitute(t *testing.T) {
	vars := map[string]string{"namespace": "default|other", "__rate_interval": "15s", "job": "demo"}
	testCases := []struct {
		name    string
		in      string
		want    string
		wantErr string
	}{
		{name: "dollar", in: `rate(x{ns=~"$namespace"}[$__rate_interval])`, want: `rate(x{ns=~"default|other"}[15s])`},
		{name: "braces and format", in: `x{ns=~"${namespace:regex}", j="${job}"}`, want: `x{ns=~"default|other", j="demo"}`},
		{name: "double brackets", in: `x{j="[[job]]"}`, want: `x{j="demo"}`},
		{name: "no variables", in: `sum(up)`, want: `sum(up)`},
		{name: "longest name wins", in: `[$__rate_interval]`, want: `[15s]`},
		{name: "undefined", in: `x[$__interval] + y{a="$tenant"}`, wantErr: "__interval, tenant"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := substitute(tc.in, vars)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("substitute(%q) error = %v, want one naming %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("substitute(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestLabelValuesQuery(t *testing.T) {
	sel, label, err := labelValuesQuery(" label_values(aion_x_count{a=\"b\"} , aion_namespace) ")
	if err != nil || sel != `aion_x_count{a="b"}` || label != "aion_namespace" {
		t.Errorf("got %q, %q, %v", sel, label, err)
	}
	if _, _, err := labelValuesQuery("query_result(up)"); err == nil {
		t.Error("query_result accepted as label_values")
	}
}

func TestDashboardVariables(t *testing.T) {
	vars, err := dashboardVariables([]byte(`{"templating":{"list":[
		{"name":"a","type":"query","query":"label_values(up, job)","datasource":{"type":"prometheus","uid":"${datasource}"}},
		{"name":"b","type":"query","query":{"query":"label_values(up, instance)","refId":"X"}}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := []dashboardVariable{
		{Name: "a", Type: "query", Query: "label_values(up, job)", Datasource: "${datasource}"},
		{Name: "b", Type: "query", Query: "label_values(up, instance)"},
	}
	if !slices.Equal(vars, want) {
		t.Errorf("got %+v, want %+v", vars, want)
	}
	if _, err := dashboardVariables([]byte(`{"templating":{"list":[{"name":"c","query":3}]}}`)); err == nil {
		t.Error("numeric query accepted")
	}
}

// e2eVariables are the values the end-to-end test gives the dashboard's
// variables: job and namespace (regexes, as Grafana substitutes a
// multi-value variable) come from the variables' own queries, the built-in
// ones are fixed here.
func e2eVariables(job, namespace string) map[string]string {
	return map[string]string{
		"job":       job,
		"namespace": namespace,
		// What Grafana computes for a 1s scrape interval and a short range:
		// at least four scrapes per window.
		"__rate_interval": "15s",
		"__interval":      "5s",
		"__range":         "5m",
	}
}

var (
	// A catalog name or a label name of the catalog (aion_namespace).
	metricToken = regexp.MustCompile(`\b(?:aion|gen_ai)_\w+`)
	// Label names in by/without clauses and in matchers.
	groupingClause = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matcherLabel   = regexp.MustCompile(`(\w+)\s*(?:=~|!~|!=|=)\s*"`)
	rangeSelector  = regexp.MustCompile(`\[([^\]]*)\]`)
)

// checkAgainstCatalog reports the names in expr that are not in the catalog:
// metric series, and label names in matchers and groupings (each must be le,
// job, instance, or a label of a metric the expression uses).
func checkAgainstCatalog(expr string) (used []catalogMetric, problems []string) {
	series := catalogSeries()
	allLabels := map[string]bool{}
	for _, m := range catalogMetrics {
		for _, l := range append(append([]string{}, m.Labels...), m.Optional...) {
			allLabels[l] = true
		}
	}
	labels := map[string]bool{"le": true, "job": true, "instance": true}
	for _, tok := range metricToken.FindAllString(expr, -1) {
		if allLabels[tok] {
			continue // a label name such as aion_namespace
		}
		m, ok := series[tok]
		if !ok {
			problems = append(problems, "unknown series "+tok)
			continue
		}
		used = append(used, m)
		for _, l := range append(append([]string{}, m.Labels...), m.Optional...) {
			labels[l] = true
		}
	}
	var names []string
	for _, g := range groupingClause.FindAllStringSubmatch(expr, -1) {
		for _, l := range strings.Split(g[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				names = append(names, l)
			}
		}
	}
	for _, m := range matcherLabel.FindAllStringSubmatch(expr, -1) {
		names = append(names, m[1])
	}
	for _, l := range names {
		if !labels[l] {
			problems = append(problems, "label "+l+" is not a label of the metrics used")
		}
	}
	return used, problems
}

// TestDashboardContract checks the dashboard against the catalog and its own
// rules without any server: every query uses catalog names only, every
// catalog metric has a panel, the variables are the documented ones, every
// query's variables can be substituted, and every series selector of every
// query is filtered by job and namespace (examples/grafana/README.md: "every
// query is filtered by both").
func TestDashboardContract(t *testing.T) {
	raw := readDashboard(t)
	queries, err := dashboardQueries(raw, "${datasource}")
	if err != nil {
		t.Fatal(err)
	}
	vars, err := dashboardVariables(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := []dashboardVariable{
		{Name: "datasource", Type: "datasource", Query: "prometheus"},
		{Name: "job", Type: "query", Datasource: "${datasource}",
			Query: "label_values(aion_store_operation_duration_seconds_count, job)"},
		{Name: "namespace", Type: "query", Datasource: "${datasource}",
			Query: `label_values(aion_store_operation_duration_seconds_count{job=~"$job"}, aion_namespace)`},
	}
	if !slices.Equal(vars, want) {
		t.Errorf("variables = %+v, want %+v", vars, want)
	}

	covered := map[string]bool{}
	for _, q := range queries {
		used, problems := checkAgainstCatalog(q.Expr)
		for _, p := range problems {
			t.Errorf("panel %q query %s: %s", q.Panel, q.RefID, p)
		}
		for _, m := range used {
			covered[m.Name] = true
		}
		if len(used) == 0 {
			t.Errorf("panel %q query %s reads no catalog metric", q.Panel, q.RefID)
		}
		for _, r := range rangeSelector.FindAllStringSubmatch(q.Expr, -1) {
			if r[1] != "$__rate_interval" {
				t.Errorf("panel %q query %s: range [%s], want [$__rate_interval]", q.Panel, q.RefID, r[1])
			}
		}
		if _, err := substitute(q.Expr, e2eVariables("demo", "default")); err != nil {
			t.Errorf("panel %q query %s: %v", q.Panel, q.RefID, err)
		}
		for _, p := range filterProblems(q.Expr) {
			t.Errorf("panel %q query %s: %s", q.Panel, q.RefID, p)
		}
	}
	for _, m := range catalogMetrics {
		if !covered[m.Name] {
			t.Errorf("no panel shows %s", m.Name)
		}
	}
}

// The values filterProblems gives the job and namespace variables: tokens no
// query contains, so a matcher holding one was written as the variable.
const (
	jobToken       = "JOB_VARIABLE"
	namespaceToken = "NAMESPACE_VARIABLE"
)

// filterProblems reports every series selector of expr that is not
// filtered by both dashboard variables, job=~"$job" and
// aion_namespace=~"$namespace": without them a panel mixes the programs or
// the tenants that report to the same Prometheus, while the dashboard says
// it shows one. The query is read as Prometheus reads it: its variables
// substituted, then parsed by Prometheus' own PromQL parser, so a selector
// without braces or one hidden in a subquery is seen too. A query that does
// not parse is a problem as well.
func filterProblems(expr string) []string {
	sub, err := substitute(expr, e2eVariables(jobToken, namespaceToken))
	if err != nil {
		return []string{err.Error()}
	}
	parsed, err := parser.NewParser(parser.Options{}).ParseExpr(sub)
	if err != nil {
		return []string{fmt.Sprintf("does not parse as PromQL: %v", err)}
	}
	var problems []string
	parser.Inspect(parsed, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		for _, want := range []struct{ label, token, variable string }{
			{"job", jobToken, "$job"},
			{"aion_namespace", namespaceToken, "$namespace"},
		} {
			filtered := slices.ContainsFunc(vs.LabelMatchers, func(m *labels.Matcher) bool {
				return m.Name == want.label && m.Type == labels.MatchRegexp && m.Value == want.token
			})
			if !filtered {
				problems = append(problems, fmt.Sprintf("%s lacks %s=~%q", vs.String(), want.label, want.variable))
			}
		}
		return nil
	})
	return problems
}

func TestFilterProblems(t *testing.T) {
	testCases := []struct {
		name string
		expr string
		want []string // substrings, one per problem, in order
	}{
		{name: "both filters", expr: `sum(rate(aion_x_count{job=~"$job", aion_namespace=~"$namespace"}[$__rate_interval]))`},
		{name: "braces format", expr: `aion_x{job=~"${job}", aion_namespace=~"${namespace:regex}"}`},
		{name: "no namespace", expr: `sum(rate(aion_x_count{job=~"$job"}[$__rate_interval]))`,
			want: []string{`lacks aion_namespace=~"$namespace"`}},
		{name: "no braces", expr: `aion_x`, want: []string{`lacks job=~"$job"`, `lacks aion_namespace=~"$namespace"`}},
		{name: "equality, not the variable's regex", expr: `aion_x{job="$job", aion_namespace=~"$namespace"}`,
			want: []string{`lacks job=~"$job"`}},
		{name: "a fixed value", expr: `aion_x{job=~"demo", aion_namespace=~"$namespace"}`,
			want: []string{`lacks job=~"$job"`}},
		{name: "the second operand", expr: `aion_a{job=~"$job", aion_namespace=~"$namespace"} / on() aion_b{job=~"$job"}`,
			want: []string{`aion_b{job=~"JOB_VARIABLE"} lacks aion_namespace`}},
		{name: "by __name__", expr: `{__name__=~"aion_.+", aion_namespace=~"$namespace"}`,
			want: []string{`lacks job=~"$job"`}},
		{name: "inside a subquery", expr: `max_over_time(aion_x{aion_namespace=~"$namespace"}[5m:1m])`,
			want: []string{`lacks job=~"$job"`}},
		{name: "a literal is no selector", expr: `(sum(aion_x{job=~"$job", aion_namespace=~"$namespace"}) or vector(0))`},
		{name: "not PromQL", expr: `sum(aion_x{job=~"$job"`, want: []string{"does not parse"}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got := filterProblems(tc.expr)
			if len(got) != len(tc.want) {
				t.Fatalf("filterProblems(%s) = %q, want %d problems like %q", tc.expr, got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

// dashboardUnits maps each panel title to its unit and queries.
func dashboardUnits(t *testing.T, raw []byte) map[string]struct {
	Unit  string
	Exprs []string
} {
	t.Helper()
	var doc struct {
		Panels []struct {
			Title       string `json:"title"`
			Type        string `json:"type"`
			FieldConfig struct {
				Defaults struct {
					Unit string `json:"unit"`
				} `json:"defaults"`
			} `json:"fieldConfig"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]struct {
		Unit  string
		Exprs []string
	}{}
	for _, p := range doc.Panels {
		if p.Type == "row" {
			continue
		}
		e := out[p.Title]
		e.Unit = p.FieldConfig.Defaults.Unit
		for _, tg := range p.Targets {
			e.Exprs = append(e.Exprs, tg.Expr)
		}
		out[p.Title] = e
	}
	return out
}

// TestDashboardPanels checks what an SRE reads off the panels: a rate is
// shown per second with a unit that says so; no panel draws a line per
// activity type for several quantiles (top-k or all types together); the
// store error ratio counts errors as AionStoreErrorRatioHigh does; the
// keyspace has an error panel.
func TestDashboardPanels(t *testing.T) {
	panels := dashboardUnits(t, readDashboard(t))
	perSecond := map[string]bool{"reqps": true, "ops": true, "suffix:/s": true, "suffix: tokens/s": true}
	for title, p := range panels {
		for _, e := range p.Exprs {
			isRate := strings.Contains(e, "rate(") && !strings.Contains(e, "histogram_quantile") && !strings.Contains(e, "\n/\n")
			if isRate && !perSecond[p.Unit] {
				t.Errorf("panel %q shows a rate with unit %q, want a per-second unit (%v)", title, p.Unit, perSecond)
			}
			if isRate && !strings.Contains(title, "per second") {
				t.Errorf("panel %q shows a rate; its title must say per second", title)
			}
			if strings.Contains(e, "histogram_quantile") && strings.Contains(e, "by (aion_activity_type") &&
				(len(p.Exprs) > 1 || !strings.HasPrefix(e, "topk(")) {
				t.Errorf("panel %q draws quantiles per activity type without topk: one line per type and quantile", title)
			}
		}
	}

	alerts, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	exclusion := regexp.MustCompile(`error_type!~"[^"]*"`)
	want := exclusion.FindString(string(alerts))
	if want == "" {
		t.Fatal("alerts.yml: AionStoreErrorRatioHigh has no error_type!~ exclusion")
	}
	ratio, ok := panels["Store error ratio"]
	if !ok || len(ratio.Exprs) != 1 {
		t.Fatalf("no single-query \"Store error ratio\" panel: %+v", ratio)
	}
	if got := exclusion.FindString(ratio.Exprs[0]); got != want {
		t.Errorf("Store error ratio excludes %q, AionStoreErrorRatioHigh %q: the stat and the alert disagree", got, want)
	}

	keyspaceErrors := false
	for _, p := range panels {
		for _, e := range p.Exprs {
			if strings.Contains(e, "aion_keyspace_operation_duration_seconds_count") && strings.Contains(e, `error_type!=""`) {
				keyspaceErrors = true
			}
		}
	}
	if !keyspaceErrors {
		t.Error("no panel shows keyspace errors (aion_keyspace_operation_duration_seconds_count with error_type)")
	}
}
