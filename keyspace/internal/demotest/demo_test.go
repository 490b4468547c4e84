package demotest_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/aionotel/aionotel/examples/demo/server"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/demotest"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
)

// memBackend is -keyspace mem:ARG: one keyspace.Memory, whatever ARG says,
// closed by a Closer that counts its calls.
type memBackend struct {
	mem    *keyspace.Memory
	closes int
}

func (m *memBackend) Close() error { m.closes++; return nil }

func (m *memBackend) backend() server.Backend {
	return server.Backend{Scheme: "mem", Open: func(context.Context, string) (keyspace.Store, io.Closer, error) {
		return m.mem, m, nil
	}}
}

func failingBackend(err error) server.Backend {
	return server.Backend{Scheme: "broken", Open: func(context.Context, string) (keyspace.Store, io.Closer, error) {
		return nil, nil, err
	}}
}

func TestCommandCapturesTheRun(t *testing.T) {
	res := demotest.Command(t, []string{"-keyspace", "nosuch:x"})
	if res.Code != server.ExitUsage {
		t.Errorf("exit code %d, want %d", res.Code, server.ExitUsage)
	}
	if !strings.HasPrefix(res.Stderr, "demo: invalid configuration: -keyspace nosuch:...: keyspace backend not in this build") || !strings.Contains(res.Stderr, "Usage: ") {
		t.Errorf("stderr = %q, want the error and the usage", res.Stderr)
	}
	if res.Stdout != "" {
		t.Errorf("stdout = %q, want nothing", res.Stdout)
	}
}

// TestRunCleanOnMemory runs the demo on a Memory backend, checks what
// RunClean returned, and has CheckStored check the Memory, then a Memory
// that holds nothing, where it must fail.
func TestRunCleanOnMemory(t *testing.T) {
	b := &memBackend{mem: keyspace.NewMemory()}
	run := demotest.RunClean(t, b.backend(), "anything")
	if run.Store != b.mem || run.Closer != b || b.closes != 1 {
		t.Errorf("Run.Store %p, Closer %v, closed %d times; want the backend's Memory and Closer, closed once", run.Store, run.Closer, b.closes)
	}
	if !slices.IsSortedFunc(run.Streams, func(a, b keyspace.StreamKey) int { return strings.Compare(a.String(), b.String()) }) {
		t.Errorf("Run.Streams not sorted: %v", run.Streams)
	}
	for _, key := range run.Streams {
		if head, err := b.mem.Head(t.Context(), key); err != nil || head == 0 {
			t.Errorf("stream %s in Run.Streams has head %d (%v) in the Memory", key, head, err)
		}
	}
	run.CheckStored(t, b.mem)

	failures := keyspacetest.ExpectFailure(t, func(t testing.TB) { run.CheckStored(t, keyspace.NewMemory()) })
	if !slices.ContainsFunc(failures, func(f string) bool { return strings.Contains(f, "the summary reports") }) {
		t.Errorf("CheckStored on an empty Memory reported %q, want the count mismatch", failures)
	}
}

func TestRunCleanFailsOnAFailedRun(t *testing.T) {
	failures := keyspacetest.ExpectFailure(t, func(t testing.TB) {
		demotest.RunClean(t, failingBackend(errors.New("refused")), "x")
	})
	if len(failures) != 1 || !strings.HasPrefix(failures[0], "exit code 1; stderr:\ndemo: -keyspace broken:...: cannot open the keyspace: refused") {
		t.Errorf("failures %q, want the exit code's", failures)
	}
}

func TestCheckOpenFails(t *testing.T) {
	res := demotest.CheckOpenFails(t, failingBackend(errors.New("dial tcp: refused")), "secret", "dial tcp: ")
	if strings.Contains(res.Stderr, "secret") {
		t.Errorf("stderr quotes the argument: %q", res.Stderr)
	}

	// A backend that opens: the run goes on for its second and succeeds.
	b := &memBackend{mem: keyspace.NewMemory()}
	failures := keyspacetest.ExpectFailure(t, func(t testing.TB) {
		demotest.CheckOpenFails(t, b.backend(), "x", "")
	})
	want := []string{"exit code 0, want 1", "demo: -keyspace mem:...: cannot open the keyspace: ", "the run started: "}
	for _, w := range want {
		if !slices.ContainsFunc(failures, func(f string) bool { return strings.Contains(f, w) }) {
			t.Errorf("failures %q lack %q", failures, w)
		}
	}
}

func TestCheckUsageError(t *testing.T) {
	b := &memBackend{mem: keyspace.NewMemory()}
	res := demotest.CheckUsageError(t, b.backend(), []string{"-keyspace", "bolt:/tmp/x.db"},
		"cd keyspace/boltstore && go run ./cmd/demo", "where agent transcripts are kept: memory, mem:ARG")
	if res.Stdout != "" {
		t.Errorf("stdout = %q, want nothing", res.Stdout)
	}

	failures := keyspacetest.ExpectFailure(t, func(t testing.TB) {
		demotest.CheckUsageError(t, b.backend(), []string{"-h"}, "not in the usage")
	})
	want := []string{"exit code 0, want 2", `stderr lacks "not in the usage"`}
	if len(failures) != 2 || !strings.HasPrefix(failures[0], want[0]) || !strings.HasPrefix(failures[1], want[1]) {
		t.Errorf("failures %q, want %q", failures, want)
	}
}
