package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/keyspace/boltstore"
	"github.com/aionotel/aionotel/keyspace/internal/demotest"
)

// TestDemoOnBolt runs the demo in-process for a second on a bbolt file, then
// reopens the file (which fails while the demo still holds it) and checks
// that it holds every transcript event the summary reports stored.
func TestDemoOnBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	run := demotest.RunClean(t, backend, path)

	// The demo must have closed the file: bbolt locks it, even against this
	// process.
	s, err := boltstore.Open(path, boltstore.WithOpenTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatalf("reopening the file after the demo: %v", err)
	}
	defer s.Close()
	run.CheckStored(t, s)
}

// TestDemoBoltOpenFails: a path bbolt cannot create fails the run with exit
// status 1 before anything starts.
func TestDemoBoltOpenFails(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "demo.db")
	demotest.CheckOpenFails(t, backend, path, "boltstore: open "+path)
}

// TestDemoBoltUsage: this build lists bolt:PATH, and still sends postgres
// to its own demo.
func TestDemoBoltUsage(t *testing.T) {
	res := demotest.CheckUsageError(t, backend, []string{"-keyspace", "postgres:postgres://u:pw@h/db"},
		"cd keyspace/pgstore && go run ./cmd/demo -keyspace postgres:",
		"where agent transcripts are kept: memory, bolt:PATH (postgres:DSN needs the demo of keyspace/pgstore)")
	if strings.Contains(res.Stderr, "pw@") {
		t.Errorf("stderr quotes the DSN:\n%s", res.Stderr)
	}
}
