package pgstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/aionotel/aionotel/eventstore"
)

// The lease statements: the lease clock (NULL: the database's
// clock_timestamp()), the lease duration in microseconds. Every shard has
// its row from the migration on (epoch 0: never acquired). A lease is live
// while its epoch is positive and it has not expired.
//
// No lease statement waits on a row lock another process holds: the reads
// take none, the takeover locks with NOWAIT (a writer of the previous
// holder holds the row FOR KEY SHARE until it commits: the takeover is
// refused at once, and tried again later), and renewals and releases skip
// rows locked by a takeover (SKIP LOCKED: such a row is being taken from
// this Store anyway). A renewal only changes expires, which takes a lock
// (FOR NO KEY UPDATE) that writers' FOR KEY SHARE does not conflict with.
const (
	qNewLife = `INSERT INTO {lives} AS l (node, life) VALUES ($1, 1)
ON CONFLICT (node) DO UPDATE SET life = l.life + 1 RETURNING life`
	leaseCols  = `shard, owner, life, epoch, epoch > 0 AND expires > coalesce($2::timestamptz, clock_timestamp())`
	qLeaseRead = `SELECT ` + leaseCols + ` FROM {shards} WHERE shard = ANY($1) ORDER BY shard`
	qLockTake  = `SELECT ` + leaseCols + ` FROM {shards} WHERE shard = ANY($1) ORDER BY shard FOR UPDATE NOWAIT`
	qLockKeep  = `SELECT ` + leaseCols + ` FROM {shards} WHERE shard = ANY($1) ORDER BY shard FOR NO KEY UPDATE NOWAIT`
	// $1 every shard of the call, $2 this node, $3 its life, $4 the shards
	// taken over (a new epoch; the others keep theirs), $5 the lease
	// clock, $6 the duration.
	qGrant = `UPDATE {shards} SET owner = $2, life = $3,
	epoch = CASE WHEN shard = ANY($4) THEN epoch + 1 ELSE epoch END,
	expires = coalesce($5::timestamptz, clock_timestamp()) + $6 * interval '1 microsecond'
WHERE shard = ANY($1) RETURNING shard, epoch`
	// $1 node, $2 life, $3 the lease clock.
	mineLive = `owner = $1 AND life = $2 AND epoch > 0 AND expires > coalesce($3::timestamptz, clock_timestamp())`
	qIsOwner = `SELECT EXISTS (SELECT 1 FROM {shards} WHERE shard = $4 AND ` + mineLive + `)`
	qPublish = `INSERT INTO {directory} AS d (shard, owner, epoch, published_at)
SELECT shard, owner, epoch, coalesce($3::timestamptz, clock_timestamp()) FROM {shards}
WHERE shard = $4 AND ` + mineLive + `
ON CONFLICT (shard) DO UPDATE SET owner = EXCLUDED.owner, epoch = EXCLUDED.epoch, published_at = EXCLUDED.published_at
WHERE d.epoch <= EXCLUDED.epoch
RETURNING 1`
	qRenew = `UPDATE {shards} SET expires = coalesce($3::timestamptz, clock_timestamp()) + $4 * interval '1 microsecond'
WHERE shard IN (SELECT shard FROM {shards} WHERE ` + mineLive + ` FOR NO KEY UPDATE SKIP LOCKED)
RETURNING shard, epoch`
	qRelease = `WITH r AS (
	UPDATE {shards} SET expires = '-infinity'
	WHERE shard IN (SELECT shard FROM {shards} WHERE ` + mineLive + ` AND shard = ANY($4) FOR NO KEY UPDATE SKIP LOCKED)
	RETURNING shard
)
DELETE FROM {directory} WHERE owner = $1 AND shard IN (SELECT shard FROM r)`
	qLeases = `SELECT s.shard, s.owner, s.epoch, s.expires, s.expires > coalesce($1::timestamptz, clock_timestamp()),
	d.owner IS NOT NULL AND d.owner = s.owner AND d.epoch = s.epoch
FROM {shards} s LEFT JOIN {directory} d ON d.shard = s.shard WHERE s.epoch > 0 ORDER BY s.shard`
)

// leaseRow is a shard's lease row as a lease statement reads it.
type leaseRow struct {
	shard int32
	owner string
	life  int64
	epoch int64
	live  bool
}

func scanLeaseRows(rows pgx.Rows) ([]leaseRow, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (leaseRow, error) {
		var l leaseRow
		err := r.Scan(&l.shard, &l.owner, &l.life, &l.epoch, &l.live)
		return l, err
	})
}

