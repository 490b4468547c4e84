package conformance

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
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

// TestRaceBudget: a contest goes on racing past its minimum rounds while
// the race budget lasts, and stops at its minimum without one.
func TestRaceBudget(t *testing.T) {
	appends := func(budget time.Duration) int64 {
		var n atomic.Int64
		err := CheckKeyspace(t.Context(), func() (keyspace.Store, func(), error) {
			s := &ksW{Memory: keyspace.NewMemory()}
			s.appendEvents = func(ctx context.Context, exp uint64, evs []keyspace.ActivityEvent) (uint64, error) {
				n.Add(1)
				return s.Memory.AppendEvents(ctx, exp, evs)
			}
			return s, nil, nil
		}, onlyRules(RuleKSConcurrentBatches), optionFunc(func(c *config) { c.raceFor = budget }))
		if err != nil {
			t.Fatal(err)
		}
		return n.Load()
	}
	least, budgeted := appends(0), appends(2*time.Second)
	if least != 24*racers || budgeted < 2*least {
		t.Errorf("appends raced: %d without a budget (want 24 rounds of %d racers), %d with 2 s (want at least two phases)", least, racers, budgeted)
	}
}
