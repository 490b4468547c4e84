package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
	"github.com/aionotel/aionotel/keyspace/pgstore"
)

// TestTwoProcessesThroughTheirOwnSequencers plays two server processes: two
// pools (separate connections), two Stores, two Sequencers, all writing one
// stream at once, each agent's 500 events in random batches of 1 to 16,
// re-sending some batches as a reconnecting worker would. The primary key
// turns every collision into a sequence conflict the Sequencers resolve, so
// the stream ends with exactly 1,000 records, store seqs 0..999 without a
// gap, every (agent, worker seq) once, each agent's events in their order.
//
// Optimistic concurrency is not fair: the writer that just won holds a fresh
// head and tends to win again, while the loser re-reads and retries. Two
// processes hammering one stream is the failover case, not the steady state
// (one Sequencer per stream), so the test retries an exhausted Append, as a
// server would, rather than tuning for fairness.
func TestTwoProcessesThroughTheirOwnSequencers(t *testing.T) {
	ctx := context.Background()
	schemaPool := testPool(t)
	schema := testSchema(t, schemaPool)
	key := keyspacetest.NewKey(4, 1)
	const perAgent = 500

	agents := []string{"process-a", "process-b"}
	errs := make([]error, len(agents))
	resent := make([]int, len(agents))
	counters := make([]*conflictCounter, len(agents))
	exhaustions := make([]int, len(agents))
	var wg sync.WaitGroup
	start := make(chan struct{})
	for p, agent := range agents {
		pool := testPool(t) // one pool per "process"
		s, err := pgstore.New(ctx, pool, pgstore.WithSchema(schema))
		if err != nil {
			t.Fatal(err)
		}
		counted := &conflictCounter{Store: s}
		counters[p] = counted
		seq := keyspace.NewSequencer(counted, keyspace.WithMaxRetries(64))
		rng := rand.New(rand.NewPCG(uint64(p), 42))
		wg.Go(func() {
			<-start
			var last []keyspace.ActivityEvent
			for next := 0; next < perAgent; {
				n := min(1+rng.IntN(16), perAgent-next)
				batch := make([]keyspace.ActivityEvent, n)
				for i := range batch {
					batch[i] = keyspacetest.Event(key, uint64(next+i), keyspace.Message{Text: fmt.Sprintf("%s %d", agent, next+i)})
					batch[i].AgentID = agent
				}
				if last != nil && rng.IntN(4) == 0 {
					// A re-delivery of the previous batch, ahead of the new one.
					batch = append(append([]keyspace.ActivityEvent(nil), last...), batch...)
					resent[p]++
				}
				// The writer that keeps winning can starve the other past its
				// retries; Append of the same batch again is safe (what landed
				// is dropped as a re-delivery), and is what a server would do.
				for attempt := 1; ; attempt++ {
					_, err := seq.Append(ctx, batch)
					if err == nil {
						break
					}
					var exhausted *keyspace.RetryExhaustedError
					if !errors.As(err, &exhausted) || attempt == 50 {
						errs[p] = fmt.Errorf("%s: Append of events %d..%d: %w", agent, next, next+n-1, err)
						return
					}
					exhaustions[p]++
				}
				last = batch[len(batch)-n:]
				next += n
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}

	reader, err := pgstore.New(ctx, schemaPool, pgstore.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	recs, err := reader.ReadFrom(ctx, key, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(agents)*perAgent {
		t.Fatalf("the stream holds %d records, want %d", len(recs), len(agents)*perAgent)
	}
	next := map[string]uint64{}
	switches := 0
	for i, r := range recs {
		if r.StoreSeq != uint64(i) {
			t.Fatalf("record %d has store seq %d", i, r.StoreSeq)
		}
		agent := r.Event.AgentID
		if r.Event.WorkerSeq != next[agent] {
			t.Fatalf("record %d: %s event %d, want its event %d (lost, duplicated or reordered)", i, agent, r.Event.WorkerSeq, next[agent])
		}
		next[agent]++
		if i > 0 && recs[i-1].Event.AgentID != agent {
			switches++
		}
	}
	if head, err := reader.Head(ctx, key); err != nil || head != uint64(len(agents)*perAgent) {
		t.Fatalf("Head = %d, %v; want %d", head, err, len(agents)*perAgent)
	}
	// Both writers started together; without a single conflict the test
	// would not have exercised the race at all.
	conflicts := counters[0].conflicts.Load() + counters[1].conflicts.Load()
	if conflicts == 0 {
		t.Fatalf("the writers met no sequence conflict: they did not race")
	}
	t.Logf("re-sent batches %v; %d sequence conflicts; %d runs of retries exhausted; the writers took turns %d times",
		resent, conflicts, exhaustions[0]+exhaustions[1], switches)
}

// conflictCounter counts the sequence conflicts a Store returns.
type conflictCounter struct {
	keyspace.Store
	conflicts atomic.Int64
}

func (c *conflictCounter) AppendEvents(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	head, err := c.Store.AppendEvents(ctx, expectedSeq, events)
	if errors.Is(err, eventstore.ErrSequenceConflict) {
		c.conflicts.Add(1)
	}
	return head, err
}