// leaseAction is what an acquisition does with one shard.
type leaseAction int

const (
	refuse leaseAction = iota // another node, or a later life of this name, holds it live
	keep                      // this Store holds it live: renewed in its epoch
	take                      // free, expired, released, or an earlier life's: a new epoch
)

func (s *Store) actionOn(l leaseRow) leaseAction {
	switch {
	case !l.live:
		return take
	case l.owner != s.cfg.node:
		return refuse
	case l.life == s.life:
		return keep
	case l.life < s.life:
		return take
	default:
		return refuse
	}
}

// epochOf returns the epoch this Store was granted for the shard, or -1.
func (s *Store) epochOf(shard int32) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.epochs[shard]; ok {
		return e
	}
	return -1
}

// SetOwnedShards sets the enumeration scope of this Store value (not of the
// node, nor of other Store values on the same database): ListWorkflowIDs,
// ListActive, ListPaused, StreamHeads and ExpiredTimers then return only
// workflows whose shard is listed. nil clears the scope (every shard); an
// empty, non-nil slice scopes to no shard at all. Shard numbers outside
// [0, ShardCount) match no workflow. The scope is not ownership: it neither
// acquires nor requires the shards. With a done context, or on a closed
// Store, it does nothing.
func (s *Store) SetOwnedShards(ctx context.Context, shards []int) {
	if s.enter(ctx) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if shards == nil {
		s.scope = nil
		return
	}
	s.scope = []int32{}
	s.addScopeLocked(shards)
}

// ExtendOwnedShards adds shards to the enumeration scope (failover
// adoption). When no scope is set every shard is already in it, and the
// call changes nothing. With a done context it does nothing.
func (s *Store) ExtendOwnedShards(ctx context.Context, shards []int) {
	if s.enter(ctx) != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scope != nil {
		s.addScopeLocked(shards)
	}
}

func (s *Store) addScopeLocked(shards []int) {
	for _, sh := range shards {
		if sh >= 0 && sh < s.shards && !slices.Contains(s.scope, int32(sh)) {
			s.scope = append(s.scope, int32(sh))
		}
	}
}

