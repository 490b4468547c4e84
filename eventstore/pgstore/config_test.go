package pgstore_test

import (
	"context"
	"errors"
	"reflect"
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
		{"schema not UTF-8", pgstore.WithSchema("s\xff")},
		{"schema too long", pgstore.WithSchema(strings.Repeat("s", 64))},
		// Regression: past 2^31-1 New failed with an untyped encoding
		// error, and a count below that but in the millions spent its time
		// creating a lease row per shard.
		{"shard count past 65,536", pgstore.WithShardCount(1<<16 + 1)},
		{"shard count past int32", pgstore.WithShardCount(1 << 40)},
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

// Regression: ListWorkflowIDs, ListActive, ListPaused, Node and ShardCount
// of a nil *Store panicked. Every method of a zero or nil Store is called
// here: none may panic, and each that returns an error (Close aside)
// returns one wrapping ErrInvalidArgument.
func TestUnmadeStoreNeverPanics(t *testing.T) {
	ctxType := reflect.TypeFor[context.Context]()
	errType := reflect.TypeFor[error]()
	for name, s := range map[string]*pgstore.Store{"zero": {}, "nil": nil} {
		v := reflect.ValueOf(s)
		for i := range v.NumMethod() {
			method, fn := v.Type().Method(i).Name, v.Method(i)
			args := make([]reflect.Value, fn.Type().NumIn())
			for j := range args {
				switch in := fn.Type().In(j); in {
				case ctxType:
					args[j] = reflect.ValueOf(context.Background())
				case reflect.TypeFor[eventstore.WriteToken]():
					args[j] = reflect.ValueOf(token)
				case reflect.TypeFor[eventstore.WorkflowID]():
					args[j] = reflect.ValueOf(eventstore.NewWorkflowID())
				default:
					args[j] = reflect.Zero(in)
				}
			}
			t.Run(name+"/"+method, func(t *testing.T) {
				defer func() {
					if r := recover(); r != nil {
						t.Fatalf("panicked: %v", r)
					}
				}()
				for _, out := range fn.Call(args) {
					if out.Type() != errType || method == "Close" {
						continue
					}
					if err, _ := out.Interface().(error); !errors.Is(err, eventstore.ErrInvalidArgument) {
						t.Errorf("= %v, want an error wrapping ErrInvalidArgument", err)
					}
				}
			})
		}
	}
}
