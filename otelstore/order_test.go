package otelstore_test

import (
	"context"
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
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/historytest"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// The order property through the decorator: the batches of generated
// histories are appended concurrently to one workflow each, every inner
// call commits in history order (optimistic concurrency allows no other)
// and its return is held; the held calls are then released in random
// groups, so their observations run concurrently and in any order. Every
// metric point and every timeline span must be what appending the same
// histories one call at a time gives. Run under -race, it also checks that
// the decorator and the tracker hold no lock of theirs around user code in
// a way that races.
const (
	gatedCases        = 60
	gatedPermutations = 3
)

func TestConcurrentAppendsReturningInAnyOrder(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	for c := range uint64(gatedCases) {
		rng := rand.New(rand.NewPCG(seed+c, 0x6a7e))
		batches := historytest.Cut(rng, historytest.Generate(rng))
		var want, got appended
		synctest.Test(t, func(t *testing.T) { want = appendAll(t, batches, nil) })
		for p := range gatedPermutations {
			synctest.Test(t, func(t *testing.T) { got = appendAll(t, batches, rng) })
			if err := want.equal(got); err != nil {
				t.Fatalf("case seed %d, permutation %d: %v", seed+c, p, err)
			}
		}
	}
}

// gated commits each Append at once and holds its return until released.
type gated struct {
	*eventstore.Memory
	committed chan struct{}
	mu        sync.Mutex
	release   map[gateKey]chan struct{}
	// returned is closed once every append returned: history reads (a
	// gap fill's) wait for it. A fill that reads a batch before that
	// batch's own return would decide its pairings with the facts read
	// back: the metrics stay exact, but the spans lack the links to the
	// store calls that returned late (see the pairing package doc).
	returned chan struct{}
}

func (g *gated) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	<-g.returned
	return g.Memory.ReadHistory(ctx, wf)
}

func (g *gated) ReadHistoryFrom(ctx context.Context, wf eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
	<-g.returned
	return g.Memory.ReadHistoryFrom(ctx, wf, from)
}

type gateKey struct {
	wf  eventstore.WorkflowID
	seq uint64
}

func (g *gated) gate(k gateKey) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.release[k] == nil {
		g.release[k] = make(chan struct{})
	}
	return g.release[k]
}

func (g *gated) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	err := g.Memory.Append(ctx, tok, wf, events, expectedSeq)
	g.committed <- struct{}{}
	<-g.gate(gateKey{wf, expectedSeq})
	return err
}

// appended is what the decorator exported for a set of appends.
type appended struct {
	metrics metricdata.ResourceMetrics
	spans   []string
}

// appendAll appends the batches through otelstore.New: with rng nil one
// call at a time in history order; else every call at once, committed in
// order and released in random groups.
func appendAll(t *testing.T, batches []historytest.Batch, rng *rand.Rand) appended {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)))
	defer func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) }()
	inner := &gated{Memory: eventstore.NewMemory(), committed: make(chan struct{}), release: map[gateKey]chan struct{}{}, returned: make(chan struct{})}
	// Wrapped so the decorator sees a plain Store: Memory's outbox methods
	// would bypass the gate.
	s, err := otelstore.New(struct{ eventstore.Store }{inner}, otelstore.WithMeterProvider(mp), otelstore.WithTracerProvider(tp))
	if err != nil {
		t.Fatal(err)
	}
	ctx, tok := context.Background(), eventstore.RecorderToken()
	heads := map[eventstore.WorkflowID]uint64{}
	var wg sync.WaitGroup
	var keys []gateKey
	for _, b := range batches {
		k := gateKey{b.WorkflowID, heads[b.WorkflowID]}
		heads[b.WorkflowID] += uint64(len(b.Events))
		keys = append(keys, k)
		wg.Go(func() {
			if err := s.Append(ctx, tok, k.wf, b.Events, k.seq); err != nil {
				t.Errorf("append at %d: %v", k.seq, err)
			}
		})
		<-inner.committed // commits in history order, one after the other
		if rng == nil {
			close(inner.gate(k))
			wg.Wait()
		}
	}
	if rng != nil {
		rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		for len(keys) > 0 {
			n := min(1+rng.IntN(3), len(keys))
			for _, k := range keys[:n] {
				close(inner.gate(k))
			}
			keys = keys[n:]
			synctest.Wait() // the group's observations, concurrently
		}
		wg.Wait()
	}
	close(inner.returned)
	synctest.Wait() // the gap fills, if any
	var a appended
	if err := reader.Collect(ctx, &a.metrics); err != nil {
		t.Fatal(err)
	}
	ended := rec.Ended()
	calls := map[[2]string]string{} // the append spans, by IDs: their workflow and seq
	for _, sp := range ended {
		if sp.Name() == "append" {
			calls[[2]string{sp.SpanContext().TraceID().String(), sp.SpanContext().SpanID().String()}] = attrsString(sp.Attributes())
		}
	}
	for _, sp := range ended {
		if sp.Name() != "append" {
			a.spans = append(a.spans, timelineString(sp, calls))
		}
	}
	slices.Sort(a.spans)
	return a
}

