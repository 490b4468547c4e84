package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestPoll(t *testing.T) {
	errNotYet := errors.New("not yet")
	errBroken := errors.New("broken")

	t.Run("retries until success", func(t *testing.T) {
		calls := 0
		err := poll(context.Background(), time.Millisecond, func(context.Context) error {
			calls++
			if calls < 3 {
				return errNotYet
			}
			return nil
		})
		if err != nil || calls != 3 {
			t.Fatalf("poll = %v after %d calls, want nil after 3", err, calls)
		}
	})
	t.Run("permanent error stops at once", func(t *testing.T) {
		calls := 0
		err := poll(context.Background(), time.Millisecond, func(context.Context) error {
			calls++
			return permanent(errBroken)
		})
		if !errors.Is(err, errBroken) || calls != 1 {
			t.Fatalf("poll = %v after %d calls, want %v after 1", err, calls, errBroken)
		}
	})
	t.Run("a check cut short by the deadline does not hide the real reason", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := poll(ctx, time.Millisecond, func(ctx context.Context) error {
			calls++
			if calls == 1 {
				return errors.New("series x missing")
			}
			cancel()
			return ctx.Err() // what an HTTP request under ctx returns
		})
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "series x missing") {
			t.Fatalf("poll = %v, want the first check's reason", err)
		}
	})
	t.Run("context end names the last failure", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := poll(ctx, time.Millisecond, func(context.Context) error {
			calls++
			if calls == 2 {
				cancel()
			}
			return errNotYet
		})
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "not yet") {
			t.Fatalf("poll = %v, want context.Canceled naming %q", err, errNotYet)
		}
	})
}
