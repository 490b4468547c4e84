package conformance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// racers is how many goroutines a concurrency rule races.
const racers = 8

// raceBudget is how long a contest or claims rule goes on racing past its
// minimum rounds. A window of a few instructions between a store's check
// and its write is hit in a small share of rounds, fewer still on a busy
// machine, where two goroutines seldom run at the same instant; a fast
// store, where such windows are, gets through many rounds in it, a slow
// one (a database) only its minimum.
const raceBudget = 250 * time.Millisecond

// racing calls phase(0), phase(1), ... until one fails, at least once and
// then while the rule's race budget (times its scale) lasts.
func racing(cfg config, phase func(int) error) error {
	start := time.Now()
	for i := 0; ; i++ {
		if err := phase(i); err != nil || time.Since(start) >= cfg.raceFor*time.Duration(cfg.scale) {
			return err
		}
	}
}

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

// race runs racer(0) to racer(n-1), each on its own goroutine, and
// returns their errors. The racers wait for each other running, not
// parked: the first ones released start at the same instant on every
// processor, so that a window of a few instructions between a store's
// check and its write is hit, not only one that yields.
func race(n int, racer func(g int) error) []error {
	var ready atomic.Int32
	errs := make([]error, n)
	var wg sync.WaitGroup
	for g := range n {
		spawn(&wg, &errs[g], func() error {
			for ready.Add(1); ready.Load() < int32(n); {
				runtime.Gosched()
			}
			return racer(g)
		})
	}
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
		won := slices.IndexFunc(errs, func(err error) bool { return err == nil })
		if won < 0 {
			return nil, fmt.Errorf("round %d: no racer won expectedSeq %d: %w", round, head, errors.Join(errs...))
		}
		next := head + uint64(lens[won])
		for g, err := range errs {
			if g != won {
				if err := wantConflict(err, head, next, fmt.Sprintf("round %d: racer %d, after racer %d won", round, g, won)); err != nil {
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
// conflict, each told the head its append made, whose every acknowledged
// append must be the record at the seq it was told, the stream exactly
// those records.
func ksConcurrentAppends(ctx context.Context, env *ruleEnv[keyspace.Store], s keyspace.Store) error {
	if err := ksContest(ctx, env, s, 1); err != nil {
		return err
	}
	g := newGen(newRand(env.cfg.seed, RuleKSConcurrentAppends+"/free"))
	return racing(env.cfg, func(int) error { return ksFreeWriters(ctx, s, keyspace.NewStreamKey(g.workflow(), g.run(), 1, 1)) })
}

// ksFreeWriters: racers append to one new stream at the head they read,
// retrying on a conflict.
func ksFreeWriters(ctx context.Context, s keyspace.Store, key keyspace.StreamKey) error {
	const perWriter = 50
	acks := make([][]uint64, racers) // the seq each writer's event was appended at
	if err := errors.Join(race(racers, func(w int) error {
		for losses := 0; len(acks[w]) < perWriter; {
			head, err := s.Head(ctx, key)
			if err != nil {
				return fmt.Errorf("reading the head: %w", err)
			}
			ev := keyspace.ActivityEvent{WorkflowID: key.WorkflowID, RunID: key.RunID, ActivityID: key.ActivityID, Attempt: key.Attempt,
				AgentID: fmt.Sprint("writer-", w), WorkerSeq: uint64(len(acks[w]))}
			got, err := s.AppendEvents(ctx, head, []keyspace.ActivityEvent{ev})
			switch {
			case err == nil && got != head+1:
				// A head read again after the commit may count others' appends.
				return fmt.Errorf("writer %d: AppendEvents(expectedSeq=%d) of one event returned head %d, want %d", w, head, got, head+1)
			case err == nil:
				acks[w] = append(acks[w], head)
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
	})...); err != nil {
		return err
	}
	recs, err := s.ReadFrom(ctx, key, 0, 0)
	if err != nil {
		return err
	}
	for w, seqs := range acks {
		for i, seq := range seqs {
			if seq >= uint64(len(recs)) || recs[seq].StoreSeq != seq || recs[seq].Event.AgentID != fmt.Sprint("writer-", w) || recs[seq].Event.WorkerSeq != uint64(i) {
				return fmt.Errorf("writer %d was told its event %d landed at seq %d: the stream of %d records holds another there, or none (two appends acknowledged at one seq)", w, i, seq, len(recs))
			}
		}
	}
	if len(recs) != racers*perWriter {
		return fmt.Errorf("%d writers × %d events: the stream holds %d records", racers, perWriter, len(recs))
	}
	return nil
}

// ksContest: racers append batches of up to maxBatch events at one
// expectedSeq, round after round: one winner, losers told its head, the
// stream exactly the winners' batches, whole and in order.
func ksContest(ctx context.Context, env *ruleEnv[keyspace.Store], s keyspace.Store, maxBatch int) error {
	m, _ := newKSModel(ctx, uint64(env.cfg.seed), 24)(s)
	rounds := 24 * env.cfg.scale
	if err := racing(env.cfg, func(int) error {
		batches := make([][][]keyspace.ActivityEvent, rounds)
		for r := range batches {
			batches[r] = make([][]keyspace.ActivityEvent, racers)
			for g := range racers {
				batches[r][g] = m.batch(ksAppend{stream: 0, n: 1 + m.g.IntN(maxBatch), seed: m.g.Uint64()})
			}
		}
		winners, err := contest(ctx, rounds, m.head(m.keys[0]), func(r, g int, head uint64) (int, error) {
			_, err := s.AppendEvents(ctx, head, deepCopy(batches[r][g]))
			return len(batches[r][g]), err
		})
		for r, g := range winners {
			for _, ev := range batches[r][g] {
				m.recs[m.keys[0]] = append(m.recs[m.keys[0]], stored(ev, m.head(m.keys[0])))
			}
		}
		return err
	}); err != nil {
		return err
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
	if err := m.append(esAppend{wf: 0, n: 1, seed: 1}); err != nil {
		return err
	}
	next := eventstore.ActivityID(0)
	if err := racing(env.cfg, func(int) error {
		tries := make([][]entry, rounds)
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
		for r, g := range winners {
			m.apply(w, tries[r][g].events, tries[r][g].rows)
		}
		return err
	}); err != nil {
		return err
	}
	if err := m.readFrom(w, abs(0), ctxLive, 0); err != nil {
		return err
	}
	if m.ob == nil {
		return nil
	}
	return m.claim(1 << 20)
}

// claimRows is how many rows the concurrent-claims rule stages.
const claimRows = 300

// outboxConcurrentClaims: racers claim small batches of the same pending
// rows at once, and re-arm some of what they got, until nothing is
// pending. Each row goes to one claimant at a time: a row handed out is
// never held by another racer that did not re-arm it, and is the staged
// row; after each round the rows still claimed are exactly those handed
// out and not re-armed, counted by CountClaimedOutboxRows, the others
// claimable again.
func outboxConcurrentClaims(ctx context.Context, env *ruleEnv[eventstore.Store], s eventstore.Store) error {
	if err := lacks(s, CapOutbox); err != nil {
		return err
	}
	ob := s.(eventstore.Outbox)
	m, _ := newESModel(ctx, uint64(env.cfg.seed), 3, env.cfg.scale)(s)
	for wf := range 3 {
		if err := m.append(esAppend{wf: wf, n: 1 + claimRows/3, rows: true, kinds: append(start, repeat(kSchedule, claimRows/3)...), seed: uint64(wf)}); err != nil {
			return fmt.Errorf("staging the rows: %w", err)
		}
	}
	want := map[string]eventstore.OutboxRow{}
	for _, r := range m.rows {
		row := *r
		row.State = eventstore.OutboxClaimed
		want[r.DispatchKey] = row
	}
	var mu sync.Mutex
	held := map[string]bool{} // handed out and not re-armed since
	return racing(env.cfg, func(phase int) error {
		for r := range 3 * env.cfg.scale {
			round := phase*3*env.cfg.scale + r
			tick(ctx)
			errs := race(racers, func(g int) error {
				rng := newRand(env.cfg.seed, fmt.Sprint(RuleOutboxConcurrentClaims, round, g))
				for rearmsLeft := 6; ; {
					limit := 1 + rng.IntN(4)
					got, err := ob.ClaimOutboxRows(ctx, limit)
					if err != nil || len(got) > limit {
						return fmt.Errorf("racer %d: ClaimOutboxRows(%d) returned %d rows, %v", g, limit, len(got), err)
					}
					if len(got) == 0 {
						return nil
					}
					mu.Lock()
					for _, r := range got {
						if held[r.DispatchKey] {
							mu.Unlock()
							return fmt.Errorf("racer %d: ClaimOutboxRows handed out row %q, which another claimant holds: two claimants at once", g, r.DispatchKey)
						}
						held[r.DispatchKey] = true
					}
					mu.Unlock()
					for _, r := range got {
						if d := diff(r, want[r.DispatchKey]); d != "" {
							return fmt.Errorf("racer %d: ClaimOutboxRows handed out row %q: %s", g, r.DispatchKey, d)
						}
					}
					if rearmsLeft > 0 && rng.IntN(3) == 0 {
						rearmsLeft--
						// Released before the re-arm takes effect: another racer
						// may claim the row the moment it is pending again.
						mu.Lock()
						held[got[0].DispatchKey] = false
						mu.Unlock()
						if err := ob.RearmOutboxPending(ctx, got[:1]); err != nil {
							return fmt.Errorf("racer %d: RearmOutboxPending of a row it holds: %w", g, err)
						}
					}
				}
			})
			if err := errors.Join(errs...); err != nil {
				return err
			}
			// Judge what the racers were told against the rows' final state:
			// what is not held is pending, claimable once.
			var pending, keys []string
			for key := range want {
				if !held[key] {
					pending = append(pending, key)
				}
			}
			if n, err := ob.CountClaimedOutboxRows(ctx); err != nil || n != len(want)-len(pending) {
				return fmt.Errorf("after the race: CountClaimedOutboxRows = %d, %v; want %d, the rows handed out and not re-armed", n, err, len(want)-len(pending))
			}
			got, err := ob.ClaimOutboxRows(ctx, math.MaxInt)
			if err != nil {
				return fmt.Errorf("after the race: ClaimOutboxRows: %w", err)
			}
			for _, r := range got {
				keys = append(keys, r.DispatchKey)
			}
			slices.Sort(keys)
			slices.Sort(pending)
			if d := diff(keys, pending); d != "" {
				return fmt.Errorf("after the race, ClaimOutboxRows finds (the rows re-armed and not claimed again): %s", d)
			}
			// The next round starts from every row pending.
			all := make([]eventstore.OutboxRow, 0, len(want))
			for key := range want {
				all = append(all, eventstore.OutboxRow{DispatchKey: key})
				held[key] = false
			}
			if err := ob.RearmOutboxPending(ctx, all); err != nil {
				return fmt.Errorf("re-arming every row: %w", err)
			}
		}
		return nil
	})
}

// ksConcurrentStreams: racers create new streams of one run at once (each
// its own streams, so every first append must succeed) while half of them
// list the run between their appends. A listing shows every stream whose
// append returned before the listing started, whole; the final listing is
// every stream, in order, with its head.
func ksConcurrentStreams(ctx context.Context, env *ruleEnv[keyspace.Store], s keyspace.Store) error {
	g := newGen(newRand(env.cfg.seed, RuleKSConcurrentStreams))
	wf, run := g.workflow(), g.run()
	perRacer := 64 * env.cfg.scale
	sizes := make([]int, racers*perRacer)
	for i := range sizes {
		sizes[i] = 1 + g.IntN(3)
	}
	var mu sync.Mutex
	var done []keyspace.StreamSummary // the streams whose first append returned
	list := func(what string) (map[keyspace.StreamKey]uint64, []keyspace.StreamSummary, error) {
		got, err := s.ListStreams(ctx, wf, run)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: ListStreams: %w", what, err)
		}
		if !slices.IsSortedFunc(got, func(a, b keyspace.StreamSummary) int { return cmpKey(a.Key, b.Key) }) {
			return nil, nil, fmt.Errorf("%s: ListStreams is not ordered by (activity, attempt): %v", what, got)
		}
		heads := map[keyspace.StreamKey]uint64{}
		for _, sum := range got {
			// Each stream is one racer's append of sizes[i] records: never
			// listed before it commits, nor in part.
			if i := int(sum.Key.ActivityID &^ (1 << 32)); sum.Key.WorkflowID != wf || i >= len(sizes) || sum.Head != uint64(sizes[i]) {
				return nil, nil, fmt.Errorf("%s: ListStreams lists %v at head %d, which no append made (each stream gets one whole batch)", what, sum.Key, sum.Head)
			}
			heads[sum.Key] = sum.Head
		}
		return heads, got, nil
	}
	errs := race(racers, func(r int) error {
		for i := r * perRacer; i < (r+1)*perRacer; i++ {
			act := eventstore.ActivityID(i)
			if r%2 == 1 {
				act |= 1 << 32 // an order a 32-bit key breaks
			}
			batch := make([]keyspace.ActivityEvent, sizes[i])
			for j := range batch {
				batch[j] = keyspace.ActivityEvent{WorkflowID: wf, RunID: run, ActivityID: act, Attempt: uint32(i % 3), AgentID: fmt.Sprint("racer-", r), WorkerSeq: uint64(j)}
			}
			if _, err := s.AppendEvents(ctx, 0, batch); err != nil {
				return fmt.Errorf("racer %d: the first append to a new stream: %w", r, err)
			}
			mu.Lock()
			done = append(done, keyspace.StreamSummary{Key: keyspace.KeyOf(batch[0]), Head: uint64(len(batch))})
			before := slices.Clone(done) // every stream appended to before the listing starts
			mu.Unlock()
			if r%2 == 1 || i%2 == 1 {
				continue
			}
			heads, _, err := list(fmt.Sprintf("racer %d", r))
			if err != nil {
				return err
			}
			for _, c := range before {
				if heads[c.Key] != c.Head {
					return fmt.Errorf("racer %d: ListStreams started after the append of %d records to %v returned, and lists it with head %d (0: not at all)", r, c.Head, c.Key, heads[c.Key])
				}
			}
		}
		return nil
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	slices.SortFunc(done, func(a, b keyspace.StreamSummary) int { return cmpKey(a.Key, b.Key) })
	_, got, err := list("after the race")
	if err != nil {
		return err
	}
	if d := diff(got, done); d != "" {
		return fmt.Errorf("after %d racers created %d streams of one run: ListStreams: %s", racers, len(done), d)
	}
	return nil
}

// cmpKey orders the streams of one run by (activity, attempt).
func cmpKey(a, b keyspace.StreamKey) int {
	return cmp.Or(cmp.Compare(a.ActivityID, b.ActivityID), cmp.Compare(a.Attempt, b.Attempt))
}
