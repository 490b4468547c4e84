package conformance

import (
	"context"
	"errors"
	"fmt"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// foreignContent is a Content kind that is not one of the five.
type foreignContent struct{ Text string }

func (foreignContent) ContentKind() string { return "message" }

// ksValidation: every implementation refuses the same invalid batches with
// the same errors and writes nothing, whether the bad event is first or
// last, on a written stream or an unwritten one.
func ksValidation(ctx context.Context, s keyspace.Store) error {
	base := newRunKey(4, 1)
	type badCase struct {
		name  string
		edit  func(ev *keyspace.ActivityEvent)
		want  error
		where string // "first", "last" or "all"
	}
	var cases []badCase
	nils := []keyspace.Content{(*keyspace.Message)(nil), (*keyspace.ToolCall)(nil), (*keyspace.ToolResult)(nil), (*keyspace.Status)(nil), (*keyspace.Usage)(nil)}
	for _, where := range []string{"first", "last"} {
		for _, c := range nils {
			cases = append(cases, badCase{fmt.Sprintf("nil-%T-%s", c, where), func(ev *keyspace.ActivityEvent) { ev.Content = c }, eventstore.ErrInvalidArgument, where})
		}
		cases = append(cases,
			badCase{"foreign-content-kind-" + where, func(ev *keyspace.ActivityEvent) { ev.Content = foreignContent{"x"} }, eventstore.ErrInvalidArgument, where},
			badCase{"ephemeral-" + where, func(ev *keyspace.ActivityEvent) { ev.Ephemeral = true }, keyspace.ErrEphemeral, where},
		)
	}
	cases = append(cases,
		badCase{"mixed-last", func(ev *keyspace.ActivityEvent) { ev.Attempt = 7 }, keyspace.ErrMixedStreams, "last"},
		badCase{"zero-workflow", func(ev *keyspace.ActivityEvent) { ev.WorkflowID = eventstore.WorkflowID{} }, eventstore.ErrInvalidArgument, "all"},
		badCase{"zero-run", func(ev *keyspace.ActivityEvent) { ev.RunID = eventstore.RunID{} }, eventstore.ErrInvalidArgument, "all"},
	)
	var errs []error
	for i, c := range cases {
		// Each case on streams of its own, so that one wrongly accepted
		// batch does not spoil the cases after it.
		key := withCoords(base, eventstore.ActivityID(100+2*i), 1)
		fresh := withCoords(key, eventstore.ActivityID(101+2*i), 0)
		if err := appendOK(ctx, s, 0, ksBatch(key, 0, 2, "valid")); err != nil {
			return err
		}
		for _, target := range []struct {
			key      keyspace.StreamKey
			expected uint64
		}{{key, 2}, {fresh, 0}} {
			batch := ksBatch(target.key, 10, 3, c.name)
			switch c.where {
			case "first":
				c.edit(&batch[0])
			case "last":
				c.edit(&batch[2])
			default:
				for i := range batch {
					c.edit(&batch[i])
				}
			}
			what := fmt.Sprintf("%s: AppendEvents(expectedSeq=%d) of a 3-event batch", c.name, target.expected)
			before, err := snapshot(ctx, s, key, fresh, withCoords(key, 4, 7))
			if err != nil {
				return err
			}
			_, err = callAppend(ctx, s, target.expected, batch)
			switch {
			case err == nil:
				errs = append(errs, fmt.Errorf("%s succeeded, want an error matching %v", what, c.want))
			case errors.Is(err, ErrRulePanicked):
				errs = append(errs, fmt.Errorf("%s: %w", what, err))
			case !errors.Is(err, c.want):
				errs = append(errs, fmt.Errorf("%s: error %v does not match %v", what, err, c.want))
			}
			if err := unchanged(ctx, s, before, what, key, fresh, withCoords(key, 4, 7)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// callAppend calls AppendEvents, turning a panic into an error.
func callAppend(ctx context.Context, s keyspace.Store, expected uint64, batch []keyspace.ActivityEvent) (head uint64, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: AppendEvents panicked: %v", ErrRulePanicked, p)
		}
	}()
	return s.AppendEvents(ctx, expected, batch)
}

// ksConcurrentBatches: racers append multi-event batches at the same
// expectedSeq, round after round, on one stream. Exactly one wins each
// round, every loser is told the winner's head, and the stream is exactly
// the winners' batches in round order: no partial batch, no interleaving.
func ksConcurrentBatches(ctx context.Context, env *ruleEnv[keyspace.Store], s keyspace.Store) error {
	rng := newRand(env.cfg.seed, RuleKSConcurrentBatches)
	ids := newIDGen(rng)
	key := keyspace.NewStreamKey(ids.workflow(), ids.run(), 1, 1)
	rounds := 24 * env.cfg.scale
	var want []keyspace.ActivityEvent
	for r := range rounds {
		head := uint64(len(want))
		batches := make([][]keyspace.ActivityEvent, ksConcurrency)
		for g := range batches {
			batches[g] = ksBatch(key, uint64(r*1000+g*10), 1+rng.IntN(5), fmt.Sprintf("round-%d-racer-%d", r, g))
			for i := range batches[g] {
				batches[g][i].AgentID = fmt.Sprintf("racer-%d", g)
			}
		}
		heads := make([]uint64, ksConcurrency)
		errs := race(ksConcurrency, func(g int) error {
			h, err := s.AppendEvents(ctx, head, batches[g])
			heads[g] = h
			return err
		})
		won, err := oneWinner(r, head, errs)
		if err != nil {
			return err
		}
		newHead := head + uint64(len(batches[won]))
		if heads[won] != newHead {
			return fmt.Errorf("round %d: the winner got head %d, want %d", r, heads[won], newHead)
		}
		if err := losersConflicted(r, head, newHead, won, errs); err != nil {
			return err
		}
		want = append(want, batches[won]...)
	}
	return readExpect(ctx, s, key, 0, 0, 0, want)
}
