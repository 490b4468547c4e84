package pipeline

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Two expositions of the same telemetry: as the OTel Go Prometheus exporter
// serves it, and as the Collector's prometheus exporter does (with job).
const (
	directText = `# TYPE aion_inflight_activities gauge
aion_inflight_activities{aion_activity_type="charge",aion_namespace="default",otel_scope_name="x"} 3
# TYPE aion_store_operation_duration_seconds histogram
aion_store_operation_duration_seconds_bucket{aion_namespace="default",db_operation_name="append",le="+Inf"} 2
aion_store_operation_duration_seconds_sum{aion_namespace="default",db_operation_name="append"} 0.1
aion_store_operation_duration_seconds_count{aion_namespace="default",db_operation_name="append"} 2
# TYPE target_info gauge
target_info{service_name="demo"} 1
`
	collectorText = `# TYPE aion_inflight_activities gauge
aion_inflight_activities{aion_activity_type="charge",aion_namespace="default",job="demo",otel_scope_name="x",otel_scope_version=""} 5
# TYPE aion_store_operation_duration_seconds histogram
aion_store_operation_duration_seconds_bucket{aion_namespace="default",db_operation_name="append",job="demo",le="+Inf"} 4
aion_store_operation_duration_seconds_sum{aion_namespace="default",db_operation_name="append",job="demo"} 0.2
aion_store_operation_duration_seconds_count{aion_namespace="default",db_operation_name="append",job="demo"} 4
# TYPE otelcol_receiver_accepted_spans_total counter
otelcol_receiver_accepted_spans_total{receiver="otlp",transport="grpc"} 7
otelcol_receiver_accepted_spans_total{receiver="otlp",transport="http"} 2
`
)

func serve(t *testing.T, text string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write([]byte(text))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestShapesMatchAcrossExporters(t *testing.T) {
	ctx := context.Background()
	direct, err := scrape(ctx, serve(t, directText))
	if err != nil {
		t.Fatal(err)
	}
	viaCollector, err := scrape(ctx, serve(t, collectorText))
	if err != nil {
		t.Fatal(err)
	}
	a, b := shapes(direct, "aion_"), shapes(viaCollector, "aion_")
	if len(a) != 2 {
		t.Fatalf("shapes = %v, want the two aion_ families", a)
	}
	if got := a["aion_store_operation_duration_seconds"].String(); got != "histogram{aion_namespace,db_operation_name}" {
		t.Errorf("histogram shape = %s", got)
	}
	if diffs := diffShapes("direct", a, "collector", b); len(diffs) != 0 {
		t.Errorf("same telemetry reported different: %v", diffs)
	}
}

func TestDiffShapes(t *testing.T) {
	a := map[string]familyShape{
		"aion_a_total": {Type: "counter", Labels: []string{"x"}},
		"aion_b":       {Type: "gauge"},
		"aion_c_total": {Type: "counter"},
	}
	b := map[string]familyShape{
		"aion_a_total": {Type: "counter", Labels: []string{"x", "y"}},
		"aion_b":       {Type: "counter"},
		"aion_d":       {Type: "gauge"},
	}
	got := strings.Join(diffShapes("A", a, "B", b), "\n")
	for _, want := range []string{
		"aion_a_total: A counter{x}, B counter{x,y}",
		"aion_b: A gauge{}, B counter{}",
		"aion_c_total only in A",
		"aion_d only in B",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
}

func TestScrapeErrorsAndSums(t *testing.T) {
	ctx := context.Background()
	fams, err := scrape(ctx, serve(t, collectorText))
	if err != nil {
		t.Fatal(err)
	}
	if total, found := sumFamilies(fams, "otelcol_receiver_accepted_spans"); !found || total != 9 {
		t.Errorf("sum = %v, %v; want 9, true", total, found)
	}
	if _, found := sumFamilies(fams, "otelcol_exporter_sent_spans"); found {
		t.Error("absent family reported found")
	}
	if _, err := scrape(ctx, serve(t, "not { a metric")); err == nil {
		t.Error("garbage parsed")
	}
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	if _, err := scrape(ctx, srv.URL); err == nil {
		t.Error("404 accepted")
	}
}
