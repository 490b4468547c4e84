package main

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestRunRejectsBadFlags(t *testing.T) {
	testCases := []struct {
		name string
		args []string
		want string // in stderr, besides the usage
	}{
		{"unknown exporter", []string{"-exporter", "jaeger"}, `unknown exporter "jaeger"`},
		{"negative workers", []string{"-workers", "-1"}, "-workers -1: must be at least 1"},
		{"zero workers", []string{"-workers", "0"}, "-workers 0: must be at least 1"},
		{"zero rate", []string{"-rate", "0"}, "-rate 0: must be above 0"},
		{"negative duration", []string{"-duration", "-5s"}, "-duration -5s: must not be negative"},
		{"empty listen", []string{"-listen", ""}, "-listen: an address is needed"},
		{"unknown flag", []string{"-verbose"}, "flag provided but not defined: -verbose"},
		{"malformed value", []string{"-rate", "fast"}, `invalid value "fast" for flag -rate`},
		{"positional argument", []string{"extra"}, `unexpected argument "extra"`},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(t.Context(), tc.args, &stdout, &stderr)
			if code != 2 {
				t.Errorf("exit code %d, want 2", code)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr.String())
			}
			if !strings.Contains(stderr.String(), "Usage: go run ./examples/demo [flags]") {
				t.Errorf("stderr lacks the usage:\n%s", stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout not empty: %s", stdout.String())
			}
		})
	}
}

func TestRunHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"-h"}, &stdout, &stderr); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	for _, want := range []string{"-exporter", "-listen", "-rate", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("usage lacks %s", want)
		}
	}
}

func TestRunAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"-listen", ln.Addr().String(), "-duration", "1s"}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	want := "demo: listen " + ln.Addr().String() + ": address already in use; choose another with -listen\n"
	if stderr.String() != want {
		t.Errorf("stderr = %q, want %q", stderr.String(), want)
	}
}

// TestRunPrometheus runs the demo end to end for a moment on a free port.
func TestRunPrometheus(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"-listen", "127.0.0.1:0", "-duration", "500ms", "-rate", "50", "-drain", "100ms"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"serving metrics at http://127.0.0.1:", "running 50 workflows/s on 4 workers for 500ms", "summary after"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	for _, want := range []string{`(?m)^  in flight at exit +0$`, `(?m)^  open at exit +0$`, `(?m)^  started +[1-9]`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("summary lacks /%s/:\n%s", want, out)
		}
	}
}

// TestRunStdoutExporter checks that the stdout exporter's JSON holds the
// catalog's metrics and the store spans, and that progress and summary go to
// stderr so that stdout stays JSON.
func TestRunStdoutExporter(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{"-exporter", "stdout", "-duration", "700ms", "-rate", "40", "-drain", "100ms"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{
		`"aion.store.operation.duration"`, `"aion.workflows.started"`, `"aion.activities.dispatched"`,
		`"aion.inflight_activities"`, `"aion.activities.completed"`, `"aion.keyspace.append.batch_size"`,
		`"aion.store append_with_outbox"`, `"service.name"`,
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %s", want)
		}
	}
	if !strings.Contains(stderr.String(), "summary after") {
		t.Errorf("stderr lacks the summary:\n%s", stderr.String())
	}
	if strings.Contains(stdout.String(), "summary after") {
		t.Error("the summary went to stdout, into the JSON")
	}
}

// TestRunStopsWhenCancelled is Ctrl-C: with no -duration, the demo runs until
// its context is cancelled, then drains and exits 0.
func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout := &notifyWriter{match: "running ", seen: make(chan struct{})}
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"-listen", "127.0.0.1:0", "-rate", "50", "-drain", "100ms"}, stdout, &stderr)
	}()
	select {
	case <-stdout.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("the demo did not start")
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the demo did not stop after cancellation")
	}
	out := stdout.String()
	for _, want := range []string{"until interrupted", "interrupt again to quit at once", "summary after"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

// notifyWriter is a buffer that closes seen once match has been written.
type notifyWriter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	match string
	seen  chan struct{}
	once  sync.Once
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n, err := w.buf.Write(p)
	if strings.Contains(w.buf.String(), w.match) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

func (w *notifyWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
