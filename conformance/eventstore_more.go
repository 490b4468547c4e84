package conformance

import (
	"context"
	"fmt"

	"github.com/aionotel/aionotel/eventstore"
)

// esConcurrentAppends: racers append multi-event batches (through Append
// and, every other round when the store is an Outbox, through
// AppendWithOutbox with rows) to one workflow at the same expectedSeq,
// round after round. Exactly one wins each round; every loser gets a
// conflict naming the winner's head; the history is the winners' batches in
// round order, whole; only the winners' rows were staged.
func esConcurrentAppends(ctx context.Context, env *ruleEnv[eventstore.Store], s eventstore.Store) error {
	rng := newRand(env.cfg.seed, RuleESConcurrentAppends)
	ids := newIDGen(rng)
	r := esRun{ids.workflow(), ids.run()}
	ob, _ := s.(eventstore.Outbox)
	const racers = 8
	rounds := 24 * env.cfg.scale
	var want []eventstore.Event
	var wantRows []string
	if err := esAppend(ctx, s, r.wf, 0, r.started("conformance-race")); err != nil {
		return err
	}
	want = append(want, r.started("conformance-race"))
	for round := range rounds {
		head := uint64(len(want))
		batches := make([][]eventstore.Event, racers)
		rows := make([][]eventstore.OutboxRow, racers)
		for g := range racers {
			n := 1 + rng.IntN(4)
			for i := range n {
				batches[g] = append(batches[g], r.signal(fmt.Sprintf("round-%d-racer-%d-event-%d", round, g, i)))
			}
			rows[g] = []eventstore.OutboxRow{{DispatchKey: fmt.Sprintf("race-%v-%d-%d", r.wf, round, g), WorkflowID: r.wf, RunID: r.run, Ordinal: eventstore.ActivityID(round*racers + g), ActivityType: "race"}}
		}
		// Rounds alternate between the two append paths: a store may
		// implement AppendWithOutbox and Append separately, and either may
		// be the one that checks the head before it writes.
		withRows := ob != nil && round%2 == 0
		errs := race(racers, func(g int) error {
			if withRows {
				return ob.AppendWithOutbox(ctx, token, r.wf, batches[g], head, rows[g])
			}
			return s.Append(ctx, token, r.wf, batches[g], head)
		})
		won, err := oneWinner(round, head, errs)
		if err != nil {
			return err
		}
		if err := losersConflicted(round, head, head+uint64(len(batches[won])), won, errs); err != nil {
			return err
		}
		want = append(want, batches[won]...)
		if withRows {
			wantRows = append(wantRows, rows[won][0].DispatchKey)
		}
	}
	if err := wantHistory(ctx, s, r.wf, want...); err != nil {
		return fmt.Errorf("after %d contested rounds: %w", rounds, err)
	}
	if ob == nil {
		return nil
	}
	claimed, err := ob.ClaimOutboxRows(ctx, 1<<20)
	if err != nil {
		return fmt.Errorf("ClaimOutboxRows: %w", err)
	}
	var got []string
	for _, row := range claimed {
		if row.WorkflowID == r.wf {
			got = append(got, row.DispatchKey)
		}
	}
	if len(got) != len(wantRows) || !sameSet(got, wantRows) {
		return fmt.Errorf("after %d contested rounds the outbox holds %d rows of the workflow, want the %d winners' rows: missing %q, extra %q", rounds, len(got), len(wantRows), missing(wantRows, got), missing(got, wantRows))
	}
	return nil
}

// esAliasing: a caller that reuses its memory after a call returned (the
// events' and package's payload bytes, the rows' input) does not change
// what is stored, nor does one that modifies what a read returned.
func esAliasing(ctx context.Context, s eventstore.Store) error {
	r := newESRun()
	events := []eventstore.Event{r.started("conformance-alias"), r.signal("alias"), r.scheduled(0)}
	want := copyEvents(events)
	if err := esAppend(ctx, s, r.wf, 0, events...); err != nil {
		return err
	}
	scribble(events)
	if err := wantHistory(ctx, s, r.wf, want...); err != nil {
		return fmt.Errorf("after the caller overwrote the payload bytes it appended: %w", err)
	}
	got, err := s.ReadHistory(ctx, r.wf)
	if err != nil {
		return err
	}
	scribble(got)
	if err := wantHistory(ctx, s, r.wf, want...); err != nil {
		return fmt.Errorf("after the caller overwrote the payload bytes ReadHistory returned: %w", err)
	}
	got, err = s.ReadHistoryFrom(ctx, r.wf, 2)
	if err != nil {
		return err
	}
	scribble(got)
	if err := wantHistory(ctx, s, r.wf, want...); err != nil {
		return fmt.Errorf("after the caller overwrote the payload bytes ReadHistoryFrom returned: %w", err)
	}

	pkgType := "conformance-alias-" + r.wf.String()
	data := []byte("package bytes")
	if err := s.PutPackage(ctx, eventstore.PackageRecord{WorkflowType: pkgType, ContentHash: "h", Data: data}); err != nil {
		return fmt.Errorf("PutPackage: %w", err)
	}
	copy(data, "#############")
	for pass := range 2 {
		pkgs, err := s.ListPackages(ctx)
		if err != nil {
			return fmt.Errorf("ListPackages: %w", err)
		}
		found := false
		for _, p := range pkgs {
			if p.WorkflowType != pkgType {
				continue
			}
			found = true
			if string(p.Data) != "package bytes" {
				return fmt.Errorf("ListPackages (pass %d) returned Data %q, want %q: the store keeps the caller's bytes or hands out its own", pass, p.Data, "package bytes")
			}
			copy(p.Data, "#############")
		}
		if !found {
			return fmt.Errorf("ListPackages does not list the package put")
		}
	}

	ob, ok := s.(eventstore.Outbox)
	if !ok {
		return nil
	}
	r2 := newESRun()
	row := r2.row(0)
	row.Input = eventstore.Payload{ContentType: "text/plain", Data: []byte("row input")}
	rows := []eventstore.OutboxRow{row}
	if err := ob.AppendWithOutbox(ctx, token, r2.wf, []eventstore.Event{r2.started("conformance-alias"), r2.scheduled(0)}, 0, rows); err != nil {
		return fmt.Errorf("AppendWithOutbox: %w", err)
	}
	copy(rows[0].Input.Data, "#########")
	for pass := range 2 {
		claimed, err := ob.ClaimOutboxRows(ctx, 1<<20)
		if err != nil {
			return fmt.Errorf("ClaimOutboxRows: %w", err)
		}
		found := false
		for i := range claimed {
			if claimed[i].DispatchKey != row.DispatchKey {
				continue
			}
			found = true
			if string(claimed[i].Input.Data) != "row input" {
				return fmt.Errorf("ClaimOutboxRows (pass %d) returned Input %q, want %q: the store keeps the caller's bytes or hands out its own", pass, claimed[i].Input.Data, "row input")
			}
			copy(claimed[i].Input.Data, "#########")
			if err := ob.RearmOutboxPending(ctx, []eventstore.OutboxRow{{DispatchKey: row.DispatchKey}}); err != nil {
				return fmt.Errorf("RearmOutboxPending: %w", err)
			}
		}
		if !found {
			return fmt.Errorf("ClaimOutboxRows (pass %d) did not return the staged row %q", pass, row.DispatchKey)
		}
	}
	return nil
}
