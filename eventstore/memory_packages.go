package eventstore

import (
	"cmp"
	"context"
	"maps"
	"slices"
)

// packageKey identifies a stored package.
type packageKey struct {
	workflowType string
	contentHash  string
}

func checkPackageKey(workflowType, contentHash string) error {
	if workflowType == "" {
		return invalidf("empty workflow type")
	}
	if contentHash == "" {
		return invalidf("empty content hash")
	}
	return nil
}

// clonePackage returns a copy of r whose Data does not alias r's.
func clonePackage(r PackageRecord) PackageRecord {
	if r.Data != nil {
		r.Data = append([]byte(nil), r.Data...)
	}
	return r
}

// PutPackage stores a copy of the package under (WorkflowType, ContentHash),
// replacing a package stored under the same pair. A zero CreatedAt is set to
// the store's clock. An empty WorkflowType or ContentHash returns an error
// wrapping [ErrInvalidArgument].
func (m *Memory) PutPackage(ctx context.Context, record PackageRecord) error {
	return m.PutPackageWithRoutes(ctx, record, nil)
}

// PutPackageWithRoutes stores the package as [Memory.PutPackage] does and, in
// the same step, routes each listed workflow type to its content hash
// (replacing the type's previous route). The listed types may differ from the
// record's own type: one package can serve several workflow types. Every
// argument is checked before anything changes: an empty type in the list
// returns an error wrapping [ErrInvalidArgument] and stores nothing.
func (m *Memory) PutPackageWithRoutes(ctx context.Context, record PackageRecord, routeWorkflowTypes []string) error {
	if err := m.enter(ctx); err != nil {
		return err
	}
	if err := checkPackageKey(record.WorkflowType, record.ContentHash); err != nil {
		return err
	}
	for i, t := range routeWorkflowTypes {
		if t == "" {
			return invalidf("route %d has an empty workflow type", i)
		}
	}
	record = clonePackage(record)
	m.mu.Lock()
	defer m.mu.Unlock()
	if record.CreatedAt.IsZero() {
		record.CreatedAt = m.cfg.now()
	}
	m.packages[packageKey{record.WorkflowType, record.ContentHash}] = record
	for _, t := range routeWorkflowTypes {
		m.routes[t] = record.ContentHash
	}
	return nil
}

// ListPackages returns copies of every stored package, ordered by workflow
// type, then content hash.
func (m *Memory) ListPackages(ctx context.Context) ([]PackageRecord, error) {
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]PackageRecord, 0, len(m.packages))
	for _, r := range m.packages {
		out = append(out, clonePackage(r))
	}
	slices.SortFunc(out, func(a, b PackageRecord) int {
		return cmp.Or(cmp.Compare(a.WorkflowType, b.WorkflowType), cmp.Compare(a.ContentHash, b.ContentHash))
	})
	return out, nil
}

// DeletePackage removes the package stored under (workflowType, contentHash).
// A package that is not stored returns an error wrapping [ErrNotFound]. A
// package that is the last one with its content hash while a route still
// points at that hash is refused with an error wrapping [ErrInvalidArgument]
// (the route would dangle); re-route or keep it. Empty names return an error
// wrapping [ErrInvalidArgument]. Nothing is removed on any error.
func (m *Memory) DeletePackage(ctx context.Context, workflowType, contentHash string) error {
	if err := m.enter(ctx); err != nil {
		return err
	}
	if err := checkPackageKey(workflowType, contentHash); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := packageKey{workflowType, contentHash}
	if _, ok := m.packages[key]; !ok {
		return notFoundf("package %q/%q", workflowType, contentHash)
	}
	if m.hashStoredLocked(contentHash, key) {
		delete(m.packages, key)
		return nil
	}
	for _, t := range slices.Sorted(maps.Keys(m.routes)) {
		if m.routes[t] == contentHash {
			return invalidf("package %q/%q is the target of the route for workflow type %q", workflowType, contentHash, t)
		}
	}
	delete(m.packages, key)
	return nil
}

// hashStoredLocked reports whether a package other than except has this
// content hash. m.mu must be held.
func (m *Memory) hashStoredLocked(contentHash string, except packageKey) bool {
	for k := range m.packages {
		if k != except && k.contentHash == contentHash {
			return true
		}
	}
	return false
}

// PutPackageRoute routes new runs of workflowType to the package with
// contentHash, replacing the type's previous route. Some stored package must
// have that content hash (any workflow type), else the call returns an error
// wrapping [ErrNotFound]. Empty names return an error wrapping
// [ErrInvalidArgument].
func (m *Memory) PutPackageRoute(ctx context.Context, workflowType, contentHash string) error {
	if err := m.enter(ctx); err != nil {
		return err
	}
	if err := checkPackageKey(workflowType, contentHash); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.hashStoredLocked(contentHash, packageKey{}) {
		return notFoundf("no package has content hash %q", contentHash)
	}
	m.routes[workflowType] = contentHash
	return nil
}

// ListPackageRoutes returns every route, ordered by workflow type.
func (m *Memory) ListPackageRoutes(ctx context.Context) ([]PackageRoute, error) {
	if err := m.enter(ctx); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]PackageRoute, 0, len(m.routes))
	for t, h := range m.routes {
		out = append(out, PackageRoute{WorkflowType: t, ContentHash: h})
	}
	slices.SortFunc(out, func(a, b PackageRoute) int { return cmp.Compare(a.WorkflowType, b.WorkflowType) })
	return out, nil
}
