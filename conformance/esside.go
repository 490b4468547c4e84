package conformance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// The side tables of the event store model: outbox, timers, packages,
// shards and retention. Each method is one generated operation.

// refused checks that err matches want (a done context's error, or a
// sentinel).
func refused(err, want error, what string) error {
	if !errors.Is(err, want) {
		return fmt.Errorf("%s returned %v, want an error matching %v", what, err, want)
	}
	return nil
}

// doneErr is the error a call with a done context of mode must return, nil
// for a live one.
func doneErr(mode ctxMode) error {
	return []error{nil, context.Canceled, context.DeadlineExceeded, nil}[mode]
}

// lookalike turns a key into one differing only in case, a separator or
// an accent: a distinct key a careless store merges with the first.
var lookalike = strings.NewReplacer("a", "A", "A", "a", "/", ":", ":", "/", "u", "ü", "ü", "u")

// timerOrder orders timers earliest first, then by workflow and ID.
func timerOrder(a, b eventstore.TimerEntry) int {
	return cmp.Or(a.FireAt.Compare(b.FireAt), strings.Compare(a.WorkflowID.String()+string(a.TimerID), b.WorkflowID.String()+string(b.TimerID)))
}

func (m *esModel) claim(limit int) error {
	got, err := m.ob.ClaimOutboxRows(m.ctx, limit)
	what := fmt.Sprintf("ClaimOutboxRows(%d)", limit)
	if limit <= 0 {
		if err := refused(err, eventstore.ErrInvalidArgument, what); err != nil {
			return err
		}
		return m.count()
	}
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	want := []eventstore.OutboxRow{}
	for _, r := range m.rows {
		if r.State == eventstore.OutboxPending && len(want) < limit {
			r.State = eventstore.OutboxClaimed
			want = append(want, *r)
		}
	}
	if d := diff(got, want); d != "" {
		return fmt.Errorf("%s, oldest pending first, in state claimed: %s", what, d)
	}
	scribble(got)
	return m.count()
}

func (m *esModel) count() error {
	want := 0
	for _, r := range m.rows {
		if r.State == eventstore.OutboxClaimed {
			want++
		}
	}
	if got, err := m.ob.CountClaimedOutboxRows(m.ctx); err != nil || got != want {
		return fmt.Errorf("CountClaimedOutboxRows = %d, %v; want %d", got, err, want)
	}
	return nil
}

// rearm re-arms some claimed rows (and, now and then, a row in another
// state, which stays as it is); variant 1 adds an unknown key (ErrNotFound)
// and 2 an empty one (ErrInvalidArgument): nothing changes then.
func (m *esModel) rearm(variant int, seed uint64) error {
	g := m.g.sub(seed)
	var rows []eventstore.OutboxRow
	for _, r := range m.rows {
		if (r.State == eventstore.OutboxClaimed && g.IntN(2) == 0) || g.IntN(40) == 0 {
			rows = append(rows, eventstore.OutboxRow{DispatchKey: r.DispatchKey, Ordinal: eventstore.ActivityID(g.u64())})
		}
	}
	var want error
	switch variant % 4 {
	case 1:
		rows, want = append(rows, eventstore.OutboxRow{DispatchKey: m.g.salt + "never-staged"}), eventstore.ErrNotFound
	case 2:
		rows, want = append(rows, eventstore.OutboxRow{}), eventstore.ErrInvalidArgument
	}
	given := deepCopy(rows)
	err := m.ob.RearmOutboxPending(m.ctx, rows)
	if d := diff(rows, given); d != "" {
		return fmt.Errorf("RearmOutboxPending changed the caller's rows: %s", d)
	}
	if want != nil {
		return errors.Join(refused(err, want, "RearmOutboxPending naming a bad row"), m.count())
	}
	if err != nil {
		return fmt.Errorf("RearmOutboxPending(%d rows): %w", len(rows), err)
	}
	for _, r := range rows {
		if mr := m.rowByKey[r.DispatchKey]; mr.State == eventstore.OutboxClaimed {
			mr.State = eventstore.OutboxPending
		}
	}
	return m.count()
}

