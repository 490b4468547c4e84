package otelstore_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

// A node that learns it lost a shard, from a write refused with ErrNotOwner
// or from IsCurrentOwner, releases the shard's activities (their gauge
// slots back, counted as released, no completion) and stops observing its
// workflows; winning it back resumes it.
func TestHandoffReleasesLostShards(t *testing.T) {
	for _, how := range []string{"ErrNotOwner", "IsCurrentOwner"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, tok := context.Background(), eventstore.RecorderToken()
				cluster := eventstore.NewMemoryCluster(eventstore.WithShardCount(1))
				h := newHarness(t)
				var reports []pairing.ResumeReport
				a := h.wrap(t, cluster.Node("a"), otelstore.WithResumeReports(func(r pairing.ResumeReport, err error) {
					if err != nil {
						t.Error(err)
					}
					reports = append(reports, r)
				}))
				so := a.(eventstore.ShardOwner)
				if err := so.AcquireOwnedShard(ctx, 0); err != nil {
					t.Fatal(err)
				}
				synctest.Wait() // the first resume, of nothing
				wf, run := ids()
				if err := a.Append(ctx, tok, wf, []eventstore.Event{
					eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "order"},
					eventstore.ActivityScheduled{Envelope: env(run, 1), ActivityID: 0, ActivityType: "charge"},
				}, 0); err != nil {
					t.Fatal(err)
				}
				h.assertSum(t, "aion.inflight_activities", false, point(1, ns, charge))

				// Node b takes the shard over (a's "lease" lapsed: killed
				// and replaced here by a release).
				if err := cluster.Node("a").ReleaseShards(ctx, []int{0}); err != nil {
					t.Fatal(err)
				}
				if err := cluster.Node("b").AcquireOwnedShard(ctx, 0); err != nil {
					t.Fatal(err)
				}
				switch how {
				case "ErrNotOwner":
					err := a.Append(ctx, tok, wf, []eventstore.Event{eventstore.ActivityCompleted{Envelope: env(run, 2), ActivityID: 0}}, 2)
					if !errors.Is(err, eventstore.ErrNotOwner) {
						t.Fatalf("a stale write = %v, want ErrNotOwner", err)
					}
				case "IsCurrentOwner":
					if so.IsCurrentOwner(ctx, 0) {
						t.Fatal("a still owns the shard")
					}
				}
				h.assertSum(t, "aion.inflight_activities", false, point(0, ns, charge))
				h.assertSum(t, "aion.pairing.released", true, point(2, ns)) // the activity and the run
				h.assertSum(t, "aion.activities.completed", true)

				// b finishes the work; a wins the shard back and resumes it.
				if err := cluster.Node("b").Append(ctx, tok, wf, []eventstore.Event{eventstore.ActivityCompleted{Envelope: env(run, 3), ActivityID: 0}}, 2); err != nil {
					t.Fatal(err)
				}
				if err := cluster.Node("b").ReleaseShards(ctx, []int{0}); err != nil {
					t.Fatal(err)
				}
				if err := so.AcquireOwnedShard(ctx, 0); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				if len(reports) != 2 || reports[1] != (pairing.ResumeReport{Workflows: 1, Runs: 1}) {
					t.Errorf("resume reports %+v, want the first and one of the open run", reports)
				}
				if err := a.Append(ctx, tok, wf, []eventstore.Event{eventstore.WorkflowCompleted{Envelope: env(run, 4)}}, 3); err != nil {
					t.Fatal(err)
				}
				if got := len(h.spansNamed("workflow order")); got != 1 {
					t.Errorf("%d run spans after a won the shard back, want 1", got)
				}
				h.assertSum(t, "aion.activities.completed", true)
			})
		})
	}
}

// A store whose shard count the decorator cannot tell is not followed: no
// resume, no release (a guess would release the wrong workflows).
func TestHandoffNeedsTheShardCount(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		called := false
		s := h.wrap(t, struct {
			eventstore.Store
			eventstore.ShardOwner
		}{eventstore.NewMemory(), eventstore.NewMemory()}, otelstore.WithResumeReports(func(pairing.ResumeReport, error) { called = true }))
		s.(eventstore.ShardOwner).SetOwnedShards(context.Background(), []int{1})
		synctest.Wait()
		if called {
			t.Error("a resume ran without a shard count")
		}
	})
}

// A claim of a row in a shard the node does not serve is not the node's to
// observe: a store whose claims cross shards hands the row back and the
// shard's owner claims it again. Were it kept, it would wait in the
// tracker for a dispatch and join it once the node adopts the shard: a
// resumed activity would get a wait (and a claim event) from a claim its
// node gave back.
func TestClaimsOutsideServedShardsAreIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, tok := context.Background(), eventstore.RecorderToken()
		cluster := eventstore.NewMemoryCluster(eventstore.WithShardCount(2))
		h := newHarness(t)
		a := h.wrap(t, cluster.Node("a"))
		if err := a.(eventstore.ShardOwner).AcquireOwnedShard(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if err := cluster.Node("b").AcquireOwnedShard(ctx, 1); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
		for eventstore.ShardOf(wf, 2) != 1 {
			wf = eventstore.NewWorkflowID()
		}
		if err := cluster.Node("b").AppendWithOutbox(ctx, tok, wf, []eventstore.Event{
			eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "checkout"},
			eventstore.ActivityScheduled{Envelope: env(run, 1), ActivityID: 0, ActivityType: "charge"},
		}, 0, row(wf, run)); err != nil {
			t.Fatal(err)
		}
		// a claims the row of b's shard (the store does not limit claims
		// by shard) and gives it back.
		rows, err := a.(eventstore.Outbox).ClaimOutboxRows(ctx, 10)
		if err != nil || len(rows) != 1 {
			t.Fatalf("a's claim = %v, %v; want the row", rows, err)
		}
		if err := cluster.Node("a").RearmOutboxPending(ctx, rows); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second) // the bubble's clock: the two claims apart
		// b leaves; a adopts its shard, resumes it and claims the row.
		if err := cluster.Node("b").ReleaseShards(ctx, []int{1}); err != nil {
			t.Fatal(err)
		}
		if err := a.(eventstore.ShardOwner).AcquireOwnedShard(ctx, 1); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		h.assertSum(t, "aion.inflight_activities", false, point(1, ns, charge))
		if rows, err := a.(eventstore.Outbox).ClaimOutboxRows(ctx, 10); err != nil || len(rows) != 1 {
			t.Fatalf("a's second claim = %v, %v; want the row", rows, err)
		}
		if got := h.waits(t); len(got) != 0 {
			t.Errorf("a resumed activity recorded waits %v", got)
		}
		if err := a.Append(ctx, tok, wf, []eventstore.Event{eventstore.ActivityCompleted{Envelope: env(run, 5), ActivityID: 0}}, 2); err != nil {
			t.Fatal(err)
		}
		spans := h.spansNamed("activity charge")
		if len(spans) != 1 {
			t.Fatalf("%d activity spans, want 1", len(spans))
		}
		if got := claimEvents(spans[0], spans[0].StartTime()); len(got) != 1 {
			t.Errorf("the activity's claim events %v, want a's last claim only", got)
		}
	})
}
