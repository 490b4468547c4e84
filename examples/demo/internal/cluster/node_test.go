package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// requireDSN returns AIONOTEL_POSTGRES_DSN or ends the test: a skip saying
// how to get one, or a failure when CI is set.
func requireDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("AIONOTEL_POSTGRES_DSN")
	if dsn != "" {
		return dsn
	}
	const hint = "start one with `source .ci/postgres.sh` from the repository root"
	if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
		t.Fatalf("AIONOTEL_POSTGRES_DSN is not set (CI is set, so this is a failure); %s", hint)
	}
	t.Skipf("AIONOTEL_POSTGRES_DSN is not set; %s", hint)
	return ""
}

// schemaDSN creates a schema of the test's own and returns the DSN that
// reaches it; the schema is dropped after the test.
func schemaDSN(t *testing.T) string {
	t.Helper()
	dsn := requireDSN(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("AIONOTEL_POSTGRES_DSN is not a URL: %v", err)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "aionotel_demo_cluster_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), dsn)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Error(err)
		}
	})
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// fakeClock is the shared clock of leases and heartbeats.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

const (
	testLease = 10 * time.Second
	testRenew = time.Second
	testGrace = 2 * time.Second
)

// life is one process of a node: the node, its decorated store and the
// decorator's telemetry.
type life struct {
	t        *testing.T
	node     *Node
	served   eventstore.Store
	reader   *sdkmetric.ManualReader
	reports  chan pairing.ResumeReport
	log      *logLines
	received int // resume reports taken
	mu       sync.Mutex
	handed   []eventstore.WorkflowID // what recover was given
}

// logLines keeps a node's log, counting its acquisitions: each is resumed
// once by the decorator.
type logLines struct {
	mu       sync.Mutex
	lines    []string
	acquired int
}

func (w *logLines) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, string(p))
	if strings.Contains(string(p), ": acquired shards ") {
		w.acquired++
	}
	return len(p), nil
}

func (w *logLines) acquisitions() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.acquired
}

type cluster struct {
	t     *testing.T
	dsn   string
	clock *fakeClock
	wfs   []eventstore.WorkflowID // the test's workflows, each with one activity
	open  map[eventstore.WorkflowID]bool
}

func (c *cluster) life(name, instance string) *life {
	c.t.Helper()
	log := &logLines{}
	n, err := Open(c.t.Context(), c.dsn, Config{Node: name, Shards: 16, Lease: testLease, Renew: testRenew, Grace: testGrace,
		Instance: instance, Now: c.clock.Now, Log: log})
	if err != nil {
		c.t.Fatal(err)
	}
	l := &life{t: c.t, node: n, log: log, reader: sdkmetric.NewManualReader(), reports: make(chan pairing.ResumeReport, 64)}
	c.t.Cleanup(func() {
		if c.t.Failed() {
			c.t.Logf("node %s (%s) log:\n%s", name, instance, strings.Join(log.lines, ""))
		}
	})
	l.served, err = otelstore.New(n.Store(),
		otelstore.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(l.reader))),
		otelstore.WithTracerProvider(tracenoop.NewTracerProvider()),
		otelstore.WithResumeReports(func(r pairing.ResumeReport, err error) {
			// A resume still reading when its node closes the store ends
			// with ErrClosed: cut short by the node's own exit, not lost.
			if err != nil && !errors.Is(err, pgstore.ErrClosed) {
				c.t.Errorf("node %s: resume: %v", name, err)
			}
			l.reports <- r
		}))
	if err != nil {
		c.t.Fatal(err)
	}
	return l
}

// start joins the cluster; recover records the test's open workflows it
// is handed.
func (c *cluster) start(l *life) error {
	return l.node.Start(c.t.Context(), l.served, func(_ context.Context, in func(eventstore.WorkflowID) bool) (int, int, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		n := 0
		for _, wf := range c.wfs {
			if c.open[wf] && in(wf) {
				l.handed = append(l.handed, wf)
				n++
			}
		}
		return n, n, nil
	})
}