// AcquireOwnedShards runs the ownership election for every listed shard, all
// or none, in one transaction. For each shard, a lease that is free (never
// acquired, released, or expired: its holder stopped renewing it for the
// lease duration) is taken by this Store in a new epoch, and so is a live
// lease of an earlier life of this node name (see [WithNode]); a live
// lease this Store holds is renewed in its epoch; a live lease of another
// node, or of a later life of this name, fails the whole call with an
// error wrapping [eventstore.ErrNotOwner] naming the holder, and no shard
// of the call is acquired or renewed. A takeover that meets a write of the
// previous holder still in progress fails the same way at once, wrapping
// [ErrLeaseBusy] too, instead of waiting for it. A shard outside [0,
// ShardCount) returns an error wrapping [eventstore.ErrInvalidArgument]
// first. A lease lasts [WithLeaseDuration] from the call.
//
// # Fencing
//
// Every grant has an epoch, one more than the shard's previous one, and
// the Store remembers the epochs it was granted. A shard that no node ever
// acquired takes writes from every Store (so a single node that runs no
// elections works as [eventstore.Memory] does). Once acquired, a write to a
// workflow of the shard (an append, a timer, SettleWorkflowOutboxRowsCancelled)
// succeeds only in a Store whose epoch is the shard's current one, with
// the lease live; any other, whatever its node name, fails with
// [eventstore.ErrNotOwner] and writes nothing. The check runs inside the
// writing transaction, which holds the lease row FOR KEY SHARE until it
// commits: a renewal (which changes only the expiry) never waits for it,
// a takeover (which locks FOR UPDATE NOWAIT) is refused while it runs, and
// a write that reaches the check after a takeover sees the new epoch and
// is refused. So the check and the write are atomic: no write commits in
// an epoch after the next epoch was granted.
//
// # Bounds
//
// A holder that stops (paused, killed, cut off) loses its shards at most
// one lease duration after its last renewal; if it stopped inside a
// write, the server ends its session after [WithIdleInTransactionTimeout]
// (half the lease by default), which releases the row: either way the
// shard can be taken over one lease duration after the holder stopped, at
// the next acquisition attempt.
func (s *Store) AcquireOwnedShards(ctx context.Context, shards []int) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	want := make([]int32, 0, len(shards))
	for _, sh := range shards {
		if err := shardCheck(sh, s.shards); err != nil {
			return err
		}
		if !slices.Contains(want, int32(sh)) {
			want = append(want, int32(sh))
		}
	}
	if len(want) == 0 {
		return nil
	}
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	var granted []leaseRow
	err := pgx.BeginFunc(ctx, s.lpool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.setIdle); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = 1000"); err != nil {
			return err
		}
		now := s.leaseNow()
		rows, err := tx.Query(ctx, s.q.leaseRead, want, now)
		if err != nil {
			return err
		}
		read, err := scanLeaseRows(rows)
		if err != nil {
			return err
		}
		if len(read) != len(want) {
			return fmt.Errorf("%w: %d of the lease rows of shards %v are missing", ErrCorruptRecord, len(want)-len(read), want)
		}
		var takes, keeps []int32
		for _, l := range read {
			switch s.actionOn(l) {
			case refuse:
				return s.refused(l, shards)
			case keep:
				keeps = append(keeps, l.shard)
			case take:
				takes = append(takes, l.shard)
			}
		}
		// Lock, without waiting, and decide again on what the lock sees.
		for _, lock := range []struct {
			q      string
			shards []int32
			want   leaseAction
		}{{s.q.lockTake, takes, take}, {s.q.lockKeep, keeps, keep}} {
			if len(lock.shards) == 0 {
				continue
			}
			rows, err := tx.Query(ctx, lock.q, lock.shards, now)
			if err != nil {
				return err
			}
			locked, err := scanLeaseRows(rows)
			if sqlState(err) == "55P03" {
				return refusal{fmt.Errorf("%w: %w: pgstore: node %q acquired none of %v: a lease row is locked by a write of its previous holder or by another acquisition; try again",
					eventstore.ErrNotOwner, ErrLeaseBusy, s.cfg.node, shards)}
			}
			if err != nil {
				return err
			}
			for _, l := range locked {
				if s.actionOn(l) != lock.want {
					return s.refused(l, shards)
				}
			}
		}
		rows, err = tx.Query(ctx, s.q.grant, want, s.cfg.node, s.life, takes, now, s.cfg.lease.Microseconds())
		if err != nil {
			return err
		}
		granted, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (leaseRow, error) {
			var l leaseRow
			return l, r.Scan(&l.shard, &l.epoch)
		})
		return err
	})
	if err != nil {
		if !isRefusal(err) {
			return s.dbErr("acquire shards", err)
		}
		return err
	}
	s.mu.Lock()
	for _, l := range granted {
		s.epochs[l.shard] = l.epoch
	}
	s.mu.Unlock()
	return nil
}

// refused is the error of an acquisition that met a live lease it may not
// take.
func (s *Store) refused(l leaseRow, shards []int) error {
	who := fmt.Sprintf("node %q", l.owner)
	if l.owner == s.cfg.node {
		who = fmt.Sprintf("a later life (%d, this Store is life %d) of node %q", l.life, s.life, l.owner)
	}
	return refusal{fmt.Errorf("%w: pgstore: shard %d is held by %s (epoch %d) with a live lease; node %q acquired none of %v",
		eventstore.ErrNotOwner, l.shard, who, l.epoch, s.cfg.node, shards)}
}

// AcquireOwnedShard is [Store.AcquireOwnedShards] for one shard.
func (s *Store) AcquireOwnedShard(ctx context.Context, shard int) error {
	return s.AcquireOwnedShards(ctx, []int{shard})
}

// IsCurrentOwner reports whether this Store holds the shard with a live
// lease, as the database says now (one query): another Store of the same
// node name does not. It reports false for a
// shard out of range, and, conservatively, when the context is done, the
// store is closed or the query fails.
func (s *Store) IsCurrentOwner(ctx context.Context, shard int) bool {
	if s.enter(ctx) != nil || shardCheck(shard, s.shards) != nil {
		return false
	}
	var owner bool
	if err := s.lpool.QueryRow(ctx, s.q.isOwner, s.cfg.node, s.life, s.leaseNow(), int32(shard)).Scan(&owner); err != nil {
		return false
	}
	return owner
}

// PublishShardOwner records this node, at its current epoch, as the shard's
// owner in the owner directory (the aionotel_shard_directory table), so
// that requests for the shard route here. A shard this node does not hold
// with a live lease returns an error wrapping [eventstore.ErrNotOwner]; a
// shard outside [0, ShardCount) an error wrapping
// [eventstore.ErrInvalidArgument].
func (s *Store) PublishShardOwner(ctx context.Context, shard int) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if err := shardCheck(shard, s.shards); err != nil {
		return err
	}
	rows, err := s.lpool.Query(ctx, s.q.publish, s.cfg.node, s.life, s.leaseNow(), int32(shard))
	if err != nil {
		return s.dbErr("publish shard owner", err)
	}
	n, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return s.dbErr("publish shard owner", err)
	}
	if len(n) == 0 {
		return fmt.Errorf("%w: pgstore: node %q does not hold shard %d", eventstore.ErrNotOwner, s.cfg.node, shard)
	}
	return nil
}

