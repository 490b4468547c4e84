package pairing

import (
	"math/rand/v2"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/internal/historytest"
)

// Under churn past both bounds (facts of generated histories, shuffled
// and repeated, into a tracker that holds a few of them), the join's
// structure stays whole after every call, the gauge equals the activities
// in flight and never goes negative, and neither bound is exceeded.
func TestBoundsHoldUnderChurn(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	cases := uint64(200)
	if raceEnabled {
		cases /= 10 // one goroutine: the race detector finds nothing more, only slower
	}
	for c := range cases {
		rng := rand.New(rand.NewPCG(seed+c, 3))
		h := newHarness(t, WithMaxInFlight(1+rng.IntN(6)), WithMaxRemembered(1+rng.IntN(12)))
		var batches []historytest.Batch
		for range 3 {
			batches = append(batches, historytest.Cut(rng, historytest.Generate(rng))...)
		}
		for i, b := range historytest.Shuffle(rng, batches, true) {
			h.tr.Observe(trace.ContextWithSpanContext(bg, b.Call), b.Namespace, b.WorkflowID, b.FirstSeq, b.Events)
			if err := h.tr.join.check(); err != nil {
				t.Fatalf("seed %d, batch %d: %v", seed+c, i, err)
			}
			if i%5 != 0 {
				continue
			}
			var gauge int64
			for k, v := range readSnapshot(h.scope()).inflight {
				if v < 0 {
					t.Fatalf("seed %d, batch %d: gauge %v = %d", seed+c, i, k, v)
				}
				gauge += v
			}
			if gauge != int64(h.tr.InFlight()) {
				t.Fatalf("seed %d, batch %d: gauge %d, %d in flight", seed+c, i, gauge, h.tr.InFlight())
			}
		}
	}
}
