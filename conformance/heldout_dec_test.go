package conformance

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// TestHeldOutDec: broken decorators written from the docs alone, a class
// each (a HistoriesReader forwarded wrongly, a caller's slice written to
// after its call returned, a wrong ShardCount, telemetry miscounting a
// run's status or a duplicate terminal), every one caught.
func TestHeldOutDec(t *testing.T) {
	expensiveSelfTest(t)
	ctx := context.Background()
	seed := optionFunc(func(c *config) { c.seed, c.noShrink, c.stopAtFirst, c.raceFor = adversarySeed, true, true, 0 })
	histories := func(f func(hr eventstore.HistoriesReader, ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error)) func(eventstore.Store) eventstore.Store {
		return passWrap(faults{histories: f})
	}
	for _, tc := range []struct {
		name string
		wrap func(eventstore.Store) eventstore.Store
	}{
		// A HistoriesReader hidden, invented, or forwarded wrongly.
		{"hides-histories-reader", passWrap(faults{hideHistories: true})},
		{"invents-histories-reader", passWrap(faults{claimHistories: true})},
		{"read-histories-in-pages", histories(func(hr eventstore.HistoriesReader, ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
			var out [][]eventstore.Event
			for len(ids) > eventstore.HistoriesPage {
				page, err := hr.ReadHistories(ctx, ids[:eventstore.HistoriesPage])
				if err != nil {
					return nil, err
				}
				out, ids = append(out, page...), ids[eventstore.HistoriesPage:]
			}
			page, err := hr.ReadHistories(ctx, ids)
			return append(out, page...), err
		})},
		{"read-histories-deduplicated", histories(func(hr eventstore.HistoriesReader, ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
			at := map[eventstore.WorkflowID]int{}
			var unique []eventstore.WorkflowID
			for _, id := range ids {
				if _, ok := at[id]; !ok {
					at[id] = len(unique)
					unique = append(unique, id)
				}
			}
			got, err := hr.ReadHistories(ctx, unique)
			if err != nil || len(got) != len(unique) {
				return got, err
			}
			out := make([][]eventstore.Event, len(ids))
			for i, id := range ids {
				out[i] = got[at[id]]
			}
			return out, nil
		})},
		{"read-histories-empty-not-forwarded", histories(func(hr eventstore.HistoriesReader, ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
			if len(ids) == 0 {
				return nil, nil
			}
			return hr.ReadHistories(ctx, ids)
		})},
		{"read-histories-own-timeout", histories(func(hr eventstore.HistoriesReader, ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
			defer cancel()
			return hr.ReadHistories(ctx, ids)
		})},
		{"read-histories-nil-history-to-empty", histories(func(hr eventstore.HistoriesReader, ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
			out, err := hr.ReadHistories(ctx, ids)
			for i := range out {
				if out[i] == nil {
					out[i] = []eventstore.Event{}
				}
			}
			return out, err
		})},

		// A caller's slice kept and written to after its call returned.
		{"clears-previous-batch", decWrap(func() *decHooks {
			var mu sync.Mutex
			var kept []eventstore.Event
			return &decHooks{append: func(in eventstore.Store, ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, exp uint64) error {
				mu.Lock()
				clear(kept) // "let the previous batch go"
				kept = evs
				mu.Unlock()
				return in.Append(ctx, tok, wf, evs, exp)
			}}
		})},
		{"settles-previous-rows", decWrap(func() *decHooks {
			var mu sync.Mutex
			var kept []eventstore.OutboxRow
			return &decHooks{rearm: func(in eventstore.Outbox, ctx context.Context, rows []eventstore.OutboxRow) error {
				mu.Lock()
				for i := range kept {
					kept[i].State = eventstore.OutboxPending // "what it re-armed is pending now"
				}
				kept = rows
				mu.Unlock()
				return in.RearmOutboxPending(ctx, rows)
			}}
		})},
		{"normalizes-shards-async", decWrap(func() *decHooks {
			return &decHooks{acquireOwnedShards: func(in eventstore.ShardOwner, ctx context.Context, shards []int) error {
				err := in.AcquireOwnedShards(ctx, shards)
				go func() {
					time.Sleep(time.Millisecond)
					for i := range shards {
						shards[i] &= 0xff
					}
				}()
				return err
			}}
		})},

		// A ShardCount of its own.
		{"shard-count-default-16", passWrap(faults{shardCount: 16})},
		{"shard-count-unknown", passWrap(faults{shardCount: -1})},
	} {
		t.Run(tc.name, func(t *testing.T) { report(t, CheckDecorator(ctx, tc.wrap, seed)) })
	}

	// Telemetry, over seeds whose histories lack the status (so the
	// generator must put every one in every history).
	for _, tc := range []struct {
		name  string
		f     telFaults
		seeds []int64
	}{
		{"timed-out-counted-as-failed", telFaults{countAs: [2]eventstore.WorkflowStatus{eventstore.StatusTimedOut, eventstore.StatusFailed}}, []int64{14, 41}},
		{"cancelled-not-counted", telFaults{uncountedStatus: eventstore.StatusCancelled}, []int64{11, 33}},
		{"continued-as-new-not-counted", telFaults{uncountedStatus: eventstore.StatusContinuedAsNew}, []int64{1}},
		{"completed-untimed", telFaults{untimedStatus: eventstore.StatusCompleted}, []int64{7, 24}},
		{"failed-untimed", telFaults{untimedStatus: eventstore.StatusFailed}, []int64{4, 25}},
		{"recounts-duplicate-terminal-apart", telFaults{recountApart: true}, []int64{1, 2}},
	} {
		for _, s := range append(tc.seeds, adversarySeed) {
			t.Run(fmt.Sprintf("%s/seed-%d", tc.name, s), func(t *testing.T) {
				opt := optionFunc(func(c *config) { c.seed, c.noShrink, c.stopAtFirst, c.raceFor = s, true, true, 0 })
				report(t, CheckTelemetry(ctx, newRefTel(tc.f), opt, WithTimeline()))
			})
		}
	}
}