// cancelRow cancels one row: an open one (variant 0), one already settled
// or cancelled (1, a no-op), a key differing from a staged one only in case
// or in a separator (2, ErrNotFound unless staged too), the empty key (3,
// ErrInvalidArgument).
func (m *esModel) cancelRow(variant int, seed uint64) error {
	g := m.g.sub(seed)
	key := m.g.salt + "never-staged"
	if len(m.rows) > 0 {
		key = pick(g, m.rows...).DispatchKey
		var open []*eventstore.OutboxRow
		for _, r := range m.rows {
			if isOpenRow(r.State) == (variant%4 == 0) {
				open = append(open, r)
			}
		}
		if len(open) > 0 {
			key = pick(g, open...).DispatchKey
		}
	}
	switch variant % 4 {
	case 2:
		key = lookalike.Replace(key)
	case 3:
		key = ""
	}
	err := m.ob.SettleOutboxRowCancelled(m.ctx, key)
	what := fmt.Sprintf("SettleOutboxRowCancelled(%s)", short(key))
	switch r := m.rowByKey[key]; {
	case key == "":
		return refused(err, eventstore.ErrInvalidArgument, what)
	case r == nil:
		return refused(err, eventstore.ErrNotFound, what)
	case err != nil:
		return fmt.Errorf("%s of a row %s: %w", what, r.State, err)
	case isOpenRow(r.State):
		r.State = eventstore.OutboxCancelled
	}
	return m.count()
}

// cancelWf cancels the open rows of a workflow (every run): variant 1 an
// unknown workflow (none), 2 the zero one (ErrInvalidArgument).
func (m *esModel) cancelWf(w *esWf, variant int) error {
	id := w.id
	switch variant % 5 {
	case 1:
		id = m.g.workflow()
	case 2:
		id = eventstore.WorkflowID{}
	}
	got, err := m.ob.SettleWorkflowOutboxRowsCancelled(m.ctx, id)
	if id.IsZero() {
		return refused(err, eventstore.ErrInvalidArgument, "SettleWorkflowOutboxRowsCancelled(zero workflow)")
	}
	want := []string{}
	for _, r := range m.rows {
		if r.WorkflowID == id && isOpenRow(r.State) {
			want = append(want, r.DispatchKey)
			r.State = eventstore.OutboxCancelled
		}
	}
	if err != nil {
		return fmt.Errorf("SettleWorkflowOutboxRowsCancelled: %w", err)
	}
	got = slices.Clone(got)
	slices.Sort(got)
	slices.Sort(want)
	if d := diff(got, want); d != "" {
		return fmt.Errorf("SettleWorkflowOutboxRowsCancelled returned the keys (sorted) %s: exactly the workflow's open rows, of every run", d)
	}
	return m.count()
}

// schedule arms a timer with a key-shaped ID (the shape variant-6 from
// variant 6 on); variant 1 uses the zero workflow and 2 the empty ID
// (ErrInvalidArgument, nothing armed).
func (m *esModel) schedule(w *esWf, variant int, seed uint64, mode ctxMode) error {
	g := m.g.sub(seed)
	e := eventstore.TimerEntry{WorkflowID: w.id, TimerID: eventstore.TimerID(g.key("")), FireAt: g.time(), ArmedSeq: g.u64()}
	if variant >= 6 {
		e.TimerID = eventstore.TimerID(keyShapes[(variant-6)%len(keyShapes)])
	}
	switch variant {
	case 1:
		e.WorkflowID = eventstore.WorkflowID{}
	case 2:
		e.TimerID = ""
	}
	ctx, cancel := ctxFor(m.ctx, mode, 0)
	defer cancel()
	err := m.s.ScheduleTimer(ctx, e.WorkflowID, e.TimerID, e.FireAt, e.ArmedSeq)
	what := fmt.Sprintf("ScheduleTimer(%s, fireAt %v, armedSeq %d)", short(string(e.TimerID)), e.FireAt, e.ArmedSeq)
	switch {
	case doneErr(mode) != nil:
		return refused(err, doneErr(mode), what)
	case e.WorkflowID.IsZero() || e.TimerID == "":
		return refused(err, eventstore.ErrInvalidArgument, what)
	case err != nil:
		return fmt.Errorf("%s: %w", what, err)
	}
	m.timers[timerKey{e.WorkflowID, e.TimerID}] = e
	return nil
}

