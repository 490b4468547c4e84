package conformance

import (
	"errors"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
)

func TestRaceJudging(t *testing.T) {
	conflict := func(found uint64) error { return &eventstore.SequenceConflictError{Expected: 3, Found: found} }
	other := errors.New("disk on fire")
	testCases := []struct {
		name       string
		errs       []error
		wantWon    int
		wantWinErr bool
		wantLosErr bool
	}{
		{name: "one-winner", errs: []error{conflict(5), nil, conflict(5)}, wantWon: 1},
		{name: "two-winners", errs: []error{nil, conflict(5), nil}, wantWinErr: true},
		{name: "no-winner", errs: []error{conflict(5), other}, wantWinErr: true},
		{name: "loser-told-stale-head", errs: []error{nil, conflict(3)}, wantWon: 0, wantLosErr: true},
		{name: "loser-other-error", errs: []error{other, nil}, wantWon: 1, wantLosErr: true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			won, err := oneWinner(7, 3, tc.errs)
			if (err != nil) != tc.wantWinErr {
				t.Fatalf("oneWinner = %d, %v; want an error: %v", won, err, tc.wantWinErr)
			}
			if err != nil {
				return
			}
			if won != tc.wantWon {
				t.Fatalf("oneWinner = %d, want %d", won, tc.wantWon)
			}
			if err := losersConflicted(7, 3, 5, won, tc.errs); (err != nil) != tc.wantLosErr {
				t.Fatalf("losersConflicted = %v, want an error: %v", err, tc.wantLosErr)
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