// RenewOwnedShards extends, in one statement, every live lease this Store
// holds by the lease duration, keeping their epochs, and returns the shards
// it holds, in order. A lease that already expired is not renewed: the
// shard may have a new holder, and this Store gets it back only through
// [Store.AcquireOwnedShards], in a new epoch. A renewal never waits on a
// lock of another process: it changes only the expiry, which writes in
// progress do not lock against, and it skips a row that a takeover has
// locked (a later life of this node name taking it over), which it then
// does not return. Call it well within the lease duration, on a schedule of
// its own, and compare what it returns with what the node thinks it owns.
func (s *Store) RenewOwnedShards(ctx context.Context) ([]int, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	rows, err := s.lpool.Query(ctx, s.q.renew, s.cfg.node, s.life, s.leaseNow(), s.cfg.lease.Microseconds())
	if err != nil {
		return nil, s.dbErr("renew shards", err)
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (leaseRow, error) {
		var l leaseRow
		return l, r.Scan(&l.shard, &l.epoch)
	})
	if err != nil {
		return nil, s.dbErr("renew shards", err)
	}
	out := make([]int, len(got))
	s.mu.Lock()
	for i, l := range got {
		out[i] = int(l.shard)
		s.epochs[l.shard] = l.epoch
	}
	s.mu.Unlock()
	slices.Sort(out)
	return out, nil
}

// ReleaseShards ends this Store's live leases on the listed shards at once,
// instead of letting them expire, and removes its directory entries for
// them, as [eventstore.Memory.ReleaseShards] gives shards up. A released
// shard is free: the next node to acquire it takes it in a new epoch, and
// until then it takes no writes (it was acquired once). Listed shards this
// node does not hold are left alone, and nil or an empty list releases
// nothing (a node shutting down lists every shard); a shard outside
// [0, ShardCount) returns an error wrapping [eventstore.ErrInvalidArgument]
// and releases nothing. One statement.
func (s *Store) ReleaseShards(ctx context.Context, shards []int) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	which := make([]int32, 0, len(shards))
	for _, sh := range shards {
		if err := shardCheck(sh, s.shards); err != nil {
			return err
		}
		which = append(which, int32(sh))
	}
	if len(which) == 0 {
		return nil
	}
	s.leaseMu.Lock()
	defer s.leaseMu.Unlock()
	if _, err := s.lpool.Exec(ctx, s.q.release, s.cfg.node, s.life, s.leaseNow(), which); err != nil {
		return s.dbErr("release shards", err)
	}
	s.mu.Lock()
	for _, sh := range which {
		delete(s.epochs, sh)
	}
	s.mu.Unlock()
	return nil
}

// Lease is one shard's lease as [Store.Leases] reads it.
type Lease struct {
	Shard   int
	Owner   string    // the node that last acquired it
	Epoch   uint64    // 1 for the first acquisition, one more for each new holder or expiry
	Expires time.Time // zero once released
	Live    bool      // Owner holds it now
	// Published reports whether the owner directory names this holder at
	// this epoch ([Store.PublishShardOwner]).
	Published bool
}

// Leases returns the lease of every shard any node ever acquired, in shard
// order, with liveness as the lease clock says now: what a node reads to
// find shards to adopt (those not Live) or to balance.
func (s *Store) Leases(ctx context.Context) ([]Lease, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := s.lpool.Query(ctx, s.q.leases, s.leaseNow())
	if err != nil {
		return nil, s.dbErr("leases", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Lease, error) {
		var (
			l       Lease
			shard   int32
			epoch   int64
			expires pgtype.Timestamptz
		)
		err := r.Scan(&shard, &l.Owner, &epoch, &expires, &l.Live, &l.Published)
		l.Shard, l.Epoch = int(shard), uint64(epoch)
		if expires.InfinityModifier == pgtype.Finite {
			l.Expires = expires.Time
		}
		return l, err
	})
	if err != nil {
		return nil, s.dbErr("leases", err)
	}
	if out == nil {
		out = []Lease{}
	}
	return out, nil
}
