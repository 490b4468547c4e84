package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// permanentError marks an error poll must not retry.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// permanent wraps err so that poll gives up at once instead of retrying.
func permanent(err error) error { return permanentError{err} }

// poll runs check at once and then every interval until it returns nil, it
// returns an error wrapped by [permanent], or ctx ends. On ctx's end the
// error wraps ctx.Err() and says why the last check had not succeeded, so a
// timeout in a test names what never arrived.
func poll(ctx context.Context, interval time.Duration, check func(context.Context) error) error {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last error
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		if pe := (permanentError{}); errors.As(err, &pe) {
			return pe.err
		}
		// A check cut short by ctx's end says less than the one before it.
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; last attempt: %v", ctx.Err(), last)
		case <-tick.C:
		}
	}
}
