package pipeline

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The alert rules and their promtool tests, relative to this directory.
var (
	alertsPath     = filepath.Join("..", "..", "..", "prometheus", "alerts.yml")
	alertsTestPath = filepath.Join("..", "..", "..", "prometheus", "alerts_test.yml")
)

// promtool runs promtool with args and returns its combined output.
func promtool(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// TestAlertRules runs the checks a user would: promtool check rules on
// alerts.yml and promtool test rules on alerts_test.yml, whose cases show
// every alert firing and staying quiet.
func TestAlertRules(t *testing.T) {
	bin := requireTool(t, "promtool")
	if out, err := promtool(t, bin, "check", "rules", alertsPath); err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	if out, err := promtool(t, bin, "test", "rules", alertsTestPath); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}

// TestAlertRulesTestsBite breaks one alert at a time in a copy of alerts.yml
// and expects alerts_test.yml to catch it: the tests pin the thresholds, the
// "for" durations, the labels, and the cases that must stay quiet.
func TestAlertRulesTestsBite(t *testing.T) {
	bin := requireTool(t, "promtool")
	rules, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(alertsTestPath)
	if err != nil {
		t.Fatal(err)
	}
	testCases := []struct {
		name, old, new string
		alert          string // the alert whose test must fail
	}{
		{"error ratio threshold", ") > 0.05", ") > 0.10", "AionStoreErrorRatioHigh"},
		{"sequence conflicts counted", `error_type!~"|sequence_conflict|not_found"`, `error_type!~"|not_found"`, "AionStoreErrorRatioHigh"},
		{"not_found counted", `error_type!~"|sequence_conflict|not_found"`, `error_type!~"|sequence_conflict"`, "AionStoreErrorRatioHigh"},
		{"successes counted as errors", `error_type!~"|sequence_conflict|not_found"`, `error_type!~"sequence_conflict|not_found"`, "AionStoreErrorRatioHigh"},
		{"store latency threshold", "  ) > 0.5\n", "  ) > 1\n", "AionStoreLatencyHigh"},
		{"store latency per operation", "by (job, aion_namespace, db_operation_name, le)", "by (job, aion_namespace, le)", "AionStoreLatencyHigh"},
		{"stuck only when growing", "min_over_time(aion_inflight_activities[15m])", "delta(aion_inflight_activities[15m])", "AionActivitiesStuck"},
		{"stuck without the completion check", "> 0\n          )\n          unless", "> 0\n          )\n          and", "AionActivitiesStuck"},
		{"stuck severity", "severity: critical", "severity: warning", "AionActivitiesStuck"},
		{"latency threshold", "  ) > 30\n", "  ) > 60\n", "AionActivityLatencyHigh"},
		{"latency below the old 10s ceiling", "  ) > 30\n", "  ) > 5\n", "AionActivityLatencyHigh"},
		{"latency for", "        for: 10m\n        labels:\n          severity: warning\n        annotations:\n          summary: \"p99 of {{ $labels.aion_activity_type }}", "        for: 1m\n        labels:\n          severity: warning\n        annotations:\n          summary: \"p99 of {{ $labels.aion_activity_type }}", "AionActivityLatencyHigh"},
		{"latency capped at an hour", "rate(aion_activity_duration_seconds_bucket[5m])", `rate(aion_activity_duration_seconds_bucket{le!~"7200|14400|28800|86400"}[5m])`, "AionActivityLatencyHigh"},
		{"age threshold", "  ) > 1800\n", "  ) > 3600\n", "AionActivityInFlightTooLong"},
		{"age of the youngest replica", "max by (job, aion_namespace, aion_activity_type) (\n            aion_activity_oldest_inflight_age_seconds", "min by (job, aion_namespace, aion_activity_type) (\n            aion_activity_oldest_inflight_age_seconds", "AionActivityInFlightTooLong"},
		{"age per instance", "max by (job, aion_namespace, aion_activity_type) (\n            aion_activity_oldest_inflight_age_seconds", "max by (job, instance, aion_namespace, aion_activity_type) (\n            aion_activity_oldest_inflight_age_seconds", "AionActivityInFlightTooLong"},
		{"age for", "        for: 1m\n        labels:\n          severity: warning\n        annotations:\n          summary: \"A {{ $labels.aion_activity_type }} activity has been", "        for: 10m\n        labels:\n          severity: warning\n        annotations:\n          summary: \"A {{ $labels.aion_activity_type }} activity has been", "AionActivityInFlightTooLong"},
		{"waiting threshold", "  ) > 300\n", "  ) > 900\n", "AionActivityWaitingTooLong"},
		{"waiting of the youngest replica", "max by (job, aion_namespace, aion_activity_type) (\n            aion_activity_oldest_waiting_age_seconds", "min by (job, aion_namespace, aion_activity_type) (\n            aion_activity_oldest_waiting_age_seconds", "AionActivityWaitingTooLong"},
		{"waiting per instance", "max by (job, aion_namespace, aion_activity_type) (\n            aion_activity_oldest_waiting_age_seconds", "max by (job, instance, aion_namespace, aion_activity_type) (\n            aion_activity_oldest_waiting_age_seconds", "AionActivityWaitingTooLong"},
		{"waiting read off the in-flight age", "            aion_activity_oldest_waiting_age_seconds\n", "            aion_activity_oldest_inflight_age_seconds\n", "AionActivityWaitingTooLong"},
		{"waiting for", "        for: 1m\n        labels:\n          severity: warning\n        annotations:\n          summary: \"A {{ $labels.aion_activity_type }} activity has waited", "        for: 5m\n        labels:\n          severity: warning\n        annotations:\n          summary: \"A {{ $labels.aion_activity_type }} activity has waited", "AionActivityWaitingTooLong"},
		{"evictions window", "increase(aion_activity_pairing_evicted_total[10m])", "increase(aion_activity_pairing_evicted_total[30m])", "AionPairingEvictions"},
		{"workflow evictions left out", "\n            or\n            label_replace(increase(aion_workflow_pairing_evicted_total[10m]), \"entry\", \"workflow\", \"\", \"\")", "", "AionPairingEvictions"},
		{"evictions merged by or", `label_replace(increase(aion_workflow_pairing_evicted_total[10m]), "entry", "workflow", "", "")`, `label_replace(increase(aion_workflow_pairing_evicted_total[10m]), "entry", "activity", "", "")`, "AionPairingEvictions"},
		{"runbook anchor", "RUNBOOK.md#aionactivitiesstuck", "RUNBOOK.md#stuck", "AionActivitiesStuck"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if strings.Count(string(rules), tc.old) != 1 {
				t.Fatalf("alerts.yml must contain %q exactly once", tc.old)
			}
			dir := t.TempDir()
			broken := strings.Replace(string(rules), tc.old, tc.new, 1)
			if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), []byte(broken), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "alerts_test.yml"), tests, 0o600); err != nil {
				t.Fatal(err)
			}
			if out, err := promtool(t, bin, "check", "rules", filepath.Join(dir, "alerts.yml")); err != nil {
				t.Fatalf("the mutation must keep the rules valid: %v\n%s", err, out)
			}
			out, err := promtool(t, bin, "test", "rules", filepath.Join(dir, "alerts_test.yml"))
			if err == nil {
				t.Fatalf("promtool test rules passed with the %s mutation", tc.name)
			}
			if !strings.Contains(out, "alertname: "+tc.alert) {
				t.Errorf("failure does not name %s:\n%s", tc.alert, out)
			}
		})
	}
}

