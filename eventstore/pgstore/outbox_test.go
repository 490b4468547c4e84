package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
)

// TestClaimOutboxRowsConcurrentSafe: dispatchers on three nodes claim from
// one outbox at once, with small limits, while appends keep staging rows;
// every row is claimed exactly once, and the claimed count is the total.
func TestClaimOutboxRowsConcurrentSafe(t *testing.T) {
	ctx := context.Background()
	pool := testPool(t)
	schema := testSchema(t, pool)
	var nodes []*pgstore.Store
	for i := range 3 {
		s, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema), pgstore.WithNode(fmt.Sprint("node-", i)))
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, s)
	}
	const workflows, perWorkflow = 30, 10
	stage := func(s *pgstore.Store) error {
		wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
		evs := []eventstore.Event{started(wf, run)}
		var rows []eventstore.OutboxRow
		for i := range perWorkflow {
			id := eventstore.ActivityID(i)
			evs = append(evs, eventstore.ActivityScheduled{Envelope: eventstore.Envelope{RunID: run}, ActivityID: id, ActivityType: "charge"})
			rows = append(rows, eventstore.OutboxRow{RunID: run, Ordinal: id, ActivityType: "charge"})
		}
		return s.AppendWithOutbox(ctx, token, wf, evs, 0, rows)
	}
	// Half staged before, half while the claimers run.
	for i := range workflows / 2 {
		if err := stage(nodes[i%3]); err != nil {
			t.Fatal(err)
		}
	}
	var (
		mu      sync.Mutex
		claimed = map[string]int{}
		wg      sync.WaitGroup
		errs    = make(chan error, 64)
		staging = make(chan struct{})
	)
	wg.Go(func() {
		defer close(staging)
		for i := range workflows / 2 {
			if err := stage(nodes[i%3]); err != nil {
				errs <- err
				return
			}
		}
	})
	for c := range 8 {
		wg.Go(func() {
			s := nodes[c%3]
			stagingDone := false
			for {
				rows, err := s.ClaimOutboxRows(ctx, 1+c%4)
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, r := range rows {
					claimed[r.DispatchKey]++
				}
				mu.Unlock()
				if len(rows) == 0 {
					if stagingDone {
						return
					}
					select {
					case <-staging:
						stagingDone = true // one more round sees the last rows
					default:
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for key, n := range claimed {
		if n != 1 {
			t.Errorf("row %s claimed %d times", key, n)
		}
	}
	if len(claimed) != workflows*perWorkflow {
		t.Fatalf("claimed %d distinct rows, want %d", len(claimed), workflows*perWorkflow)
	}
	if n, err := nodes[0].CountClaimedOutboxRows(ctx); err != nil || n != workflows*perWorkflow {
		t.Fatalf("CountClaimedOutboxRows = %d, %v; want %d", n, err, workflows*perWorkflow)
	}
}
