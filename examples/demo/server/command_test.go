package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/keyspace"
)

func TestCommandRejectsBadFlags(t *testing.T) {
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
		{"keyspace without a colon", []string{"-keyspace", "/tmp/demo.db"}, "-keyspace: want memory, bolt:PATH or postgres:DSN"},
		{"keyspace backend without its argument", []string{"-keyspace", "bolt"}, "-keyspace bolt: needs a PATH: bolt:PATH"},
		{"keyspace with an empty argument", []string{"-keyspace", "postgres:"}, "-keyspace postgres: nothing after the colon; want postgres:DSN"},
		{"memory with an argument", []string{"-keyspace", "memory:big"}, "-keyspace memory: takes no argument"},
		{"keyspace name not a name", []string{"-keyspace", "Bolt:/tmp/x"}, "the part before the first colon is not a backend name"},
		{"bare URL", []string{"-keyspace", "postgres://u:pw@db/x"}, "a URL needs the backend name in front of it, as in -keyspace postgres:postgres://HOST/DB"},
		{"bolt in a build without it", []string{"-keyspace", "bolt:/tmp/x.db"},
			"-keyspace bolt:...: keyspace backend not in this build; the bbolt backend (a file) is in its own module, whose demo has it: cd keyspace/boltstore && go run ./cmd/demo -keyspace bolt:/tmp/demo.db"},
		{"postgres in a build without it", []string{"-keyspace", "postgres:postgres://u:pw@db/x"},
			"-keyspace postgres:...: keyspace backend not in this build; the PostgreSQL backend is in its own module, whose demo has it: cd keyspace/pgstore && go run ./cmd/demo -keyspace postgres:"},
		{"unknown keyspace backend", []string{"-keyspace", "redis:localhost:6379"},
			"-keyspace redis:...: keyspace backend not in this build (it has memory); bolt:PATH: cd keyspace/boltstore && go run ./cmd/demo -keyspace bolt:/tmp/demo.db; postgres:DSN: cd keyspace/pgstore && go run ./cmd/demo"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Command(t.Context(), tc.args, &stdout, &stderr)
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
			// A DSN's password, or any argument, is never echoed.
			if strings.Contains(stderr.String(), "pw@") || strings.Contains(stderr.String(), "6379") {
				t.Errorf("stderr quotes the -keyspace argument:\n%s", stderr.String())
			}
		})
	}
}

func TestCommandHelp(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := Command(t.Context(), []string{"-h"}, &stdout, &stderr); code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	for _, want := range []string{
		"-exporter", "-listen", "-rate", "OTEL_EXPORTER_OTLP_ENDPOINT",
		"-keyspace", "where agent transcripts are kept: memory (bolt:PATH needs the demo of keyspace/boltstore; postgres:DSN needs the demo of keyspace/pgstore)",
		"cd keyspace/boltstore && go run ./cmd/demo [flags]", "cd keyspace/pgstore && go run ./cmd/demo [flags]",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("usage lacks %s", want)
		}
	}
}

func TestCommandAddressInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var stdout, stderr bytes.Buffer
	code := Command(t.Context(), []string{"-listen", ln.Addr().String(), "-duration", "1s"}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	want := "demo: listen " + ln.Addr().String() + ": address already in use; choose another with -listen\n"
	if stderr.String() != want {
		t.Errorf("stderr = %q, want %q", stderr.String(), want)
	}
}

// TestCommandPrometheus runs the demo end to end for a moment on a free port.
func TestCommandPrometheus(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Command(t.Context(), []string{"-listen", "127.0.0.1:0", "-duration", "500ms", "-rate", "50", "-drain", "100ms"}, &stdout, &stderr)
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

// TestCommandStdoutExporter checks that the stdout exporter's JSON holds the
// catalog's metrics and the store spans, and that progress and summary go to
// stderr so that stdout stays JSON.
func TestCommandStdoutExporter(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := Command(t.Context(), []string{"-exporter", "stdout", "-duration", "700ms", "-rate", "40", "-drain", "100ms"}, &stdout, &stderr)
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

// TestCommandStopsWhenCancelled is Ctrl-C: with no -duration, the demo runs until
// its context is cancelled, then drains and exits 0.
func TestCommandStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stdout := &notifyWriter{match: "running ", seen: make(chan struct{})}
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Command(ctx, []string{"-listen", "127.0.0.1:0", "-rate", "50", "-drain", "100ms"}, stdout, &stderr)
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

// recordingStore is a keyspace backend for the tests: a keyspace.Memory that
// remembers the streams appended to, and its own Close.
type recordingStore struct {
	*keyspace.Memory
	mu           sync.Mutex
	streams      map[keyspace.StreamKey]bool
	closes       int
	appendsAfter int // AppendEvents calls after Close
	closeErr     error
}

func newRecordingStore() *recordingStore {
	return &recordingStore{Memory: keyspace.NewMemory(), streams: map[keyspace.StreamKey]bool{}}
}

func (r *recordingStore) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	head, err := r.Memory.AppendEvents(ctx, expectedSeq, events)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closes > 0 {
		r.appendsAfter++
	}
	if err == nil && len(events) > 0 {
		r.streams[keyspace.KeyOf(events[0])] = true
	}
	return head, err
}

func (r *recordingStore) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closes++
	return r.closeErr
}

