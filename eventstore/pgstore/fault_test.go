//go:build unix

package pgstore_test

// The fault-injection test: several OS processes (this test binary,
// re-executed as cluster nodes through TestMain) share one PostgreSQL
// schema, and the test pauses, replaces, kills and cuts them off while they
// write, then checks what the database holds.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	ossignal "os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
	"github.com/aionotel/aionotel/otelstore"
)

// The environment of a node process.
const (
	envFaultNode   = "AIONOTEL_FAULT_NODE"   // the node's name; set: this process is a node
	envFaultSchema = "AIONOTEL_FAULT_SCHEMA" // the schema the nodes share
	envFaultWant   = "AIONOTEL_FAULT_WANT"   // the shards the node wants, comma-separated
	envFaultSeed   = "AIONOTEL_FAULT_SEED"   // the seed of the test (and of each node's choices)
	// AIONOTEL_FAULT_RESTART, when set, is a shell command that restarts
	// the PostgreSQL server of AIONOTEL_POSTGRES_DSN (for example
	// "pg_ctlcluster 15 main restart"): the test then restarts it under the
	// nodes. Unset, that scenario is skipped: the server may be shared.
	envFaultRestart = "AIONOTEL_FAULT_RESTART"
)

const (
	faultShards   = 6
	faultLease    = 2 * time.Second
	faultRenew    = 200 * time.Millisecond
	faultPerShard = 4 // workflows per shard, shared by every owner of the shard
	// faultSlack covers round trips, scheduling and process start on a
	// loaded machine, on top of one lease and one acquisition interval.
	faultSlack = 1500 * time.Millisecond
)

func TestMain(m *testing.M) {
	if node := os.Getenv(envFaultNode); node != "" {
		os.Exit(faultNodeMain(node))
	}
	os.Exit(m.Run())
}

// faultWorkflow returns the k-th workflow of a shard: the same for every
// process, so that every owner of a shard appends to the same histories
// and a write under a stale epoch shows in their order.
func faultWorkflow(shard, k int) (eventstore.WorkflowID, eventstore.RunID) {
	r := rand.New(rand.NewPCG(uint64(shard)+1, uint64(k)+1))
	for {
		var wf eventstore.WorkflowID
		for i := range wf {
			wf[i] = byte(r.Uint32())
		}
		if !wf.IsZero() && eventstore.ShardOf(wf, faultShards) == shard {
			run := eventstore.RunID(wf)
			run[15] ^= 0xff
			return wf, run
		}
	}
}

// A tag says who wrote an event: instance (node.pid), shard, the epoch the
// writer believed it held, and a counter.
type faultTag struct {
	instance string
	shard    int
	epoch    uint64
	n        int
}

func (t faultTag) String() string {
	return fmt.Sprintf("%s/%d/%d/%d", t.instance, t.shard, t.epoch, t.n)
}

func parseTag(s string) (faultTag, error) {
	p := strings.Split(s, "/")
	if len(p) != 4 {
		return faultTag{}, fmt.Errorf("tag %q", s)
	}
	shard, err1 := strconv.Atoi(p[1])
	epoch, err2 := strconv.ParseUint(p[2], 10, 64)
	n, err3 := strconv.Atoi(p[3])
	return faultTag{p[0], shard, epoch, n}, errors.Join(err1, err2, err3)
}

func tagOf(ev eventstore.Event) string {
	switch e := ev.(type) {
	case eventstore.WorkflowStarted:
		return string(e.Input.Data)
	case eventstore.ActivityScheduled:
		return string(e.Input.Data)
	case eventstore.ActivityCompleted:
		return string(e.Result.Data)
	}
	return ""
}

// openActivity returns the activity of a history scheduled and not
// completed, if any (the workload keeps at most one open per workflow).
func openActivity(h []eventstore.Event) (eventstore.ActivityID, bool) {
	open := map[eventstore.ActivityID]bool{}
	for _, ev := range h {
		switch e := ev.(type) {
		case eventstore.ActivityScheduled:
			open[e.ActivityID] = true
		case eventstore.ActivityCompleted:
			delete(open, e.ActivityID)
		}
	}
	for id := range open {
		return id, true
	}
	return 0, false
}

