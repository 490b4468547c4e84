package conformance

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// The side tables of the event store model: outbox, timers, packages,
// shards.

func isOpenRow(s eventstore.OutboxState) bool {
	return s == eventstore.OutboxPending || s == eventstore.OutboxClaimed
}

func (m *esModel) outboxOp(ctx context.Context, o esOp, w *esWf, rng *rand.Rand) error {
	ob := m.outbox
	switch o.kind {
	case esOpClaim:
		// Oldest first: rows are staged with strictly increasing CreatedAt,
		// so staging order and age agree.
		var want []eventstore.OutboxRow
		for _, r := range m.rows {
			if r.State == eventstore.OutboxPending && len(want) < o.limit {
				r.State = eventstore.OutboxClaimed
				c := *r
				want = append(want, c)
			}
		}
		got, err := ob.ClaimOutboxRows(ctx, o.limit)
		if err != nil {
			return fmt.Errorf("ClaimOutboxRows(%d): %w", o.limit, err)
		}
		if err := sameRowList(fmt.Sprintf("ClaimOutboxRows(%d)", o.limit), got, want); err != nil {
			return err
		}
		for i := range got {
			for j := range got[i].Input.Data {
				got[i].Input.Data[j] = '#'
			}
		}
		return m.countClaimed(ctx)
	case esOpRearm:
		// Some claimed rows, and maybe a pending, settled or cancelled one:
		// only claimed rows go back to pending.
		var rows []eventstore.OutboxRow
		for _, r := range m.rows {
			if (r.State == eventstore.OutboxClaimed && rng.IntN(2) == 0) || rng.IntN(40) == 0 {
				rows = append(rows, eventstore.OutboxRow{DispatchKey: r.DispatchKey})
			}
		}
		unknown := o.variant%5 == 0
		if unknown {
			rows = append(rows, eventstore.OutboxRow{DispatchKey: "conformance-unknown-" + m.salt})
		}
		err := ob.RearmOutboxPending(ctx, rows)
		if unknown {
			if !errors.Is(err, eventstore.ErrNotFound) {
				return fmt.Errorf("RearmOutboxPending naming an unknown row returned %v, want an error matching eventstore.ErrNotFound", err)
			}
			return m.countClaimed(ctx)
		}
		if err != nil {
			return fmt.Errorf("RearmOutboxPending(%d rows): %w", len(rows), err)
		}
		for _, r := range rows {
			if mr := m.rowByKey[r.DispatchKey]; mr.State == eventstore.OutboxClaimed {
				mr.State = eventstore.OutboxPending
			}
		}
		return m.countClaimed(ctx)
	case esOpCancelRow:
		var open []*eventstore.OutboxRow
		for _, r := range m.rows {
			if isOpenRow(r.State) {
				open = append(open, r)
			}
		}
		if len(open) == 0 || o.variant%6 == 0 {
			err := ob.SettleOutboxRowCancelled(ctx, "conformance-unknown-"+m.salt)
			if !errors.Is(err, eventstore.ErrNotFound) {
				return fmt.Errorf("SettleOutboxRowCancelled of an unknown key returned %v, want an error matching eventstore.ErrNotFound", err)
			}
			return nil
		}
		r := open[rng.IntN(len(open))]
		if err := ob.SettleOutboxRowCancelled(ctx, r.DispatchKey); err != nil {
			return fmt.Errorf("SettleOutboxRowCancelled(%q, %s): %w", r.DispatchKey, r.State, err)
		}
		r.State = eventstore.OutboxCancelled
		return m.countClaimed(ctx)
	case esOpCancelWf:
		var want []string
		for _, r := range m.rows {
			if r.WorkflowID == w.id && isOpenRow(r.State) {
				want = append(want, r.DispatchKey)
				r.State = eventstore.OutboxCancelled
			}
		}
		got, err := ob.SettleWorkflowOutboxRowsCancelled(ctx, w.id)
		if err != nil {
			return fmt.Errorf("SettleWorkflowOutboxRowsCancelled: %w", err)
		}
		if len(got) != len(want) || !sameSet(got, want) {
			return fmt.Errorf("SettleWorkflowOutboxRowsCancelled(%v) returned %d keys, want the %d open rows: missing %q, extra %q", w.id, len(got), len(want), missing(want, got), missing(got, want))
		}
		return m.countClaimed(ctx)
	}
	return nil
}

