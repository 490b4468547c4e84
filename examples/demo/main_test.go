package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// isolateEnv makes run's changes to the exporter variables undone after the
// test, and starts from a known environment.
func isolateEnv(t *testing.T, kv ...string) {
	t.Helper()
	for _, k := range []string{"OTEL_METRICS_EXPORTER", "OTEL_TRACES_EXPORTER", "OTEL_METRIC_EXPORT_INTERVAL",
		"OTEL_EXPORTER_PROMETHEUS_HOST", "OTEL_EXPORTER_PROMETHEUS_PORT", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_INSECURE",
		"OTEL_LOGS_EXPORTER", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"} {
		t.Setenv(k, "")
	}
	for i := 0; i+1 < len(kv); i += 2 {
		t.Setenv(kv[i], kv[i+1])
	}
}

// runBounded runs the demo, failing the test if it has not returned within
// bound.
func runBounded(t *testing.T, bound time.Duration, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	done := make(chan int, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { done <- run(ctx, args, &stdout, &stderr) }()
	select {
	case code := <-done:
		return code, stdout.String(), stderr.String()
	case <-time.After(bound):
		cancel()
		<-done
		t.Fatalf("demo %q still running after %s\nstdout:\n%s\nstderr:\n%s", args, bound, &stdout, &stderr)
		return 0, "", ""
	}
}

// TestBadFlagsExit2 checks that every bad flag is a usage error that names
// it, before anything starts.
func TestBadFlagsExit2(t *testing.T) {
	testCases := []struct {
		name string
		args []string
		want string
	}{
		{"unknown flag", []string{"-nope"}, "nope"},
		{"exporter", []string{"-exporter", "jaeger"}, "-exporter"},
		{"keyspace scheme", []string{"-keyspace", "redis:x"}, "-keyspace"},
		{"keyspace without path", []string{"-keyspace", "bolt:"}, "-keyspace"},
		{"rate zero", []string{"-rate", "0"}, "-rate"},
		{"rate NaN", []string{"-rate", "NaN"}, "-rate"},
		{"workers negative", []string{"-workers", "-1"}, "-workers"},
		{"workers too many", []string{"-workers", "1025"}, "-workers"},
		{"run timeout zero", []string{"-run-timeout", "0s"}, "-run-timeout"},
		{"max-inflight", []string{"-max-inflight", "-1"}, "-max-inflight"},
		{"negative duration", []string{"-duration", "-1s"}, "-duration"},
		{"listen", []string{"-listen", "nocolon"}, "-listen"},
		{"argument", []string{"extra"}, "unexpected"},
		{"store scheme", []string{"-store", "redis:x"}, "-store"},
		{"store without DSN", []string{"-store", "postgres:"}, "-store"},
		{"node of the memory store", []string{"-node", "a"}, "need -store postgres:DSN"},
		{"shards of the memory store", []string{"-shards", "4"}, "need -store postgres:DSN"},
		{"negative shards", []string{"-store", "postgres:x", "-shards", "-1"}, "-shards"},
		{"renewal too slow", []string{"-store", "postgres:x", "-lease", "2s", "-renew", "1500ms"}, "renewing at least twice per lease"},
		{"zero lease", []string{"-store", "postgres:x", "-lease", "0s"}, "-lease"},
		{"renewal overflowing twice", []string{"-store", "postgres:x", "-lease", "4s", "-renew", "2562047h"}, "renewing at least twice per lease"},
		{"renewal of 1ns", []string{"-store", "postgres:x", "-lease", "4s", "-renew", "1ns"}, "renewal interval of at least"},
		{"lease too long", []string{"-store", "postgres:x", "-lease", "1000h"}, "want a lease from"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			isolateEnv(t)
			code, _, stderr := runBounded(t, 10*time.Second, tc.args...)
			if code != 2 || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want 2 and %q", code, stderr, tc.want)
			}
		})
	}
}

// TestListenInUseExits1 checks that an address already in use ends the
// demo with status 1 and says so.
func TestListenInUseExits1(t *testing.T) {
	isolateEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, _, stderr := runBounded(t, 10*time.Second, "-listen", ln.Addr().String(), "-duration", "1s")
	if code != 1 || !strings.Contains(stderr, "address already in use") || !strings.Contains(stderr, ln.Addr().String()) {
		t.Errorf("exit %d, stderr %q; want 1 naming the address in use", code, stderr)
	}
}

// TestShutdownBoundedWithUnreachableOTLP is issue 12 item 7: with the OTLP
// endpoint unreachable (a loopback port reserved and closed), the demo
// still ends within the drain plus the flush bound, exits 0 and says what
// it could not flush.
func TestShutdownBoundedWithUnreachableOTLP(t *testing.T) {
	for _, protocol := range []string{"grpc", "http/protobuf"} {
		t.Run(protocol, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			addr := ln.Addr().String()
			ln.Close()
			isolateEnv(t, "OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr, "OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			const duration, drain = time.Second, 200 * time.Millisecond
			code, stdout, stderr := runBounded(t, duration+drain+flushTimeout+2*time.Second,
				"-exporter", "otlp", "-duration", duration.String(), "-drain", drain.String())
			if code != 0 {
				t.Errorf("exit %d, want 0", code)
			}
			if !strings.Contains(stderr, "telemetry: metrics not flushed: ") {
				t.Errorf("stderr %q does not say what was not flushed", stderr)
			}
			if !strings.Contains(stdout, "summary after ") {
				t.Errorf("no summary in %q", stdout)
			}
		})
	}
}