// retire retires an armed timer as armed (variant 0), with its fireAt
// moved by a microsecond (1), its armedSeq differing in bit 32 (2) or 63
// (3), or a timer not armed: an ID differing only in case or separator (4);
// 5 uses an empty ID (ErrInvalidArgument).
func (m *esModel) retire(variant int, seed uint64) error {
	g := m.g.sub(seed)
	armed := make([]eventstore.TimerEntry, 0, len(m.timers))
	for _, e := range m.timers {
		armed = append(armed, e)
	}
	slices.SortFunc(armed, timerOrder)
	e := eventstore.TimerEntry{WorkflowID: m.wf(0).id, TimerID: "never-armed", FireAt: g.time()}
	if len(armed) > 0 {
		e = pick(g, armed...)
	}
	switch variant % 6 {
	case 1:
		e.FireAt = e.FireAt.Add(time.Microsecond)
	case 2:
		e.ArmedSeq ^= 1 << 32
	case 3:
		e.ArmedSeq ^= 1 << 63
	case 4:
		e.TimerID = eventstore.TimerID(lookalike.Replace(string(e.TimerID)))
	case 5:
		e.TimerID = ""
	}
	got, err := m.s.RetireTimer(m.ctx, e.WorkflowID, e.TimerID, e.FireAt, e.ArmedSeq)
	what := fmt.Sprintf("RetireTimer(%s, %v, armedSeq %d)", short(string(e.TimerID)), e.FireAt, e.ArmedSeq)
	if e.TimerID == "" {
		return refused(err, eventstore.ErrInvalidArgument, what)
	}
	k := timerKey{e.WorkflowID, e.TimerID}
	want := eventstore.TimerAbsent
	if a, ok := m.timers[k]; ok {
		want = eventstore.TimerSuperseded
		if a.FireAt.Equal(e.FireAt) && a.ArmedSeq == e.ArmedSeq {
			want = eventstore.TimerRetired
			delete(m.timers, k)
		}
	}
	if err != nil || got != want {
		return fmt.Errorf("%s = %v, %v; want %v (armed: %+v)", what, got, err, want, m.timers[k])
	}
	return nil
}

