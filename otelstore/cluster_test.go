package otelstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/timeline"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// The cluster property: decorators on the nodes of one shared store, each
// serving its shards, under a random workload with node deaths (the
// process and its tracker gone without shutdown; the survivors adopt its
// shards), shard moves between live nodes and restarts (a new process
// resumes). After every step the in-flight gauges summed over the live
// processes equal the activities history has in flight; at the end, over
// every process that ever ran, each activity settled in history is counted
// once on aion.activities.completed with history's duration, and each
// settled activity and closed run is exported as exactly one span with
// history's times (IDs are derived, so spans are compared by identity).
// A failing sequence is shrunk before it is reported, with its seed.
const (
	clusterSequences = 40
	clusterSteps     = 120
	clusterShards    = 4
	clusterWorkflows = 12
)

func TestClusterTelemetryAddsUp(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for n := range uint64(clusterSequences) {
		rng := rand.New(rand.NewPCG(seed+n, 0xc1))
		ops := make([]clusterOp, clusterSteps)
		for i := range ops {
			ops[i] = clusterOp{kind: rng.IntN(20), pick: rng.Uint64()}
		}
		if err := runCluster(t, ops); err != nil {
			ops, err = shrinkCluster(t, ops, err)
			t.Fatalf("sequence seed %d: %v\nshrunk to %d steps: %v", seed+n, err, len(ops), ops)
		}
	}
}

// clusterOp is one step: its kind (a range of 20: mostly appends) and the
// number that picks its workflow, node, shard or event.
type clusterOp struct {
	kind int
	pick uint64
}

func (o clusterOp) String() string {
	switch {
	case o.kind < 16:
		return fmt.Sprintf("append(%d)", o.pick%1000)
	case o.kind < 17:
		return fmt.Sprintf("kill(%d)", o.pick%1000)
	case o.kind < 18:
		return fmt.Sprintf("restart(%d)", o.pick%1000)
	default:
		return fmt.Sprintf("move(%d)", o.pick%1000)
	}
}

// shrinkCluster drops steps while the sequence still fails.
func shrinkCluster(t *testing.T, ops []clusterOp, err error) ([]clusterOp, error) {
	for chunk := len(ops) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(ops); {
			try := slices.Concat(ops[:i], ops[i+chunk:])
			if e := runCluster(t, try); e != nil {
				ops, err = try, e
				continue
			}
			i += chunk
		}
	}
	return ops, err
}

// runCluster runs one sequence in a bubble of its own (fake time, and a
// point where the background resumes have finished).
func runCluster(t *testing.T, ops []clusterOp) (err error) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t)
		defer c.close()
		synctest.Wait() // the first resumes
		for i, op := range ops {
			if err = c.step(op); err == nil {
				synctest.Wait() // the resumes the step started
				err = c.checkInFlight()
			}
			if err != nil {
				err = fmt.Errorf("step %d, %v: %w", i, op, err)
				return
			}
		}
		err = c.checkSettled()
	})
	return err
}

// process is one life of a node: a decorator with its own providers.
type process struct {
	node   string
	store  eventstore.Store
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	mp     *sdkmetric.MeterProvider
	tp     *sdktrace.TracerProvider
	errs   *[]error
}

type cluster struct {
	t          *testing.T
	mem        *eventstore.MemoryCluster
	live       map[string]*process
	dead       []*process
	owner      map[int]string // shard -> node
	shards     map[string][]int
	wfs        []*wfModel
	clock      int64 // whole seconds
	names      int
	errMu      sync.Mutex
	resumeErrs []error
	// inner wraps a node's store before the decorator does; nil: none.
	inner func(*eventstore.Memory) eventstore.Store
}

func newCluster(t *testing.T) *cluster { return newClusterWith(t, nil) }

func newClusterWith(t *testing.T, inner func(*eventstore.Memory) eventstore.Store) *cluster {
	c := &cluster{
		t: t, mem: eventstore.NewMemoryCluster(eventstore.WithShardCount(clusterShards)),
		live: map[string]*process{}, owner: map[int]string{}, shards: map[string][]int{},
		clock: 1_000_000, inner: inner,
	}
	for i := range clusterWorkflows {
		var id eventstore.WorkflowID
		binary.BigEndian.PutUint64(id[:8], uint64(i)) // shard i % clusterShards
		id[15] = 0xf1
		c.wfs = append(c.wfs, &wfModel{id: id})
	}
	a, b := c.start(), c.start()
	for s := range clusterShards {
		c.give(s, []string{a, b}[s%2])
	}
	for _, name := range []string{a, b} {
		c.serve(c.live[name])
	}
	return c
}

