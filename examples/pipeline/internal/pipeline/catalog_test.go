package pipeline

import (
	"strings"
	"testing"
)

// TestCatalogTable checks the table against the naming rules of the OTel
// Prometheus translation, so a typo in a name cannot slip into the contract
// the dashboard, the alerts and the end-to-end test are checked against.
func TestCatalogTable(t *testing.T) {
	if len(catalogMetrics) != 14 {
		t.Errorf("catalog has %d metrics, DESIGN.md lists 14", len(catalogMetrics))
	}
	seen := map[string]bool{}
	for _, m := range catalogMetrics {
		if seen[m.Name] {
			t.Errorf("%s listed twice", m.Name)
		}
		seen[m.Name] = true
		if !strings.HasPrefix(m.Name, "aion_") {
			t.Errorf("%s: every name starts with aion_", m.Name)
		}
		switch m.Kind {
		case counter:
			if !strings.HasSuffix(m.Name, "_total") {
				t.Errorf("counter %s must end in _total", m.Name)
			}
		case gauge, histogram:
			if strings.HasSuffix(m.Name, "_total") {
				t.Errorf("%s %s must not end in _total", m.Kind, m.Name)
			}
		}
		if strings.Contains(m.Name, "duration") != strings.HasSuffix(m.Name, "_seconds") {
			t.Errorf("%s: durations, and only they, are in seconds", m.Name)
		}
		for _, l := range append(append([]string{}, m.Labels...), m.Optional...) {
			if strings.ContainsAny(l, ".-") || l == "" {
				t.Errorf("%s: label %q is not a Prometheus label name", m.Name, l)
			}
		}
	}
	series := catalogSeries()
	if len(series) != 14+4*2 {
		t.Errorf("catalogSeries has %d names, want 22 (14 metrics, 4 of them histograms with 3 series)", len(series))
	}
	for _, name := range []string{"aion_activity_duration_seconds_bucket", "aion_keyspace_append_batch_size_sum", "aion_inflight_activities"} {
		if _, ok := series[name]; !ok {
			t.Errorf("catalogSeries lacks %s", name)
		}
	}
	if _, ok := series["aion_store_operation_duration_seconds"]; ok {
		t.Error("a histogram's bare family name is not a series")
	}
}
