package pairing

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// The order property: for any set of runs, the telemetry is the same
// whatever order their facts arrive in and however often each repeats.
//
// Each case generates histories of a few workflows (continue-as-new
// chains, reopened runs, retries, every outcome and status, activities
// left to their run's close, a second terminal, a terminal after the
// close), cuts each history into batches and observes them once in
// history order. Then, several times, it observes the same batches
// shuffled across and within workflows, with some repeated, on a fresh
// tracker, and compares every metric point and every exported span (IDs,
// parent, name, times, attributes, events, links, status) with the first.
// The ID generator is installed, so span and parent IDs are comparable.
const (
	orderCases        = 400
	orderPermutations = 6
)

func TestObservationOrderDoesNotMatter(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	synctest.Test(t, func(t *testing.T) {
		for c := range uint64(orderCases) {
			if err := checkOrderCase(seed + c); err != nil {
				t.Fatalf("case seed %d: %v", seed+c, err)
			}
		}
	})
}

func checkOrderCase(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x0de5))
	batches := cutBatches(rng, genHistories(rng))
	want, err := observeAll(batches)
	if err != nil {
		return err
	}
	for p := range orderPermutations {
		order := shuffledWithRepeats(rng, batches)
		got, err := observeAll(order)
		if err != nil {
			return err
		}
		if err := want.equal(got); err != nil {
			return fmt.Errorf("permutation %d (%d batches, %d observations): %w", p, len(batches), len(order), err)
		}
	}
	return nil
}

// history is one workflow's history.
type history struct {
	ns     string
	wf     eventstore.WorkflowID
	events []eventstore.Event
}

// genHistories makes one to three workflows' histories.
func genHistories(rng *rand.Rand) []history {
	var out []history
	for w := range 1 + rng.IntN(3) {
		g := histGen{rng: rng, h: history{ns: []string{"", "tenant"}[rng.IntN(2)], wf: wfID(byte(w + 1))}, clock: 1_000_000}
		g.workflow()
		out = append(out, g.h)
	}
	return out
}

type histGen struct {
	rng   *rand.Rand
	h     history
	clock int64 // whole seconds, so duration sums are exact in any order
}

func (g *histGen) env(run eventstore.RunID) eventstore.Envelope {
	g.clock += 1 + g.rng.Int64N(3)
	return eventstore.Envelope{WorkflowID: g.h.wf, RunID: run, Seq: uint64(len(g.h.events) + 1), RecordedAt: time.Unix(g.clock, 0)}
}

func (g *histGen) add(ev eventstore.Event) { g.h.events = append(g.h.events, ev) }

var (
	orderTypes    = []string{"charge", "ship", "llm"}
	orderStatuses = []eventstore.WorkflowStatus{eventstore.StatusCompleted, eventstore.StatusFailed, eventstore.StatusCancelled, eventstore.StatusTimedOut}
)

func (g *histGen) workflow() {
	runs := 1 + g.rng.IntN(3)
	for r := range runs {
		run := runID(byte(r + 1))
		g.add(eventstore.WorkflowStarted{Envelope: g.env(run), WorkflowType: "flow"})
		open := g.activities(run, 0)
		switch {
		case r < runs-1:
			g.add(eventstore.WorkflowContinuedAsNew{Envelope: g.env(run), NewRunID: runID(byte(r + 2))})
		case g.rng.IntN(4) == 0:
			// left open
			continue
		default:
			g.close(run)
		}
		// A terminal after the close, for an activity the close abandoned.
		if len(open) > 0 && g.rng.IntN(3) == 0 {
			g.terminal(run, open[g.rng.IntN(len(open))])
		}
		if r == runs-1 && g.rng.IntN(3) == 0 {
			g.add(eventstore.WorkflowReopened{Envelope: g.env(run)})
			g.activities(run, 10)
			if g.rng.IntN(2) == 0 {
				g.close(run)
			}
		}
	}
}

func (g *histGen) close(run eventstore.RunID) {
	env := g.env(run)
	switch orderStatuses[g.rng.IntN(len(orderStatuses))] {
	case eventstore.StatusCompleted:
		g.add(eventstore.WorkflowCompleted{Envelope: env})
	case eventstore.StatusFailed:
		g.add(eventstore.WorkflowFailed{Envelope: env})
	case eventstore.StatusCancelled:
		g.add(eventstore.WorkflowCancelled{Envelope: env})
	default:
		g.add(eventstore.WorkflowTimedOut{Envelope: env})
	}
}

// activities writes a run's activity events from ordinal first on, and
// returns those left without a terminal.
func (g *histGen) activities(run eventstore.RunID, first eventstore.ActivityID) []eventstore.ActivityID {
	var open, done []eventstore.ActivityID
	next := first
	for range g.rng.IntN(12) {
		switch x := g.rng.IntN(10); {
		case x < 3 || len(open) == 0:
			g.add(eventstore.ActivityScheduled{Envelope: g.env(run), ActivityID: next, ActivityType: orderTypes[g.rng.IntN(len(orderTypes))]})
			open = append(open, next)
			next++
		case x < 5:
			a := open[g.rng.IntN(len(open))]
			g.add(eventstore.ActivityFailed{Envelope: g.env(run), ActivityID: a, Error: eventstore.ActivityError{Kind: eventstore.Retryable}})
		case x < 8:
			i := g.rng.IntN(len(open))
			g.terminal(run, open[i])
			done = append(done, open[i])
			open = slices.Delete(open, i, i+1)
		case x < 9 && len(done) > 0:
			g.terminal(run, done[g.rng.IntN(len(done))]) // a second terminal
		default:
			g.add(eventstore.SignalReceived{Envelope: g.env(run), SignalName: "poke"})
		}
	}
	return open
}

