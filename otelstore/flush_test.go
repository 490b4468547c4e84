package otelstore_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// total is the sum of every point of a counter or up-down counter, or the
// sample count of every point of a histogram (0 if not recorded).
func (h *harness) total(t *testing.T, name string) int64 {
	t.Helper()
	m, ok := h.metrics(t)[name]
	if !ok {
		return 0
	}
	var n int64
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			n += dp.Value
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			n += int64(dp.Count)
		}
	default:
		t.Fatalf("%s is %T", name, m.Data)
	}
	return n
}

func (h *harness) wantTotal(t *testing.T, name string, want int64) {
	t.Helper()
	if got := h.total(t, name); got != want {
		t.Errorf("%s = %d, want %d", name, got, want)
	}
}

// An adopter that acquires a dead node's shards and at once writes the
// retries, terminals and closes of its orphaned runs, before the resume it
// starts by itself lists them (or, after a restart, without any resume),
// records each of them once, at history's times, each activity span under
// its run span (no ID generator installed), once Flush returned: a
// process calls Flush and then shuts its providers down. Before Flush
// waited for the shards' background resume too, 5 of 60 runs of the
// adoption lost a completion, a retry, a run span or gauge slots (the
// resume was still joining when Flush returned).
func TestAdopterClosesOrphansBeforeItsResume(t *testing.T) {
	for _, mode := range []string{"adopt", "adopt, concurrent writers", "adopt then Resume", "restart"} {
		t.Run(mode, func(t *testing.T) {
			ctx, tok := context.Background(), eventstore.RecorderToken()
			cluster := eventstore.NewMemoryCluster()
			all := make([]int, eventstore.DefaultShardCount)
			for i := range all {
				all[i] = i
			}
			dead := newHarness(t)
			a := dead.wrap(t, cluster.Node("a"))
			if mode != "restart" {
				if err := a.(eventstore.ShardOwner).AcquireOwnedShards(ctx, all); err != nil {
					t.Fatal(err)
				}
			}
			// 30 open runs of 1 to 3 activities in flight, activity 0
			// retried once.
			type orphan struct {
				wf   eventstore.WorkflowID
				run  eventstore.RunID
				seq  uint64
				acts int
			}
			rng := rand.New(rand.NewPCG(1, 2))
			var orphans []orphan
			inFlight := 0
			for range 30 {
				wf, run := ids()
				o := orphan{wf: wf, run: run, acts: 1 + rng.IntN(3)}
				evs := []eventstore.Event{eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "order"}}
				for i := range o.acts {
					evs = append(evs, eventstore.ActivityScheduled{Envelope: env(run, time.Second), ActivityID: eventstore.ActivityID(i), ActivityType: "charge"})
				}
				evs = append(evs, eventstore.ActivityFailed{Envelope: env(run, 2*time.Second), ActivityID: 0, Attempt: 1, Error: eventstore.ActivityError{Kind: eventstore.Retryable}})
				if err := a.Append(ctx, tok, wf, evs, 0); err != nil {
					t.Fatal(err)
				}
				o.seq = uint64(len(evs))
				orphans = append(orphans, o)
				inFlight += o.acts
			}
			// a resumes the shards it acquired in the background.
			if err := otelstore.Flush(ctx, a); err != nil {
				t.Fatal(err)
			}
			dead.wantTotal(t, "aion.inflight_activities", int64(inFlight))

			h := newHarness(t)
			var b eventstore.Store
			if mode == "restart" {
				b = h.wrap(t, cluster.Node("a"))
			} else {
				cluster.Kill("a")
				b = h.wrap(t, cluster.Node("b"))
				if err := b.(eventstore.ShardOwner).AcquireOwnedShards(ctx, all); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			for _, o := range orphans {
				write := func() {
					evs := []eventstore.Event{eventstore.ActivityFailed{Envelope: env(o.run, 3*time.Second), ActivityID: 0, Attempt: 2, Error: eventstore.ActivityError{Kind: eventstore.Retryable}}}
					for i := range o.acts {
						evs = append(evs, eventstore.ActivityCompleted{Envelope: env(o.run, 5*time.Second), ActivityID: eventstore.ActivityID(i), Attempt: 3})
					}
					evs = append(evs, eventstore.WorkflowCompleted{Envelope: env(o.run, 10*time.Second)})
					if err := b.Append(ctx, tok, o.wf, evs, o.seq); err != nil {
						t.Error(err)
					}
				}
				if mode == "adopt, concurrent writers" {
					wg.Go(write)
				} else {
					write()
				}
			}
			wg.Wait()
			if mode == "adopt then Resume" {
				if _, err := otelstore.Resume(ctx, b); err != nil {
					t.Fatal(err)
				}
			}
			if err := otelstore.Flush(ctx, b); err != nil {
				t.Fatal(err)
			}
			h.wantTotal(t, "aion.activities.completed", int64(inFlight))
			h.wantTotal(t, "aion.activity.duration", int64(inFlight))
			h.wantTotal(t, "aion.activities.retried", 30)
			h.wantTotal(t, "aion.activities.dispatched", 0)
			h.wantTotal(t, "aion.workflows.completed", 30)
			h.wantTotal(t, "aion.workflows.started", 0)
			h.wantTotal(t, "aion.workflow.duration", 30)
			h.wantTotal(t, "aion.inflight_activities", 0)

			traces := map[string]int{}
			runSpans := map[string]string{} // trace -> run span ID
			for _, s := range h.spansNamed("workflow order") {
				traces[s.SpanContext().TraceID().String()]++
				runSpans[s.SpanContext().TraceID().String()] = s.SpanContext().SpanID().String()
				if !s.StartTime().Equal(t0) || !s.EndTime().Equal(t0.Add(10*time.Second)) {
					t.Errorf("run span %v..%v, want history's 0s..10s", s.StartTime().Sub(t0), s.EndTime().Sub(t0))
				}
			}
			if len(traces) != 30 {
				t.Errorf("%d runs with a run span, want 30", len(traces))
			}
			for id, n := range traces {
				if n != 1 {
					t.Errorf("trace %s has %d run spans, want 1", id, n)
				}
			}
			acts := h.spansNamed("activity charge")
			if len(acts) != inFlight {
				t.Errorf("%d activity spans, want %d", len(acts), inFlight)
			}
			for _, s := range acts {
				if run := runSpans[s.SpanContext().TraceID().String()]; s.Parent().SpanID().String() != run {
					t.Errorf("activity span's parent %s, want its run span %s", s.Parent().SpanID(), run)
				}
				if !s.StartTime().Equal(t0.Add(time.Second)) || !s.EndTime().Equal(t0.Add(5*time.Second)) {
					t.Errorf("activity span %v..%v, want history's 1s..5s", s.StartTime().Sub(t0), s.EndTime().Sub(t0))
				}
			}
		})
	}
}

