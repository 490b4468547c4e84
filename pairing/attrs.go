package pairing

import (
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/aionotel/aionotel/internal/cardinality"
	"github.com/aionotel/aionotel/internal/catalog"
)

// nsAttrs holds the precomputed measurement options of one namespace.
type nsAttrs struct {
	name    string
	evicted []metric.AddOption // aion.namespace (+ extra)
	hash    uint64             // hasher.namespace(name)
}

// typeAttrs holds the precomputed measurement options of one (namespace,
// recorded activity type) pair. A live entry points at its typeAttrs, so a
// terminal needs no cache lookup. Immutable once built.
type typeAttrs struct {
	ns *nsAttrs
	// base carries aion.namespace and aion.activity.type: the dispatched and
	// retried counters and the in-flight up-down counter.
	base []metric.AddOption
	// completed and duration add aion.activity.outcome, indexed by
	// Outcome.index.
	completed [numOutcomes][]metric.AddOption
	duration  [numOutcomes][]metric.RecordOption
}

type typeKey struct {
	namespace    string
	activityType string
}

// attrCache maps (namespace, activity type) to its precomputed options. The
// hot path, a pair seen before, is one lock-free map read and does not
// allocate; building a new pair copies the map, which is fine because new
// pairs are rare and the map is small (see below).
//
// The map is bounded: it keys admitted types by their own name and every
// overflow type only under "_other", so it holds at most (namespaces seen) x
// (type limit + 2) entries.
type attrCache struct {
	hash    hasher
	extra   []attribute.KeyValue
	limiter *cardinality.Limiter

	// types is read without a lock: it is replaced, never modified, by a
	// writer holding mu (copy on write). Writes happen once per new pair.
	types atomic.Pointer[map[typeKey]*typeAttrs]

	mu         sync.Mutex // serialises writers
	namespaces map[string]*nsAttrs
}

func newAttrCache(h hasher, extra []attribute.KeyValue, typeLimit int) *attrCache {
	c := &attrCache{
		hash:       h,
		extra:      append([]attribute.KeyValue(nil), extra...),
		limiter:    cardinality.New(typeLimit, catalog.OtherType),
		namespaces: make(map[string]*nsAttrs),
	}
	c.types.Store(&map[typeKey]*typeAttrs{})
	return c
}

// forType returns the options for activityType in namespace ns (already
// normalised). The empty type is recorded as "_unknown"; a type past the
// cardinality limit as "_other".
func (c *attrCache) forType(ns, activityType string) *typeAttrs {
	if ta := (*c.types.Load())[typeKey{ns, activityType}]; ta != nil {
		return ta
	}
	return c.miss(ns, activityType)
}

// miss resolves the recorded type and builds its options once.
func (c *attrCache) miss(ns, activityType string) *typeAttrs {
	recorded := catalog.UnknownType
	if activityType != "" {
		recorded = c.limiter.Admit(activityType)
	}
	// An overflow type is only ever looked up under "_other", never cached
	// under its own name: that is what keeps the map bounded.
	cacheRaw := activityType == "" || recorded == activityType

	c.mu.Lock()
	defer c.mu.Unlock()
	old := *c.types.Load()
	ta := old[typeKey{ns, recorded}]
	if ta != nil && (!cacheRaw || old[typeKey{ns, activityType}] == ta) {
		return ta // an overflow type, or another writer got here first
	}
	next := make(map[typeKey]*typeAttrs, len(old)+2)
	for k, v := range old {
		next[k] = v
	}
	if ta == nil {
		ta = c.build(ns, recorded)
		next[typeKey{ns, recorded}] = ta
	}
	if cacheRaw {
		next[typeKey{ns, activityType}] = ta
	}
	c.types.Store(&next)
	return ta
}

// build makes the options of one (namespace, recorded type); c.mu is held.
func (c *attrCache) build(ns, recorded string) *typeAttrs {
	na := c.namespaces[ns]
	if na == nil {
		na = &nsAttrs{
			name:    ns,
			evicted: []metric.AddOption{metric.WithAttributeSet(c.set(catalog.Namespace.String(ns)))},
			hash:    c.hash.namespace(ns),
		}
		c.namespaces[ns] = na
	}
	ta := &typeAttrs{
		ns:   na,
		base: []metric.AddOption{metric.WithAttributeSet(c.set(catalog.Namespace.String(ns), catalog.ActivityType.String(recorded)))},
	}
	for i, o := range outcomes {
		opt := metric.WithAttributeSet(c.set(
			catalog.Namespace.String(ns),
			catalog.ActivityType.String(recorded),
			catalog.ActivityOutcome.String(string(o)),
		))
		ta.completed[i] = []metric.AddOption{opt}
		ta.duration[i] = []metric.RecordOption{opt}
	}
	return ta
}

// set returns the attribute set of the extra attributes plus kvs.
func (c *attrCache) set(kvs ...attribute.KeyValue) attribute.Set {
	all := make([]attribute.KeyValue, 0, len(c.extra)+len(kvs))
	all = append(all, c.extra...)
	all = append(all, kvs...)
	return attribute.NewSet(all...)
}
