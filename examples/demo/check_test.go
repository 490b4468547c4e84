package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

func TestInFlightFoldsByThePairingRules(t *testing.T) {
	r1, r2 := eventstore.NewRunID(), eventstore.NewRunID()
	e1, e2 := eventstore.Envelope{RunID: r1}, eventstore.Envelope{RunID: r2}
	sched := func(env eventstore.Envelope, id eventstore.ActivityID, typ string) eventstore.Event {
		return eventstore.ActivityScheduled{Envelope: env, ActivityID: id, ActivityType: typ}
	}
	testCases := []struct {
		name   string
		events []eventstore.Event
		want   map[string]int
	}{
		{"dispatched, not settled", []eventstore.Event{eventstore.WorkflowStarted{Envelope: e1}, sched(e1, 0, "charge"), sched(e1, 1, "ship")},
			map[string]int{"charge": 1, "ship": 1}},
		{"a repeat counts once", []eventstore.Event{sched(e1, 0, "charge"), sched(e1, 0, "charge")}, map[string]int{"charge": 1}},
		{"settled by each terminal", []eventstore.Event{sched(e1, 0, "a"), sched(e1, 1, "b"), sched(e1, 2, "c"), sched(e1, 3, "d"),
			eventstore.ActivityCompleted{Envelope: e1, ActivityID: 0},
			eventstore.ActivityFailed{Envelope: e1, ActivityID: 1, Error: eventstore.ActivityError{Kind: eventstore.Terminal}},
			eventstore.ActivityCancelled{Envelope: e1, ActivityID: 2}, eventstore.ActivityTimedOut{Envelope: e1, ActivityID: 3}},
			map[string]int{}},
		{"a retryable failure settles nothing", []eventstore.Event{sched(e1, 0, "a"),
			eventstore.ActivityFailed{Envelope: e1, ActivityID: 0, Error: eventstore.ActivityError{Kind: eventstore.Retryable}}},
			map[string]int{"a": 1}},
		{"the run's close abandons, a reopen does not revive", []eventstore.Event{sched(e1, 0, "a"),
			eventstore.WorkflowFailed{Envelope: e1}, eventstore.WorkflowReopened{Envelope: e1}, sched(e1, 1, "b")},
			map[string]int{"b": 1}},
		{"a terminal of another run settles nothing here", []eventstore.Event{sched(e1, 0, "a"),
			eventstore.WorkflowContinuedAsNew{Envelope: e1, NewRunID: r2}, eventstore.WorkflowStarted{Envelope: e2},
			sched(e2, 0, "a"), eventstore.ActivityCompleted{Envelope: e1, ActivityID: 0}},
			map[string]int{"a": 1}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got := inFlight(tc.events)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("inFlight = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScrapeSumsTheGaugeByType(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `# HELP aion_inflight_activities x
# TYPE aion_inflight_activities gauge
aion_inflight_activities{aion_activity_type="charge",aion_namespace="a",otel_scope_name="x"} 2
aion_inflight_activities{aion_activity_type="charge",aion_namespace="b",otel_scope_name="x"} 1
aion_inflight_activities{aion_activity_type="say \"hi\"",aion_namespace="a"} 4 1700000000000
aion_inflight_activities_other{aion_activity_type="charge"} 100
aion_activities_completed_total{aion_activity_type="charge"} 100
`)
	}))
	defer srv.Close()
	for _, node := range []string{strings.TrimPrefix(srv.URL, "http://"), srv.URL, srv.URL + "/metrics"} {
		got, err := scrape(t.Context(), node)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]float64{"charge": 3, `say "hi"`: 4}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("scrape(%q) = %v, want %v", node, got, want)
		}
	}
	if _, err := scrape(t.Context(), srv.URL+"/nothing"); err == nil {
		t.Error("scrape of a 404: no error")
	}
}

func TestCheckReadingAgrees(t *testing.T) {
	testCases := []struct {
		name          string
		hist          map[string]int
		before, after map[string]float64
		frozen        bool
		agree         bool
	}{
		{"frozen, equal", map[string]int{"a": 2}, map[string]float64{"a": 2}, map[string]float64{"a": 2}, true, true},
		{"frozen, between is not enough", map[string]int{"a": 2}, map[string]float64{"a": 3}, map[string]float64{"a": 1}, true, false},
		{"equal", map[string]int{"a": 2}, map[string]float64{"a": 2}, map[string]float64{"a": 2}, false, true},
		{"between two readings", map[string]int{"a": 2}, map[string]float64{"a": 3}, map[string]float64{"a": 1}, false, true},
		{"outside both", map[string]int{"a": 5}, map[string]float64{"a": 3}, map[string]float64{"a": 1}, false, false},
		{"a type only the gauges have", map[string]int{}, map[string]float64{"b": 1}, map[string]float64{"b": 1}, false, false},
		{"a type only the histories have", map[string]int{"c": 1}, nil, nil, false, false},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			r := checkReading{histories: tc.hist, before: []map[string]float64{tc.before}, after: []map[string]float64{tc.after}, frozen: tc.frozen}
			if got := r.agree(); got != tc.agree {
				t.Errorf("agree = %v, want %v", got, tc.agree)
			}
		})
	}
}

func TestCheckBadArgumentsExit2(t *testing.T) {
	for _, args := range [][]string{{}, {"127.0.0.1:9464"}, {"-store", "memory", "127.0.0.1:9464"}, {"-store", "postgres:x"},
		{"-store", "postgres:x", "-tries", "0", "127.0.0.1:9464"}, {"-nope"}} {
		var stdout, stderr strings.Builder
		if code := run(t.Context(), append([]string{"check"}, args...), &stdout, &stderr); code != 2 {
			t.Errorf("demo check %q: exit %d, want 2\nstderr: %s", args, code, stderr.String())
		}
	}
}

// TestCheckAgreesWithALiveNode runs a cluster node on PostgreSQL and,
// while it runs, `demo check` against its store and its endpoint: the
// histories and the gauge agree, and the table says so.
func TestCheckAgreesWithALiveNode(t *testing.T) {
	isolateEnv(t)
	dsn := clusterDSN(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	nodeCtx, stopNode := context.WithCancel(t.Context())
	defer stopNode()
	nodeDone := make(chan string)
	go func() {
		var out, errs strings.Builder
		code := run(nodeCtx, []string{"-store", "postgres:" + dsn, "-node", "a", "-shards", "4", "-listen", addr,
			"-rate", "5", "-duration", "60s", "-drain", "200ms"}, &out, &errs)
		nodeDone <- fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errs.String())
	}()
	// Wait until the node serves its metrics and has work in flight.
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := scrape(t.Context(), addr)
		total := 0.0
		for _, v := range m {
			total += v
		}
		if err == nil && total > 0 {
			break
		}
		if time.Now().After(deadline) {
			stopNode()
			t.Fatalf("the node never showed an activity in flight (last error %v)\n%s", err, <-nodeDone)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, tc := range []struct {
		args []string
		how  string
	}{
		{nil, "the appends held while they were read"},
		{[]string{"-freeze=false"}, "read while the workload moved"},
	} {
		var stdout, stderr strings.Builder
		args := append([]string{"check", "-store", "postgres:" + dsn, "-tries", "30"}, tc.args...)
		code := run(t.Context(), append(args, addr), &stdout, &stderr)
		out := stdout.String()
		if code != 0 || !strings.Contains(out, "agree: the gauges of 1 nodes") || !strings.Contains(out, tc.how) ||
			!strings.Contains(out, "activity type") || !strings.Contains(out, "total") {
			stopNode()
			t.Fatalf("demo %q: exit %d\nstdout:\n%s\nstderr:\n%s\nnode: %s", args, code, out, stderr.String(), <-nodeDone)
		}
		t.Logf("demo %q:\n%s", args, out)
	}
	stopNode()
	<-nodeDone
}