// blockedLister is a node whose ListActive waits for its gate: the resume
// of the shards the decorator starts serving hangs until the test opens it.
type blockedLister struct {
	*eventstore.Memory
	gate chan struct{}
}

func (b blockedLister) ListActive(ctx context.Context) ([]eventstore.WorkflowID, error) {
	<-b.gate
	return b.Memory.ListActive(ctx)
}

// Flush waits for the resume the decorator runs by itself when it starts
// serving shards, and gives up when its context ends.
func TestFlushWaitsForTheShardsResume(t *testing.T) {
	ctx := context.Background()
	inner := blockedLister{eventstore.NewMemory(), make(chan struct{})}
	reports := make(chan error, 1)
	s := newHarness(t).wrap(t, inner, otelstore.WithResumeReports(func(_ pairing.ResumeReport, err error) { reports <- err }))
	if err := s.(eventstore.ShardOwner).AcquireOwnedShards(ctx, []int{0, 1}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := otelstore.Flush(cancelled, s); !errors.Is(err, context.Canceled) {
		t.Fatalf("Flush during a blocked resume = %v, want context.Canceled", err)
	}
	close(inner.gate)
	if err := otelstore.Flush(ctx, s); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-reports:
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
	default:
		t.Fatal("Flush returned before the shards' resume reported")
	}
}

// A node whose scope narrows, or which runs its first election, gives the
// shards it leaves back, also those it served from the start without a
// resume, and one whose scope widens resumes the shards it gains by
// itself: once Flush returned, its gauge is what history has in flight in
// the shards it serves, without a call to Resume.
func TestScopeChangesKeepTheGaugeToHistory(t *testing.T) {
	ctx, tok := context.Background(), eventstore.RecorderToken()
	const shards = 4
	inner := eventstore.NewMemory(eventstore.WithShardCount(shards))
	h := newHarness(t)
	s := h.wrap(t, inner)
	perShard := make([]int64, shards)
	for range 40 {
		wf, run := ids()
		if err := s.Append(ctx, tok, wf, []eventstore.Event{
			eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "flow"},
			eventstore.ActivityScheduled{Envelope: env(run, time.Second), ActivityID: 0, ActivityType: "charge"},
		}, 0); err != nil {
			t.Fatal(err)
		}
		perShard[eventstore.ShardOf(wf, shards)]++
	}
	so := s.(eventstore.ShardOwner)
	so.SetOwnedShards(ctx, []int{0})
	if err := otelstore.Flush(ctx, s); err != nil {
		t.Fatal(err)
	}
	h.assertSum(t, "aion.inflight_activities", false, point(perShard[0], ns, charge))
	so.ExtendOwnedShards(ctx, []int{2, 3})
	if err := otelstore.Flush(ctx, s); err != nil {
		t.Fatal(err)
	}
	h.assertSum(t, "aion.inflight_activities", false, point(perShard[0]+perShard[2]+perShard[3], ns, charge))
	so.SetOwnedShards(ctx, nil)
	if err := otelstore.Flush(ctx, s); err != nil {
		t.Fatal(err)
	}
	h.assertSum(t, "aion.inflight_activities", false, point(40, ns, charge))
	// The first election leaves out the shards the node did not win.
	if err := so.AcquireOwnedShards(ctx, []int{1, 2}); err != nil {
		t.Fatal(err)
	}
	if err := otelstore.Flush(ctx, s); err != nil {
		t.Fatal(err)
	}
	h.assertSum(t, "aion.inflight_activities", false, point(perShard[1]+perShard[2], ns, charge))
}
