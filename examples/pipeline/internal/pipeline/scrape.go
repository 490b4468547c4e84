package pipeline

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape fetches a /metrics endpoint in the Prometheus text format and parses
// it into metric families keyed by name.
func scrape(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return fams, nil
}

// familyShape is what a dashboard query depends on in a metric family: its
// type and the label names its series carry.
type familyShape struct {
	Type   string
	Labels []string // sorted, without the labels of the scrape target
}

func (s familyShape) String() string {
	return s.Type + "{" + strings.Join(s.Labels, ",") + "}"
}

// targetLabel reports whether a label describes where the series came from
// rather than what it measures: job, instance, and the instrumentation scope
// labels the OTel exporters add.
func targetLabel(name string) bool {
	return name == "job" || name == "instance" || strings.HasPrefix(name, "otel_scope_")
}

// shapes returns the shape of every family whose name starts with one of
// prefixes.
func shapes(fams map[string]*dto.MetricFamily, prefixes ...string) map[string]familyShape {
	out := map[string]familyShape{}
	for name, f := range fams {
		if !slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(name, p) }) {
			continue
		}
		seen := map[string]bool{}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if !targetLabel(l.GetName()) {
					seen[l.GetName()] = true
				}
			}
		}
		labels := make([]string, 0, len(seen))
		for l := range seen {
			labels = append(labels, l)
		}
		sort.Strings(labels)
		out[name] = familyShape{Type: strings.ToLower(f.GetType().String()), Labels: labels}
	}
	return out
}

// diffShapes lists every difference between two sets of family shapes, named
// after aName and bName; none means a query written for one works on the other.
func diffShapes(aName string, a map[string]familyShape, bName string, b map[string]familyShape) []string {
	var diffs []string
	names := map[string]bool{}
	for n := range a {
		names[n] = true
	}
	for n := range b {
		names[n] = true
	}
	sorted := make([]string, 0, len(names))
	for n := range names {
		sorted = append(sorted, n)
	}
	sort.Strings(sorted)
	for _, n := range sorted {
		sa, inA := a[n]
		sb, inB := b[n]
		switch {
		case !inA:
			diffs = append(diffs, fmt.Sprintf("%s only in %s", n, bName))
		case !inB:
			diffs = append(diffs, fmt.Sprintf("%s only in %s", n, aName))
		case sa.Type != sb.Type || !slices.Equal(sa.Labels, sb.Labels):
			diffs = append(diffs, fmt.Sprintf("%s: %s %s, %s %s", n, aName, sa, bName, sb))
		}
	}
	return diffs
}

// sumFamilies adds up every sample value of the families whose name starts
// with prefix (counters, gauges and untyped only).
func sumFamilies(fams map[string]*dto.MetricFamily, prefix string) (total float64, found bool) {
	for name, f := range fams {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			switch {
			case m.Counter != nil:
				total += m.GetCounter().GetValue()
				found = true
			case m.Gauge != nil:
				total += m.GetGauge().GetValue()
				found = true
			case m.Untyped != nil:
				total += m.GetUntyped().GetValue()
				found = true
			}
		}
	}
	return total, found
}

// sumLabeled adds up the counter values of the families whose name starts
// with prefix, on the series whose label name has the given value.
func sumLabeled(fams map[string]*dto.MetricFamily, prefix, name, value string) float64 {
	var total float64
	for fname, f := range fams {
		if !strings.HasPrefix(fname, prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == name && l.GetValue() == value {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}
