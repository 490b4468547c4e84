package pipeline

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// dashboardQuery is one PromQL target of a Grafana dashboard panel.
type dashboardQuery struct {
	Panel string // the panel's title
	RefID string // the target's refId ("A", "B", ...)
	Expr  string // PromQL, with the dashboard's variables still in it
}

// dashboardVariable is one entry of the dashboard's templating list.
type dashboardVariable struct {
	Name  string
	Type  string // "datasource", "query", ...
	Query string // the query of a query variable; the plugin type of a datasource variable
	// Datasource is the uid of the variable's datasource ("${datasource}").
	Datasource string
}

// dsRef is a Grafana datasource reference.
type dsRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashboardPanel struct {
	Title      string           `json:"title"`
	Type       string           `json:"type"`
	Datasource *dsRef           `json:"datasource"`
	Panels     []dashboardPanel `json:"panels"` // a row's panels, when collapsed
	Targets    []struct {
		RefID      string `json:"refId"`
		Expr       string `json:"expr"`
		Hide       bool   `json:"hide"`
		Datasource *dsRef `json:"datasource"`
	} `json:"targets"`
}

type dashboardDoc struct {
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *dsRef          `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

// dashboardQueries returns every visible PromQL target of the dashboard,
// including those of panels nested in collapsed rows, in panel order. A
// target with no expression is an error: Grafana would show an empty panel.
// When datasourceUID is not empty, every panel and target must use that
// datasource uid with type prometheus, so that one selection of the
// datasource variable drives the whole dashboard.
func dashboardQueries(raw []byte, datasourceUID string) ([]dashboardQuery, error) {
	var doc dashboardDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	var out []dashboardQuery
	var problems []string
	var walk func(ps []dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type == "row" {
				continue
			}
			if len(p.Targets) == 0 {
				problems = append(problems, fmt.Sprintf("panel %q has no query", p.Title))
			}
			if datasourceUID != "" && !isPrometheusRef(p.Datasource, datasourceUID) {
				problems = append(problems, fmt.Sprintf("panel %q: datasource %+v, want prometheus %q", p.Title, p.Datasource, datasourceUID))
			}
			for _, tg := range p.Targets {
				if tg.Hide {
					continue
				}
				if strings.TrimSpace(tg.Expr) == "" {
					problems = append(problems, fmt.Sprintf("panel %q target %q: empty expr", p.Title, tg.RefID))
					continue
				}
				if datasourceUID != "" && tg.Datasource != nil && !isPrometheusRef(tg.Datasource, datasourceUID) {
					problems = append(problems, fmt.Sprintf("panel %q target %q: datasource %+v, want prometheus %q", p.Title, tg.RefID, tg.Datasource, datasourceUID))
				}
				out = append(out, dashboardQuery{Panel: p.Title, RefID: tg.RefID, Expr: tg.Expr})
			}
		}
	}
	walk(doc.Panels)
	if len(problems) > 0 {
		return out, fmt.Errorf("dashboard:\n\t%s", strings.Join(problems, "\n\t"))
	}
	return out, nil
}

func isPrometheusRef(r *dsRef, uid string) bool {
	return r != nil && r.Type == "prometheus" && r.UID == uid
}

// dashboardVariables returns the templating variables of the dashboard. The
// query of a variable may be a string or, as newer Grafana versions save it,
// an object with a "query" field.
func dashboardVariables(raw []byte) ([]dashboardVariable, error) {
	var doc dashboardDoc
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	out := make([]dashboardVariable, 0, len(doc.Templating.List))
	for _, v := range doc.Templating.List {
		dv := dashboardVariable{Name: v.Name, Type: v.Type}
		if v.Datasource != nil {
			dv.Datasource = v.Datasource.UID
		}
		if len(v.Query) > 0 {
			var s string
			if err := json.Unmarshal(v.Query, &s); err == nil {
				dv.Query = s
			} else {
				var obj struct {
					Query string `json:"query"`
				}
				if err := json.Unmarshal(v.Query, &obj); err != nil {
					return nil, fmt.Errorf("variable %q: query is neither a string nor an object: %w", v.Name, err)
				}
				dv.Query = obj.Query
			}
		}
		out = append(out, dv)
	}
	return out, nil
}

// variableRef matches Grafana's three variable syntaxes: ${name} (with an
// optional :format), [[name]] (with an optional :format) and $name.
var variableRef = regexp.MustCompile(`\$\{(\w+)(?::[^}]*)?\}|\[\[(\w+)(?::[^\]]*)?\]\]|\$(\w+)`)

// substitute replaces every variable reference in expr by its value in vars,
// as Grafana does before sending a query. A reference to a variable vars does
// not define is an error naming it, so no query reaches Prometheus with a
// literal "$" in it.
func substitute(expr string, vars map[string]string) (string, error) {
	unknown := map[string]bool{}
	out := variableRef.ReplaceAllStringFunc(expr, func(ref string) string {
		m := variableRef.FindStringSubmatch(ref)
		name := m[1] + m[2] + m[3] // exactly one group matched
		v, ok := vars[name]
		if !ok {
			unknown[name] = true
			return ref
		}
		return v
	})
	if len(unknown) > 0 {
		names := make([]string, 0, len(unknown))
		for n := range unknown {
			names = append(names, n)
		}
		sort.Strings(names)
		return out, fmt.Errorf("undefined variables %s in %q", strings.Join(names, ", "), expr)
	}
	return out, nil
}

// labelValuesQuery parses Grafana's label_values(selector, label) variable
// query.
func labelValuesQuery(q string) (selector, label string, err error) {
	m := regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*(\w+)\s*\)\s*$`).FindStringSubmatch(q)
	if m == nil {
		return "", "", fmt.Errorf("%q is not label_values(selector, label)", q)
	}
	return m[1], m[2], nil
}
