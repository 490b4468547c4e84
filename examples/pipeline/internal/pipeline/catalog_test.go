package pipeline

import (
	"slices"
	"strings"
	"testing"
)

// TestCatalogTable checks the table against the naming rules of the OTel
// Prometheus translation, so a typo in a name cannot slip into the contract
// the dashboard, the alerts and the end-to-end test are checked against.
func TestCatalogTable(t *testing.T) {
	// 14 of the store and the pairing tracker, 3 of the timeline, 2 of the
	// wait for a worker, 9 of the agent transcripts; 1 of go-workflows.
	if len(catalogMetrics) != 29 {
		t.Errorf("catalog has %d metrics, want 29", len(catalogMetrics))
	}
	if n := len(demoMetrics()); n != 28 {
		t.Errorf("the demo records %d catalog metrics, want 28 (all but go-workflows' one)", n)
	}
	if u := demoUnfed(); len(u) != 1 || u["aion_workflow_task_wait_duration_seconds"] == "" {
		t.Errorf("demoUnfed = %v, want go-workflows' workflow task wait only", u)
	}
	seen := map[string]bool{}
	for _, m := range catalogMetrics {
		if seen[m.Name] {
			t.Errorf("%s listed twice", m.Name)
		}
		seen[m.Name] = true
		if !slices.ContainsFunc(catalogPrefixes, func(p string) bool { return strings.HasPrefix(m.Name, p) }) {
			t.Errorf("%s: every name starts with one of %v", m.Name, catalogPrefixes)
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
		timed := strings.Contains(m.Name, "duration") || strings.Contains(m.Name, "_age") || strings.Contains(m.Name, "time_to_")
		if timed != strings.HasSuffix(m.Name, "_seconds") {
			t.Errorf("%s: durations and ages, and only they, are in seconds", m.Name)
		}
		for _, l := range append(append([]string{}, m.Labels...), m.Optional...) {
			if strings.ContainsAny(l, ".-") || l == "" {
				t.Errorf("%s: label %q is not a Prometheus label name", m.Name, l)
			}
		}
	}
	series := catalogSeries()
	if len(series) != 29+12*2 {
		t.Errorf("catalogSeries has %d names, want 53 (29 metrics, 12 of them histograms with 3 series)", len(series))
	}
	for _, name := range []string{"aion_activity_duration_seconds_bucket", "aion_keyspace_append_batch_size_sum", "aion_inflight_activities",
		"aion_activity_oldest_inflight_age_seconds", "aion_workflow_duration_seconds_bucket", "gen_ai_client_token_usage_sum",
		"aion_activity_wait_duration_seconds_bucket", "aion_activity_oldest_waiting_age_seconds"} {
		if _, ok := series[name]; !ok {
			t.Errorf("catalogSeries lacks %s", name)
		}
	}
	if _, ok := series["aion_store_operation_duration_seconds"]; ok {
		t.Error("a histogram's bare family name is not a series")
	}
}
