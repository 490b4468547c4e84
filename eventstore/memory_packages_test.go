package eventstore

import (
	"errors"
	"slices"
	"testing"
	"time"
)

func pkg(workflowType, hash string) PackageRecord {
	return PackageRecord{WorkflowType: workflowType, ContentHash: hash, Data: []byte(workflowType + "@" + hash)}
}

func mustPackages(t *testing.T, m *Memory) []PackageRecord {
	t.Helper()
	p, err := m.ListPackages(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustRoutes(t *testing.T, m *Memory) []PackageRoute {
	t.Helper()
	r, err := m.ListPackageRoutes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func packageKeys(ps []PackageRecord) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.WorkflowType + "/" + p.ContentHash
	}
	return out
}

func TestMemoryPutPackage(t *testing.T) {
	ctx := t.Context()
	m, clock := newTestMemory(t)
	given := t0.Add(-time.Hour)
	in := pkg("order", "h1")
	for _, p := range []PackageRecord{pkg("order", "h2"), in, {WorkflowType: "billing", ContentHash: "h9", CreatedAt: given}} {
		if err := m.PutPackage(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	in.Data[0] = 'X' // the caller reuses its buffer
	got := mustPackages(t, m)
	if keys := packageKeys(got); !slices.Equal(keys, []string{"billing/h9", "order/h1", "order/h2"}) {
		t.Fatalf("ListPackages = %v, want sorted by type then hash", keys)
	}
	if string(got[1].Data) != "order@h1" {
		t.Errorf("stored data = %q, want %q: the store aliases caller memory", got[1].Data, "order@h1")
	}
	if !got[0].CreatedAt.Equal(given) || !got[1].CreatedAt.Equal(t0) {
		t.Errorf("CreatedAt = %v, %v; want the given one, then the clock", got[0].CreatedAt, got[1].CreatedAt)
	}
	got[1].Data[0] = 'Y'
	if again := mustPackages(t, m); string(again[1].Data) != "order@h1" {
		t.Errorf("data after mutating a listed copy = %q", again[1].Data)
	}
	// Same type and hash: the new record replaces the old.
	clock.Advance(time.Minute)
	if err := m.PutPackage(ctx, PackageRecord{WorkflowType: "order", ContentHash: "h1", Data: []byte("v2")}); err != nil {
		t.Fatal(err)
	}
	again := mustPackages(t, m)
	if len(again) != 3 || string(again[1].Data) != "v2" || !again[1].CreatedAt.Equal(t0.Add(time.Minute)) {
		t.Errorf("after replacing: %+v", again)
	}
}

func TestMemoryPackageInvalidArguments(t *testing.T) {
	testCases := []struct {
		name string
		call func(m *Memory) error
	}{
		{name: "put empty type", call: func(m *Memory) error { return m.PutPackage(t.Context(), pkg("", "h")) }},
		{name: "put empty hash", call: func(m *Memory) error { return m.PutPackage(t.Context(), pkg("t", "")) }},
		{name: "with routes empty route type", call: func(m *Memory) error {
			return m.PutPackageWithRoutes(t.Context(), pkg("new", "h"), []string{"new", ""})
		}},
		{name: "with routes empty hash", call: func(m *Memory) error {
			return m.PutPackageWithRoutes(t.Context(), pkg("new", ""), []string{"new"})
		}},
		{name: "route empty type", call: func(m *Memory) error { return m.PutPackageRoute(t.Context(), "", "h0") }},
		{name: "route empty hash", call: func(m *Memory) error { return m.PutPackageRoute(t.Context(), "t", "") }},
		{name: "delete empty type", call: func(m *Memory) error { return m.DeletePackage(t.Context(), "", "h0") }},
		{name: "delete empty hash", call: func(m *Memory) error { return m.DeletePackage(t.Context(), "t", "") }},
		{name: "delete routed package", call: func(m *Memory) error { return m.DeletePackage(t.Context(), "t", "h0") }},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestMemory(t)
			if err := m.PutPackageWithRoutes(t.Context(), pkg("t", "h0"), []string{"t"}); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, m)
			if err := tc.call(m); !errors.Is(err, ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidArgument", err)
			}
			if after := snapshot(t, m); after != before {
				t.Errorf("a refused call changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestMemoryPackageRoutes(t *testing.T) {
	ctx := t.Context()
	m, _ := newTestMemory(t)

	// One package serving two workflow types, routed in one step.
	if err := m.PutPackageWithRoutes(ctx, pkg("order", "h1"), []string{"order", "refund"}); err != nil {
		t.Fatal(err)
	}
	want := []PackageRoute{{"order", "h1"}, {"refund", "h1"}}
	if got := mustRoutes(t, m); !slices.Equal(got, want) {
		t.Fatalf("routes = %v, want %v", got, want)
	}
	if got := packageKeys(mustPackages(t, m)); !slices.Equal(got, []string{"order/h1"}) {
		t.Fatalf("packages = %v", got)
	}

	// Routing to a hash no package has is refused.
	if err := m.PutPackageRoute(ctx, "order", "h2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("PutPackageRoute to a missing package = %v, want ErrNotFound", err)
	}
	// Re-routing a type replaces its route.
	if err := m.PutPackage(ctx, pkg("order", "h2")); err != nil {
		t.Fatal(err)
	}
	if err := m.PutPackageRoute(ctx, "order", "h2"); err != nil {
		t.Fatal(err)
	}
	want = []PackageRoute{{"order", "h2"}, {"refund", "h1"}}
	if got := mustRoutes(t, m); !slices.Equal(got, want) {
		t.Fatalf("routes = %v, want %v", got, want)
	}

	// h1 still serves refund: deleting its only package would dangle the route.
	if err := m.DeletePackage(ctx, "order", "h1"); !errors.Is(err, ErrInvalidArgument) {
		t.Errorf("DeletePackage of a routed package = %v, want ErrInvalidArgument", err)
	}
	// With a second package of the same content, the route survives a delete.
	if err := m.PutPackage(ctx, pkg("refund", "h1")); err != nil {
		t.Fatal(err)
	}
	if err := m.DeletePackage(ctx, "order", "h1"); err != nil {
		t.Errorf("DeletePackage with the hash still stored under another type = %v", err)
	}
	if err := m.DeletePackage(ctx, "order", "h1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeletePackage of a deleted package = %v, want ErrNotFound", err)
	}
	// Once unrouted, a package can go.
	if err := m.PutPackageRoute(ctx, "refund", "h2"); err != nil {
		t.Fatal(err)
	}
	if err := m.DeletePackage(ctx, "refund", "h1"); err != nil {
		t.Errorf("DeletePackage of an unrouted package = %v", err)
	}
	if got := packageKeys(mustPackages(t, m)); !slices.Equal(got, []string{"order/h2"}) {
		t.Errorf("packages = %v, want [order/h2]", got)
	}
	want = []PackageRoute{{"order", "h2"}, {"refund", "h2"}}
	if got := mustRoutes(t, m); !slices.Equal(got, want) {
		t.Errorf("routes = %v, want %v", got, want)
	}
}
