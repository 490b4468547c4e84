package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// racers is how many goroutines a concurrency rule races.
const racers = 8

// spawn runs f on a new goroutine of wg and stores its result in *errp; a
// panic becomes an error matching ErrRulePanicked and a runtime.Goexit one
// matching ErrRuleAborted, since the rule's own guard cannot see other
// goroutines.
func spawn(wg *sync.WaitGroup, errp *error, f func() error) {
	wg.Go(func() {
		returned := false
		defer func() {
			if p := recover(); p != nil {
				*errp = fmt.Errorf("%w: %v", ErrRulePanicked, p)
			} else if !returned {
				*errp = ErrRuleAborted
			}
		}()
		*errp = f()
		returned = true
	})
}

// race runs racer(0) to racer(n-1), each on its own goroutine, released
// together once all are started, and returns their errors.
func race(n int, racer func(g int) error) []error {
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for g := range n {
		spawn(&wg, &errs[g], func() error {
			<-start
			return racer(g)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// contest runs rounds in which every racer appends at the same head: try
// makes racer g's append of round at head and returns its length. Exactly
// one must win each round, and every loser must be told the head the
// winner left. It returns the winner of each round.
func contest(ctx context.Context, rounds int, head uint64, try func(round, g int, head uint64) (int, error)) ([]int, error) {
	winners := make([]int, rounds)
	for round := range rounds {
		tick(ctx)
		lens := make([]int, racers)
		errs := race(racers, func(g int) error {
			n, err := try(round, g, head)
			lens[g] = n
			return err
		})
		won := -1
		for g, err := range errs {
			if err == nil && won >= 0 {
				return nil, fmt.Errorf("round %d: racers %d and %d both appended at expectedSeq %d", round, won, g, head)
			}
			if err == nil {
				won = g
			}
		}
		if won < 0 {
			return nil, fmt.Errorf("round %d: no racer won expectedSeq %d: %w", round, head, errors.Join(errs...))
		}
		next := head + uint64(lens[won])
		for g, err := range errs {
			if g != won {
				if err := wantConflict(err, head, next, fmt.Sprintf("round %d: losing racer %d", round, g)); err != nil {
					return nil, err
				}
			}
		}
		winners[round], head = won, next
	}
	return winners, nil
}

// ksConcurrentAppends: one-event racers at one expectedSeq, round after
// round; then free-running writers that read the head and retry on a
// conflict must land every event exactly once, contiguously.
func ksConcurrentAppends(ctx context.Context, env *ruleEnv[keyspace.Store], s keyspace.Store) error {
	if err := ksContest(ctx, env, s, RuleKSConcurrentAppends, 1); err != nil {
		return err
	}
	g := newGen(newRand(env.cfg.seed, RuleKSConcurrentAppends+"/free"))
	key := keyspace.NewStreamKey(g.workflow(), g.run(), 1, 1)
	const perWriter = 20
	errs := make([]error, racers)
	var wg sync.WaitGroup
	for w := range racers {
		spawn(&wg, &errs[w], func() error {
			losses := 0
			for i := 0; i < perWriter; {
				head, err := s.Head(ctx, key)
				if err != nil {
					return fmt.Errorf("reading the head: %w", err)
				}
				ev := keyspace.ActivityEvent{WorkflowID: key.WorkflowID, RunID: key.RunID, ActivityID: key.ActivityID, Attempt: key.Attempt,
					AgentID: fmt.Sprint("writer-", w), WorkerSeq: uint64(i)}
				_, err = s.AppendEvents(ctx, head, []keyspace.ActivityEvent{ev})
				switch {
				case err == nil:
					i++
				case !errors.Is(err, eventstore.ErrSequenceConflict):
					return fmt.Errorf("AppendEvents(expectedSeq=%d): %w", head, err)
				case losses > racers*perWriter:
					// Each conflict is another writer's success between this
					// writer's Head and its append: more losses than all
					// writers append means a wrong head.
					return fmt.Errorf("writer %d lost %d appends at the head Head reported: %w", w, losses, err)
				default:
					losses++
				}
			}
			return nil
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	recs, err := s.ReadFrom(ctx, key, 0, 0)
	if err != nil {
		return err
	}
	next := map[string]uint64{}
	for i, rec := range recs {
		if rec.StoreSeq != uint64(i) || rec.Event.WorkerSeq != next[rec.Event.AgentID] {
			return fmt.Errorf("record %d: StoreSeq %d, %s event %d, want StoreSeq %d and its event %d (lost, duplicated or torn)",
				i, rec.StoreSeq, rec.Event.AgentID, rec.Event.WorkerSeq, i, next[rec.Event.AgentID])
		}
		next[rec.Event.AgentID]++
	}
	if len(recs) != racers*perWriter {
		return fmt.Errorf("%d writers × %d events: the stream holds %d records", racers, perWriter, len(recs))
	}
	return nil
}

// ksConcurrentBatches: racers append batches of up to five events at one
// expectedSeq, round after round: the stream is exactly the winners'
// batches, whole and in order.
func ksConcurrentBatches(ctx context.Context, env *ruleEnv[keyspace.Store], s keyspace.Store) error {
	return ksContest(ctx, env, s, RuleKSConcurrentBatches, 5)
}

func ksContest(ctx context.Context, env *ruleEnv[keyspace.Store], s keyspace.Store, name string, maxBatch int) error {
	start := newKSModel(ctx, uint64(env.cfg.seed), 24)
	m, _ := start(s)
	rounds := 24 * env.cfg.scale
	batches := make([][][]keyspace.ActivityEvent, rounds)
	for r := range batches {
		batches[r] = make([][]keyspace.ActivityEvent, racers)
		for g := range racers {
			batches[r][g] = m.batch(ksAppend{stream: 0, n: 1 + m.g.IntN(maxBatch), seed: m.g.Uint64()})
		}
	}
	winners, err := contest(ctx, rounds, 0, func(r, g int, head uint64) (int, error) {
		_, err := s.AppendEvents(ctx, head, deepCopy(batches[r][g]))
		return len(batches[r][g]), err
	})
	if err != nil {
		return err
	}
	for r, g := range winners {
		for _, ev := range batches[r][g] {
			m.recs[m.keys[0]] = append(m.recs[m.keys[0]], stored(ev, m.head(m.keys[0])))
		}
	}
	return m.read(ksRead{from: abs(0)})
}

// esConcurrentAppends: racers append batches (through Append, and every
// other round for an Outbox through AppendWithOutbox with rows) to one
// workflow at one expectedSeq, round after round: one winner, losers told
// its head, the history exactly the winners' batches, only the winners'
// rows staged.
func esConcurrentAppends(ctx context.Context, env *ruleEnv[eventstore.Store], s eventstore.Store) error {
	m, _ := newESModel(ctx, uint64(env.cfg.seed), 2, env.cfg.scale)(s)
	w := m.wf(0)
	rounds := 24 * env.cfg.scale
	type entry struct {
		events []eventstore.Event
		rows   []eventstore.OutboxRow
	}
	tries := make([][]entry, rounds)
	if err := m.append(esAppend{wf: 0, n: 1, seed: 1}); err != nil {
		return err
	}
	next := eventstore.ActivityID(0)
	for r := range tries {
		tries[r] = make([]entry, racers)
		for g := range racers {
			kinds := make([]string, 1+m.g.IntN(4))
			for i := range kinds {
				kinds[i] = pick(m.g, kSignal, kSchedule)
			}
			evs, rows := m.batch(w, esAppend{wf: 0, n: len(kinds), kinds: kinds, seed: m.g.Uint64(), rows: m.ob != nil && r%2 == 0})
			// Every racer schedules activities of its own, so that the
			// winners' rows never share a dispatch key.
			ids := map[eventstore.ActivityID]eventstore.ActivityID{}
			for i, ev := range evs {
				if s, ok := ev.(eventstore.ActivityScheduled); ok {
					ids[s.ActivityID], s.ActivityID = next, next
					evs[i], next = s, next+1
				}
			}
			for i := range rows {
				rows[i].Ordinal, rows[i].DispatchKey = ids[rows[i].Ordinal], ""
			}
			tries[r][g] = entry{evs, rows}
		}
	}
	winners, err := contest(ctx, rounds, w.head(), func(r, g int, head uint64) (int, error) {
		e := tries[r][g]
		if e.rows != nil {
			return len(e.events), m.ob.AppendWithOutbox(ctx, token, w.id, deepCopy(e.events), head, deepCopy(e.rows))
		}
		return len(e.events), s.Append(ctx, token, w.id, deepCopy(e.events), head)
	})
	if err != nil {
		return err
	}
	for r, g := range winners {
		m.apply(w, tries[r][g].events, tries[r][g].rows)
	}
	if err := m.readFrom(w, abs(0), ctxLive, 0); err != nil {
		return err
	}
	if m.ob == nil {
		return nil
	}
	return m.claim(1 << 20)
}
