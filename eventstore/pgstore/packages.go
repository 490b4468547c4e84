package pgstore

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/aionotel/aionotel/eventstore"
)

const (
	qPackageLock = `SELECT pg_advisory_xact_lock($1)`
	qPutPackage  = `INSERT INTO {packages} (type_key, hash_key, workflow_type, content_hash, data, created_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (type_key, hash_key) DO UPDATE SET data = EXCLUDED.data, created_at = EXCLUDED.created_at`
	qPutRoutes = `INSERT INTO {routes} (type_key, workflow_type, content_hash, hash_key)
SELECT *, $3, $4 FROM unnest($1::bytea[], $2::bytea[])
ON CONFLICT (type_key) DO UPDATE SET content_hash = EXCLUDED.content_hash, hash_key = EXCLUDED.hash_key`
	qListPackages = `SELECT workflow_type, content_hash, data, created_at FROM {packages} ORDER BY workflow_type, content_hash`
	qListRoutes   = `SELECT workflow_type, content_hash FROM {routes} ORDER BY workflow_type`
	// Whether the package is stored, whether another package has its hash,
	// and the first route (by type) to its hash.
	qPackageDeps = `SELECT
	EXISTS (SELECT 1 FROM {packages} WHERE type_key = $1 AND hash_key = $2),
	EXISTS (SELECT 1 FROM {packages} WHERE hash_key = $2 AND type_key <> $1),
	(SELECT workflow_type FROM {routes} WHERE hash_key = $2 ORDER BY workflow_type LIMIT 1)`
	qDeletePackage = `DELETE FROM {packages} WHERE type_key = $1 AND hash_key = $2`
	qHashStored    = `SELECT EXISTS (SELECT 1 FROM {packages} WHERE hash_key = $1)`
)

func checkPackageKey(workflowType, contentHash string) error {
	if workflowType == "" {
		return fmt.Errorf("%w: empty workflow type", eventstore.ErrInvalidArgument)
	}
	if contentHash == "" {
		return fmt.Errorf("%w: empty content hash", eventstore.ErrInvalidArgument)
	}
	return nil
}

// packageTx runs fn in a transaction that holds the store's package lock:
// package and route writes run one at a time across every node, so a
// delete can never leave a route dangling behind a concurrent re-route.
func (s *Store) packageTx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, s.setIdle); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, s.q.packageLock, s.n.lockKey+1); err != nil {
			return err
		}
		return fn(tx)
	})
	if err != nil && !isRefusal(err) {
		return s.dbErr(op, err)
	}
	return err
}

// PutPackage stores a copy of the package under (WorkflowType,
// ContentHash), replacing a package stored under the same pair, as
// [eventstore.Memory.PutPackage] does. A zero CreatedAt is set to the
// [WithClock] clock. An empty WorkflowType or ContentHash returns an error
// wrapping [eventstore.ErrInvalidArgument].
func (s *Store) PutPackage(ctx context.Context, record eventstore.PackageRecord) error {
	return s.PutPackageWithRoutes(ctx, record, nil)
}

// PutPackageWithRoutes stores the package as [Store.PutPackage] does and, in
// the same transaction, routes each listed workflow type to its content
// hash (replacing the type's previous route). Every argument is checked
// before anything changes: an empty type in the list returns an error
// wrapping [eventstore.ErrInvalidArgument] and stores nothing.
func (s *Store) PutPackageWithRoutes(ctx context.Context, record eventstore.PackageRecord, routeWorkflowTypes []string) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if err := checkPackageKey(record.WorkflowType, record.ContentHash); err != nil {
		return err
	}
	for i, t := range routeWorkflowTypes {
		if t == "" {
			return fmt.Errorf("%w: route %d has an empty workflow type", eventstore.ErrInvalidArgument, i)
		}
	}
	if record.CreatedAt.IsZero() {
		record.CreatedAt = s.cfg.now()
	}
	seen := make(map[string]bool, len(routeWorkflowTypes))
	var keys, types [][]byte
	for _, t := range routeWorkflowTypes {
		if !seen[t] {
			seen[t] = true
			keys, types = append(keys, digest(t)), append(types, []byte(t))
		}
	}
	hashKey := digest(record.ContentHash)
	return s.packageTx(ctx, "put package", func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		b.Queue(s.q.putPackage, digest(record.WorkflowType), hashKey, []byte(record.WorkflowType), []byte(record.ContentHash),
			nullBytes(record.Data), timeBytes(record.CreatedAt))
		if len(keys) > 0 {
			b.Queue(s.q.putRoutes, keys, types, []byte(record.ContentHash), hashKey)
		}
		return tx.SendBatch(ctx, b).Close()
	})
}

