package telemetry

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/metric"
)

// TestPrometheusEndpointExemplars records a histogram value inside a sampled
// span and scrapes the demo's /metrics as Prometheus does: asking for
// OpenMetrics it gets the exemplar with the span's trace ID; asking for the
// classic text format it still gets the metrics, without exemplars.
func TestPrometheusEndpointExemplars(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := lis.Addr().(*net.TCPAddr).Port
	lis.Close()
	t.Setenv("OTEL_METRICS_EXPORTER", "prometheus")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_HOST", "127.0.0.1")
	t.Setenv("OTEL_EXPORTER_PROMETHEUS_PORT", strconv.Itoa(port))
	tel, err := Start(context.Background(), "aionotel-demo")
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())

	ctx, span := tel.Tracer.Tracer("test").Start(context.Background(), "op")
	h, err := tel.Meter.Meter("test").Float64Histogram("op.duration", metric.WithUnit("s"))
	if err != nil {
		t.Fatal(err)
	}
	h.Record(ctx, 0.5)
	span.End()
	exemplar := `trace_id="` + span.SpanContext().TraceID().String() + `"`

	testCases := []struct {
		name, accept, wantType string
		wantExemplar           bool
	}{
		{name: "OpenMetrics", accept: "application/openmetrics-text;version=1.0.0", wantType: "application/openmetrics-text", wantExemplar: true},
		{name: "classic text", accept: "text/plain;version=0.0.4", wantType: "text/plain"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/metrics", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Accept", tc.accept)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.wantType) {
				t.Errorf("Content-Type %q, want %s", ct, tc.wantType)
			}
			if !strings.Contains(string(body), "op_duration_seconds_bucket") {
				t.Fatalf("no op_duration_seconds histogram in:\n%s", body)
			}
			if got := strings.Contains(string(body), exemplar); got != tc.wantExemplar {
				t.Errorf("exemplar %s present = %v, want %v:\n%s", exemplar, got, tc.wantExemplar, body)
			}
		})
	}
}
