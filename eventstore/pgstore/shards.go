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

// The lease statements: $2 (or $1) this node, the lease clock (NULL: the
// database's clock_timestamp()), the lease duration in microseconds.
const (
	// A free or expired lease is taken with a new epoch; a live lease of
	// this node is extended in its epoch; a live lease of another node is
	// left alone (and not returned). Rows are locked in shard order, so
	// concurrent acquirers never deadlock.
	qAcquire = `INSERT INTO {shards} AS s (shard, owner, epoch, expires)
SELECT shard, $2, 1, coalesce($3::timestamptz, clock_timestamp()) + $4 * interval '1 microsecond'
FROM unnest($1::int[]) AS u(shard) ORDER BY shard
ON CONFLICT (shard) DO UPDATE SET
	owner = EXCLUDED.owner,
	epoch = CASE WHEN s.owner = EXCLUDED.owner AND s.expires > coalesce($3::timestamptz, clock_timestamp()) THEN s.epoch ELSE s.epoch + 1 END,
	expires = EXCLUDED.expires
WHERE s.owner = EXCLUDED.owner OR s.expires <= coalesce($3::timestamptz, clock_timestamp())
RETURNING shard`
	qHolders = `SELECT shard, owner, epoch FROM {shards} WHERE shard = ANY($1) AND NOT (shard = ANY($2)) ORDER BY shard LIMIT 1`
	qIsOwner = `SELECT EXISTS (SELECT 1 FROM {shards} WHERE shard = $1 AND owner = $2 AND expires > coalesce($3::timestamptz, clock_timestamp()))`
	qPublish = `INSERT INTO {directory} AS d (shard, owner, epoch, published_at)
SELECT shard, owner, epoch, coalesce($3::timestamptz, clock_timestamp()) FROM {shards}
WHERE shard = $1 AND owner = $2 AND expires > coalesce($3::timestamptz, clock_timestamp())
ON CONFLICT (shard) DO UPDATE SET owner = EXCLUDED.owner, epoch = EXCLUDED.epoch, published_at = EXCLUDED.published_at
WHERE d.epoch <= EXCLUDED.epoch
RETURNING 1`
	qRenew = `UPDATE {shards} SET expires = coalesce($2::timestamptz, clock_timestamp()) + $3 * interval '1 microsecond'
WHERE owner = $1 AND expires > coalesce($2::timestamptz, clock_timestamp())
RETURNING shard`
	qRelease = `WITH r AS (
	UPDATE {shards} SET expires = '-infinity'
	WHERE owner = $1 AND expires > coalesce($2::timestamptz, clock_timestamp()) AND shard = ANY($3)
	RETURNING shard
)
DELETE FROM {directory} WHERE owner = $1 AND shard IN (SELECT shard FROM r)`
	qLeases = `SELECT s.shard, s.owner, s.epoch, s.expires, s.expires > coalesce($1::timestamptz, clock_timestamp()),
	d.owner IS NOT NULL AND d.owner = s.owner AND d.epoch = s.epoch
FROM {shards} s LEFT JOIN {directory} d ON d.shard = s.shard ORDER BY s.shard`
)

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
// lease duration) is taken by this node in a new epoch; a live lease this
// node holds is renewed in its epoch; a live lease of another node fails the
// whole call with an error wrapping [eventstore.ErrNotOwner] naming the
// holder, and no shard of the call is acquired or renewed. A shard outside
// [0, ShardCount) returns an error wrapping [eventstore.ErrInvalidArgument]
// first. A lease lasts [WithLeaseDuration] from the call.
//
// # Fencing
//
// A shard that no node ever acquired takes writes from every node (so a
// single node that runs no elections works as [eventstore.Memory] does).
// Once acquired, a write to a workflow of the shard (an append, a timer,
// SettleWorkflowOutboxRowsCancelled) succeeds only for the node holding a
// live lease; any other fails with [eventstore.ErrNotOwner] and writes
// nothing. The check runs inside the writing transaction, which holds the
// lease row locked shared until it commits: a takeover waits for the writes
// in progress, and a write that began before a takeover but reached the
// check after it sees the new holder and is refused.
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
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, s.q.acquire, want, s.cfg.node, s.leaseNow(), s.cfg.lease.Microseconds())
		if err != nil {
			return err
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return err
		}
		if len(got) == len(want) {
			return nil
		}
		var (
			shard int32
			owner string
			epoch int64
		)
		if err := tx.QueryRow(ctx, s.q.holders, want, got).Scan(&shard, &owner, &epoch); err != nil {
			return err
		}
		return refusal{fmt.Errorf("%w: pgstore: shard %d is held by node %q (epoch %d) with a live lease; node %q acquired none of %v",
			eventstore.ErrNotOwner, shard, owner, epoch, s.cfg.node, shards)}
	})
	if err != nil && !isRefusal(err) {
		return s.dbErr("acquire shards", err)
	}
	return err
}

// AcquireOwnedShard is [Store.AcquireOwnedShards] for one shard.
func (s *Store) AcquireOwnedShard(ctx context.Context, shard int) error {
	return s.AcquireOwnedShards(ctx, []int{shard})
}

// IsCurrentOwner reports whether this node holds the shard with a live
// lease, as the database says now (one query). It reports false for a
// shard out of range, and, conservatively, when the context is done, the
// store is closed or the query fails.
func (s *Store) IsCurrentOwner(ctx context.Context, shard int) bool {
	if s.enter(ctx) != nil || shardCheck(shard, s.shards) != nil {
		return false
	}
	var owner bool
	if err := s.pool.QueryRow(ctx, s.q.isOwner, int32(shard), s.cfg.node, s.leaseNow()).Scan(&owner); err != nil {
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
	rows, err := s.pool.Query(ctx, s.q.publish, int32(shard), s.cfg.node, s.leaseNow())
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

// RenewOwnedShards extends, in one statement, every live lease this node
// holds by the lease duration, keeping their epochs, and returns the shards
// it holds, in order. A lease that already expired is not renewed: the
// shard may have a new holder, and this node gets it back only through
// [Store.AcquireOwnedShards], in a new epoch. Call it well within the lease
// duration, and compare what it returns with what the node thinks it owns.
func (s *Store) RenewOwnedShards(ctx context.Context) ([]int, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.renew, s.cfg.node, s.leaseNow(), s.cfg.lease.Microseconds())
	if err != nil {
		return nil, s.dbErr("renew shards", err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, s.dbErr("renew shards", err)
	}
	out := make([]int, len(got))
	for i, sh := range got {
		out[i] = int(sh)
	}
	slices.Sort(out)
	return out, nil
}

// ReleaseShards ends this node's live leases on the listed shards at once,
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
	if _, err := s.pool.Exec(ctx, s.q.release, s.cfg.node, s.leaseNow(), which); err != nil {
		return s.dbErr("release shards", err)
	}
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
	rows, err := s.pool.Query(ctx, s.q.leases, s.leaseNow())
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