func (c *cluster) close() {
	for _, p := range append(slices.Collect(mapValues(c.live)), c.dead...) {
		_ = p.mp.Shutdown(context.Background())
		_ = p.tp.Shutdown(context.Background())
	}
}

func mapValues[K comparable, V any](m map[K]V) func(func(V) bool) {
	return func(yield func(V) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

// start starts a node with no shards and returns its name.
func (c *cluster) start() string {
	c.names++
	name := fmt.Sprintf("node-%d", c.names)
	c.live[name] = c.newProcess(name)
	return name
}

func (c *cluster) newProcess(node string) *process {
	p := &process{node: node, reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder(), errs: &c.resumeErrs}
	p.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(p.reader))
	p.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p.spans), sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)))
	var inner eventstore.Store = c.mem.Node(node)
	if c.inner != nil {
		inner = c.inner(c.mem.Node(node))
	}
	s, err := otelstore.New(inner, otelstore.WithMeterProvider(p.mp), otelstore.WithTracerProvider(p.tp),
		otelstore.WithResumeReports(func(_ pairing.ResumeReport, err error) {
			if err != nil {
				c.errMu.Lock() // the nodes' resumes report concurrently
				*p.errs = append(*p.errs, err)
				c.errMu.Unlock()
			}
		}))
	if err != nil {
		c.t.Fatal(err)
	}
	p.store = s
	return p
}

// give records that node holds shard s (the election is run by serve or
// adopt).
func (c *cluster) give(s int, node string) {
	c.owner[s] = node
	c.shards[node] = append(c.shards[node], s)
	slices.Sort(c.shards[node])
}

// serve makes process p serve its node's shards, as a process does when it
// starts: scope, then election.
func (c *cluster) serve(p *process) {
	ctx := context.Background()
	own := slices.Clone(c.shards[p.node])
	p.store.(eventstore.ShardOwner).SetOwnedShards(ctx, own)
	if err := p.store.(eventstore.ShardOwner).AcquireOwnedShards(ctx, own); err != nil {
		c.t.Fatalf("%s acquiring %v: %v", p.node, own, err)
	}
}

func (c *cluster) liveNames() []string {
	return slices.Sorted(func(yield func(string) bool) {
		for n := range c.live {
			if !yield(n) {
				return
			}
		}
	})
}

func (c *cluster) step(op clusterOp) error {
	ctx := context.Background()
	names := c.liveNames()
	switch {
	case op.kind < 16:
		return c.appendStep(op.pick)
	case op.kind < 17: // a node dies; the survivors adopt its shards
		if len(names) < 2 {
			return nil
		}
		victim := names[op.pick%uint64(len(names))]
		c.mem.Kill(victim)
		c.dead = append(c.dead, c.live[victim])
		delete(c.live, victim)
		orphans := c.shards[victim]
		delete(c.shards, victim)
		survivors := c.liveNames()
		if op.pick%3 == 0 { // and a new node joins, to take some of them
			survivors = append(survivors, c.start())
			c.serve(c.live[survivors[len(survivors)-1]])
		}
		for i, s := range orphans {
			taker := survivors[i%len(survivors)]
			c.give(s, taker)
			so := c.live[taker].store.(eventstore.ShardOwner)
			if err := so.AcquireOwnedShard(ctx, s); err != nil {
				return fmt.Errorf("%s adopting shard %d: %w", taker, s, err)
			}
			so.ExtendOwnedShards(ctx, []int{s})
		}
	case op.kind < 18: // a node restarts: a new process resumes
		node := names[op.pick%uint64(len(names))]
		c.dead = append(c.dead, c.live[node])
		c.live[node] = c.newProcess(node)
		c.serve(c.live[node])
	default: // a shard moves between live nodes
		if len(names) < 2 {
			return nil
		}
		from := names[op.pick%uint64(len(names))]
		to := names[(op.pick/7+1)%uint64(len(names))]
		if from == to || len(c.shards[from]) == 0 {
			return nil
		}
		s := c.shards[from][op.pick%uint64(len(c.shards[from]))]
		if err := c.mem.Node(from).ReleaseShards(ctx, []int{s}); err != nil {
			return err
		}
		c.shards[from] = slices.DeleteFunc(c.shards[from], func(x int) bool { return x == s })
		c.live[from].store.(eventstore.ShardOwner).SetOwnedShards(ctx, slices.Clone(c.shards[from]))
		c.give(s, to)
		so := c.live[to].store.(eventstore.ShardOwner)
		if err := so.AcquireOwnedShard(ctx, s); err != nil {
			return fmt.Errorf("%s taking shard %d: %w", to, s, err)
		}
		so.ExtendOwnedShards(ctx, []int{s})
	}
	return nil
}