// runbookBase is where every alert's runbook_url points: RUNBOOK.md, next
// to alerts.yml, in the repository.
const runbookBase = "https://github.com/aionotel/aionotel/blob/main/examples/prometheus/RUNBOOK.md"

// runbookPath is RUNBOOK.md relative to this directory.
var runbookPath = filepath.Join("..", "..", "..", "prometheus", "RUNBOOK.md")

// TestAlertsContract checks alerts.yml against the catalog without promtool:
// only catalog series and labels, and the documented alerts, each with a
// for duration, a severity, a summary, a description and a runbook_url that
// points at the alert's own section of RUNBOOK.md, which exists.
func TestAlertsContract(t *testing.T) {
	raw, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	// Comments may name a histogram by its family name; only rules count.
	rules := regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(string(raw), "")
	_, problems := checkAgainstCatalog(rules)
	for _, p := range problems {
		t.Error(p)
	}
	runbook, err := os.ReadFile(runbookPath)
	if err != nil {
		t.Fatal(err)
	}
	var sections []string
	for _, m := range regexp.MustCompile(`(?m)^## (\w+)$`).FindAllStringSubmatch(string(runbook), -1) {
		sections = append(sections, m[1])
	}
	if !slices.Equal(sections, alertNames(t)) {
		t.Errorf("RUNBOOK.md sections %v, want one per alert in order %v", sections, alertNames(t))
	}
	blocks := alertRe.FindAllStringSubmatchIndex(string(raw), -1)
	var names []string
	for i, b := range blocks {
		name := string(raw[b[2]:b[3]])
		names = append(names, name)
		end := len(raw)
		if i+1 < len(blocks) {
			end = blocks[i+1][0]
		}
		body := string(raw[b[1]:end])
		for _, want := range []string{"\n        for: ", "\n          severity: ", "\n          summary: ", "\n          description: "} {
			if !strings.Contains(body, want) {
				t.Errorf("alert %s lacks %q", name, strings.TrimSpace(want))
			}
		}
		wantURL := "\n          runbook_url: " + runbookBase + "#" + strings.ToLower(name) + "\n"
		if !strings.Contains(body, wantURL) {
			t.Errorf("alert %s lacks %q", name, strings.TrimSpace(wantURL))
		}
		if !slices.Contains(sections, name) {
			t.Errorf("RUNBOOK.md has no section \"## %s\" (sections %v)", name, sections)
		}
	}
	want := []string{"AionStoreErrorRatioHigh", "AionStoreLatencyHigh", "AionActivitiesStuck",
		"AionActivityInFlightTooLong", "AionActivityWaitingTooLong", "AionActivityLatencyHigh", "AionPairingEvictions"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("alerts = %v, want %v", names, want)
	}
}

// alertRe matches the first line of an alerting rule in alerts.yml.
var alertRe = regexp.MustCompile(`(?m)^      - alert: (\w+)$`)

// alertNames returns the names of the alerting rules of alerts.yml, in order.
func alertNames(t testing.TB) []string {
	t.Helper()
	raw, err := os.ReadFile(alertsPath)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range alertRe.FindAllStringSubmatch(string(raw), -1) {
		names = append(names, m[1])
	}
	return names
}
