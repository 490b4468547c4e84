package pairing

import (
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/internal/attrcache"
	"github.com/aionotel/aionotel/internal/catalog"
)

// nsAttrs holds the precomputed measurement options of one recorded
// namespace and the cache of its activity types. Immutable once built,
// except for the type cache, which is safe for concurrent use.
type nsAttrs struct {
	name      string // the recorded namespace
	extra     []attribute.KeyValue
	evicted   []metric.AddOption // aion.namespace (+ extra)
	types     *attrcache.Cache[*typeAttrs]
	workflows *attrcache.Cache[*workflowAttrs]
}

// resumeFailed returns the options of a workflow a resume could not read:
// the namespace and error.type. Built per call: failures are rare.
func (na *nsAttrs) resumeFailed(errorType string) []metric.AddOption {
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(append(na.extra,
		catalog.Namespace.String(na.name), catalog.ErrorType.String(errorType))...))}
}

// typeAttrs holds the precomputed measurement options of one (recorded
// namespace, recorded activity type) pair. A live entry points at its
// typeAttrs, so a terminal needs no cache lookup. Immutable once built.
type typeAttrs struct {
	ns *nsAttrs
	// base carries aion.namespace and aion.activity.type: the dispatched and
	// retried counters and the in-flight up-down counter.
	base []metric.AddOption
	// completed and duration add aion.activity.outcome, indexed by
	// Outcome.index.
	completed [numOutcomes][]metric.AddOption
	duration  [numOutcomes][]metric.RecordOption
	// age observes the oldest-in-flight and oldest-waiting gauges.
	age []metric.ObserveOption
	// wait records the wait for a worker (claims.go).
	wait []metric.RecordOption
	// spanName and spanStart start an activity span: "activity <type>",
	// with aion.namespace, aion.activity.type and the extra attributes.
	spanName  string
	spanStart trace.SpanStartOption
}

// workflowAttrs holds the precomputed options of one (recorded namespace,
// recorded workflow type) pair: the run span's name and attributes and the
// workflow duration's options by status. Immutable once built.
type workflowAttrs struct {
	ns        *nsAttrs
	spanName  string
	spanStart trace.SpanStartOption // aion.namespace, aion.workflow.type, extra
	duration  [numStatuses][]metric.RecordOption
}

// attrCache maps (namespace, activity type) to its precomputed options in
// two bounded levels of internal/attrcache: namespaces (cleaned, the first
// nsLimit as themselves, later ones as "_other"), then, per recorded
// namespace, activity types (cleaned, "" as "_unknown", the first typeLimit
// as themselves, later ones as "_other"). Both levels are lock-free on hits
// and O(1) on a miss, so it holds at most (nsLimit+2) x (typeLimit+2) option
// sets however many values arrive.
type attrCache struct {
	extra      []attribute.KeyValue
	typeLimit  int
	namespaces *attrcache.Cache[*nsAttrs]
	built      atomic.Int64 // typeAttrs built, for tests
}

func newAttrCache(extra []attribute.KeyValue, nsLimit, typeLimit int) *attrCache {
	c := &attrCache{extra: append([]attribute.KeyValue(nil), extra...), typeLimit: typeLimit}
	// "" never reaches the cache (keys are normalised), and "default" is the
	// empty stand-in: it is always recorded as itself, outside the limit.
	c.namespaces = attrcache.New(nsLimit, catalog.DefaultNamespace, catalog.OtherType, c.buildNamespace)
	return c
}

// forType returns the options for activityType in namespace ns.
func (c *attrCache) forType(ns, activityType string) *typeAttrs {
	return c.namespaces.Get(ns).types.Get(activityType)
}

func (c *attrCache) buildNamespace(ns string) *nsAttrs {
	na := &nsAttrs{
		name:    ns,
		extra:   c.extra,
		evicted: []metric.AddOption{metric.WithAttributeSet(c.set(catalog.Namespace.String(ns)))},
	}
	na.types = attrcache.New(c.typeLimit, catalog.UnknownType, catalog.OtherType, func(typ string) *typeAttrs {
		return c.buildType(na, ns, typ)
	})
	na.workflows = attrcache.New(c.typeLimit, catalog.UnknownType, catalog.OtherType, func(typ string) *workflowAttrs {
		return c.buildWorkflow(na, ns, typ)
	})
	return na
}

func (c *attrCache) buildWorkflow(na *nsAttrs, ns, typ string) *workflowAttrs {
	base := []attribute.KeyValue{catalog.Namespace.String(ns), catalog.WorkflowType.String(typ)}
	wa := &workflowAttrs{
		ns:        na,
		spanName:  catalog.RunSpanPrefix + " " + typ,
		spanStart: trace.WithAttributes(append(append([]attribute.KeyValue(nil), c.extra...), base...)...),
	}
	for i, s := range statuses {
		wa.duration[i] = []metric.RecordOption{metric.WithAttributeSet(c.set(append(base, catalog.WorkflowStatus.String(string(s)))...))}
	}
	return wa
}

func (c *attrCache) buildType(na *nsAttrs, ns, typ string) *typeAttrs {
	c.built.Add(1)
	base := []attribute.KeyValue{catalog.Namespace.String(ns), catalog.ActivityType.String(typ)}
	set := c.set(base...)
	ta := &typeAttrs{
		ns:        na,
		base:      []metric.AddOption{metric.WithAttributeSet(set)},
		age:       []metric.ObserveOption{metric.WithAttributeSet(set)},
		wait:      []metric.RecordOption{metric.WithAttributeSet(set)},
		spanName:  catalog.ActivitySpanPrefix + " " + typ,
		spanStart: trace.WithAttributes(append(append([]attribute.KeyValue(nil), c.extra...), base...)...),
	}
	for i, o := range outcomes {
		opt := metric.WithAttributeSet(c.set(append(base, catalog.ActivityOutcome.String(string(o)))...))
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