func attrsString(kvs []attribute.KeyValue) string {
	var b strings.Builder
	for _, kv := range kvs {
		if kv.Key == "aion.workflow.id" || kv.Key == "aion.store.expected_seq" {
			fmt.Fprintf(&b, "%s=%s ", kv.Key, kv.Value.String())
		}
	}
	return b.String()
}

// timelineString renders a timeline span, each link to an append span as
// that call's workflow and expected seq.
func timelineString(s sdktrace.ReadOnlySpan, calls map[[2]string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s parent=%s %s..%s status=%v\n", s.Name(), s.SpanContext().TraceID(), s.SpanContext().SpanID(),
		s.Parent().SpanID(), s.StartTime().UTC().Format(time.TimeOnly), s.EndTime().UTC().Format(time.TimeOnly), s.Status())
	for _, kv := range s.Attributes() {
		fmt.Fprintf(&b, "  attr %s=%s\n", kv.Key, kv.Value.String())
	}
	for _, e := range s.Events() {
		fmt.Fprintf(&b, "  event %s at %s %v\n", e.Name, e.Time.UTC().Format(time.TimeOnly), e.Attributes)
	}
	for _, l := range s.Links() {
		to, ok := calls[[2]string{l.SpanContext.TraceID().String(), l.SpanContext.SpanID().String()}]
		if !ok {
			to = l.SpanContext.TraceID().String() + "/" + l.SpanContext.SpanID().String()
		}
		fmt.Fprintf(&b, "  link %s %v\n", to, l.Attributes)
	}
	return b.String()
}

func (want appended) equal(got appended) error {
	tb := &recordingTB{}
	// A batch returning ahead of the one before it is a gap for a moment:
	// whether its fill reads history (aion.pairing.resumed) or finds it
	// closed depends on the schedule. Everything else may not.
	want.metrics, got.metrics = withoutReads(want.metrics), withoutReads(got.metrics)
	if !metricdatatest.AssertEqual(tb, want.metrics, got.metrics, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()) {
		return fmt.Errorf("metrics differ: %s", tb.msg)
	}
	if !slices.Equal(want.spans, got.spans) {
		return fmt.Errorf("timeline spans differ:\nin history order:\n%s\nreturned in any order:\n%s", strings.Join(want.spans, ""), strings.Join(got.spans, ""))
	}
	return nil
}

// withoutReads returns rm without aion.pairing.resumed.
func withoutReads(rm metricdata.ResourceMetrics) metricdata.ResourceMetrics {
	out := rm
	out.ScopeMetrics = nil
	for _, sm := range rm.ScopeMetrics {
		sm.Metrics = slices.DeleteFunc(slices.Clone(sm.Metrics), func(m metricdata.Metrics) bool { return m.Name == "aion.pairing.resumed" })
		out.ScopeMetrics = append(out.ScopeMetrics, sm)
	}
	return out
}

// recordingTB takes what metricdatatest reports.
type recordingTB struct {
	testing.TB
	msg string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Error(args ...any) {
	r.msg += fmt.Sprint(args...)
}
