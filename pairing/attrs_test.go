package pairing

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/aionotel/aionotel/internal/catalog"
)

// A pair seen before returns the same precomputed options; "" shares
// "_unknown"'s; overflow types share "_other"'s, per namespace; overflow
// namespaces share "_other"'s.
func TestAttrCacheReuses(t *testing.T) {
	c := newAttrCache(nil, 1, 1)
	a := c.forType("n", "a")
	if c.forType("n", "a") != a {
		t.Error("a second lookup built new options")
	}
	if c.forType("default", "a") == a {
		t.Error("two namespaces share options")
	}
	if c.forType("n", "") != c.forType("n", catalog.UnknownType) {
		t.Error(`"" and "_unknown" do not share options`)
	}
	if c.forType("n", "b") != c.forType("n", "c") || c.forType("n", "b") != c.forType("n", catalog.OtherType) {
		t.Error("overflow types do not share the _other options")
	}
	if a.ns != c.forType("n", "b").ns {
		t.Error("types of one namespace do not share its namespace options")
	}
	if c.forType("m", "a") != c.forType("o", "a") || c.forType("m", "a").ns != c.forType(catalog.OtherType, "x").ns {
		t.Error("overflow namespaces do not share the _other namespace")
	}
}

// However many distinct namespaces and types arrive, the cache builds at
// most (namespace limit + 2) x (type limit + 2) option sets.
func TestAttrCacheBounded(t *testing.T) {
	c := newAttrCache(nil, 3, 3)
	for i := range 2_000 {
		ns := fmt.Sprintf("ns-%d", i%100)
		c.forType(ns, fmt.Sprintf("type-%d", i))
		c.forType(ns, "")
	}
	if got, limit := c.built.Load(), int64((3+2)*(3+2)); got > limit {
		t.Errorf("cache built %d option sets, want <= %d", got, limit)
	}
}

// The precomputed sets carry exactly the catalog attributes plus the extra
// ones, for each outcome slot in the order of the outcomes table.
func TestAttrCacheSets(t *testing.T) {
	extra := attribute.String("deployment.cell", "eu-1")
	ta := newAttrCache([]attribute.KeyValue{extra}, 10, 10).forType("n", "t")
	wantNS := attribute.NewSet(extra, catalog.Namespace.String("n"))
	if got := evictedSet(ta.ns); !got.Equals(&wantNS) {
		t.Errorf("evicted set = %v, want %v", got.ToSlice(), wantNS.ToSlice())
	}
	for i, o := range outcomes {
		if o.index() != i {
			t.Errorf("outcome %q has index %d, slot %d", o, o.index(), i)
		}
		want := attribute.NewSet(extra, catalog.Namespace.String("n"), catalog.ActivityType.String("t"), catalog.ActivityOutcome.String(string(o)))
		if got := recordSet(ta.duration[i]); !got.Equals(&want) {
			t.Errorf("duration set for %q = %v, want %v", o, got.ToSlice(), want.ToSlice())
		}
	}
}

// evictedSet and recordSet read back the attribute set a precomputed option
// carries.
func evictedSet(na *nsAttrs) attribute.Set {
	return metric.NewAddConfig(na.evicted).Attributes()
}

func recordSet(opts []metric.RecordOption) attribute.Set {
	return metric.NewRecordConfig(opts).Attributes()
}