// stored returns how many records the streams appended to hold, read from
// the Memory itself.
func (r *recordingStore) stored(t *testing.T) int64 {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var n int64
	for key := range r.streams {
		recs, err := r.Memory.ReadFrom(t.Context(), key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		n += int64(len(recs))
	}
	return n
}

// summaryCount returns the number of the summary row label, failing the
// test if the summary lacks it.
func summaryCount(t *testing.T, out, label string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(label) + ` +(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("summary lacks %q:\n%s", label, out)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCommandBackend runs the demo on a registered backend: it is opened with
// the argument after the first colon, the server writes the transcripts into
// it (as many records as the summary reports), and it is closed once, after
// the last append.
func TestCommandBackend(t *testing.T) {
	store := newRecordingStore()
	var opened []string
	fake := Backend{Scheme: "fake", Open: func(_ context.Context, arg string) (keyspace.Store, io.Closer, error) {
		opened = append(opened, arg)
		return store, store, nil
	}}
	var stdout, stderr bytes.Buffer
	args := []string{"-keyspace", "fake:dir/file.db:with:colons", "-listen", "127.0.0.1:0", "-duration", "1s", "-rate", "60", "-drain", "100ms"}
	if code := Command(t.Context(), args, &stdout, &stderr, fake); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	if len(opened) != 1 || opened[0] != "dir/file.db:with:colons" {
		t.Errorf("Open called with %q, want once with %q", opened, "dir/file.db:with:colons")
	}
	if store.closes != 1 || store.appendsAfter != 0 {
		t.Errorf("closed %d times, %d appends after Close; want 1 and 0", store.closes, store.appendsAfter)
	}
	out := stdout.String()
	want := regexp.MustCompile(`(?m)^keeping agent transcripts in the fake keyspace \(IDs from seed (\d+)\); workflow histories stay in memory$`)
	m := want.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("stdout lacks /%s/:\n%s", want, out)
	}
	if m[1] == strconv.Itoa(DefaultSeed) {
		t.Errorf("seed %s: without -seed, a durable keyspace gets a random seed", m[1])
	}
	reported := summaryCount(t, out, "events stored")
	if reported == 0 {
		t.Fatalf("no transcript event stored in 1s:\n%s", out)
	}
	if got := store.stored(t); got != reported {
		t.Errorf("the backend's store holds %d records in the streams appended to, the summary reports %d stored", got, reported)
	}
	if strings.Contains(out, "  errors ") {
		t.Errorf("the run counted errors:\n%s", out)
	}
}

// TestCommandKeyspaceMemory is -keyspace memory, given explicitly, with a
// backend registered that it must not touch: the transcripts are stored (in
// the server's own keyspace.Memory) and the seed stays the default one.
func TestCommandKeyspaceMemory(t *testing.T) {
	fake := Backend{Scheme: "fake", Open: func(context.Context, string) (keyspace.Store, io.Closer, error) {
		t.Error("the fake backend was opened for -keyspace memory")
		return nil, nil, errors.New("not this one")
	}}
	var stdout, stderr bytes.Buffer
	args := []string{"-keyspace", "memory", "-listen", "127.0.0.1:0", "-duration", "1s", "-rate", "60", "-drain", "100ms"}
	if code := Command(t.Context(), args, &stdout, &stderr, fake); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	if strings.Contains(out, "keeping agent transcripts") {
		t.Errorf("the memory keyspace got the durable keyspace banner:\n%s", out)
	}
	if n := summaryCount(t, out, "events stored"); n == 0 {
		t.Errorf("no transcript event stored:\n%s", out)
	}
}

// TestCommandRegisteredBackendHints checks the usage error of a backend that
// neither the build nor the registered backends have, with one registered.
func TestCommandRegisteredBackendHints(t *testing.T) {
	bolt := Backend{Scheme: "bolt", Open: func(context.Context, string) (keyspace.Store, io.Closer, error) {
		t.Error("bolt opened for redis:")
		return nil, nil, errors.New("no")
	}}
	var stdout, stderr bytes.Buffer
	if code := Command(t.Context(), []string{"-keyspace", "redis:x"}, &stdout, &stderr, bolt); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	want := "demo: invalid configuration: -keyspace redis:...: keyspace backend not in this build (it has memory, bolt); postgres:DSN: cd keyspace/pgstore && go run ./cmd/demo"
	if !strings.Contains(stderr.String(), want) {
		t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
	}
	if strings.Contains(stderr.String(), "bolt:PATH: cd keyspace/boltstore") {
		t.Errorf("the hint sends to another build for bolt, which this one has:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "where agent transcripts are kept: memory, bolt:PATH (postgres:DSN needs the demo of keyspace/pgstore)") {
		t.Errorf("the usage does not list the registered backend:\n%s", stderr.String())
	}
}

// TestCommandBackendOpenFails: a backend that cannot open its store fails the
// run (exit 1) before anything starts, and a Closer it returned is closed.
func TestCommandBackendOpenFails(t *testing.T) {
	testCases := []struct {
		name       string
		store      bool // Open returns a store (with its error)
		err        error
		wantStderr string
	}{
		{"error", false, errors.New("disk on fire"), "demo: -keyspace fake:...: cannot open the keyspace: disk on fire\n"},
		{"error with a closer", true, errors.New("half open"), "demo: -keyspace fake:...: cannot open the keyspace: half open\n"},
		{"no store", false, nil, "demo: -keyspace fake:...: cannot open the keyspace: the fake backend returned no store\n"},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecordingStore()
			fake := Backend{Scheme: "fake", Open: func(context.Context, string) (keyspace.Store, io.Closer, error) {
				if tc.store {
					return rec, rec, tc.err
				}
				return nil, rec, tc.err
			}}
			var stdout, stderr bytes.Buffer
			if code := Command(t.Context(), []string{"-keyspace", "fake:x", "-listen", "127.0.0.1:0", "-duration", "1s"}, &stdout, &stderr, fake); code != 1 {
				t.Errorf("exit code %d, want 1", code)
			}
			if stderr.String() != tc.wantStderr {
				t.Errorf("stderr = %q, want %q", stderr.String(), tc.wantStderr)
			}
			if stdout.Len() != 0 {
				t.Errorf("the run started: %s", stdout.String())
			}
			if rec.closes != 1 {
				t.Errorf("the Closer Open returned was closed %d times, want 1", rec.closes)
			}
		})
	}
}

// TestCommandBackendCloseFails: a keyspace that fails to close fails the run,
// after it has run with the given seed.
func TestCommandBackendCloseFails(t *testing.T) {
	store := newRecordingStore()
	store.closeErr = errors.New("fsync failed")
	fake := Backend{Scheme: "fake", Open: func(context.Context, string) (keyspace.Store, io.Closer, error) { return store, store, nil }}
	var stdout, stderr bytes.Buffer
	args := []string{"-keyspace", "fake:x", "-seed", "7", "-listen", "127.0.0.1:0", "-duration", "200ms", "-drain", "50ms"}
	if code := Command(t.Context(), args, &stdout, &stderr, fake); code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if want := "demo: -keyspace fake:...: close: fsync failed\n"; stderr.String() != want {
		t.Errorf("stderr = %q, want %q", stderr.String(), want)
	}
	for _, want := range []string{"in the fake keyspace (IDs from seed 7)", "summary after"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout.String())
		}
	}
}

// TestCommandInvalidBackend: an unusable Backend is the program's error, not
// the user's: exit 1 before the flags are even parsed.
func TestCommandInvalidBackend(t *testing.T) {
	open := func(context.Context, string) (keyspace.Store, io.Closer, error) {
		return keyspace.NewMemory(), nil, nil
	}
	var stdout, stderr bytes.Buffer
	code := Command(t.Context(), []string{"-h"}, &stdout, &stderr, Backend{Scheme: "memory", Open: open}, Backend{Scheme: "x"})
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	for _, want := range []string{`demo: invalid keyspace Backend: backend 0: Scheme "memory" is built in`, `backend 1 ("x"): nil Open`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "Usage:") {
		t.Errorf("a program error printed the usage:\n%s", stderr.String())
	}
}
