package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// clusterDSN returns a DSN reaching a schema of the test's own in the
// database of AIONOTEL_POSTGRES_DSN (dropped after the test), or ends the
// test: a skip saying how to get one, or a failure when CI is set.
func clusterDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("AIONOTEL_POSTGRES_DSN")
	if dsn == "" {
		const hint = "start one with `source .ci/postgres.sh` from the repository root"
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("AIONOTEL_POSTGRES_DSN is not set (CI is set, so this is a failure); %s", hint)
		}
		t.Skipf("AIONOTEL_POSTGRES_DSN is not set; %s", hint)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("AIONOTEL_POSTGRES_DSN is not a URL: %v", err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "aionotel_demo_main_" + hex.EncodeToString(b[:])
	exec := func(ctx context.Context, sql string) {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	exec(t.Context(), "CREATE SCHEMA "+schema)
	t.Cleanup(func() { exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE") })
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// TestClusterNodeRuns runs two demo nodes on one PostgreSQL database for
// a few seconds: each joins, takes its share of the shards, runs its
// workload there, drains, releases its shards and leaves, exiting 0.
func TestClusterNodeRuns(t *testing.T) {
	isolateEnv(t)
	dsn := clusterDSN(t)
	type result struct {
		code           int
		stdout, stderr string
	}
	results := make(chan result, 2)
	for _, node := range []string{"a", "b"} {
		go func() {
			code, stdout, stderr := runBounded(t, 40*time.Second, "-exporter", "none", "-store", "postgres:"+dsn, "-node", node,
				"-shards", "8", "-lease", "2s", "-renew", "200ms", "-duration", "4s", "-drain", "500ms")
			results <- result{code, stdout, stderr}
		}()
	}
	for range 2 {
		r := <-results
		if r.code != 0 {
			t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
			continue
		}
		for _, want := range []string{": service.instance.id=", "8 shards, leases of 2s renewed every 200ms", ": acquired shards [",
			"released its shards and left the cluster", "summary after "} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
			}
		}
		for _, line := range strings.Split(r.stdout, "\n") {
			if f := strings.Fields(line); len(f) == 2 && f[0] == "workflows.started" && f[1] == "0" {
				t.Errorf("a node started no workflow:\n%s", r.stdout)
			}
		}
	}
}

// TestClusterStoreUnreachable checks that a -store nobody answers ends the
// demo with status 1, without quoting the DSN (it may hold a password).
func TestClusterStoreUnreachable(t *testing.T) {
	isolateEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	dsn := "postgres://someone:s3cret@" + addr + "/db?connect_timeout=2"
	code, stdout, stderr := runBounded(t, 20*time.Second, "-exporter", "none", "-store", "postgres:"+dsn, "-duration", "1s")
	if code != 1 || !strings.Contains(stderr, "-store postgres: ") || strings.Contains(stdout+stderr, "s3cret") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant 1, an error naming -store and no password", code, stdout, stderr)
	}
}

// TestClusterNodeFindsAFreePort starts a node without -listen while
// 127.0.0.1:9464 is taken (by the test, or by whatever already has it): a
// second node on a host gets a Prometheus port of its own.
func TestClusterNodeFindsAFreePort(t *testing.T) {
	isolateEnv(t)
	dsn := clusterDSN(t)
	if ln, err := net.Listen("tcp", "127.0.0.1:9464"); err == nil {
		defer ln.Close()
	}
	code, stdout, stderr := runBounded(t, 30*time.Second, "-store", "postgres:"+dsn, "-node", "p", "-duration", "1s", "-drain", "100ms")
	if code != 0 || !strings.Contains(stdout, "metrics at http://127.0.0.1:") || strings.Contains(stdout, "127.0.0.1:9464/metrics") {
		t.Errorf("exit %d\nstdout:\n%s\nstderr:\n%s\nwant 0 and metrics on another port than 9464", code, stdout, stderr)
	}
}