func (l *life) tick(balance bool) {
	l.t.Helper()
	if err := l.node.Tick(l.t.Context(), balance); err != nil {
		l.t.Fatalf("node %s: %v", l.node.Name(), err)
	}
	l.node.going.Wait()
}

// resumed waits until the decorator has resumed every acquisition so far.
func (l *life) resumed() {
	l.t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for l.received < l.log.acquisitions() {
		select {
		case <-l.reports:
			l.received++
		case <-deadline.C:
			l.t.Fatalf("node %s: %d acquisitions, %d resumes reported", l.node.Name(), l.log.acquisitions(), l.received)
		}
	}
}

// sum returns the sum of a counter or up-down counter of the decorator.
func (l *life) sum(name string) int64 {
	l.t.Helper()
	var rm metricdata.ResourceMetrics
	if err := l.reader.Collect(context.Background(), &rm); err != nil {
		l.t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if d, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range d.DataPoints {
					n += p.Value
				}
			}
		}
	}
	return n
}

func (l *life) inFlight() int64 { return l.sum("aion.inflight_activities") }

// dispatch starts a workflow in a shard of l's node with one activity in
// flight, through l's decorator.
func (c *cluster) dispatch(l *life) eventstore.WorkflowID {
	c.t.Helper()
	wf, ok := l.node.NewWorkflowID()
	if !ok {
		c.t.Fatalf("node %s serves no shard", l.node.Name())
	}
	run := eventstore.NewRunID()
	env := eventstore.Envelope{RunID: run}
	err := l.node.Append(wf, func() error {
		return l.served.Append(c.t.Context(), eventstore.RecorderToken(), wf, []eventstore.Event{
			eventstore.WorkflowStarted{Envelope: env, WorkflowType: "order"},
			eventstore.ActivityScheduled{Envelope: env, ActivityID: 0, ActivityType: "charge"},
		}, 0)
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.wfs = append(c.wfs, wf)
	c.open[wf] = true
	return wf
}

// settle completes the workflow's activity through l's decorator.
func (c *cluster) settle(l *life, wf eventstore.WorkflowID) {
	c.t.Helper()
	events, err := l.served.ReadHistory(c.t.Context(), wf)
	if err != nil {
		c.t.Fatal(err)
	}
	env := eventstore.Envelope{RunID: events[0].EventEnvelope().RunID}
	err = l.node.Append(wf, func() error {
		return l.served.Append(c.t.Context(), eventstore.RecorderToken(), wf,
			[]eventstore.Event{eventstore.ActivityCompleted{Envelope: env, ActivityID: 0, Attempt: 1}}, uint64(len(events)))
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.open[wf] = false
}

// inFlightIn counts the test's activities in flight in the shards.
func (c *cluster) inFlightIn(shards []int) int64 {
	var n int64
	for _, wf := range c.wfs {
		if c.open[wf] && slices.Contains(shards, eventstore.ShardOf(wf, 16)) {
			n++
		}
	}
	return n
}

func (c *cluster) inFlight() int64 {
	var n int64
	for _, wf := range c.wfs {
		if c.open[wf] {
			n++
		}
	}
	return n
}

// owners returns the shards of each node with a live lease.
func (c *cluster) owners(l *life) map[string][]int {
	c.t.Helper()
	leases, err := l.node.store.Leases(c.t.Context())
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[string][]int{}
	for _, le := range leases {
		if le.Live {
			out[le.Owner] = append(out[le.Owner], le.Shard)
		}
	}
	return out
}

// settleDown ticks the lives until the live leases are shared as want
// (shards per node) and every node serves what it holds, or fails.
func (c *cluster) settleDown(want map[string]int, lives ...*life) map[string][]int {
	c.t.Helper()
	for round := range 8 {
		for _, l := range lives {
			l.tick(true)
		}
		owners := c.owners(lives[0])
		ok := len(owners) == len(want)
		for name, n := range want {
			ok = ok && len(owners[name]) == n
		}
		for _, l := range lives {
			ok = ok && slices.Equal(l.node.Shards(), owners[l.node.Name()])
		}
		if ok {
			for _, l := range lives {
				l.resumed()
			}
			return owners
		}
		if round%2 == 1 {
			c.clock.Advance(testGrace) // hand-overs in progress end
		}
	}
	c.t.Fatalf("the leases are %v, want shares %v", c.owners(lives[0]), want)
	return nil
}

// TestNodes drives a cluster of nodes on PostgreSQL by hand, on a fake
// lease clock: they share the shards evenly, hand shards over when a node
// joins, adopt a dead node's shards (the decorator resumes them, the
// orphans are handed to the server), take back their leases after a quick
// restart, drop the shards whose lease ran out while they paused, refuse a
// name that another live process uses, and leave at once on Close. Through
// it all the in-flight gauges of the live nodes add up to the activities in
// flight, and a terminal committed after a handoff is counted once.
func TestNodes(t *testing.T) {
	c := &cluster{t: t, dsn: schemaDSN(t), clock: &fakeClock{t: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)},
		open: map[eventstore.WorkflowID]bool{}}
	a, b, cc := c.life("a", "a-1"), c.life("b", "b-1"), c.life("c", "c-1")
	for _, l := range []*life{a, b, cc} {
		if err := c.start(l); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(a.node.Shards()); got != 16 {
		t.Fatalf("the first node started alone holds %d shards, want all 16", got)
	}
	owners := c.settleDown(map[string]int{"a": 6, "b": 5, "c": 5}, a, b, cc)
	t.Logf("shares: %v", owners)

	// Work on every node; each places workflows in its own shards only.
	for range 3 {
		for _, l := range []*life{a, b, cc} {
			wf := c.dispatch(l)
			if !slices.Contains(owners[l.node.Name()], eventstore.ShardOf(wf, 16)) || !l.node.Serves(wf) {
				t.Fatalf("node %s placed workflow %s in shard %d, it holds %v", l.node.Name(), wf, eventstore.ShardOf(wf, 16), owners[l.node.Name()])
			}
		}
	}
	for _, l := range []*life{a, b, cc} {
		if got := l.inFlight(); got != 3 {
			t.Fatalf("node %s: %d in flight, want 3", l.node.Name(), got)
		}
	}
	for _, wf := range c.wfs {
		if eventstore.ShardOf(wf, 16) == owners["b"][0] && a.node.Serves(wf) {
			t.Errorf("node a serves workflow %s of node b's shard", wf)
		}
	}

	// c dies: no Close, no more ticks. Once its lease ran out, a and b share
	// its shards; the decorators resume them and the servers get its orphans.
	c.clock.Advance(testLease + time.Second)
	c.settleDown(map[string]int{"a": 8, "b": 8}, a, b)
	if got, want := a.inFlight()+b.inFlight(), c.inFlight(); got != want {
		t.Errorf("after the adoption the live gauges sum to %d, want the %d in flight", got, want)
	}
	var handed []eventstore.WorkflowID
	for _, l := range []*life{a, b} {
		handed = append(handed, l.handed...)
	}
	for _, wf := range c.wfs[:9] {
		if slices.Contains(cc.node.Shards(), eventstore.ShardOf(wf, 16)) && !slices.Contains(handed, wf) {
			t.Errorf("the orphaned workflow %s of node c was handed to no server", wf)
		}
	}
	// A terminal of an adopted activity is counted once, by its adopter.
	var adopted eventstore.WorkflowID
	for _, wf := range c.wfs {
		if c.open[wf] && slices.Contains(cc.node.Shards(), eventstore.ShardOf(wf, 16)) {
			adopted = wf
		}
	}
	adopter := a
	if b.node.Serves(adopted) {
		adopter = b
	}
	c.settle(adopter, adopted)
	if got := a.sum("aion.activities.completed") + b.sum("aion.activities.completed"); got != 1 {
		t.Errorf("completions after the adopted terminal: %d, want 1", got)
	}

	// c restarts under its name, long after its lease: it gets its share
	// back as a and b hand shards over, and resumes them.
	c2 := c.life("c", "c-2")
	if err := c.start(c2); err != nil {
		t.Fatal(err)
	}
	owners = c.settleDown(map[string]int{"a": 6, "b": 5, "c": 5}, a, b, c2)
	if got, want := a.inFlight()+b.inFlight()+c2.inFlight(), c.inFlight(); got != want {
		t.Errorf("after the hand-overs the live gauges sum to %d, want the %d in flight", got, want)
	}
	if got, want := c2.inFlight(), c.inFlightIn(owners["c"]); got != want {
		t.Errorf("the restarted node's gauge: %d, want the %d in flight in its shards %v", got, want, owners["c"])
	}

	// b pauses past its lease: a and c take its shards; when b ticks again
	// its renewal finds them gone and it drops them, giving its gauge
	// slots back.
	c.clock.Advance(testLease + time.Second)
	c.settleDown(map[string]int{"a": 8, "c": 8}, a, c2)
	if len(b.node.Shards()) == 0 {
		t.Fatal("b forgot its shards before it ticked")
	}
	b.tick(false)
	if got := b.node.Shards(); len(got) != 0 {
		t.Errorf("b still holds %v after its renewal failed", got)
	}
	if got := b.inFlight(); got != 0 {
		t.Errorf("b's gauge after it lost its shards: %d, want 0", got)
	}
	if got, want := a.inFlight()+c2.inFlight(), c.inFlight(); got != want {
		t.Errorf("the live gauges sum to %d, want the %d in flight", got, want)
	}
	b.node.Close(t.Context())

	// c crashes and restarts at once: the new process waits to see that
	// the old one no longer beats, then takes its leases back, with their
	// activities.
	c3 := c.life("c", "c-3")
	c3.node.pause = func(ctx context.Context, d time.Duration) error { c.clock.Advance(d); return nil }
	if err := c.start(c3); err != nil {
		t.Fatal(err)
	}
	c3.resumed()
	if c3.received != 1 {
		t.Errorf("the restarted c resumed %d times, want once (its leases taken back)", c3.received)
	}
	owners = c.owners(a)
	if got := c3.node.Shards(); !slices.Equal(got, owners["c"]) || len(got) != 8 {
		t.Errorf("the restarted c holds %v, the leases of c are %v", got, owners["c"])
	}
	if got, want := c3.inFlight(), c.inFlightIn(owners["c"]); got != want {
		t.Errorf("the restarted c's gauge: %d, want the %d in flight in its shards", got, want)
	}

	// A second process named a while a beats is refused.
	a.tick(false)
	a2 := c.life("a", "a-2")
	a2.node.pause = func(ctx context.Context, d time.Duration) error {
		c.clock.Advance(d)
		return a.node.Tick(ctx, false)
	}
	if err := c.start(a2); !errors.Is(err, ErrNodeRunning) {
		t.Errorf("a second node a started: %v, want ErrNodeRunning", err)
	}
	a2.node.closeConns()

	// Close releases at once: c3's shards are free without waiting for the
	// lease.
	if err := c3.node.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := c.owners(a)["c"]; len(got) != 0 {
		t.Errorf("c still holds %v after Close", got)
	}
	a.tick(true)
	a.resumed()
	if got := len(a.node.Shards()); got != 16 {
		t.Errorf("a alone holds %d shards after c left, want 16", got)
	}
	if err := a.node.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	cc.node.closeConns()
	c2.node.closeConns()
}
