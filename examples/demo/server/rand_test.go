package server

import (
	"testing"
	"time"
)

func TestLockedRand(t *testing.T) {
	r := newLockedRand(42)
	t.Run("between stays in range", func(t *testing.T) {
		for range 1000 {
			if d := r.between(ms(10, 20)); d < 10*time.Millisecond || d > 20*time.Millisecond {
				t.Fatalf("between(10ms, 20ms) = %s", d)
			}
		}
		if d := r.between(ms(5, 5)); d != 5*time.Millisecond {
			t.Errorf("between(5ms, 5ms) = %s", d)
		}
	})
	t.Run("pick follows the weights", func(t *testing.T) {
		counts := make([]int, 3)
		for range 3000 {
			counts[r.pick([]int{0, 1, 2})]++
		}
		if counts[0] != 0 || counts[1] < 800 || counts[2] < 1700 {
			t.Errorf("counts %v for weights 0, 1, 2", counts)
		}
		if i := r.pick([]int{0, 0}); i != 0 {
			t.Errorf("pick of zero weights = %d, want 0", i)
		}
	})
	t.Run("uuids are version 4 and distinct", func(t *testing.T) {
		a, b := r.uuid(), r.uuid()
		if a == b || a[6]>>4 != 4 || a[8]>>6 != 2 {
			t.Errorf("uuids %x %x", a, b)
		}
	})
	t.Run("the seed fixes the sequence", func(t *testing.T) {
		x, y := newLockedRand(9), newLockedRand(9)
		for range 10 {
			if x.workflowID() != y.workflowID() {
				t.Fatal("two sources with one seed differ")
			}
		}
	})
}