// nextEvent is the workload's next event of a workflow: its start, then
// activities scheduled and completed in turn, so that what history has in
// flight changes with every append.
func nextEvent(wf eventstore.WorkflowID, run eventstore.RunID, h []eventstore.Event, tag string) eventstore.Event {
	env := eventstore.Envelope{WorkflowID: wf, RunID: run}
	if len(h) == 0 {
		return eventstore.WorkflowStarted{Envelope: env, WorkflowType: "fault", Input: eventstore.Payload{Data: []byte(tag)}}
	}
	if id, ok := openActivity(h); ok {
		return eventstore.ActivityCompleted{Envelope: env, ActivityID: id, Result: eventstore.Payload{Data: []byte(tag)}, Attempt: 1}
	}
	return eventstore.ActivityScheduled{Envelope: env, ActivityID: eventstore.ActivityID(len(h) + 1), ActivityType: "work",
		Input: eventstore.Payload{Data: []byte(tag)}}
}

// faultNodeMain is a node: it renews its leases on one schedule, acquires
// the shards it wants and adopts any shard without a live lease on
// another, and appends to the workflows of the shards it holds from two
// writers. It reports on stdout, one line per fact:
//
//	ACQ shard epoch      acquired
//	LOST shard           a held shard the renewal did not return
//	ACK wf seq tag t     an append that returned nil; t: when it was called (Unix ns)
//	FENCED shard         an append refused with ErrNotOwner
//	READY                signal handlers installed
//	GAUGE n              its in-flight gauge (SIGHUP asked)
//	INTX                 stopping itself inside a write transaction (SIGUSR1 asked)
//	QUIET, LOUD          writers stopped, started again (SIGUSR2 asked)
//
// SIGUSR1: the next write stops the process (SIGSTOP) once its transaction
// holds its locks. SIGUSR2: stop or start writing.
func faultNodeMain(node string) int {
	ctx := context.Background()
	instance := fmt.Sprintf("%s.%d", node, os.Getpid())
	seed, _ := strconv.ParseUint(os.Getenv(envFaultSeed), 10, 64)
	rng := rand.New(rand.NewPCG(seed, uint64(os.Getpid())))
	var rngMu sync.Mutex
	var outMu sync.Mutex
	say := func(format string, args ...any) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintf(os.Stdout, format+"\n", args...)
	}
	var s *pgstore.Store
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		var err error
		s, err = pgstore.Open(ctx, os.Getenv(dsnEnv), pgstore.WithSchema(os.Getenv(envFaultSchema)), pgstore.WithNode(node),
			pgstore.WithLeaseDuration(faultLease))
		if err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			fmt.Fprintln(os.Stderr, "node:", err)
			return 1
		}
	}
	// Telemetry: the decorator follows the node's shards (it resumes a
	// shard acquired, releases one lost); SIGHUP reports the in-flight
	// gauge.
	reader := sdkmetric.NewManualReader()
	decorated, err := otelstore.New(s, otelstore.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	if err != nil {
		fmt.Fprintln(os.Stderr, "node:", err)
		return 1
	}
	d := decorated.(interface {
		eventstore.Store
		eventstore.ShardOwner
	})
	d.SetOwnedShards(ctx, []int{})
	hup := make(chan os.Signal, 1)
	ossignal.Notify(hup, syscall.SIGHUP)
	go func() {
		for range hup {
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(ctx, &rm); err != nil {
				continue
			}
			var inflight int64
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "aion.inflight_activities" {
						for _, dp := range sum.DataPoints {
							inflight += dp.Value
						}
					}
				}
			}
			say("GAUGE %d", inflight)
		}
	}()
	say("READY") // the signal handlers are in place
	var want []int
	for _, f := range strings.Split(os.Getenv(envFaultWant), ",") {
		if sh, err := strconv.Atoi(f); err == nil {
			want = append(want, sh)
		}
	}

	var stopInTx, quiet atomic.Bool
	sigs := make(chan os.Signal, 4)
	ossignal.Notify(sigs, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for sig := range sigs {
			switch {
			case sig == syscall.SIGUSR1:
				stopInTx.Store(true)
			case quiet.Load():
				quiet.Store(false)
				say("LOUD")
			default:
				quiet.Store(true)
				say("QUIET")
			}
		}
	}()
	pgstore.SetHooksForTest(s, nil, func(uint32) {
		if stopInTx.CompareAndSwap(true, false) {
			say("INTX")
			_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
		}
	})

	var mu sync.Mutex
	held := map[int]uint64{} // shard -> the epoch this process believes it holds
	// Renewal, on its own schedule.
	go func() {
		for range time.Tick(faultRenew) {
			got, err := s.RenewOwnedShards(ctx)
			if err != nil {
				continue
			}
			mu.Lock()
			var lost []int
			for sh := range held {
				if !slices.Contains(got, sh) {
					delete(held, sh)
					lost = append(lost, sh)
					say("LOST %d", sh)
				}
			}
			mu.Unlock()
			for _, sh := range lost {
				d.IsCurrentOwner(ctx, sh) // the decorator releases it
			}
		}
	}()
	// Acquisition and adoption.
	go func() {
		for range time.Tick(faultRenew) {
			leases, err := s.Leases(ctx)
			if err != nil {
				continue
			}
			// Adopt at most one shard a tick that some node held and lost
			// (in random order, so that survivors share them).
			var orphans []int
			for _, l := range leases {
				if !l.Live && !slices.Contains(want, l.Shard) {
					orphans = append(orphans, l.Shard)
				}
			}
			rngMu.Lock()
			rng.Shuffle(len(orphans), func(i, j int) { orphans[i], orphans[j] = orphans[j], orphans[i] })
			rngMu.Unlock()
			for _, sh := range append(slices.Clone(want), orphans[:min(len(orphans), 1)]...) {
				mu.Lock()
				_, mine := held[sh]
				mu.Unlock()
				if mine {
					continue
				}
				if d.AcquireOwnedShard(ctx, sh) != nil {
					continue
				}
				leases, err := s.Leases(ctx)
				if err != nil {
					continue
				}
				for _, l := range leases {
					if l.Shard == sh && l.Owner == node && l.Live {
						mu.Lock()
						held[sh] = l.Epoch
						mu.Unlock()
						d.ExtendOwnedShards(ctx, []int{sh}) // the decorator resumes it
						say("ACQ %d %d", sh, l.Epoch)
					}
				}
			}
		}
	}()
	// Writers.
	counter := atomic.Int64{}
	for range 2 {
		go func() {
			for {
				if quiet.Load() {
					time.Sleep(faultRenew)
					continue
				}
				mu.Lock()
				var shards []int
				for sh := range held {
					shards = append(shards, sh)
				}
				mu.Unlock()
				if len(shards) == 0 {
					time.Sleep(20 * time.Millisecond)
					continue
				}
				slices.Sort(shards)
				rngMu.Lock()
				sh, k := shards[rng.IntN(len(shards))], rng.IntN(faultPerShard)
				rngMu.Unlock()
				mu.Lock()
				epoch, ok := held[sh]
				mu.Unlock()
				if !ok {
					continue
				}
				wf, run := faultWorkflow(sh, k)
				h, err := s.ReadHistory(ctx, wf)
				if err != nil {
					continue
				}
				tag := faultTag{instance, sh, epoch, int(counter.Add(1))}.String()
				ev := nextEvent(wf, run, h, tag)
				called := time.Now().UnixNano()
				switch err := d.Append(ctx, token, wf, []eventstore.Event{ev}, uint64(len(h))); {
				case err == nil:
					say("ACK %s %d %s %d", wf, len(h)+1, tag, called)
				case errors.Is(err, eventstore.ErrNotOwner):
					say("FENCED %d", sh)
				}
			}
		}()
	}
	select {}
}