// wfModel is what the workload knows of a workflow, to write its next
// events.
type wfModel struct {
	id      eventstore.WorkflowID
	head    uint64
	runs    int  // runs started
	running bool // the current run is open
	run     eventstore.RunID
	next    eventstore.ActivityID
	open    []eventstore.ActivityID
}

var (
	clusterTypes    = []string{"charge", "ship", "llm"}
	clusterOutcomes = 4
)

// appendStep appends the next events of one workflow through the node
// that serves it.
func (c *cluster) appendStep(pick uint64) error {
	w := c.wfs[pick%uint64(len(c.wfs))]
	rng := rand.New(rand.NewPCG(pick, 1))
	env := func() eventstore.Envelope {
		c.clock += 1 + rng.Int64N(5)
		return eventstore.Envelope{RunID: w.run, RecordedAt: time.Unix(c.clock, 0)}
	}
	var batch []eventstore.Event
	for range 1 + rng.IntN(3) {
		switch x := rng.IntN(10); {
		case !w.running:
			if w.runs == 3 {
				break // the workflow is done
			}
			w.runs++
			binary.BigEndian.PutUint64(w.run[:8], uint64(w.runs))
			copy(w.run[8:], w.id[:8])
			w.running, w.next, w.open = true, 0, nil
			batch = append(batch, eventstore.WorkflowStarted{Envelope: env(), WorkflowType: "flow"})
		case x < 4 || len(w.open) == 0:
			batch = append(batch, eventstore.ActivityScheduled{Envelope: env(), ActivityID: w.next, ActivityType: clusterTypes[rng.IntN(len(clusterTypes))]})
			w.open = append(w.open, w.next)
			w.next++
		case x < 5:
			batch = append(batch, eventstore.ActivityFailed{Envelope: env(), ActivityID: w.open[rng.IntN(len(w.open))], Error: eventstore.ActivityError{Kind: eventstore.Retryable}})
		case x < 8:
			i := rng.IntN(len(w.open))
			batch = append(batch, terminalEvent(env(), w.open[i], rng.IntN(clusterOutcomes)))
			w.open = slices.Delete(w.open, i, i+1)
		case x < 9:
			batch = append(batch, closeEvent(env(), rng.IntN(5), w.runs))
			w.running, w.open = false, nil
		default:
			batch = append(batch, eventstore.SignalReceived{Envelope: env(), SignalName: "poke"})
		}
	}
	if len(batch) == 0 {
		return nil
	}
	node := c.owner[eventstore.ShardOf(w.id, clusterShards)]
	if err := c.live[node].store.Append(context.Background(), eventstore.RecorderToken(), w.id, batch, w.head); err != nil {
		return fmt.Errorf("%s appending to %v at %d: %w", node, w.id, w.head, err)
	}
	w.head += uint64(len(batch))
	return nil
}

func terminalEvent(env eventstore.Envelope, a eventstore.ActivityID, outcome int) eventstore.Event {
	switch outcome {
	case 0:
		return eventstore.ActivityCompleted{Envelope: env, ActivityID: a}
	case 1:
		return eventstore.ActivityFailed{Envelope: env, ActivityID: a, Error: eventstore.ActivityError{Kind: eventstore.Terminal}}
	case 2:
		return eventstore.ActivityCancelled{Envelope: env, ActivityID: a}
	}
	return eventstore.ActivityTimedOut{Envelope: env, ActivityID: a}
}

