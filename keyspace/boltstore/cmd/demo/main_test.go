package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/examples/demo/server"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/boltstore"
)

// recorder wraps the store the backend opened and remembers the streams
// appended to, so that the test can read them back afterwards.
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

// recording returns the main's backend with its store wrapped by rec.
func recording(rec *recorder, opened *[]string) server.Backend {
	return server.Backend{Scheme: backend.Scheme, Open: func(ctx context.Context, arg string) (keyspace.Store, io.Closer, error) {
		*opened = append(*opened, arg)
		s, c, err := backend.Open(ctx, arg)
		if err != nil {
			return s, c, err
		}
		rec.Store = s
		return rec, c, nil
	}}
}

// TestDemoOnBolt runs the demo in-process for a second on a bbolt file, then
// reopens the file (which fails while the demo still holds it) and checks
// that it holds every transcript event the summary reports stored.
func TestDemoOnBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	rec := &recorder{streams: map[keyspace.StreamKey]bool{}}
	var opened []string
	var stdout, stderr bytes.Buffer
	args := []string{"-keyspace", "bolt:" + path, "-listen", "127.0.0.1:0", "-duration", "1s", "-rate", "60", "-drain", "200ms"}
	if code := server.Command(t.Context(), args, &stdout, &stderr, recording(rec, &opened)); code != 0 {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr.String())
	}
	if len(opened) != 1 || opened[0] != path {
		t.Errorf("Open called with %q, want once with %q", opened, path)
	}
	out := stdout.String()
	if !strings.Contains(out, "keeping agent transcripts in the bolt keyspace") {
		t.Errorf("stdout lacks the keyspace banner:\n%s", out)
	}
	if strings.Contains(out, "  errors ") {
		t.Errorf("the run counted errors:\n%s", out)
	}
	reported := eventsStored(t, out)
	if reported == 0 {
		t.Fatalf("no transcript event stored in 1s:\n%s", out)
	}

	// The demo must have closed the file: bbolt locks it, even against this
	// process.
	s, err := boltstore.Open(path, boltstore.WithOpenTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatalf("reopening the file after the demo: %v", err)
	}
	defer s.Close()
	if len(rec.streams) == 0 {
		t.Fatal("no stream was appended to")
	}
	ctx := t.Context()
	var stored int64
	for key := range rec.streams {
		recs, err := s.ReadFrom(ctx, key, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range recs {
			if r.StoreSeq != uint64(i) || keyspace.KeyOf(r.Event) != key {
				t.Errorf("stream %s: record %d has seq %d, key %s", key, i, r.StoreSeq, keyspace.KeyOf(r.Event))
			}
		}
		stored += int64(len(recs))
		streams, err := s.ListStreams(ctx, key.WorkflowID, key.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if !listed(streams, key, uint64(len(recs))) {
			t.Errorf("ListStreams of %s/%s = %v lacks %s with head %d", key.WorkflowID, key.RunID, streams, key, len(recs))
		}
	}
	if stored != reported {
		t.Errorf("the file holds %d records in the streams appended to, the summary reports %d stored", stored, reported)
	}
}

func listed(streams []keyspace.StreamSummary, key keyspace.StreamKey, head uint64) bool {
	for _, st := range streams {
		if st.Key == key && st.Head == head {
			return true
		}
	}
	return false
}

// eventsStored returns the summary's count of transcript events stored.
func eventsStored(t *testing.T, out string) int64 {
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

// TestDemoBoltOpenFails: a path bbolt cannot create fails the run with exit
// status 1 before anything starts.
func TestDemoBoltOpenFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "demo.db")
	var stdout, stderr bytes.Buffer
	code := server.Command(t.Context(), []string{"-keyspace", "bolt:" + path, "-listen", "127.0.0.1:0", "-duration", "1s"}, &stdout, &stderr, backend)
	if code != 1 {
		t.Errorf("exit code %d, want 1", code)
	}
	if want := "demo: -keyspace bolt:...: cannot open the keyspace: boltstore: open " + path; !strings.HasPrefix(stderr.String(), want) {
		t.Errorf("stderr = %q, want it to begin with %q", stderr.String(), want)
	}
	if stdout.Len() != 0 {
		t.Errorf("the run started: %s", stdout.String())
	}
}

// TestDemoBoltUsage: this build lists bolt:PATH, and still sends postgres
// to its own demo.
func TestDemoBoltUsage(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := server.Command(t.Context(), []string{"-keyspace", "postgres:postgres://u:pw@h/db"}, &stdout, &stderr, backend); code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	for _, want := range []string{
		"cd keyspace/pgstore && go run ./cmd/demo -keyspace postgres:",
		"where agent transcripts are kept: memory, bolt:PATH (postgres:DSN needs the demo of keyspace/pgstore)",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "pw@") {
		t.Errorf("stderr quotes the DSN:\n%s", stderr.String())
	}
}
