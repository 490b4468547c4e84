package demotest

import (
	"bytes"
	"context"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/aionotel/aionotel/examples/demo/server"
	"github.com/aionotel/aionotel/keyspace"
)

// Result is what one in-process run of the demo command returned and
// printed.
type Result struct {
	Code           int // the exit status
	Stdout, Stderr string
}

// Command runs the demo command in-process, server.Command with args (the
// flags) and backends, on t's context, and returns its exit status and
// output.
func Command(t testing.TB, args []string, backends ...server.Backend) Result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := server.Command(t.Context(), args, &stdout, &stderr, backends...)
	return Result{Code: code, Stdout: stdout.String(), Stderr: stderr.String()}
}

// Run is what a clean run of the demo on a durable backend left for the
// test to check.
type Run struct {
	Result
	// Store and Closer are what the backend's Open returned; the demo used
	// Store wrapped, to see which streams it appended to, and has closed
	// Closer.
	Store  keyspace.Store
	Closer io.Closer
	// Streams are the streams the run appended to, sorted by their String
	// form.
	Streams []keyspace.StreamKey
	// Stored is the count of transcript events stored that the summary
	// reports.
	Stored int64
}

// RunClean runs the demo for a second, at 60 workflows per second, on
// backend opened with arg (-keyspace SCHEME:arg; the Prometheus endpoint on
// a free port). The run must exit with status 0, open the backend exactly
// once, with arg, announce the keyspace in its banner, count no errors, and
// store at least one transcript event in at least one stream; the test
// fails otherwise, and stops where what follows would make no sense (a
// failed run, nothing stored).
func RunClean(t testing.TB, backend server.Backend, arg string) Run {
	t.Helper()
	rec := &recorder{streams: map[keyspace.StreamKey]bool{}}
	var opened []string
	var run Run
	wrapped := server.Backend{Scheme: backend.Scheme, Open: func(ctx context.Context, arg string) (keyspace.Store, io.Closer, error) {
		opened = append(opened, arg)
		s, c, err := backend.Open(ctx, arg)
		if err != nil {
			return s, c, err
		}
		rec.Store, run.Store, run.Closer = s, s, c
		return rec, c, nil
	}}
	args := []string{"-keyspace", backend.Scheme + ":" + arg, "-listen", "127.0.0.1:0", "-duration", "1s", "-rate", "60", "-drain", "200ms"}
	run.Result = Command(t, args, wrapped)
	if run.Code != server.ExitOK {
		t.Fatalf("exit code %d; stderr:\n%s", run.Code, run.Stderr)
	}
	if len(opened) != 1 || opened[0] != arg {
		// The argument may be a DSN holding a password: not quoted.
		t.Errorf("the backend was opened %d times (the first with the -keyspace argument: %v), want once with it", len(opened), len(opened) > 0 && opened[0] == arg)
	}
	if want := "keeping agent transcripts in the " + backend.Scheme + " keyspace"; !strings.Contains(run.Stdout, want) {
		t.Errorf("stdout lacks the keyspace banner %q:\n%s", want, run.Stdout)
	}
	if strings.Contains(run.Stdout, "  errors ") {
		t.Errorf("the run counted errors:\n%s", run.Stdout)
	}
	run.Stored = eventsStored(t, run.Stdout)
	if run.Stored == 0 {
		t.Fatalf("no transcript event stored in 1s:\n%s", run.Stdout)
	}
	run.Streams = rec.keys()
	if len(run.Streams) == 0 {
		t.Fatal("no stream was appended to")
	}
	return run
}

// CheckStored checks s, a store on the keyspace the run wrote (opened after
// the run), against the run: each stream the run appended to must hold
// records at store seqs 0, 1, ... of its own key, and be listed by
// ListStreams with its head; together they must hold as many records as the
// summary reports stored.
func (r Run) CheckStored(t testing.TB, s keyspace.Store) {
	t.Helper()
	ctx := t.Context()
	var stored int64
	for _, key := range r.Streams {
		recs, err := s.ReadFrom(ctx, key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, rec := range recs {
			if rec.StoreSeq != uint64(i) || keyspace.KeyOf(rec.Event) != key {
				t.Errorf("stream %s: record %d has seq %d, key %s", key, i, rec.StoreSeq, keyspace.KeyOf(rec.Event))
			}
		}
		stored += int64(len(recs))
		streams, err := s.ListStreams(ctx, key.WorkflowID, key.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(streams, keyspace.StreamSummary{Key: key, Head: uint64(len(recs))}) {
			t.Errorf("ListStreams of %s/%s = %v lacks %s with head %d", key.WorkflowID, key.RunID, streams, key, len(recs))
		}
	}
	if stored != r.Stored {
		t.Errorf("the keyspace holds %d records in the streams appended to, the summary reports %d stored", stored, r.Stored)
	}
}

// CheckOpenFails runs the demo with -keyspace SCHEME:arg, for a backend
// whose Open fails on arg, and checks that the run fails before it starts:
// exit status 1, nothing on stdout, and stderr beginning
// "demo: -keyspace SCHEME:...: cannot open the keyspace: " followed by
// detail. It returns the result for checks of the backend's own.
func CheckOpenFails(t testing.TB, backend server.Backend, arg, detail string) Result {
	t.Helper()
	res := Command(t, []string{"-keyspace", backend.Scheme + ":" + arg, "-listen", "127.0.0.1:0", "-duration", "1s"}, backend)
	if res.Code != server.ExitError {
		t.Errorf("exit code %d, want %d", res.Code, server.ExitError)
	}
	if want := "demo: -keyspace " + backend.Scheme + ":...: cannot open the keyspace: " + detail; !strings.HasPrefix(res.Stderr, want) {
		t.Errorf("stderr = %q, want it to begin with %q", res.Stderr, want)
	}
	if res.Stdout != "" {
		t.Errorf("the run started: %s", res.Stdout)
	}
	return res
}

// CheckUsageError runs the demo with args and backend and checks that it
// refuses them as a usage error: exit status 2, with every one of wants in
// stderr. It returns the result for checks of the backend's own.
func CheckUsageError(t testing.TB, backend server.Backend, args []string, wants ...string) Result {
	t.Helper()
	res := Command(t, args, backend)
	if res.Code != server.ExitUsage {
		t.Errorf("exit code %d, want %d", res.Code, server.ExitUsage)
	}
	for _, want := range wants {
		if !strings.Contains(res.Stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, res.Stderr)
		}
	}
	return res
}

// eventsStored returns the summary's count of transcript events stored.
func eventsStored(t testing.TB, out string) int64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  events stored +(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary in:\n%s", out)
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// recorder wraps the store the backend opened and remembers the streams
// appended to.
type recorder struct {
	keyspace.Store
	mu      sync.Mutex
	streams map[keyspace.StreamKey]bool
}

func (r *recorder) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	head, err := r.Store.AppendEvents(ctx, expectedSeq, events)
	if err == nil && len(events) > 0 {
		r.mu.Lock()
		r.streams[keyspace.KeyOf(events[0])] = true
		r.mu.Unlock()
	}
	return head, err
}

// keys returns the streams appended to, sorted by their text.
func (r *recorder) keys() []keyspace.StreamKey {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]keyspace.StreamKey, 0, len(r.streams))
	for k := range r.streams {
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b keyspace.StreamKey) int { return strings.Compare(a.String(), b.String()) })
	return out
}