// faultProc is a node process as the test drives it.
type faultProc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	log  []faultLine
	seen chan struct{} // a line arrived
}

type faultLine struct {
	at   time.Time
	text string
}

type faultCluster struct {
	t      *testing.T
	schema string
	seed   uint64
	check  *pgstore.Store
	procs  []*faultProc // every process ever started
}

func (c *faultCluster) start(name string, want ...int) *faultProc {
	c.t.Helper()
	var ws []string
	for _, w := range want {
		ws = append(ws, strconv.Itoa(w))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), dsnEnv+"="+faultDSN(testDSN(c.t), c.schema), envFaultNode+"="+name, envFaultSchema+"="+c.schema,
		envFaultWant+"="+strings.Join(ws, ","), envFaultSeed+"="+strconv.FormatUint(c.seed, 10))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p := &faultProc{name: name, cmd: cmd, seen: make(chan struct{}, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.log = append(p.log, faultLine{time.Now(), sc.Text()})
			p.mu.Unlock()
			select {
			case p.seen <- struct{}{}:
			default:
			}
		}
	}()
	c.procs = append(c.procs, p)
	p.await(c.t, "READY", time.Time{}, 60*time.Second)
	return p
}

// on makes c report to t (a subtest) until the returned func runs.
func (c *faultCluster) on(t *testing.T) func() {
	parent := c.t
	c.t = t
	return func() { c.t = parent }
}

