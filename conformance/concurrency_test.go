package conformance

import (
	"errors"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
)

// contest finds one winner per round and holds every loser to a conflict
// naming the head the winner left.
func TestContestJudging(t *testing.T) {
	conflict := func(found uint64) error { return &eventstore.SequenceConflictError{Expected: 3, Found: found} }
	other := errors.New("disk on fire")
	testCases := []struct {
		name    string
		answer  func(g int) error // racer g's answer at head 3, batches of 2
		wantErr bool
	}{
		{"one-winner", func(g int) error {
			if g == 5 {
				return nil
			}
			return conflict(5)
		}, false},
		{"two-winners", func(g int) error {
			if g < 2 {
				return nil
			}
			return conflict(5)
		}, true},
		{"no-winner", func(int) error { return conflict(5) }, true},
		{"loser-told-stale-head", func(g int) error {
			if g == 0 {
				return nil
			}
			return conflict(3)
		}, true},
		{"loser-other-error", func(g int) error {
			if g == 0 {
				return nil
			}
			return other
		}, true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			winners, err := contest(t.Context(), 1, 3, func(_, g int, head uint64) (int, error) { return 2, tc.answer(g) })
			if (err != nil) != tc.wantErr {
				t.Fatalf("contest = %v, %v; want an error: %v", winners, err, tc.wantErr)
			}
			if err == nil && winners[0] != 5 {
				t.Errorf("winner = %d, want 5", winners[0])
			}
		})
	}
}

func TestRaceReleasesEveryRacer(t *testing.T) {
	errs := race(4, func(g int) error {
		if g == 2 {
			panic("racer 2")
		}
		return nil
	})
	for g, err := range errs {
		if want := g == 2; errors.Is(err, ErrRulePanicked) != want {
			t.Errorf("racer %d: err %v, want ErrRulePanicked: %v", g, err, want)
		}
	}
}
