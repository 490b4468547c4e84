// Package attrcache maps an attribute value that callers control (a workflow
// or activity type, a namespace) to state precomputed for it, typically the
// measurement options of the metric streams it names.
//
// A [Cache] cleans each value with [attrvalue.String], then bounds the number
// of distinct recorded values: the first limit distinct cleaned values are
// recorded as themselves, every later one as the overflow value. The empty
// value is recorded as the empty stand-in and does not count against the
// limit. The state for a recorded value is built once, by the function given
// to [New], and shared by every raw value recorded as it.
//
// Memory is bounded by the limit: a raw value is remembered under its own
// name only when it is clean and admitted (or empty), so attacker-chosen
// values (new ones, or invalid ones that clean to an admitted value) cost a
// lock and a cleaning pass per lookup but no memory.
//
// A Cache is safe for concurrent use and must not be copied. The hot path, a
// clean value seen before, takes no lock and does not allocate.
package attrcache

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/aionotel/aionotel/internal/attrvalue"
)

// Cache is a bounded map from attribute values to precomputed state. Create
// one with [New].
type Cache[V any] struct {
	build    func(recorded string) V
	limit    int
	empty    string
	overflow string

	// hits maps a raw (clean and admitted, or empty) or recorded value to
	// its state. It is read without a lock and replaced, never modified, by
	// a writer holding mu: at most limit+3 values are ever stored, so the
	// copies cost O(limit²) over the cache's life, and a hit is one plain
	// map lookup.
	hits atomic.Pointer[map[string]V]

	mu       sync.Mutex // serialises admission, building and replacing hits
	admitted int
}

// New returns a Cache that records up to limit distinct values as
// themselves (limit <= 0 records every non-empty value as overflow), the
// empty value as empty, and builds the state of each recorded value with
// build.
func New[V any](limit int, empty, overflow string, build func(recorded string) V) *Cache[V] {
	c := &Cache[V]{build: build, limit: limit, empty: empty, overflow: overflow}
	c.hits.Store(&map[string]V{})
	return c
}

// Get returns the state of the value raw is recorded as, building it on
// first use.
func (c *Cache[V]) Get(raw string) V {
	if v, ok := (*c.hits.Load())[raw]; ok {
		return v
	}
	return c.miss(raw)
}

// Recorded returns the value raw is recorded as, admitting it if there is
// room.
func (c *Cache[V]) Recorded(raw string) string {
	_, recorded := c.resolve(raw)
	return recorded
}

func (c *Cache[V]) miss(raw string) V {
	v, _ := c.resolve(raw)
	return v
}

func (c *Cache[V]) resolve(raw string) (V, string) {
	clean := attrvalue.String(raw)
	c.mu.Lock()
	defer c.mu.Unlock()
	hits := *c.hits.Load()
	recorded := clean
	switch {
	case clean == "":
		recorded = c.empty
	case clean == c.empty || clean == c.overflow:
		// The stand-ins are recorded as themselves and never count.
	default:
		if _, ok := hits[clean]; !ok {
			if c.admitted >= c.limit {
				recorded = c.overflow
			} else {
				c.admitted++
			}
		}
	}
	v, known := hits[recorded]
	if !known {
		v = c.build(recorded)
	}
	// Remember raw under its own name only when that cannot grow the map
	// past the bound: it is the recorded value itself, or the empty value.
	_, rawKnown := hits[raw]
	keepRaw := !rawKnown && (raw == recorded || raw == "")
	if !known || keepRaw {
		next := maps.Clone(hits)
		next[recorded] = v
		if keepRaw {
			next[raw] = v
		}
		c.hits.Store(&next)
	}
	return v, recorded
}
