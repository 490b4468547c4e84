package cardinality

import (
	"fmt"
	"sync"
	"testing"
)

func TestLimiterAdmitsUpToLimit(t *testing.T) {
	l := New(2, "_other")
	testCases := []struct{ in, want string }{
		{"a", "a"}, {"b", "b"}, {"c", "_other"}, {"a", "a"}, {"b", "b"}, {"d", "_other"},
	}
	for _, tc := range testCases {
		if got := l.Admit(tc.in); got != tc.want {
			t.Errorf("Admit(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestLimiterZeroAdmitsNothing(t *testing.T) {
	if got := New(0, "_other").Admit("a"); got != "_other" {
		t.Errorf("Admit = %q, want _other", got)
	}
}

// Racing first sightings never admit more than the limit.
func TestLimiterConcurrentSafe(t *testing.T) {
	const limit = 50
	l := New(limit, "_other")
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := map[string]bool{}
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				v := fmt.Sprintf("v%d", (i*7+g)%300)
				if got := l.Admit(v); got != "_other" {
					mu.Lock()
					admitted[got] = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(admitted) != limit {
		t.Errorf("admitted %d distinct values, want exactly %d", len(admitted), limit)
	}
}

func BenchmarkAdmitKnown(b *testing.B) {
	l := New(10, "_other")
	l.Admit("checkout")
	b.ReportAllocs()
	for b.Loop() {
		_ = l.Admit("checkout")
	}
}