// closeEvent closes a run with one of the five statuses; a continue-as-new
// names the next run (which the workload starts later).
func closeEvent(env eventstore.Envelope, status, runs int) eventstore.Event {
	switch status {
	case 0:
		return eventstore.WorkflowCompleted{Envelope: env}
	case 1:
		return eventstore.WorkflowFailed{Envelope: env}
	case 2:
		return eventstore.WorkflowCancelled{Envelope: env}
	case 3:
		return eventstore.WorkflowTimedOut{Envelope: env}
	}
	var next eventstore.RunID
	binary.BigEndian.PutUint64(next[:8], uint64(runs+1))
	return eventstore.WorkflowContinuedAsNew{Envelope: env, NewRunID: next}
}

// truth is what the histories say: activities in flight, and each settled
// activity and closed run with its times.
type truth struct {
	inFlight int
	settled  map[string]settledSpan // by span ID
	outcomes map[string]int64       // type/outcome -> count
	seconds  map[string]float64     // type/outcome -> sum of durations
}

type settledSpan struct {
	name       string
	start, end time.Time
}

func (c *cluster) truth() (truth, error) {
	tr := truth{settled: map[string]settledSpan{}, outcomes: map[string]int64{}, seconds: map[string]float64{}}
	for _, w := range c.wfs {
		history, err := c.mem.Node(c.liveNames()[0]).ReadHistory(context.Background(), w.id)
		if err != nil {
			return tr, err
		}
		type act struct {
			typ string
			at  time.Time
		}
		acts := map[eventstore.RunID]map[eventstore.ActivityID]act{}
		starts := map[eventstore.RunID]time.Time{}
		settle := func(run eventstore.RunID, id eventstore.ActivityID, outcome string, at time.Time) {
			a, ok := acts[run][id]
			if !ok {
				return
			}
			delete(acts[run], id)
			k := a.typ + "/" + outcome
			tr.outcomes[k]++
			tr.seconds[k] += at.Sub(a.at).Seconds()
			sid := timeline.ActivitySpanID("default", w.id, run, id)
			tr.settled[sid.String()] = settledSpan{name: "activity " + a.typ, start: a.at, end: at}
		}
		for _, ev := range history {
			env := ev.EventEnvelope()
			switch e := ev.(type) {
			case eventstore.WorkflowStarted:
				starts[env.RunID] = env.RecordedAt
				acts[env.RunID] = map[eventstore.ActivityID]act{}
			case eventstore.ActivityScheduled:
				acts[env.RunID][e.ActivityID] = act{e.ActivityType, env.RecordedAt}
			case eventstore.ActivityCompleted:
				settle(env.RunID, e.ActivityID, "succeeded", env.RecordedAt)
			case eventstore.ActivityFailed:
				if e.Error.Kind == eventstore.Terminal {
					settle(env.RunID, e.ActivityID, "failed", env.RecordedAt)
				}
			case eventstore.ActivityCancelled:
				settle(env.RunID, e.ActivityID, "cancelled", env.RecordedAt)
			case eventstore.ActivityTimedOut:
				settle(env.RunID, e.ActivityID, "timed_out", env.RecordedAt)
			case eventstore.WorkflowCompleted, eventstore.WorkflowFailed, eventstore.WorkflowCancelled,
				eventstore.WorkflowTimedOut, eventstore.WorkflowContinuedAsNew:
				for id := range acts[env.RunID] {
					settle(env.RunID, id, "abandoned", env.RecordedAt)
				}
				root := timeline.Root("default", w.id, env.RunID)
				tr.settled[root.SpanID().String()] = settledSpan{name: "workflow flow", start: starts[env.RunID], end: env.RecordedAt}
			}
		}
		for _, run := range acts {
			tr.inFlight += len(run)
		}
	}
	return tr, nil
}

