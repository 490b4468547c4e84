package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"github.com/aionotel/aionotel/eventstore"
)

// The Outbox and ShardOwner rules of the event store suite. Each runs only
// when the fresh store implements the capability (see withOutbox and
// withShardOwner). The outbox rules need the whole store to themselves:
// ClaimOutboxRows claims any pending row, not only this rule's.

// stage appends a started event plus one scheduled event and one outbox row
// per ordinal, in one AppendWithOutbox at expectedSeq 0.
func stage(ctx context.Context, o eventstore.Outbox, r esRun, ordinals ...eventstore.ActivityID) ([]eventstore.OutboxRow, error) {
	evs := []eventstore.Event{r.started("conformance")}
	var rows []eventstore.OutboxRow
	for _, id := range ordinals {
		evs = append(evs, r.scheduled(id))
		rows = append(rows, r.row(id))
	}
	if err := o.AppendWithOutbox(ctx, token, r.wf, evs, 0, rows); err != nil {
		return nil, fmt.Errorf("AppendWithOutbox(%d events, %d rows): %w", len(evs), len(rows), err)
	}
	return rows, nil
}

// sameRows checks got is exactly want, in order, comparing what the stager
// chose (the store sets State and may set CreatedAt).
func sameRows(what string, got []eventstore.OutboxRow, want ...eventstore.OutboxRow) error {
	keys := func(rows []eventstore.OutboxRow) []string {
		out := make([]string, len(rows))
		for i, r := range rows {
			out[i] = r.DispatchKey
		}
		return out
	}
	if len(got) != len(want) {
		return fmt.Errorf("%s returned rows %v, want %v", what, keys(got), keys(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.DispatchKey != w.DispatchKey || g.WorkflowID != w.WorkflowID || g.RunID != w.RunID ||
			g.Ordinal != w.Ordinal || g.ActivityType != w.ActivityType || !reflect.DeepEqual(g.Input, w.Input) {
			return fmt.Errorf("%s: row %d is %+v, want %+v (rows %v, want %v, oldest first)", what, i, g, w, keys(got), keys(want))
		}
	}
	return nil
}

func claim(ctx context.Context, o eventstore.Outbox, limit int, want ...eventstore.OutboxRow) error {
	got, err := o.ClaimOutboxRows(ctx, limit)
	if err != nil {
		return fmt.Errorf("ClaimOutboxRows(%d): %w", limit, err)
	}
	return sameRows(fmt.Sprintf("ClaimOutboxRows(%d)", limit), got, want...)
}

func wantClaimed(ctx context.Context, o eventstore.Outbox, want int, step string) error {
	n, err := o.CountClaimedOutboxRows(ctx)
	if err != nil {
		return fmt.Errorf("%s: CountClaimedOutboxRows: %w", step, err)
	}
	if n != want {
		return fmt.Errorf("%s: CountClaimedOutboxRows = %d, want %d", step, n, want)
	}
	return nil
}

func outboxAtomic(ctx context.Context, s eventstore.Store, o eventstore.Outbox) error {
	r := newESRun()
	evs := []eventstore.Event{r.started("conformance"), r.scheduled(0), r.scheduled(1)}
	rows := []eventstore.OutboxRow{r.row(0), r.row(1)}
	if err := o.AppendWithOutbox(ctx, eventstore.WriteToken{}, r.wf, evs, 0, rows); !errors.Is(err, eventstore.ErrInvalidToken) {
		return fmt.Errorf("AppendWithOutbox with the zero WriteToken returned %v, want an error matching eventstore.ErrInvalidToken", err)
	}
	if err := wantHistory(ctx, s, r.wf); err != nil {
		return fmt.Errorf("after a refused AppendWithOutbox: %w", err)
	}
	if err := o.AppendWithOutbox(ctx, token, r.wf, evs, 0, rows); err != nil {
		return fmt.Errorf("AppendWithOutbox: %w", err)
	}
	if err := wantHistory(ctx, s, r.wf, evs...); err != nil {
		return err
	}
	// A conflicting append stages none of its rows (and writes no event).
	err := o.AppendWithOutbox(ctx, token, r.wf, []eventstore.Event{r.scheduled(2)}, 0, []eventstore.OutboxRow{r.row(2)})
	if err := wantConflict(err, 0, 3, "a conflicting AppendWithOutbox(expectedSeq=0)"); err != nil {
		return err
	}
	if err := wantHistory(ctx, s, r.wf, evs...); err != nil {
		return fmt.Errorf("after a conflicting AppendWithOutbox: %w", err)
	}
	// Exactly the committed rows are claimable: none from the refused or
	// the conflicting call.
	return claim(ctx, o, 10, rows...)
}

func outboxClaim(ctx context.Context, _ eventstore.Store, o eventstore.Outbox) error {
	rows, err := stage(ctx, o, newESRun(), 0, 1, 2)
	if err != nil {
		return err
	}
	for _, limit := range []int{0, -1} {
		if _, err := o.ClaimOutboxRows(ctx, limit); !errors.Is(err, eventstore.ErrInvalidArgument) {
			return fmt.Errorf("ClaimOutboxRows(%d) returned %v, want an error matching eventstore.ErrInvalidArgument", limit, err)
		}
	}
	if err := wantClaimed(ctx, o, 0, "after the refused claims"); err != nil {
		return err
	}
	if err := claim(ctx, o, 2, rows[:2]...); err != nil {
		return err
	}
	if err := wantClaimed(ctx, o, 2, "after claiming two"); err != nil {
		return err
	}
	if err := claim(ctx, o, 5, rows[2:]...); err != nil {
		return err
	}
	if err := wantClaimed(ctx, o, 3, "after claiming the rest"); err != nil {
		return err
	}
	if err := claim(ctx, o, 5); err != nil {
		return fmt.Errorf("with nothing pending: %w", err)
	}
	return wantClaimed(ctx, o, 3, "after an empty claim")
}

func outboxRearm(ctx context.Context, _ eventstore.Store, o eventstore.Outbox) error {
	r := newESRun()
	rows, err := stage(ctx, o, r, 0, 1)
	if err != nil {
		return err
	}
	if err := claim(ctx, o, 5, rows...); err != nil {
		return err
	}
	if err := o.RearmOutboxPending(ctx, rows[:1]); err != nil {
		return fmt.Errorf("RearmOutboxPending: %w", err)
	}
	if err := wantClaimed(ctx, o, 1, "after re-arming one of two claimed rows"); err != nil {
		return err
	}
	if err := claim(ctx, o, 5, rows[0]); err != nil {
		return fmt.Errorf("a re-armed row is pending again: %w", err)
	}
	if err := wantClaimed(ctx, o, 2, "after claiming the re-armed row"); err != nil {
		return err
	}
	missing := r.row(99)
	if err := o.RearmOutboxPending(ctx, []eventstore.OutboxRow{missing}); !errors.Is(err, eventstore.ErrNotFound) {
		return fmt.Errorf("RearmOutboxPending of a row the store does not hold returned %v, want an error matching eventstore.ErrNotFound", err)
	}
	return wantClaimed(ctx, o, 2, "after a refused re-arm")
}

func outboxSettle(ctx context.Context, _ eventstore.Store, o eventstore.Outbox) error {
	r := newESRun()
	rows, err := stage(ctx, o, r, 0, 1)
	if err != nil {
		return err
	}
	if err := claim(ctx, o, 1, rows[0]); err != nil {
		return err
	}
	if err := o.SettleOutboxRowCancelled(ctx, rows[1].DispatchKey); err != nil {
		return fmt.Errorf("SettleOutboxRowCancelled(pending row): %w", err)
	}
	if err := claim(ctx, o, 5); err != nil {
		return fmt.Errorf("a cancelled row must not be claimable: %w", err)
	}
	if err := o.SettleOutboxRowCancelled(ctx, rows[0].DispatchKey); err != nil {
		return fmt.Errorf("SettleOutboxRowCancelled(claimed row): %w", err)
	}
	if err := wantClaimed(ctx, o, 0, "after cancelling the claimed row"); err != nil {
		return err
	}
	if err := o.SettleOutboxRowCancelled(ctx, r.row(99).DispatchKey); !errors.Is(err, eventstore.ErrNotFound) {
		return fmt.Errorf("SettleOutboxRowCancelled of a row the store does not hold returned %v, want an error matching eventstore.ErrNotFound", err)
	}
	return nil
}

// outboxTerminalSettles is the fixed counterpart of the model's settlement
// checks, so that a store whose history never settles rows is caught
// whatever the seed.
func outboxTerminalSettles(ctx context.Context, s eventstore.Store, o eventstore.Outbox) error {
	r := newESRun()
	rows, err := stage(ctx, o, r, 0, 1, 2, 3)
	if err != nil {
		return err
	}
	if err := claim(ctx, o, 3, rows[0], rows[1], rows[2]); err != nil {
		return err
	}
	failed := func(id eventstore.ActivityID, kind eventstore.ActivityErrorKind) eventstore.Event {
		return eventstore.ActivityFailed{Envelope: r.env(), ActivityID: id, Error: eventstore.ActivityError{Kind: kind, Message: "conformance"}, Attempt: 1}
	}
	if err := esAppend(ctx, s, r.wf, 5, r.activityDone(0), failed(1, eventstore.Terminal), failed(2, eventstore.Retryable),
		eventstore.ActivityCancelled{Envelope: r.env(), ActivityID: 3, Attempt: 1}); err != nil {
		return err
	}
	if err := wantClaimed(ctx, o, 1, "after a completion and a terminal failure of two claimed rows' activities and a retryable failure of the third's"); err != nil {
		return err
	}
	if err := claim(ctx, o, 5); err != nil {
		return fmt.Errorf("the pending row of a cancelled activity must not be claimable: %w", err)
	}
	return nil
}

func outboxSettleWorkflow(ctx context.Context, _ eventstore.Store, o eventstore.Outbox) error {
	a, b := newESRun(), newESRun()
	aRows, err := stage(ctx, o, a, 0, 1, 2)
	if err != nil {
		return err
	}
	bRows, err := stage(ctx, o, b, 0)
	if err != nil {
		return err
	}
	if err := claim(ctx, o, 1, aRows[0]); err != nil {
		return err
	}
	if err := o.SettleOutboxRowCancelled(ctx, aRows[2].DispatchKey); err != nil {
		return fmt.Errorf("SettleOutboxRowCancelled: %w", err)
	}
	keys, err := o.SettleWorkflowOutboxRowsCancelled(ctx, a.wf)
	if err != nil {
		return fmt.Errorf("SettleWorkflowOutboxRowsCancelled: %w", err)
	}
	if want := []string{aRows[0].DispatchKey, aRows[1].DispatchKey}; !sameSet(keys, want) {
		return fmt.Errorf("SettleWorkflowOutboxRowsCancelled returned %v, want the open rows' keys %v (one claimed, one pending; not the already cancelled one, not another workflow's)", keys, want)
	}
	if err := wantClaimed(ctx, o, 0, "after settling the workflow"); err != nil {
		return err
	}
	if err := claim(ctx, o, 10, bRows...); err != nil {
		return fmt.Errorf("only the other workflow's row stays claimable: %w", err)
	}
	keys, err = o.SettleWorkflowOutboxRowsCancelled(ctx, a.wf)
	if err != nil {
		return fmt.Errorf("SettleWorkflowOutboxRowsCancelled (again): %w", err)
	}
	if len(keys) != 0 {
		return fmt.Errorf("settling a workflow with no open rows returned %v, want none", keys)
	}
	keys, err = o.SettleWorkflowOutboxRowsCancelled(ctx, eventstore.NewWorkflowID())
	if err != nil || len(keys) != 0 {
		return fmt.Errorf("SettleWorkflowOutboxRowsCancelled(unknown workflow) = %v, %v; want none, nil", keys, err)
	}
	return nil
}

// The ShardOwner rules use shard 0 only: it is the one shard every
// partitioned store has. Ownership of other shards, scoping to particular
// shards and range checks depend on the store's shard count and election,
// which the contract leaves to the store.

func shardAcquireOne(ctx context.Context, _ eventstore.Store, so eventstore.ShardOwner) error {
	if err := so.AcquireOwnedShard(ctx, 0); err != nil {
		return fmt.Errorf("AcquireOwnedShard(0): %w", err)
	}
	if !so.IsCurrentOwner(ctx, 0) {
		return errors.New("IsCurrentOwner(0) = false after AcquireOwnedShard(0) succeeded")
	}
	if err := notOwnerOfOthers(ctx, so); err != nil {
		return fmt.Errorf("after AcquireOwnedShard(0): %w", err)
	}
	if err := so.PublishShardOwner(ctx, 0); err != nil {
		return fmt.Errorf("PublishShardOwner(0) after acquiring it: %w", err)
	}
	return nil
}

func shardAcquireMany(ctx context.Context, _ eventstore.Store, so eventstore.ShardOwner) error {
	if err := so.AcquireOwnedShards(ctx, []int{0}); err != nil {
		return fmt.Errorf("AcquireOwnedShards([0]): %w", err)
	}
	if !so.IsCurrentOwner(ctx, 0) {
		return errors.New("IsCurrentOwner(0) = false after AcquireOwnedShards([0]) succeeded")
	}
	if err := notOwnerOfOthers(ctx, so); err != nil {
		return fmt.Errorf("after AcquireOwnedShards([0]): %w", err)
	}
	if err := so.PublishShardOwner(ctx, 0); err != nil {
		return fmt.Errorf("PublishShardOwner(0) after acquiring it: %w", err)
	}
	return nil
}

// notOwnerOfOthers checks that holding shard 0 is not holding every shard:
// shards 1 and -1 were never acquired, whether the store has them or not.
func notOwnerOfOthers(ctx context.Context, so eventstore.ShardOwner) error {
	for _, shard := range []int{1, -1} {
		if so.IsCurrentOwner(ctx, shard) {
			return fmt.Errorf("IsCurrentOwner(%d) = true, but shard %d was never acquired", shard, shard)
		}
	}
	return nil
}

func shardPublishRequiresAcquire(ctx context.Context, _ eventstore.Store, so eventstore.ShardOwner) error {
	if err := so.PublishShardOwner(ctx, 0); !errors.Is(err, eventstore.ErrNotOwner) {
		return fmt.Errorf("PublishShardOwner(0) on a store that never acquired shard 0 returned %v, want an error matching eventstore.ErrNotOwner", err)
	}
	return nil
}

func shardNilScope(ctx context.Context, s eventstore.Store, so eventstore.ShardOwner) error {
	var runs []esRun
	for range 3 {
		r := newESRun()
		if err := esAppend(ctx, s, r.wf, 0, r.started("conformance")); err != nil {
			return err
		}
		runs = append(runs, r)
	}
	check := func(step string) error {
		for _, r := range runs {
			if err := wantListed(ctx, s, r.wf, step, true, false); err != nil {
				return err
			}
		}
		return nil
	}
	so.SetOwnedShards(ctx, nil)
	if err := check("after SetOwnedShards(nil)"); err != nil {
		return err
	}
	so.ExtendOwnedShards(ctx, []int{0})
	return check("after widening the every-shard scope with ExtendOwnedShards([0])")
}

// shardNegativeRefused: a negative shard is out of range for every store,
// and an out-of-range shard is malformed input.
func shardNegativeRefused(ctx context.Context, _ eventstore.Store, so eventstore.ShardOwner) error {
	if err := so.AcquireOwnedShard(ctx, -1); !errors.Is(err, eventstore.ErrInvalidArgument) {
		return fmt.Errorf("AcquireOwnedShard(-1) returned %v, want an error matching eventstore.ErrInvalidArgument", err)
	}
	if err := so.AcquireOwnedShards(ctx, []int{-1}); !errors.Is(err, eventstore.ErrInvalidArgument) {
		return fmt.Errorf("AcquireOwnedShards([-1]) returned %v, want an error matching eventstore.ErrInvalidArgument", err)
	}
	if so.IsCurrentOwner(ctx, -1) {
		return errors.New("IsCurrentOwner(-1) = true after the refused elections")
	}
	return nil
}
