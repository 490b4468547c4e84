package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// notServed are the dashboard's families a go-workflows service has no
// facts for: transcripts (keyspace, GenAI), schedules and reopened runs
// (go-workflows has neither), and the bounds' evictions (only past a
// bound).
var notServed = regexp.MustCompile(`^aion_(keyspace_|gen_ai_|schedules_fired|workflows_reopened|activity_pairing_evicted|workflow_pairing_evicted)`)

// TestServiceServesTheDashboard runs the service for a short while and
// checks that every metric family the Grafana dashboard and the alert
// rules query is on its
// /metrics endpoint, except those listed in notServed; and that the
// summary shows the drained state (no activity in flight, a run span per
// run).
func TestServiceServesTheDashboard(t *testing.T) {
	var out bytes.Buffer
	var scrape string
	cfg := config{
		db:        filepath.Join(t.TempDir(), "shop.sqlite"),
		duration:  2 * time.Second,
		listen:    "127.0.0.1:0",
		rate:      20,
		namespace: "shop",
		drained: func(url string) {
			resp, err := http.Get(url)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			scrape = string(b)
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := run(ctx, cfg, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "0 now, by type") {
		t.Errorf("activities still in flight after the drain:\n%s", out.String())
	}
	dashboard, err := os.ReadFile(filepath.Join("..", "grafana", "aionotel-overview.json"))
	if err != nil {
		t.Fatal(err)
	}
	families := map[string]bool{}
	for _, m := range regexp.MustCompile(`"expr":\s*"((?:[^"\\]|\\.)*)"`).FindAllStringSubmatch(string(dashboard), -1) {
		for _, name := range regexp.MustCompile(`aion_[a-z_]+`).FindAllString(m[1], -1) {
			if strings.HasSuffix(name, "_type") || strings.HasSuffix(name, "_outcome") || strings.HasSuffix(name, "_status") || strings.HasSuffix(name, "_delivery") || strings.HasSuffix(name, "_trigger") || name == "aion_namespace" {
				continue // a label
			}
			families[name] = true
		}
	}
	// The alert rules' families too.
	alerts, err := os.ReadFile(filepath.Join("..", "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	{ // its expressions are block scalars: every name in the file
		for _, name := range regexp.MustCompile(`aion_[a-z_]+`).FindAllString(string(alerts), -1) {
			if strings.HasSuffix(name, "_type") || strings.HasSuffix(name, "_outcome") || name == "aion_namespace" {
				continue
			}
			families[name] = true
		}
	}
	served := 0
	for name := range families {
		if notServed.MatchString(name) {
			continue
		}
		served++
		if !regexp.MustCompile(`(?m)^` + name + `(_bucket)?[{ ]`).MatchString(scrape) { // a rule may name a histogram by its base name
			t.Errorf("the dashboard queries %s; the go-workflows service does not serve it", name)
		}
	}
	if served < 10 {
		t.Errorf("only %d dashboard families checked", served)
	}
	t.Logf("%d of the dashboard's and alert rules' %d families served\n%s", served, len(families), out.String())
}

// TestUnknownExporter checks that an -exporter value other than
// prometheus or otlp is refused before anything starts.
func TestUnknownExporter(t *testing.T) {
	cfg := config{db: filepath.Join(t.TempDir(), "shop.sqlite"), duration: time.Second, exporter: "zipkin", rate: 1}
	err := run(t.Context(), cfg, io.Discard)
	if err == nil || !strings.Contains(err.Error(), `-exporter "zipkin"`) {
		t.Fatalf("run with -exporter zipkin = %v, want an error naming the value", err)
	}
	if _, statErr := os.Stat(cfg.db); statErr == nil {
		t.Error("the database was created although the flag was refused")
	}
}
