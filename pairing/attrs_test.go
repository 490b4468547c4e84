package pairing

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/aionotel/aionotel/internal/catalog"
)

// A pair seen before returns the same precomputed options; "" shares
// "_unknown"'s; overflow types share "_other"'s.
func TestAttrCacheReuses(t *testing.T) {
	c := newAttrCache(newHasher(), nil, 1)
	a := c.forType("n", "a")
	if c.forType("n", "a") != a {
		t.Error("a second lookup built new options")
	}
	if c.forType("m", "a") == a {
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
}

// However many distinct types arrive, the cache holds at most the admitted
// ones plus "_unknown" and "_other" per namespace (and the raw "" alias).
func TestAttrCacheBounded(t *testing.T) {
	c := newAttrCache(newHasher(), nil, 3)
	for i := range 10_000 {
		c.forType("n", fmt.Sprintf("type-%d", i))
		c.forType("n", "")
	}
	if got, limit := len(*c.types.Load()), 3+3; got > limit {
		t.Errorf("cache holds %d entries after 10000 distinct types, want <= %d", got, limit)
	}
}

// The precomputed sets carry exactly the catalog attributes plus the extra
// ones, for each outcome slot in the order of the outcomes table.
func TestAttrCacheSets(t *testing.T) {
	extra := attribute.String("deployment.cell", "eu-1")
	ta := newAttrCache(newHasher(), []attribute.KeyValue{extra}, 10).forType("n", "t")
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