func (m *esModel) countClaimed(ctx context.Context) error {
	want := 0
	for _, r := range m.rows {
		if r.State == eventstore.OutboxClaimed {
			want++
		}
	}
	got, err := m.outbox.CountClaimedOutboxRows(ctx)
	if err != nil {
		return fmt.Errorf("CountClaimedOutboxRows: %w", err)
	}
	if got != want {
		return fmt.Errorf("CountClaimedOutboxRows = %d, want %d", got, want)
	}
	return nil
}

// sameRowList compares claimed rows, in order.
func sameRowList(what string, got, want []eventstore.OutboxRow) error {
	keys := func(rs []eventstore.OutboxRow) []string {
		out := make([]string, len(rs))
		for i, r := range rs {
			out[i] = r.DispatchKey
		}
		return out
	}
	if len(got) != len(want) {
		return fmt.Errorf("%s returned %d rows %q, want %d %q (oldest pending first)", what, len(got), keys(got), len(want), keys(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.DispatchKey != w.DispatchKey {
			return fmt.Errorf("%s returned rows %q, want %q (oldest pending first)", what, keys(got), keys(want))
		}
		if g.WorkflowID != w.WorkflowID || g.RunID != w.RunID || g.Ordinal != w.Ordinal || g.ActivityType != w.ActivityType ||
			g.Input.ContentType != w.Input.ContentType || !bytes.Equal(g.Input.Data, w.Input.Data) || !g.CreatedAt.Equal(w.CreatedAt) || g.State != eventstore.OutboxClaimed {
			return fmt.Errorf("%s: row %d = %+v, want %+v in state claimed", what, i, g, w)
		}
	}
	return nil
}

func (m *esModel) timerOp(ctx context.Context, s eventstore.Store, o esOp, w *esWf, rng *rand.Rand) error {
	base := time.Unix(1_800_000_000, 0).UTC()
	ids := []eventstore.TimerID{"t0", "t\x00ü\xff", eventstore.TimerID("timer-" + m.salt)}
	switch o.kind {
	case esOpTimer:
		e := eventstore.TimerEntry{WorkflowID: w.id, TimerID: ids[rng.IntN(len(ids))], FireAt: base.Add(time.Duration(rng.IntN(100)) * time.Minute), ArmedSeq: uint64(rng.IntN(4))}
		if err := s.ScheduleTimer(ctx, e.WorkflowID, e.TimerID, e.FireAt, e.ArmedSeq); err != nil {
			return fmt.Errorf("ScheduleTimer(%+v): %w", e, err)
		}
		m.timers[timerModelKey{e.WorkflowID, e.TimerID}] = e
	case esOpRetire:
		var armed []eventstore.TimerEntry
		for _, e := range m.timers {
			armed = append(armed, e)
		}
		slices.SortFunc(armed, func(a, b eventstore.TimerEntry) int {
			return cmp.Or(bytes.Compare(a.WorkflowID[:], b.WorkflowID[:]), strings.Compare(string(a.TimerID), string(b.TimerID)))
		})
		var e eventstore.TimerEntry
		if len(armed) == 0 {
			e = eventstore.TimerEntry{WorkflowID: w.id, TimerID: "never-armed", FireAt: base}
		} else {
			e = armed[rng.IntN(len(armed))]
		}
		want := eventstore.TimerRetired
		_, armedNow := m.timers[timerModelKey{e.WorkflowID, e.TimerID}]
		switch o.variant % 4 {
		case 1: // only fireAt differs
			e.FireAt = e.FireAt.Add(time.Second)
			want = eventstore.TimerSuperseded
		case 2: // only armedSeq differs
			e.ArmedSeq++
			want = eventstore.TimerSuperseded
		case 3:
			e.TimerID, armedNow = eventstore.TimerID("absent-"+m.salt), false
		}
		if !armedNow {
			want = eventstore.TimerAbsent
		}
		got, err := s.RetireTimer(ctx, e.WorkflowID, e.TimerID, e.FireAt, e.ArmedSeq)
		if err != nil {
			return fmt.Errorf("RetireTimer(%+v): %w", e, err)
		}
		if got != want {
			return fmt.Errorf("RetireTimer(%+v) = %v, want %v (armed: %+v)", e, got, want, m.timers[timerModelKey{e.WorkflowID, e.TimerID}])
		}
		if got == eventstore.TimerRetired {
			delete(m.timers, timerModelKey{e.WorkflowID, e.TimerID})
		}
	case esOpExpired:
		asOf := base.Add(time.Duration(rng.IntN(110)) * time.Minute)
		if o.variant == 1 {
			asOf = base.Add(1000 * time.Hour)
		}
		var want []eventstore.TimerEntry
		for _, e := range m.timers {
			if !e.FireAt.After(asOf) {
				want = append(want, e)
			}
		}
		got, err := s.ExpiredTimers(ctx, asOf)
		if err != nil {
			return fmt.Errorf("ExpiredTimers: %w", err)
		}
		var mine []eventstore.TimerEntry
		for i, g := range got {
			if i > 0 && g.FireAt.Before(got[i-1].FireAt) {
				return fmt.Errorf("ExpiredTimers(%v) is not earliest first: %v after %v", asOf, g.FireAt, got[i-1].FireAt)
			}
			if m.owned[g.WorkflowID] != nil {
				mine = append(mine, g)
			}
		}
		if len(mine) != len(want) {
			return fmt.Errorf("ExpiredTimers(%v) returned %d of this run's timers, want %d", asOf, len(mine), len(want))
		}
		for _, g := range mine {
			e, ok := m.timers[timerModelKey{g.WorkflowID, g.TimerID}]
			if !ok || !e.FireAt.Equal(g.FireAt) || e.ArmedSeq != g.ArmedSeq || e.FireAt.After(asOf) {
				return fmt.Errorf("ExpiredTimers(%v) returned %+v, want %+v", asOf, g, e)
			}
		}
	}
	return nil
}

func (m *esModel) packageOp(ctx context.Context, s eventstore.Store, o esOp, rng *rand.Rand) error {
	hashes := []string{"h1", "h2", "h\x00ü"}
	typ, hash := m.pkgTypes[rng.IntN(len(m.pkgTypes))], hashes[rng.IntN(len(hashes))]
	hashStored := func(h string, except [2]string) bool {
		for k := range m.packages {
			if k != except && k[1] == h {
				return true
			}
		}
		return false
	}
	m.clock = m.clock.Add(time.Second)
	rec := eventstore.PackageRecord{WorkflowType: typ, ContentHash: hash, Data: []byte("package " + hostile(rng)), CreatedAt: m.clock}
	if o.big {
		rec.Data = bytes.Repeat([]byte{0, 0xff, 'p'}, esModelBigPayload/3)
	}
	switch o.variant % 6 {
	case 0, 1:
		caller := slices.Clone(rec.Data)
		rec.Data = caller
		if err := s.PutPackage(ctx, rec); err != nil {
			return fmt.Errorf("PutPackage(%q, %q): %w", typ, hash, err)
		}
		stored := rec
		stored.Data = slices.Clone(caller)
		m.packages[[2]string{typ, hash}] = stored
		for i := range caller {
			caller[i] = '#'
		}
	case 2:
		routes := []string{m.routeTyps[rng.IntN(len(m.routeTyps))], m.routeTyps[rng.IntN(len(m.routeTyps))]}
		bad := rng.IntN(3) == 0
		if bad {
			routes = append(routes, "")
		}
		err := s.PutPackageWithRoutes(ctx, rec, routes)
		if bad {
			if !errors.Is(err, eventstore.ErrInvalidArgument) {
				return fmt.Errorf("PutPackageWithRoutes with an empty route type returned %v, want an error matching eventstore.ErrInvalidArgument (and nothing stored)", err)
			}
			return m.listPackages(ctx, s)
		}
		if err != nil {
			return fmt.Errorf("PutPackageWithRoutes(%q, %q, %q): %w", typ, hash, routes, err)
		}
		m.packages[[2]string{typ, hash}] = rec
		for _, r := range routes {
			m.routes[r] = hash
		}
	case 3:
		rt := m.routeTyps[rng.IntN(len(m.routeTyps))]
		err := s.PutPackageRoute(ctx, rt, hash)
		if !hashStored(hash, [2]string{}) {
			if !errors.Is(err, eventstore.ErrNotFound) {
				return fmt.Errorf("PutPackageRoute(%q, %q) to no stored package returned %v, want an error matching eventstore.ErrNotFound", rt, hash, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("PutPackageRoute(%q, %q): %w", rt, hash, err)
		}
		m.routes[rt] = hash
	case 4:
		k := [2]string{typ, hash}
		_, stored := m.packages[k]
		routed := false
		for _, h := range m.routes {
			routed = routed || h == hash
		}
		if stored && routed && !hashStored(hash, k) {
			return m.listPackages(ctx, s) // what deleting a routed package does is the store's choice
		}
		err := s.DeletePackage(ctx, typ, hash)
		if !stored {
			if !errors.Is(err, eventstore.ErrNotFound) {
				return fmt.Errorf("DeletePackage(%q, %q) of a package not stored returned %v, want an error matching eventstore.ErrNotFound", typ, hash, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("DeletePackage(%q, %q): %w", typ, hash, err)
		}
		delete(m.packages, k)
	default:
		return m.listPackages(ctx, s)
	}
	return nil
}

func (m *esModel) listPackages(ctx context.Context, s eventstore.Store) error {
	got, err := s.ListPackages(ctx)
	if err != nil {
		return fmt.Errorf("ListPackages: %w", err)
	}
	n := 0
	for _, g := range got {
		if !slices.Contains(m.pkgTypes, g.WorkflowType) {
			continue
		}
		n++
		w, ok := m.packages[[2]string{g.WorkflowType, g.ContentHash}]
		if !ok || !bytes.Equal(w.Data, g.Data) || !w.CreatedAt.Equal(g.CreatedAt) {
			return fmt.Errorf("ListPackages returned %q/%q (%d bytes, created %v), want %v (%d bytes, created %v)", g.WorkflowType, g.ContentHash, len(g.Data), g.CreatedAt, ok, len(w.Data), w.CreatedAt)
		}
		for i := range g.Data {
			g.Data[i] = '#'
		}
	}
	if n != len(m.packages) {
		return fmt.Errorf("ListPackages returned %d of this run's packages, want %d", n, len(m.packages))
	}
	routes, err := s.ListPackageRoutes(ctx)
	if err != nil {
		return fmt.Errorf("ListPackageRoutes: %w", err)
	}
	n = 0
	for _, r := range routes {
		if !slices.Contains(m.routeTyps, r.WorkflowType) {
			continue
		}
		n++
		if m.routes[r.WorkflowType] != r.ContentHash {
			return fmt.Errorf("ListPackageRoutes routes %q to %q, want %q", r.WorkflowType, r.ContentHash, m.routes[r.WorkflowType])
		}
	}
	if n != len(m.routes) {
		return fmt.Errorf("ListPackageRoutes returned %d of this run's routes, want %d", n, len(m.routes))
	}
	return nil
}

func (m *esModel) shardOp(ctx context.Context, o esOp) error {
	so := m.shards
	switch o.variant % 4 {
	case 0:
		// A many-shard election with one bad shard acquires none.
		shards := []int{0, -1}
		if o.seed%2 == 0 {
			shards = []int{-1, 0}
		}
		if err := so.AcquireOwnedShards(ctx, shards); !errors.Is(err, eventstore.ErrInvalidArgument) {
			return fmt.Errorf("AcquireOwnedShards(%v) returned %v, want an error matching eventstore.ErrInvalidArgument", shards, err)
		}
	case 1:
		if err := so.AcquireOwnedShards(ctx, []int{0}); err != nil {
			return fmt.Errorf("AcquireOwnedShards([0]): %w", err)
		}
		m.shard0 = true
	case 2:
		err := so.PublishShardOwner(ctx, 0)
		if m.shard0 && err != nil {
			return fmt.Errorf("PublishShardOwner(0) after acquiring it: %w", err)
		}
		if !m.shard0 && !errors.Is(err, eventstore.ErrNotOwner) {
			return fmt.Errorf("PublishShardOwner(0) before acquiring it returned %v, want an error matching eventstore.ErrNotOwner", err)
		}
	}
	if got := so.IsCurrentOwner(ctx, 0); got != m.shard0 {
		return fmt.Errorf("IsCurrentOwner(0) = %v, want %v", got, m.shard0)
	}
	// The rule acquires shard 0 only: no other shard is held, whether the
	// store has it or not.
	for _, shard := range []int{1, -1} {
		if so.IsCurrentOwner(ctx, shard) {
			return fmt.Errorf("IsCurrentOwner(%d) = true, but shard %d was never acquired", shard, shard)
		}
	}
	return nil
}

// esModelRule is the event store model rule.
func esModelRule(ctx context.Context, env *ruleEnv[eventstore.Store], s eventstore.Store) error {
	rng := newRand(env.cfg.seed, RuleESModel)
	n := esModelWorkflows * env.cfg.scale
	ops := genESOps(rng, env.cfg.scale, n)
	idSeed, modelSeed := rng.Uint64(), rng.Uint64()
	// Every replay draws the same IDs but for a fresh salt: the same order
	// and shards, no collision with the run that failed.
	ids := func() *idGen { return newIDGen(rand.New(rand.NewPCG(idSeed, 3))) }
	return runModel(ctx, env, s, ops, execES(ids, modelSeed, n))
}
