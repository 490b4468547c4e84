package server

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// scrape fetches a Prometheus endpoint and returns the samples: the series
// (name and labels, as exposed) mapped to their value.
func scrape(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: %s", resp.Status)
	}
	samples := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape: bad sample %q", line)
		}
		samples[line[:i]] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return samples
}

// metricName returns the name part of an exposed series.
func metricName(series string) string {
	if i := strings.IndexByte(series, '{'); i >= 0 {
		return series[:i]
	}
	return series
}

// TestPrometheusEndpointServesCatalog runs the server against the Prometheus
// exporter on a free port, drains it, and scrapes the endpoint before it
// closes: every instrument of the telemetry catalog is there under the
// Prometheus name DESIGN.md lists, and every in-flight series is back at 0.
// A small pairing bound makes evictions happen, so the eviction counter
// shows up too.
func TestPrometheusEndpointServesCatalog(t *testing.T) {
	tel, err := StartTelemetry(t.Context(), TelemetryConfig{Exporter: ExporterPrometheus, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer tel.Shutdown(context.Background())
	if host, port, err := net.SplitHostPort(tel.Addr()); err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("Addr() = %q: want the bound loopback address", tel.Addr())
	}
	srv, err := New(WithMeterProvider(tel.MeterProvider()), WithTracerProvider(tel.TracerProvider()),
		WithRate(150), WithWorkers(8), WithMaxInFlight(20), WithDrainGrace(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	sum := runFor(t, srv, 2*time.Second)
	if sum.Errors != 0 {
		t.Fatalf("%d errors, first: %v", sum.Errors, sum.FirstError)
	}
	samples := scrape(t, tel.Addr())

	names := map[string]bool{}
	for series := range samples {
		names[metricName(series)] = true
	}
	want := []string{
		"aion_store_operation_duration_seconds_bucket",
		"aion_store_operation_duration_seconds_count",
		"aion_store_operation_duration_seconds_sum",
		"aion_workflows_started_total",
		"aion_workflows_completed_total",
		"aion_signals_delivered_total",
		"aion_schedules_fired_total",
		"aion_activities_dispatched_total",
		"aion_inflight_activities",
		"aion_activities_completed_total",
		"aion_activity_duration_seconds_bucket",
		"aion_activity_duration_seconds_count",
		"aion_activities_retried_total",
		"aion_activity_pairing_evicted_total",
		"aion_keyspace_operation_duration_seconds_bucket",
		"aion_keyspace_append_batch_size_bucket",
		"target_info",
	}
	if sum.Reopened > 0 {
		want = append(want, "aion_workflows_reopened_total")
	}
	for _, n := range want {
		if !names[n] {
			t.Errorf("metric %s missing from /metrics", n)
		}
	}

	inflight := 0
	for series, v := range samples {
		if metricName(series) != "aion_inflight_activities" {
			continue
		}
		inflight++
		if v != 0 {
			t.Errorf("%s = %v after the drain, want 0", series, v)
		}
	}
	if inflight < 2 {
		t.Errorf("%d aion_inflight_activities series, want one per activity type", inflight)
	}

	// Labels are the catalog's attributes, escaped.
	for _, l := range []string{`aion_namespace="default"`, `db_operation_name="append_with_outbox"`, `error_type="sequence_conflict"`, `aion_activity_outcome="cancelled"`} {
		found := false
		for series := range samples {
			if strings.Contains(series, l) {
				found = true
				break
			}
		}
		if !found {
			t.Errorf("no series with label %s", l)
		}
	}
	if !strings.Contains(strings.Join(keys(samples), "\n"), `service_name="aionotel-demo"`) {
		t.Error("target_info does not carry service_name=\"aionotel-demo\"")
	}
}

func keys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestStartTelemetryAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = StartTelemetry(t.Context(), TelemetryConfig{Exporter: ExporterPrometheus, Listen: ln.Addr().String()})
	var le *ListenError
	if !errors.As(err, &le) || !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("err = %v, want a *ListenError matching EADDRINUSE", err)
	}
	if want := "listen " + ln.Addr().String() + ": address already in use"; err.Error() != want {
		t.Errorf("message %q, want %q", err.Error(), want)
	}
}

func TestStartTelemetryStdout(t *testing.T) {
	var out bytes.Buffer
	tel, err := StartTelemetry(t.Context(), TelemetryConfig{Exporter: ExporterStdout, Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Addr() != "" {
		t.Errorf("Addr() = %q for stdout, want empty", tel.Addr())
	}
	counter, _ := tel.MeterProvider().Meter("test").Int64Counter("demo.test.count")
	counter.Add(t.Context(), 3)
	_, span := tel.TracerProvider().Tracer("test").Start(t.Context(), "demo-test-span")
	span.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"demo.test.count"`, `"demo-test-span"`, `"aionotel-demo"`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("stdout output lacks %s:\n%s", want, out.String())
		}
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

func TestParseExporter(t *testing.T) {
	testCases := []struct {
		in      string
		want    Exporter
		wantErr bool
	}{
		{"prometheus", ExporterPrometheus, false},
		{"otlp", ExporterOTLP, false},
		{"stdout", ExporterStdout, false},
		{"", "", true},
		{"Prometheus", "", true},
		{"jaeger", "", true},
	}
	for _, tc := range testCases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseExporter(tc.in)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("ParseExporter(%q) = %q, %v", tc.in, got, err)
			}
			if tc.wantErr && !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("error %v does not match ErrInvalidConfig", err)
			}
		})
	}
}

func TestNewResource(t *testing.T) {
	testCases := []struct {
		name, env, want string
	}{
		{"default", "", DefaultServiceName},
		{"from OTEL_SERVICE_NAME", "checkout-sim", "checkout-sim"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OTEL_SERVICE_NAME", tc.env)
			t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment.name=test")
			res, err := NewResource(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, kv := range res.Attributes() {
				got[string(kv.Key)] = kv.Value.Emit()
			}
			if got["service.name"] != tc.want {
				t.Errorf("service.name = %q, want %q", got["service.name"], tc.want)
			}
			if got["service.version"] == "" || got["deployment.environment.name"] != "test" || got["telemetry.sdk.language"] != "go" {
				t.Errorf("resource attributes %v", got)
			}
		})
	}
}

// TestStartTelemetryOTLP checks that the otlp pipeline builds without a
// Collector (the gRPC connection is lazy), targets the endpoint the standard
// variable names, and that Shutdown returns by its deadline when nothing
// listens there.
func TestStartTelemetryOTLP(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	tel, err := StartTelemetry(t.Context(), TelemetryConfig{Exporter: ExporterOTLP})
	if err != nil {
		t.Fatal(err)
	}
	if tel.Addr() != "" {
		t.Errorf("Addr() = %q for otlp, want empty", tel.Addr())
	}
	if got := otlpTarget(); got != "http://"+addr {
		t.Errorf("otlpTarget() = %q, want the variable's value", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_ = tel.Shutdown(ctx) // the last export fails: nothing listens
	if waited := time.Since(start); waited > 5*time.Second {
		t.Errorf("Shutdown took %s past a 300ms deadline", waited)
	}
}

func TestOTLPTargetDefault(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_INSECURE", "OTEL_EXPORTER_OTLP_METRICS_INSECURE", "OTEL_EXPORTER_OTLP_TRACES_INSECURE"} {
		t.Setenv(k, "")
	}
	if otlpEnvSet() {
		t.Fatal("otlpEnvSet() with every variable empty")
	}
	if got := otlpTarget(); !strings.HasPrefix(got, LocalOTLPEndpoint+" ") {
		t.Errorf("otlpTarget() = %q, want the local endpoint", got)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_INSECURE", "true")
	if !otlpEnvSet() {
		t.Error("otlpEnvSet() ignores OTEL_EXPORTER_OTLP_INSECURE")
	}
}