// checkInFlight: the live processes' gauges add up to history's activities
// in flight.
func (c *cluster) checkInFlight() error {
	c.errMu.Lock()
	errs := slices.Clone(c.resumeErrs)
	c.errMu.Unlock()
	if len(errs) > 0 {
		return fmt.Errorf("resumes failed: %w", errors.Join(errs...))
	}
	want, err := c.truth()
	if err != nil {
		return err
	}
	var got int64
	for _, p := range c.live {
		for _, v := range sums(collect(p), "aion.inflight_activities") {
			if v < 0 {
				return fmt.Errorf("%s: a negative gauge", p.node)
			}
			got += v
		}
	}
	if got != int64(want.inFlight) {
		return fmt.Errorf("the live nodes' gauges add up to %d, history has %d in flight", got, want.inFlight)
	}
	return nil
}

// checkSettled: over every process, each settlement counted once with its
// duration, each settled activity and closed run one span with history's
// times.
func (c *cluster) checkSettled() error {
	want, err := c.truth()
	if err != nil {
		return err
	}
	outcomes, seconds := map[string]int64{}, map[string]float64{}
	spans := map[string][]sdktrace.ReadOnlySpan{}
	for _, p := range append(slices.Collect(mapValues(c.live)), c.dead...) {
		rm := collect(p)
		for k, v := range sumsBy(rm, "aion.activities.completed") {
			outcomes[k] += v
		}
		for k, v := range histogramSumsBy(rm, "aion.activity.duration") {
			seconds[k] += v
		}
		for _, s := range p.spans.Ended() {
			if strings.HasPrefix(s.Name(), "activity ") || strings.HasPrefix(s.Name(), "workflow ") {
				spans[s.SpanContext().SpanID().String()] = append(spans[s.SpanContext().SpanID().String()], s)
			}
		}
	}
	var problems []string
	for k, n := range want.outcomes {
		if outcomes[k] != n || seconds[k] != want.seconds[k] {
			problems = append(problems, fmt.Sprintf("%s: %d completions, %gs; history %d, %gs", k, outcomes[k], seconds[k], n, want.seconds[k]))
		}
	}
	for k, n := range outcomes {
		if _, ok := want.outcomes[k]; !ok && n != 0 {
			problems = append(problems, fmt.Sprintf("%s: %d completions history does not have", k, n))
		}
	}
	for id, w := range want.settled {
		got := spans[id]
		switch {
		case len(got) != 1:
			problems = append(problems, fmt.Sprintf("%s (%s): %d spans", w.name, id, len(got)))
		case got[0].Name() != w.name || !got[0].StartTime().Equal(w.start) || !got[0].EndTime().Equal(w.end):
			problems = append(problems, fmt.Sprintf("%s (%s): %s %v..%v, history %v..%v", w.name, id, got[0].Name(), got[0].StartTime().Unix(), got[0].EndTime().Unix(), w.start.Unix(), w.end.Unix()))
		}
	}
	for id, got := range spans {
		if _, ok := want.settled[id]; !ok {
			problems = append(problems, fmt.Sprintf("%s (%s): exported, history has it unsettled", got[0].Name(), id))
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return errors.New(strings.Join(problems, "\n"))
	}
	return nil
}

func collect(p *process) metricdata.ResourceMetrics {
	var rm metricdata.ResourceMetrics
	_ = p.reader.Collect(context.Background(), &rm)
	return rm
}

// sums returns an int64 sum's points (their values only).
func sums(rm metricdata.ResourceMetrics, name string) []int64 {
	var out []int64
	for _, v := range sumsBy(rm, name) {
		out = append(out, v)
	}
	return out
}

// sumsBy returns an int64 sum's points by "type/outcome".
func sumsBy(rm metricdata.ResourceMetrics, name string) map[string]int64 {
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, dp := range s.DataPoints {
					out[typeOutcome(dp.Attributes)] += dp.Value
				}
			}
		}
	}
	return out
}

func histogramSumsBy(rm metricdata.ResourceMetrics, name string) map[string]float64 {
	out := map[string]float64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok && m.Name == name {
				for _, dp := range h.DataPoints {
					out[typeOutcome(dp.Attributes)] += dp.Sum
				}
			}
		}
	}
	return out
}

func typeOutcome(set attribute.Set) string {
	typ, _ := set.Value(otelstore.AttrActivityType)
	outcome, _ := set.Value(otelstore.AttrActivityOutcome)
	return typ.AsString() + "/" + outcome.AsString()
}
