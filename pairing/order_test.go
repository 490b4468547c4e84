package pairing

import (
	"context"
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
	"github.com/aionotel/aionotel/internal/historytest"
)

// The order property: for any set of runs, the telemetry is the same
// whatever order their facts arrive in and however often each repeats.
//
// Each case generates histories of a few workflows (continue-as-new
// chains, reopened runs, retries, every outcome and status, activities
// left to their run's close, a second terminal, a terminal after the
// close), cuts each history into batches, and derives the outbox facts of
// their dispatches: most rows staged, some claimed once or twice (a
// re-arm) at later times. It observes them once in history order, each
// dispatch's outbox facts right after it. Then, several times, it
// observes the same batches shuffled across and within workflows, with
// some repeated, the outbox facts anywhere before the first batch that
// could settle their activity (before their dispatch too, some repeated;
// a claim has no history position, so one arriving after its activity's
// completion was recorded is too late by rule), on a fresh tracker, and
// compares every metric point and every exported span (IDs, parent,
// name, times, attributes, events, links, status) with the first. The ID
// generator is installed, so span and parent IDs are comparable.
const (
	orderCases        = 400
	orderPermutations = 6
)

func TestObservationOrderDoesNotMatter(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	synctest.Test(t, func(t *testing.T) {
		cases := uint64(orderCases)
		if raceEnabled {
			cases /= 10 // one goroutine: the race detector finds nothing more, only slower
		}
		for c := range cases {
			if err := checkOrderCase(seed + c); err != nil {
				t.Fatalf("case seed %d: %v", seed+c, err)
			}
		}
	})
}

func checkOrderCase(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x0de5))
	batches := historytest.Cut(rng, historytest.Generate(rng))
	facts := outboxFacts(rng, batches)
	want, err := observeAll(inHistoryOrder(batches, facts))
	if err != nil {
		return err
	}
	for p := range orderPermutations {
		order := shuffled(rng, batches, facts)
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

// observed is what one tracker exported after observing a sequence of
// batches.
type observed struct {
	metrics metricdata.ResourceMetrics
	spans   []string
}

func observeAll(batches []observation) (observed, error) {
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
	for _, o := range batches {
		switch b := o.batch; {
		case b == nil:
			f := o.outbox
			if f.claim {
				tr.Claimed(context.Background(), f.key.Namespace, []eventstore.OutboxRow{row(f.key)}, f.at)
			} else {
				tr.Staged(context.Background(), f.key.Namespace, f.key.WorkflowID, []eventstore.OutboxRow{row(f.key)})
			}
		default:
			ctx := trace.ContextWithSpanContext(context.Background(), b.Call)
			tr.Observe(ctx, b.Namespace, b.WorkflowID, b.FirstSeq, b.Events)
		}
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
		fmt.Fprintf(&b, "  attr %s=%s\n", a.Key, a.Value.String())
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

// An observation is a committed batch or an outbox fact.
type observation struct {
	batch  *historytest.Batch
	outbox *outboxFact
}

// outboxFact is a row staged, or claimed at a time, for one dispatch of
// the generated histories, and where it may arrive: its dispatch's batch,
// and the batches that could settle it (a terminal of it, a close of its
// run after it), by index in history order.
type outboxFact struct {
	key      Key
	claim    bool
	at       time.Time
	dispatch int
	settlers []int
}

// outboxFacts derives the outbox facts of the batches' dispatches, each
// dispatch's in the order they happen (staged, then its claims by time).
func outboxFacts(rng *rand.Rand, batches []historytest.Batch) []*outboxFact {
	var out []*outboxFact
	for i, b := range batches {
		for _, ev := range b.Events {
			d, ok := ev.(eventstore.ActivityScheduled)
			if !ok {
				continue
			}
			k := Key{Namespace: b.Namespace, WorkflowID: b.WorkflowID, RunID: d.RunID, ActivityID: d.ActivityID}
			settlers := settlersOf(batches, k, d.Seq)
			if rng.IntN(4) != 0 {
				out = append(out, &outboxFact{key: k, dispatch: i, settlers: settlers})
			}
			at := d.RecordedAt
			for range rng.IntN(3) {
				at = at.Add(time.Duration(1+rng.IntN(5)) * time.Second)
				out = append(out, &outboxFact{key: k, claim: true, at: at, dispatch: i, settlers: settlers})
			}
		}
	}
	return out
}

// settlersOf returns the batches holding a terminal of k or a close of its
// run after position seq.
func settlersOf(batches []historytest.Batch, k Key, seq uint64) []int {
	var out []int
	for i, b := range batches {
		if b.WorkflowID != k.WorkflowID || b.Namespace != k.Namespace {
			continue
		}
		for _, ev := range b.Events {
			f, _, s := factOf(ev)
			if f.run == k.RunID && (f.kind == factTerminal && f.activity == k.ActivityID || f.kind == factClose && s > seq) {
				out = append(out, i)
				break
			}
		}
	}
	return out
}

// inHistoryOrder is the batches in order, each dispatch's outbox facts
// right after its batch, or right before it when that batch also settles
// it.
func inHistoryOrder(batches []historytest.Batch, facts []*outboxFact) []observation {
	var out []observation
	for i := range batches {
		var after []observation
		for _, f := range facts {
			if f.dispatch != i {
				continue
			}
			if slices.Contains(f.settlers, i) {
				out = append(out, observation{outbox: f})
			} else {
				after = append(after, observation{outbox: f})
			}
		}
		out = append(out, observation{batch: &batches[i]})
		out = append(out, after...)
	}
	return out
}

// shuffled is the batches shuffled, some repeated, and each outbox fact
// (some repeated) anywhere before the first arrival of a batch that could
// settle its activity, the claims of one dispatch in their order.
func shuffled(rng *rand.Rand, batches []historytest.Batch, facts []*outboxFact) []observation {
	order := historytest.Shuffle(rng, batches, true)
	index := make(map[trace.SpanID]int, len(batches))
	for i, b := range batches {
		index[b.Call.SpanID()] = i
	}
	first := make(map[int]int) // batch -> its first position in order
	for p := len(order) - 1; p >= 0; p-- {
		first[index[order[p].Call.SpanID()]] = p
	}
	type placed struct {
		gap, seq int // before order[gap], in seq order
		f        *outboxFact
	}
	var items []placed
	last := map[Key]int{} // the gap of a dispatch's last claim placed
	for seq, f := range facts {
		limit := len(order)
		for _, s := range f.settlers {
			limit = min(limit, first[s])
		}
		from := 0
		if f.claim {
			from = last[f.key]
		}
		gap := from + rng.IntN(limit-from+1)
		if f.claim {
			last[f.key] = gap
		}
		items = append(items, placed{gap, seq, f})
		if rng.IntN(4) == 0 { // a repeat, after the first
			items = append(items, placed{gap + rng.IntN(limit-gap+1), len(facts) + seq, f})
		}
	}
	slices.SortStableFunc(items, func(a, b placed) int {
		if a.gap != b.gap {
			return a.gap - b.gap
		}
		return a.seq - b.seq
	})
	var out []observation
	next := 0
	for p := range order {
		for ; next < len(items) && items[next].gap == p; next++ {
			out = append(out, observation{outbox: items[next].f})
		}
		out = append(out, observation{batch: &order[p]})
	}
	for ; next < len(items); next++ {
		out = append(out, observation{outbox: items[next].f})
	}
	return out
}