// TestKeyspaceBolt runs the demo with -keyspace bolt: on a temporary file.
func TestKeyspaceBolt(t *testing.T) {
	isolateEnv(t)
	path := filepath.Join(t.TempDir(), "k.db")
	code, stdout, stderr := runBounded(t, 20*time.Second, "-exporter", "none", "-keyspace", "bolt:"+path, "-duration", "1s", "-drain", "100ms")
	if code != 0 || !strings.Contains(stdout, "keyspace bolt") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		t.Fatalf("bolt file: %v", err)
	}
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "transcript.events" && f[1] == "0" {
			t.Errorf("no transcript event written: %s", stdout)
		}
	}
}

// TestInterruptDrains stops the demo as the first signal does: it drains,
// prints the summary and exits 0 within the drain and flush bounds.
func TestInterruptDrains(t *testing.T) {
	isolateEnv(t)
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"-exporter", "none", "-drain", "300ms"}, &stdout, &stderr) }()
	cancel()
	select {
	case code := <-done:
		if code != 0 || !strings.Contains(stdout.String(), "summary after ") {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &stdout, &stderr)
		}
	case <-time.After(300*time.Millisecond + flushTimeout + 2*time.Second):
		t.Fatalf("still running after the interrupt\nstdout:\n%s", &stdout)
	}
}

// TestOTLPDefaultsToLoopbackCollector checks that -exporter otlp with no
// endpoint reaches the Collector of collector-config.yaml without TLS, and
// that an endpoint or TLS setting of the user's is left alone.
func TestOTLPDefaultsToLoopbackCollector(t *testing.T) {
	testCases := []struct {
		name     string
		exporter string
		env      []string
		want     string
	}{
		{"http/protobuf by default", "otlp", nil, "http://127.0.0.1:4318"},
		{"grpc", "otlp", []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, "http://127.0.0.1:4317"},
		{"endpoint given", "otlp", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "https://collector:4318"}, "https://collector:4318"},
		{"insecure given", "otlp", []string{"OTEL_EXPORTER_OTLP_INSECURE", "false"}, ""},
		{"prometheus", "prometheus", nil, ""},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			isolateEnv(t, tc.env...)
			configureEnv(options{exporter: tc.exporter, listen: "127.0.0.1:9464"}, map[string]bool{"exporter": true})
			if got := os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); got != tc.want {
				t.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDBSystemOfKeyspace(t *testing.T) {
	for spec, want := range map[string]string{"memory": "", "bolt:k.db": "", "postgres:postgres://x@h/db": "postgresql"} {
		if got := dbSystem(spec); got != want {
			t.Errorf("dbSystem(%q) = %q, want %q", spec, got, want)
		}
	}
}

// TestOTLPHTTPProtobuf checks that autoexport's variables are honoured: with
// OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf the demo posts protobuf metrics
// and spans to the OTLP/HTTP paths of the endpoint it is given.
func TestOTLPHTTPProtobuf(t *testing.T) {
	var mu sync.Mutex
	got := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && r.Header.Get("Content-Type") == "application/x-protobuf" && len(body) > 0 {
			mu.Lock()
			got[r.URL.Path]++
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	isolateEnv(t, "OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL, "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf",
		"OTEL_METRIC_EXPORT_INTERVAL", "200")
	code, _, stderr := runBounded(t, 20*time.Second, "-exporter", "otlp", "-duration", "1s", "-drain", "200ms")
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if got["/v1/metrics"] == 0 || got["/v1/traces"] == 0 || got["/v1/logs"] == 0 {
		t.Errorf("protobuf posts by path = %v, want /v1/metrics, /v1/traces and /v1/logs", got)
	}
}

// tokenLine is the format of the token totals the pipeline's end-to-end
// test parses; it must not change.
var tokenLine = regexp.MustCompile(`^demo: gen_ai tokens model=(\S+) type=(input|output|cache_read|cache_creation|reasoning) total=([0-9]+)$`)

// TestPrintsTokenTotals checks that the demo ends with one line per request
// model and token type of the tokens it committed, in the exact format the
// pipeline test reads.
func TestPrintsTokenTotals(t *testing.T) {
	isolateEnv(t)
	code, stdout, stderr := runBounded(t, 20*time.Second, "-exporter", "none", "-duration", "1s", "-drain", "300ms")
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(stdout, "\n") {
		if !strings.HasPrefix(line, "demo: gen_ai tokens") {
			continue
		}
		m := tokenLine.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("token line %q is not in the format %s", line, tokenLine)
			continue
		}
		if seen[m[1]+" "+m[2]] || (m[2] == "input" || m[2] == "output") && m[3] == "0" {
			t.Errorf("token line %q repeats a model and type, or counts no input or output", line)
		}
		seen[m[1]+" "+m[2]] = true
	}
	if len(seen) == 0 || len(seen)%5 != 0 {
		t.Errorf("token lines for %v, want the five types of each model:\n%s", seen, stdout)
	}
}