// faultDSN is the nodes' DSN: application_name names the test's schema,
// so that the test can find the nodes' sessions on the server.
func faultDSN(dsn, schema string) string {
	name := "fault " + schema
	switch {
	case !strings.Contains(dsn, "://"):
		return dsn + " application_name='" + name + "'"
	case strings.Contains(dsn, "?"):
		return dsn + "&application_name=" + strings.ReplaceAll(name, " ", "%20")
	default:
		return dsn + "?application_name=" + strings.ReplaceAll(name, " ", "%20")
	}
}

func (p *faultProc) pid() int { return p.cmd.Process.Pid }

func (p *faultProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := syscall.Kill(p.pid(), sig); err != nil {
		t.Fatalf("%s: kill -%d: %v", p.name, sig, err)
	}
}

// lines returns the log lines with a prefix, from a time on.
func (p *faultProc) lines(prefix string, since time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, l := range p.log {
		if !l.at.Before(since) && strings.HasPrefix(l.text, prefix) {
			out = append(out, l.text)
		}
	}
	return out
}

// await waits for a line with the prefix from since on, bounded.
func (p *faultProc) await(t *testing.T, prefix string, since time.Time, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for len(p.lines(prefix, since)) == 0 {
		select {
		case <-p.seen:
		case <-deadline:
			t.Fatalf("%s did not report %q within %s", p.name, prefix, within)
		}
	}
}

