// Package cardinality bounds the number of distinct values a user-controlled
// attribute (a workflow or activity type) can take on a metric.
package cardinality

import "sync"

// Limiter admits the first Limit distinct values it sees and maps every later
// new value to an overflow value. Admitted values stay admitted. It is safe
// for concurrent use; the zero value is not ready, use [New].
type Limiter struct {
	limit    int
	overflow string
	admitted sync.Map // string -> struct{}
	mu       sync.Mutex
	n        int
}

// New returns a Limiter admitting up to limit values (limit <= 0 admits none)
// and mapping the rest to overflow.
func New(limit int, overflow string) *Limiter {
	return &Limiter{limit: limit, overflow: overflow}
}

// Admit returns v when it is (or can become) one of the admitted values, and
// the overflow value otherwise. The hot path, a value already admitted, takes
// no lock and does not allocate.
func (l *Limiter) Admit(v string) string {
	if _, ok := l.admitted.Load(v); ok {
		return v
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.admitted.Load(v); ok {
		return v
	}
	if l.n >= l.limit {
		return l.overflow
	}
	l.admitted.Store(v, struct{}{})
	l.n++
	return v
}
