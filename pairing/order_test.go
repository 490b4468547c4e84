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

	"github.com/aionotel/aionotel/internal/historytest"
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
	want, err := observeAll(batches)
	if err != nil {
		return err
	}
	for p := range orderPermutations {
		order := historytest.Shuffle(rng, batches, true)
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

func observeAll(batches []historytest.Batch) (observed, error) {
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
		ctx := trace.ContextWithSpanContext(context.Background(), b.Call)
		tr.Observe(ctx, b.Namespace, b.WorkflowID, b.FirstSeq, b.Events)
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