// leases reads the leases: shard -> lease (Owner "" when not live).
func (c *faultCluster) leases() map[int]pgstore.Lease {
	c.t.Helper()
	leases, err := c.check.Leases(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	out := map[int]pgstore.Lease{}
	for _, l := range leases {
		if !l.Live {
			l.Owner = ""
		}
		out[l.Shard] = l
	}
	return out
}

// owners reads the live leases: shard -> owner.
func (c *faultCluster) owners() map[int]string {
	out := map[int]string{}
	for sh, l := range c.leases() {
		if l.Owner != "" {
			out[sh] = l.Owner
		}
	}
	return out
}

// handover waits until every shard in shards has a live lease of a node
// in to, in an epoch after the one in before, and returns how long it took
// from since; it fails past within.
func (c *faultCluster) handover(what string, shards []int, to []string, before map[int]pgstore.Lease, since time.Time, within time.Duration) time.Duration {
	c.t.Helper()
	for {
		own := c.leases()
		done := true
		for _, sh := range shards {
			if !slices.Contains(to, own[sh].Owner) || own[sh].Epoch <= before[sh].Epoch {
				done = false
			}
		}
		if done {
			d := time.Since(since)
			c.t.Logf("%s: shards %v handed over to %v in %s (bound %s)", what, shards, to, d.Round(time.Millisecond), within)
			return d
		}
		if time.Since(since) > within {
			c.t.Fatalf("%s: shards %v not handed over to %v within %s (one lease %s + one acquisition interval %s + slack %s): leases %v",
				what, shards, to, within, faultLease, faultRenew, faultSlack, own)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// shardsOf returns the shards a node name holds live.
func (c *faultCluster) shardsOf(name string) []int {
	var out []int
	for sh, o := range c.owners() {
		if o == name {
			out = append(out, sh)
		}
	}
	slices.Sort(out)
	return out
}

// checkDB reads every history and checks, against what the nodes
// reported: every acknowledged append is there, at its seq; along each
// history the writers' epochs never go back (no write under a stale
// epoch after a newer one); each epoch of a shard has one writer process.
func (c *faultCluster) checkDB(scenario string) {
	c.t.Helper()
	ctx := context.Background()
	// What was acknowledged before the histories are read must be there.
	acked := map[*faultProc][]string{}
	for _, p := range c.procs {
		acked[p] = p.lines("ACK ", time.Time{})
	}
	at := map[string]string{} // "wf seq" -> tag
	writers := map[[2]uint64]string{}
	twice := map[[2]uint64]bool{} // reported
	events, stale := 0, 0
	inflight := 0
	for sh := range faultShards {
		for k := range faultPerShard {
			wf, _ := faultWorkflow(sh, k)
			h, err := c.check.ReadHistory(ctx, wf)
			if err != nil {
				c.t.Fatal(err)
			}
			if _, ok := openActivity(h); ok {
				inflight++
			}
			var last faultTag
			for i, ev := range h {
				events++
				tag, err := parseTag(tagOf(ev))
				if err != nil {
					c.t.Fatalf("%s: workflow %s seq %d: %v", scenario, wf, i+1, err)
				}
				at[fmt.Sprintf("%s %d", wf, i+1)] = tag.String()
				if tag.epoch < last.epoch && stale < 5 {
					stale++
					c.t.Errorf("%s: stale write: workflow %s (shard %d) seq %d written by %s in epoch %d after seq %d by %s in epoch %d",
						scenario, wf, sh, i+1, tag.instance, tag.epoch, i, last.instance, last.epoch)
				}
				key := [2]uint64{uint64(sh), tag.epoch}
				if w, ok := writers[key]; ok && w != tag.instance && !twice[key] {
					twice[key] = true
					c.t.Errorf("%s: two writers in epoch %d of shard %d: %s and %s (workflow %s seq %d)", scenario, tag.epoch, sh, w, tag.instance, wf, i+1)
				}
				if !twice[key] {
					writers[key] = tag.instance
				}
				last = tag
			}
		}
	}
	acks := 0
	for _, p := range c.procs {
		for _, l := range acked[p] {
			f := strings.Fields(l)
			acks++
			if got := at[f[1]+" "+f[2]]; got != f[3] {
				c.t.Errorf("%s: %s acknowledged %s at seq %s of %s, the database has %q", scenario, p.name, f[3], f[2], f[1], got)
			}
		}
	}
	c.t.Logf("%s: the database holds %d events, %d activities in flight; %d acknowledged appends all there", scenario, events, inflight, acks)
}

// inFlight counts the activities history has in flight.
func (c *faultCluster) inFlight() int64 {
	c.t.Helper()
	var n int64
	for sh := range faultShards {
		for k := range faultPerShard {
			wf, _ := faultWorkflow(sh, k)
			h, err := c.check.ReadHistory(context.Background(), wf)
			if err != nil {
				c.t.Fatal(err)
			}
			if _, ok := openActivity(h); ok {
				n++
			}
		}
	}
	return n
}

// checkTelemetry stops the writers of the live nodes and waits (bounded)
// until the nodes' in-flight gauges, summed, equal what history has in
// flight. An append whose commit the server made but whose answer the
// node lost (its session ended) is not observed until the node writes to
// that workflow again and fills the gap from history: when the sums
// differ, the writers run again for a moment, up to four rounds.
func (c *faultCluster) checkTelemetry(scenario string, live ...*faultProc) {
	c.t.Helper()
	var last string
	for round := range 4 {
		ok, msg := c.telemetryRound(scenario, live)
		if ok {
			c.t.Logf("%s (round %d)", msg, round+1)
			return
		}
		last = msg
		time.Sleep(500 * time.Millisecond) // the writers run again
	}
	c.t.Errorf("%s: %s", scenario, last)
}

func (c *faultCluster) telemetryRound(scenario string, live []*faultProc) (bool, string) {
	c.t.Helper()
	since := time.Now()
	for _, p := range live {
		p.signal(c.t, syscall.SIGUSR2)
	}
	for _, p := range live {
		p.await(c.t, "QUIET", since, 5*time.Second)
	}
	defer func() {
		for _, p := range live {
			p.signal(c.t, syscall.SIGUSR2)
		}
	}()
	time.Sleep(200 * time.Millisecond) // appends in flight return
	truth := c.inFlight()
	var sum int64
	var each []string
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		asked := time.Now()
		sum, each = 0, nil
		for _, p := range live {
			p.signal(c.t, syscall.SIGHUP)
			p.await(c.t, "GAUGE", asked, 5*time.Second)
			g := p.lines("GAUGE", asked)
			v, _ := strconv.ParseInt(strings.Fields(g[len(g)-1])[1], 10, 64)
			sum += v
			each = append(each, fmt.Sprintf("%s=%d", p.name, v))
		}
		if sum == truth {
			return true, fmt.Sprintf("%s: the nodes' in-flight gauges %v sum to %d, as history has, %s after the writers stopped",
				scenario, each, sum, time.Since(since).Round(time.Millisecond))
		}
		if time.Now().After(deadline) {
			return false, fmt.Sprintf("the nodes' in-flight gauges %v sum to %d; history has %d in flight", each, sum, truth)
		}
	}
}

// busiest returns the process holding the most shards, with them, and
// the others with their names.
func (c *faultCluster) busiest(procs ...*faultProc) (*faultProc, []int, []*faultProc, []string) {
	victim, shards := procs[0], c.shardsOf(procs[0].name)
	for _, p := range procs[1:] {
		if s := c.shardsOf(p.name); len(s) > len(shards) {
			victim, shards = p, s
		}
	}
	var others []*faultProc
	var names []string
	for _, p := range procs {
		if p != victim {
			others, names = append(others, p), append(names, p.name)
		}
	}
	return victim, shards, others, names
}

// staleAcks fails if p acknowledged an append it called after since under
// an epoch older than its shard's current one: a write a fenced process
// should not have made.
func (c *faultCluster) staleAcks(scenario string, p *faultProc, since time.Time) {
	c.t.Helper()
	now := c.leases()
	for _, l := range p.lines("ACK ", time.Time{}) {
		f := strings.Fields(l)
		called, _ := strconv.ParseInt(f[4], 10, 64)
		tag, err := parseTag(f[3])
		if err != nil || called < since.UnixNano() {
			continue
		}
		if tag.epoch < now[tag.shard].Epoch && now[tag.shard].Owner != "" {
			c.t.Errorf("%s: %s (pid %d), resumed, wrote in epoch %d of shard %d, whose epoch is %d: %s", scenario, p.name, p.pid(), tag.epoch, tag.shard, now[tag.shard].Epoch, l)
		}
	}
}

// noLosses fails if a survivor lost a lease or was fenced since a time.
func (c *faultCluster) noLosses(scenario string, since time.Time, survivors ...*faultProc) {
	c.t.Helper()
	for _, p := range survivors {
		if l := append(p.lines("LOST", since), p.lines("FENCED", since)...); len(l) > 0 {
			c.t.Errorf("%s: survivor %s (pid %d) lost shards: %v", scenario, p.name, p.pid(), l)
		}
	}
}

// TestFaultInjection runs three node processes on one schema of the
// PostgreSQL and, in order: pauses one inside an open write transaction
// (it stops itself once its transaction holds its locks); pauses one
// (SIGSTOP) past its lease while it does not write; pauses one
// and starts a replacement under the same name, then resumes the paused
// one; kills one (SIGKILL) while it writes; ends every node's sessions on
// the server side (and, with AIONOTEL_FAULT_RESTART, restarts the server).
// After each scenario it checks the database: every acknowledged append is
// there, no write under a stale epoch, one writer per epoch; the victim's
// shards reach the survivors within one lease plus one acquisition
// interval (plus slack), the survivors lose none of theirs, and the live
// nodes' in-flight gauges, summed, converge to what history has in flight.
func TestFaultInjection(t *testing.T) {
	if testing.Short() {
		t.Skip("the fault-injection test runs for about half a minute")
	}
	ctx := context.Background()
	pool := testPool(t)
	schema := testSchema(t, pool)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(envFaultSeed); v != "" {
		seed, _ = strconv.ParseUint(v, 10, 64)
	}
	t.Logf("seed %d (replay: %s=%d)", seed, envFaultSeed, seed)
	check, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema), pgstore.WithShardCount(faultShards), pgstore.WithNode("checker"))
	if err != nil {
		t.Fatal(err)
	}
	c := &faultCluster{t: t, schema: schema, seed: seed, check: check}
	t.Cleanup(func() {
		for _, p := range c.procs {
			_ = syscall.Kill(p.pid(), syscall.SIGCONT)
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	bound := faultLease + faultRenew + faultSlack
	startedAt := time.Now()

	n1, n2, n3 := c.start("n1", 0, 1), c.start("n2", 2, 3), c.start("n3", 4, 5)
	c.handover("start", []int{0, 1, 2, 3, 4, 5}, []string{"n1", "n2", "n3"}, nil, startedAt, 10*time.Second)
	time.Sleep(faultLease / 2) // writes under way

	t.Run("pause inside an open write transaction", func(t *testing.T) {
		defer c.on(t)()
		since := time.Now()
		before := c.leases()
		victim, _, survivors, names := c.busiest(n1, n2, n3)
		victim.signal(t, syscall.SIGUSR1)
		victim.await(t, "INTX", since, 10*time.Second)
		defer victim.signal(t, syscall.SIGCONT)
		paused := time.Now()
		shards := c.shardsOf(victim.name) // as the pause left them
		c.handover(victim.name+" paused in a transaction", shards, names, before, paused, bound)
		resumed := time.Now()
		victim.signal(t, syscall.SIGCONT)
		time.Sleep(faultLease / 2)
		c.noLosses(t.Name(), since, survivors...)
		c.staleAcks(t.Name(), victim, resumed)
		c.checkDB(t.Name())
		c.checkTelemetry(t.Name(), n1, n2, n3)
	})

	t.Run("pause without an open transaction", func(t *testing.T) {
		defer c.on(t)()
		since := time.Now()
		victim, _, survivors, names := c.busiest(n1, n2, n3)
		victim.signal(t, syscall.SIGUSR2)
		victim.await(t, "QUIET", since, 5*time.Second)
		time.Sleep(100 * time.Millisecond) // a write in flight returns
		before := c.leases()
		paused := time.Now()
		victim.signal(t, syscall.SIGSTOP)
		defer victim.signal(t, syscall.SIGCONT)
		shards := c.shardsOf(victim.name) // as the pause left them
		c.handover(victim.name+" paused", shards, names, before, paused, bound)
		victim.signal(t, syscall.SIGCONT)
		resumed := time.Now()
		victim.signal(t, syscall.SIGUSR2) // writing again
		time.Sleep(faultLease / 2)
		c.noLosses(t.Name(), since, survivors...)
		c.staleAcks(t.Name(), victim, resumed)
		c.checkDB(t.Name())
		c.checkTelemetry(t.Name(), n1, n2, n3)
	})

	t.Run("same-name replacement while paused, then SIGCONT", func(t *testing.T) {
		defer c.on(t)()
		since := time.Now()
		before := c.leases()
		n3.signal(t, syscall.SIGSTOP)
		defer n3.signal(t, syscall.SIGCONT)
		paused := time.Now()
		victim := c.shardsOf("n3") // as the pause left them
		replacement := c.start("n3", 4, 5)
		c.handover("n3 replaced under its name", victim, []string{"n1", "n2", "n3"}, before, paused, bound)
		resumed := time.Now()
		n3.signal(t, syscall.SIGCONT)
		time.Sleep(faultLease) // the old process runs, and tries to write
		c.noLosses(t.Name(), since, n1, n2, replacement)
		c.staleAcks(t.Name(), n3, resumed)
		c.checkDB(t.Name())
		_ = n3.cmd.Process.Kill()
		n3 = replacement
		c.checkTelemetry(t.Name(), n1, n2, n3)
	})

	t.Run("kill -9 during writes", func(t *testing.T) {
		defer c.on(t)()
		since := time.Now()
		victimProc, _, survivors, names := c.busiest(n1, n2, n3)
		victimProc.await(t, "ACK", since, 5*time.Second)
		before := c.leases()
		killed := time.Now()
		victimProc.signal(t, syscall.SIGKILL)
		victim := c.shardsOf(victimProc.name) // as the kill left them
		c.handover(victimProc.name+" killed", victim, names, before, killed, bound)
		time.Sleep(2 * faultRenew)
		c.noLosses(t.Name(), since, survivors...)
		c.checkDB(t.Name())
		// The killed node comes back under its name (its shards are the
		// survivors' now).
		switch victimProc {
		case n1:
			n1 = c.start("n1", 0, 1)
		case n2:
			n2 = c.start("n2", 2, 3)
		default:
			n3 = c.start("n3", 4, 5)
		}
		time.Sleep(2 * faultRenew) // it has found its shards taken
		c.checkTelemetry(t.Name(), n1, n2, n3)
	})

	t.Run("server ends every session", func(t *testing.T) {
		defer c.on(t)()
		since := time.Now()
		restart := os.Getenv(envFaultRestart)
		if restart != "" {
			out, err := exec.Command("sh", "-c", restart).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v: %s", envFaultRestart, err, out)
			}
			t.Logf("restarted the server: %s", restart)
		} else {
			t.Logf("PostgreSQL restart not run (the server may be shared; set %s to a restart command such as 'pg_ctlcluster 15 main restart'): terminating every node session instead", envFaultRestart)
			var n int
			if err := pool.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
				"fault "+schema).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				t.Fatal("no node session found to terminate")
			}
			t.Logf("terminated %d node sessions", n)
		}
		for _, p := range []*faultProc{n1, n2, n3} {
			if len(c.shardsOf(p.name)) > 0 {
				p.await(t, "ACK", time.Now(), 20*time.Second)
			}
		}
		c.handover("after the sessions ended", []int{0, 1, 2, 3, 4, 5}, []string{"n1", "n2", "n3"}, nil, since, 20*time.Second)
		if restart == "" {
			c.noLosses(t.Name(), since, n1, n2, n3)
		}
		c.checkDB(t.Name())
		c.checkTelemetry(t.Name(), n1, n2, n3)
	})
	t.Logf("the fault-injection run took %s", time.Since(startedAt).Round(time.Millisecond))
}
