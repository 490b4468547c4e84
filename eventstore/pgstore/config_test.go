package pgstore_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
)

func TestNewRefusesBadArguments(t *testing.T) {
	ctx := context.Background()
	if _, err := pgstore.New(ctx, nil); !errors.Is(err, eventstore.ErrInvalidArgument) {
		t.Fatalf("New(nil pool) = %v, want ErrInvalidArgument", err)
	}
	if _, err := pgstore.Open(ctx, "postgres://%zz"); !errors.Is(err, eventstore.ErrInvalidArgument) {
		t.Fatalf("Open(bad DSN) = %v, want ErrInvalidArgument", err)
	}
	pool := testPool(t)
	testCases := []struct {
		name string
		opt  pgstore.Option
	}{
		{"node with NUL", pgstore.WithNode("a\x00b")},
		{"node not UTF-8", pgstore.WithNode("a\xffb")},
		{"node too long", pgstore.WithNode(strings.Repeat("n", 201))},
		{"schema with NUL", pgstore.WithSchema("s\x00")},
		{"schema too long", pgstore.WithSchema(strings.Repeat("s", 64))},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := pgstore.New(ctx, pool, tc.opt); !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Fatalf("New = %v, want ErrInvalidArgument", err)
			}
		})
	}
}

func TestDefaultNodeNamesDiffer(t *testing.T) {
	a, pool, schema := newStore(t)
	b, err := pgstore.New(context.Background(), pool, pgstore.WithSchema(schema), nil, pgstore.WithNode(""), pgstore.WithLeaseDuration(-1), pgstore.WithLeaseClock(nil), pgstore.WithClock(nil))
	if err != nil {
		t.Fatal(err)
	}
	pattern := regexp.MustCompile(`^.+-[0-9a-f]{8}$`)
	if !pattern.MatchString(a.Node()) || !pattern.MatchString(b.Node()) || a.Node() == b.Node() {
		t.Fatalf("default node names %q and %q: want two different <host>-<8 hex digits>", a.Node(), b.Node())
	}
}

// TestClosedAndZeroStoresRefuse: after Close every method returns ErrClosed
// and the infallible ones do nothing; the zero Store returns an error
// wrapping ErrInvalidArgument instead of panicking.
func TestClosedAndZeroStoresRefuse(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	wf := eventstore.NewWorkflowID()
	for _, st := range []struct {
		s    *pgstore.Store
		want error
	}{{s, pgstore.ErrClosed}, {&pgstore.Store{}, eventstore.ErrInvalidArgument}} {
		calls := map[string]error{
			"Append":            st.s.Append(ctx, token, wf, []eventstore.Event{started(wf, eventstore.NewRunID())}, 0),
			"ScheduleTimer":     st.s.ScheduleTimer(ctx, wf, "t", time.Now(), 0),
			"AcquireOwnedShard": st.s.AcquireOwnedShard(ctx, 0),
			"PutPackage":        st.s.PutPackage(ctx, eventstore.PackageRecord{WorkflowType: "t", ContentHash: "h"}),
		}
		_, calls["ReadHistory"] = st.s.ReadHistory(ctx, wf)
		_, calls["ClaimOutboxRows"] = st.s.ClaimOutboxRows(ctx, 1)
		_, calls["Leases"] = st.s.Leases(ctx)
		_, calls["PruneClosed"] = st.s.PruneClosed(ctx, time.Now())
		for name, err := range calls {
			if !errors.Is(err, st.want) {
				t.Errorf("%s on %T = %v, want %v", name, st.s, err, st.want)
			}
		}
		if st.s.IsCurrentOwner(ctx, 0) {
			t.Error("IsCurrentOwner = true")
		}
		st.s.SetOwnedShards(ctx, []int{0})
		st.s.ExtendOwnedShards(ctx, []int{0})
	}
}