// expired lists the due timers as of an armed timer's FireAt (variant 0),
// a microsecond before it (1), the zero time (2) or far ahead (3).
func (m *esModel) expired(variant int, seed uint64, mode ctxMode) error {
	g := m.g.sub(seed)
	asOf := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, e := range m.timers {
		if g.IntN(len(m.timers)) == 0 {
			asOf = e.FireAt
		}
	}
	switch variant % 4 {
	case 1:
		asOf = asOf.Add(-time.Microsecond)
	case 2:
		asOf = time.Time{}
	case 3:
		asOf = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return m.expiredAsOf(asOf, mode)
}

// expiredAsOf calls ExpiredTimers(asOf) and judges the answer.
func (m *esModel) expiredAsOf(asOf time.Time, mode ctxMode) error {
	want := []eventstore.TimerEntry{}
	for _, e := range m.timers {
		if !e.FireAt.After(asOf) && !m.noScope {
			want = append(want, e)
		}
	}
	slices.SortFunc(want, timerOrder)
	return twice(m.ctx, mode, 0, false, func(ctx context.Context) ([]eventstore.TimerEntry, error) { return m.s.ExpiredTimers(ctx, asOf) },
		func(got []eventstore.TimerEntry) string {
			for i := 1; i < len(got); i++ {
				if got[i].FireAt.Before(got[i-1].FireAt) {
					return fmt.Sprintf("ExpiredTimers(%v) is not earliest first: %v after %v", asOf, got[i].FireAt, got[i-1].FireAt)
				}
			}
			got = slices.DeleteFunc(slices.Clone(got), func(e eventstore.TimerEntry) bool { return m.byID[e.WorkflowID] == nil })
			slices.SortStableFunc(got, timerOrder)
			if d := diff(got, want); d != "" {
				return fmt.Sprintf("ExpiredTimers(%v), this rule's timers: %s", asOf, d)
			}
			return ""
		})
}

// pkg is one generated package operation: variant 0 puts, 1 puts with
// routes (one of them empty for 2: nothing stored), 3 routes, 4 deletes, 5
// lists; typ and hash (key shapes, salted here) name the package when set.
func (m *esModel) pkg(variant int, seed uint64, typ, hash string, mode ctxMode) error {
	g := m.g.sub(seed)
	if typ == "" {
		typ, hash = pick(g, keyShapes...), pick(g, keyShapes...)
	}
	// The hash before the salt, so that ("a/b", "c") and ("a", "b/c")
	// still join to one string.
	typ, hash = m.g.salt+typ, hash+m.g.salt
	rec := filled[eventstore.PackageRecord](g)
	rec.WorkflowType, rec.ContentHash = typ, hash
	if rec.CreatedAt.IsZero() {
		rec.CreatedAt = time.Unix(1, 0)
	}
	hashStored := func(h string, except [2]string) bool {
		for k := range m.packages {
			if k != except && k[1] == h {
				return true
			}
		}
		return false
	}
	ctx, cancel := ctxFor(m.ctx, mode, 0)
	defer cancel()
	k := [2]string{typ, hash}
	what := fmt.Sprintf("package (%s, %s)", short(typ), short(hash))
	var err error
	switch variant % 6 {
	case 0, 1, 2:
		routes := []string{g.key(m.g.salt), g.key(m.g.salt)}
		if variant%6 == 2 {
			routes = append(routes, "")
		}
		given, givenRoutes := deepCopy(rec), slices.Clone(routes)
		if variant%6 == 0 {
			err = m.s.PutPackage(ctx, rec)
		} else {
			err = m.s.PutPackageWithRoutes(ctx, rec, routes)
		}
		if d := diff(rec, given) + diff(routes, givenRoutes); d != "" {
			return fmt.Errorf("putting %s changed the caller's arguments: %s", what, d)
		}
		scribble(rec)
		switch {
		case doneErr(mode) != nil:
			return refused(err, doneErr(mode), "putting "+what)
		case variant%6 == 2:
			return errors.Join(refused(err, eventstore.ErrInvalidArgument, "PutPackageWithRoutes with an empty route"), m.listPackages(ctxLive))
		case err != nil:
			return fmt.Errorf("putting %s: %w", what, err)
		}
		m.packages[k] = given
		if variant%6 == 1 {
			for _, r := range routes {
				m.routes[r] = hash
			}
		}
	case 3:
		rt := g.key(m.g.salt)
		err = m.s.PutPackageRoute(ctx, rt, hash)
		switch {
		case doneErr(mode) != nil:
			return refused(err, doneErr(mode), "PutPackageRoute")
		case !hashStored(hash, [2]string{}):
			return refused(err, eventstore.ErrNotFound, fmt.Sprintf("PutPackageRoute to %s, which no package has", short(hash)))
		case err != nil:
			return fmt.Errorf("PutPackageRoute(%s, %s): %w", short(rt), short(hash), err)
		}
		m.routes[rt] = hash
	case 4:
		_, stored := m.packages[k]
		routed := slices.Contains(mapValues(m.routes), hash)
		if stored && routed && !hashStored(hash, k) {
			return m.listPackages(mode) // deleting the last package of a routed hash is the store's choice
		}
		err = m.s.DeletePackage(ctx, typ, hash)
		switch {
		case doneErr(mode) != nil:
			return refused(err, doneErr(mode), "DeletePackage")
		case !stored:
			return refused(err, eventstore.ErrNotFound, "DeletePackage of "+what+", not stored")
		case err != nil:
			return fmt.Errorf("DeletePackage of %s: %w", what, err)
		}
		delete(m.packages, k)
	default:
		return m.listPackages(mode)
	}
	return nil
}

func mapValues[K comparable, V any](m map[K]V) []V {
	out := make([]V, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func (m *esModel) listPackages(mode ctxMode) error {
	ours := func(s string) bool { return strings.HasPrefix(s, m.g.salt) }
	want := mapValues(m.packages)
	byKey := func(a, b eventstore.PackageRecord) int {
		return strings.Compare(a.WorkflowType+"\xff\xff"+a.ContentHash, b.WorkflowType+"\xff\xff"+b.ContentHash)
	}
	slices.SortFunc(want, byKey)
	if err := twice(m.ctx, mode, 0, false, m.s.ListPackages, func(got []eventstore.PackageRecord) string {
		got = slices.DeleteFunc(slices.Clone(got), func(p eventstore.PackageRecord) bool { return !ours(p.WorkflowType) })
		slices.SortFunc(got, byKey)
		if d := diff(got, want); d != "" {
			return "ListPackages, this rule's packages: " + d
		}
		return ""
	}); err != nil {
		return err
	}
	var routes []eventstore.PackageRoute
	for t, h := range m.routes {
		routes = append(routes, eventstore.PackageRoute{WorkflowType: t, ContentHash: h})
	}
	byType := func(a, b eventstore.PackageRoute) int { return strings.Compare(a.WorkflowType, b.WorkflowType) }
	slices.SortFunc(routes, byType)
	return twice(m.ctx, mode, 0, false, m.s.ListPackageRoutes, func(got []eventstore.PackageRoute) string {
		got = slices.DeleteFunc(slices.Clone(got), func(r eventstore.PackageRoute) bool { return !ours(r.WorkflowType) })
		slices.SortFunc(got, byType)
		if d := diff(got, routes); d != "" {
			return "ListPackageRoutes, this rule's routes: " + d
		}
		return ""
	})
}

// badShards are shard numbers no store has: a store keeping shards in 32
// bits turns 1<<32 into shard 0.
var badShards = []int{-1, math.MinInt, 1 << 32, math.MaxInt}

// shard runs one single-node ShardOwner operation: variant 0 acquires
// shard 0 through AcquireOwnedShards and 8 through AcquireOwnedShard, 1 a
// list holding a bad shard (none acquired), 2 publishes shard 0, 3 a bad
// shard, 4 sets the empty scope (no workflow listed) and 5 clears it, 6
// widens the clear scope (no change), 7 sets the empty scope with a done
// context (no change). Then IsCurrentOwner must follow, of shard 0 and of bad shards,
// and false with a done context.
func (m *esModel) shard(variant int, seed uint64) error {
	so := m.so
	g := m.g.sub(seed)
	bad := pick(g, badShards...)
	done, cancel := context.WithCancel(m.ctx)
	cancel()
	var err error
	switch variant % 9 {
	case 0, 8:
		if variant%9 == 8 {
			err = so.AcquireOwnedShard(m.ctx, 0)
		} else {
			err = so.AcquireOwnedShards(m.ctx, []int{0})
		}
		if err != nil {
			return fmt.Errorf("acquiring shard 0: %w", err)
		}
		m.shard0 = true
	case 1:
		list := pick(g, []int{bad}, []int{0, bad}, []int{bad, 0})
		if len(list) == 1 && seed%2 == 1 {
			err = so.AcquireOwnedShard(m.ctx, bad)
		} else {
			err = so.AcquireOwnedShards(m.ctx, list)
		}
		if err := refused(err, eventstore.ErrInvalidArgument, fmt.Sprintf("acquiring shards %v", list)); err != nil {
			return err
		}
	case 2:
		err = so.PublishShardOwner(m.ctx, 0)
		if m.shard0 && err != nil {
			return fmt.Errorf("PublishShardOwner(0) after acquiring it: %w", err)
		}
		if !m.shard0 {
			if err := refused(err, eventstore.ErrNotOwner, "PublishShardOwner(0) before acquiring it"); err != nil {
				return err
			}
		}
	case 3:
		if err := refused(so.PublishShardOwner(m.ctx, bad), eventstore.ErrInvalidArgument, fmt.Sprintf("PublishShardOwner(%d)", bad)); err != nil {
			return err
		}
	case 4, 5:
		var scope []int
		if variant%9 == 4 {
			scope = []int{}
		}
		so.SetOwnedShards(m.ctx, scope)
		m.noScope = scope != nil
		return errors.Join(m.listings(ctxLive), m.expired(3, seed, ctxLive), m.query(0, seed, ctxLive))
	case 6:
		if m.noScope {
			so.SetOwnedShards(m.ctx, nil)
			m.noScope = false
		}
		so.ExtendOwnedShards(m.ctx, []int{0})
		return m.listings(ctxLive)
	case 7:
		so.SetOwnedShards(done, pick(g, []int{}, nil))
		so.ExtendOwnedShards(done, []int{0})
		return m.listings(ctxLive)
	}
	if got := so.IsCurrentOwner(m.ctx, 0); got != m.shard0 {
		return fmt.Errorf("IsCurrentOwner(0) = %v, want %v", got, m.shard0)
	}
	if so.IsCurrentOwner(done, 0) {
		return errors.New("IsCurrentOwner(0) with a cancelled context = true, want false")
	}
	if so.IsCurrentOwner(m.ctx, bad) {
		return fmt.Errorf("IsCurrentOwner(%d) = true, but no store has that shard", bad)
	}
	return nil
}

// prune removes closed workflows through PruneClosed with a cutoff at a
// closed run's ClosedAt (variant 0: that one stays), a microsecond after
// it (1), far ahead (2) or the zero time (3).
func (m *esModel) prune(variant int, seed uint64) error {
	if m.pr == nil {
		return skipf(0, "%T has no PruneClosed method (retention is optional)", m.s)
	}
	g := m.g.sub(seed)
	prunable := func(w *esWf) (time.Time, bool) {
		if w.head() == 0 {
			return time.Time{}, false
		}
		r := w.runs[len(w.runs)-1]
		return r.ClosedAt, r.Status.Closed() && r.Status != eventstore.StatusContinuedAsNew
	}
	cutoff := time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	var closed []time.Time
	for _, w := range m.wfs {
		if at, ok := prunable(w); ok {
			closed = append(closed, at)
		}
	}
	if len(closed) > 0 {
		cutoff = pick(g, closed...)
	}
	switch variant % 4 {
	case 1:
		cutoff = cutoff.Add(time.Microsecond)
	case 2:
		cutoff = time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)
	case 3:
		cutoff = time.Time{}
	}
	var gone []*esWf
	for _, w := range m.wfs {
		if at, ok := prunable(w); ok && at.Before(cutoff) {
			gone = append(gone, w)
		}
	}
	if n := m.pr.PruneClosed(cutoff); n != len(gone) {
		return fmt.Errorf("PruneClosed(%v) = %d, want %d (the workflows whose current run closed strictly before)", cutoff, n, len(gone))
	}
	var errs []error
	for _, w := range gone {
		*w = esWf{id: w.id, wfType: w.wfType}
		m.rows = slices.DeleteFunc(m.rows, func(r *eventstore.OutboxRow) bool {
			if r.WorkflowID == w.id {
				delete(m.rowByKey, r.DispatchKey)
				delete(m.rowsOf, actKey{w.id, rowRef{r.RunID, r.Ordinal}})
				return true
			}
			return false
		})
		for k := range m.timers {
			if k.wf == w.id {
				delete(m.timers, k)
			}
		}
		errs = append(errs, m.readAll(w, ctxLive), m.chain(w, ctxLive))
	}
	if m.ob != nil {
		errs = append(errs, m.count())
	}
	return errors.Join(errs...)
}