func (g *histGen) terminal(run eventstore.RunID, a eventstore.ActivityID) {
	env := g.env(run)
	switch g.rng.IntN(4) {
	case 0:
		g.add(eventstore.ActivityCompleted{Envelope: env, ActivityID: a})
	case 1:
		g.add(eventstore.ActivityFailed{Envelope: env, ActivityID: a, Error: eventstore.ActivityError{Kind: eventstore.Terminal}})
	case 2:
		g.add(eventstore.ActivityCancelled{Envelope: env, ActivityID: a})
	default:
		g.add(eventstore.ActivityTimedOut{Envelope: env, ActivityID: a})
	}
}

// obsBatch is one committed batch as the decorator observes it.
type obsBatch struct {
	ns       string
	wf       eventstore.WorkflowID
	firstSeq uint64 // 0: the events carry their Seq
	events   []eventstore.Event
	call     trace.SpanContext
}

// cutBatches cuts each history into batches of one to four events, in
// history order; some batches pass their positions as the events' own.
func cutBatches(rng *rand.Rand, hs []history) []obsBatch {
	var out []obsBatch
	for _, h := range hs {
		for i := 0; i < len(h.events); {
			n := min(1+rng.IntN(4), len(h.events)-i)
			b := obsBatch{ns: h.ns, wf: h.wf, firstSeq: uint64(i + 1), events: h.events[i : i+n], call: callSpan(len(out) + 1)}
			if rng.IntN(3) == 0 {
				b.firstSeq = 0
			}
			out = append(out, b)
			i += n
		}
	}
	return out
}

// callSpan is the span context of the n-th store call.
func callSpan(n int) trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	binary.BigEndian.PutUint64(tid[8:], uint64(n))
	binary.BigEndian.PutUint64(sid[:], uint64(n))
	tid[0], sid[0] = 0xca, 0xca
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
}

// shuffledWithRepeats returns the batches in a random order, some of them
// twice or three times.
func shuffledWithRepeats(rng *rand.Rand, batches []obsBatch) []obsBatch {
	out := slices.Clone(batches)
	for _, b := range batches {
		for rng.IntN(4) == 0 {
			out = append(out, b)
		}
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// observed is what one tracker exported after observing a sequence of
// batches.
type observed struct {
	metrics metricdata.ResourceMetrics
	spans   []string
}

func observeAll(batches []obsBatch) (observed, error) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithIDGenerator(NewIDGenerator(nil)))
	defer func() { _ = mp.Shutdown(context.Background()); _ = tp.Shutdown(context.Background()) }()
	var errs []error
	tr, err := New(WithMeterProvider(mp), WithTracerProvider(tp), withErrorHandler(func(err error) { errs = append(errs, err) }))
	if err != nil {
		return observed{}, err
	}
	for _, b := range batches {
		ctx := trace.ContextWithSpanContext(context.Background(), b.call)
		tr.Observe(ctx, b.ns, b.wf, b.firstSeq, b.events)
		if err := tr.join.check(); err != nil {
			return observed{}, err
		}
	}
	if len(errs) > 0 {
		return observed{}, fmt.Errorf("reported: %v", errs)
	}
	var o observed
	if err := reader.Collect(context.Background(), &o.metrics); err != nil {
		return observed{}, err
	}
	for _, s := range rec.Ended() {
		o.spans = append(o.spans, spanString(s))
	}
	slices.Sort(o.spans)
	return o, nil
}

// spanString renders everything of a span the property compares.
func spanString(s sdktrace.ReadOnlySpan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s/%s parent=%s %s..%s status=%v:%s\n", s.Name(), s.SpanContext().TraceID(), s.SpanContext().SpanID(),
		s.Parent().SpanID(), s.StartTime().UTC().Format(time.TimeOnly), s.EndTime().UTC().Format(time.TimeOnly), s.Status().Code, s.Status().Description)
	for _, a := range s.Attributes() {
		fmt.Fprintf(&b, "  attr %s=%s\n", a.Key, a.Value.Emit())
	}
	for _, e := range s.Events() {
		fmt.Fprintf(&b, "  event %s at %s %v\n", e.Name, e.Time.UTC().Format(time.TimeOnly), e.Attributes)
	}
	for _, l := range s.Links() {
		fmt.Fprintf(&b, "  link %s/%s %v\n", l.SpanContext.TraceID(), l.SpanContext.SpanID(), l.Attributes)
	}
	return b.String()
}

func (want observed) equal(got observed) error {
	tb := &seqTB{}
	if !metricdatatest.AssertEqual[metricdata.ResourceMetrics](tb, want.metrics, got.metrics,
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()) {
		return fmt.Errorf("metrics differ: %w", tb.failed)
	}
	if !slices.Equal(want.spans, got.spans) {
		return fmt.Errorf("spans differ:\nin history order:\n%s\nshuffled:\n%s", strings.Join(want.spans, ""), strings.Join(got.spans, ""))
	}
	return nil
}