// ListPackages returns every stored package, ordered by workflow type, then
// content hash (bytewise, as Go compares strings).
func (s *Store) ListPackages(ctx context.Context) ([]eventstore.PackageRecord, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.listPackages)
	if err != nil {
		return nil, s.dbErr("list packages", err)
	}
	defer rows.Close()
	out := []eventstore.PackageRecord{}
	for rows.Next() {
		var typ, hash, data, created []byte
		if err := rows.Scan(&typ, &hash, &data, &created); err != nil {
			return nil, s.dbErr("list packages", err)
		}
		at, err := readTime(created)
		if err != nil {
			return nil, err
		}
		out = append(out, eventstore.PackageRecord{WorkflowType: string(typ), ContentHash: string(hash), Data: data, CreatedAt: at})
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("list packages", err)
	}
	return out, nil
}

// DeletePackage removes the package stored under (workflowType,
// contentHash), with [eventstore.Memory.DeletePackage]'s rules: a package
// that is not stored returns an error wrapping [eventstore.ErrNotFound]; the
// last package with its content hash while a route points at that hash is
// refused with an error wrapping [eventstore.ErrInvalidArgument]; empty
// names return an error wrapping [eventstore.ErrInvalidArgument]. Nothing is
// removed on any error.
func (s *Store) DeletePackage(ctx context.Context, workflowType, contentHash string) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if err := checkPackageKey(workflowType, contentHash); err != nil {
		return err
	}
	typeKey, hashKey := digest(workflowType), digest(contentHash)
	return s.packageTx(ctx, "delete package", func(tx pgx.Tx) error {
		var stored, shared bool
		var route []byte
		if err := tx.QueryRow(ctx, s.q.packageDeps, typeKey, hashKey).Scan(&stored, &shared, &route); err != nil {
			return err
		}
		switch {
		case !stored:
			return refusal{fmt.Errorf("%w: package %q/%q", eventstore.ErrNotFound, workflowType, contentHash)}
		case !shared && route != nil:
			return refusal{fmt.Errorf("%w: package %q/%q is the target of the route for workflow type %q", eventstore.ErrInvalidArgument, workflowType, contentHash, string(route))}
		}
		_, err := tx.Exec(ctx, s.q.deletePackage, typeKey, hashKey)
		return err
	})
}

// PutPackageRoute routes new runs of workflowType to the package with
// contentHash, replacing the type's previous route. Some stored package
// must have that content hash (any workflow type), else the call returns an
// error wrapping [eventstore.ErrNotFound]. Empty names return an error
// wrapping [eventstore.ErrInvalidArgument].
func (s *Store) PutPackageRoute(ctx context.Context, workflowType, contentHash string) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if err := checkPackageKey(workflowType, contentHash); err != nil {
		return err
	}
	hashKey := digest(contentHash)
	return s.packageTx(ctx, "put package route", func(tx pgx.Tx) error {
		var stored bool
		if err := tx.QueryRow(ctx, s.q.hashStored, hashKey).Scan(&stored); err != nil {
			return err
		}
		if !stored {
			return refusal{fmt.Errorf("%w: no package has content hash %q", eventstore.ErrNotFound, contentHash)}
		}
		_, err := tx.Exec(ctx, s.q.putRoutes, [][]byte{digest(workflowType)}, [][]byte{[]byte(workflowType)}, []byte(contentHash), hashKey)
		return err
	})
}

// ListPackageRoutes returns every route, ordered by workflow type.
func (s *Store) ListPackageRoutes(ctx context.Context) ([]eventstore.PackageRoute, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.listRoutes)
	if err != nil {
		return nil, s.dbErr("list package routes", err)
	}
	routes, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (eventstore.PackageRoute, error) {
		var typ, hash []byte
		err := r.Scan(&typ, &hash)
		return eventstore.PackageRoute{WorkflowType: string(typ), ContentHash: string(hash)}, err
	})
	if err != nil {
		return nil, s.dbErr("list package routes", err)
	}
	if routes == nil {
		routes = []eventstore.PackageRoute{}
	}
	return routes, nil
}

// refusal marks an error the store chose (a contract refusal), which a
// transaction helper returns as it is rather than as a database failure.
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

func isRefusal(err error) bool {
	_, ok := err.(refusal)
	return ok
}
