package conformance

import (
	"errors"
	"fmt"
	"sync"
)

// race runs racer(0) to racer(n-1), each on its own goroutine, released
// together once all are started, and returns their errors when all have
// returned (see [spawn] for a racer that panics).
func race(n int, racer func(g int) error) []error {
	start := make(chan struct{})
	errs := make([]error, n)
	var wg sync.WaitGroup
	for g := range n {
		spawn(&wg, &errs[g], func() error {
			<-start
			return racer(g)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

// oneWinner returns the racer whose append at head succeeded in round: the
// only nil of errs. Two winners, or none, is an error.
func oneWinner(round int, head uint64, errs []error) (int, error) {
	won := -1
	for g, err := range errs {
		if err == nil {
			if won >= 0 {
				return -1, fmt.Errorf("round %d: racers %d and %d both appended at expectedSeq %d", round, won, g, head)
			}
			won = g
		}
	}
	if won < 0 {
		return -1, fmt.Errorf("round %d: no racer won expectedSeq %d: %w", round, head, errors.Join(errs...))
	}
	return won, nil
}

// losersConflicted checks that every racer of round but won was refused
// with a conflict at head whose Found is newHead, the head the winner left.
func losersConflicted(round int, head, newHead uint64, won int, errs []error) error {
	for g, err := range errs {
		if g != won {
			if err := wantConflict(err, head, newHead, fmt.Sprintf("round %d: losing racer %d", round, g)); err != nil {
				return err
			}
		}
	}
	return nil
}

// spawn runs f on a new goroutine of wg and stores its result in *errp; a
// panic becomes an error matching ErrRulePanicked instead of killing the
// process, and a runtime.Goexit one matching ErrRuleAborted, since the
// rule's own guard cannot see other goroutines.
func spawn(wg *sync.WaitGroup, errp *error, f func() error) {
	wg.Go(func() {
		returned := false
		defer func() {
			if p := recover(); p != nil {
				*errp = fmt.Errorf("%w: %v", ErrRulePanicked, p)
			} else if !returned {
				*errp = ErrRuleAborted
			}
		}()
		*errp = f()
		returned = true
	})
}
