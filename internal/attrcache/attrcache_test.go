package attrcache

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

func newCounting(limit int) (*Cache[string], *int) {
	builds := new(int)
	return New(limit, "_unknown", "_other", func(recorded string) string {
		*builds++
		return "state:" + recorded
	}), builds
}

func TestCacheRecordsUpToLimit(t *testing.T) {
	c, builds := newCounting(2)
	testCases := []struct{ in, want string }{
		{"a", "state:a"},
		{"b", "state:b"},
		{"c", "state:_other"},
		{"a", "state:a"},
		{"", "state:_unknown"},
		{"_other", "state:_other"},
		{"_unknown", "state:_unknown"},
		{"d", "state:_other"},
		{"b\xff", "state:_other"}, // cleans to "b\uFFFD", a new value past the limit
	}
	for _, tc := range testCases {
		if got := c.Get(tc.in); got != tc.want {
			t.Errorf("Get(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if *builds != 4 { // a, b, _other, _unknown
		t.Errorf("built %d states, want 4", *builds)
	}
}

func TestCacheCleansValues(t *testing.T) {
	c, _ := newCounting(10)
	if got := c.Recorded("bad\xff\xfe"); got != "bad\uFFFD" {
		t.Errorf("Recorded(invalid) = %q", got)
	}
	long := strings.Repeat("x", 1000)
	if got := c.Recorded(long); len(got) != 256 {
		t.Errorf("Recorded(long) has %d bytes, want 256", len(got))
	}
	// A raw value that cleans to an admitted one shares its state.
	if c.Get("bad\xff") != c.Get("bad\uFFFD") {
		t.Error("a value and its cleaned form have different states")
	}
}

// Values that are not remembered under their own name keep memory bounded.
func TestCacheMemoryBounded(t *testing.T) {
	c, _ := newCounting(3)
	for i := range 10000 {
		c.Get(fmt.Sprintf("type-%d", i))
		c.Get(strings.Repeat("y", 300) + fmt.Sprint(i)) // cleans to one admitted prefix
	}
	n := len(*c.hits.Load())
	if n > 3+2 { // three admitted values (one remembered twice at most) and _other
		t.Errorf("cache remembers %d values after 20000 distinct lookups", n)
	}
}

func TestCacheHitDoesNotAllocate(t *testing.T) {
	c, _ := newCounting(10)
	c.Get("checkout")
	key := strings.Clone("checkout")
	if n := testing.AllocsPerRun(100, func() { c.Get(key) }); n != 0 {
		t.Errorf("a cache hit allocated %v times", n)
	}
}

func TestCacheConcurrentSafe(t *testing.T) {
	const limit = 20
	c := New(limit, "_unknown", "_other", func(recorded string) *string { return &recorded })
	var wg sync.WaitGroup
	seen := make([]map[string]*string, 8)
	for g := range seen {
		seen[g] = map[string]*string{}
		wg.Go(func() {
			for i := range 200 {
				v := fmt.Sprint(i % 50)
				seen[g][v] = c.Get(v)
			}
		})
	}
	wg.Wait()
	recorded := map[string]bool{}
	for v, p := range seen[0] {
		for g := 1; g < len(seen); g++ {
			if seen[g][v] != p {
				t.Fatalf("value %q has two states", v)
			}
		}
		recorded[*p] = true
	}
	if len(recorded) != limit+1 {
		t.Errorf("%d recorded values, want %d admitted plus _other", len(recorded), limit)
	}
}
