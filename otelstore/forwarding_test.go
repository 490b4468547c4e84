package otelstore_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/aionotel/aionotel/conformance"
	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/otelstore"
)

// calls renders a spy's call log as "Method:args" strings.
func calls(spy *conformance.Spy) []string {
	var out []string
	for _, c := range spy.Calls() {
		out = append(out, fmt.Sprintf("%s:%v", c.Method, c.Args))
	}
	return out
}

func assertCalled(t *testing.T, spy *conformance.Spy, want string) {
	t.Helper()
	if got := calls(spy); !slices.Contains(got, want) {
		t.Errorf("the spy did not record %s: the call was not forwarded; saw %v", want, got)
	}
}

// Seed regression (#157): the per-shard failover seam is forwarded. The spy
// answers with values a forgetful decorator would not invent (NotOwner,
// false), so both the result and the call log catch a dropped forward.
func TestForwardsPerShardSeam(t *testing.T) {
	spy := conformance.NewSpy(conformance.CapShardOwner)
	s := shards(newHarness(t).wrap(t, spy.Store()))
	ctx := context.Background()

	if err := s.AcquireOwnedShard(ctx, 0); !errors.Is(err, eventstore.ErrNotOwner) {
		t.Errorf("AcquireOwnedShard = %v, want the spy's NotOwner, not a default nil", err)
	}
	if s.IsCurrentOwner(ctx, 1) {
		t.Error("IsCurrentOwner = true, want the spy's false, not a default true")
	}
	if err := s.PublishShardOwner(ctx, 2); !errors.Is(err, eventstore.ErrNotOwner) {
		t.Errorf("PublishShardOwner = %v, want the spy's NotOwner", err)
	}
	assertCalled(t, spy, "AcquireOwnedShard:[0]")
	assertCalled(t, spy, "IsCurrentOwner:[1]")
	assertCalled(t, spy, "PublishShardOwner:[2]")

	// The plural seams have no value sentinel: the call log proves them.
	s.SetOwnedShards(ctx, []int{3})
	if err := s.AcquireOwnedShards(ctx, []int{4}); err != nil {
		t.Errorf("AcquireOwnedShards = %v, want the spy's nil", err)
	}
	s.ExtendOwnedShards(ctx, []int{5})
	for _, want := range []string{"SetOwnedShards:[[3]]", "AcquireOwnedShards:[[4]]", "ExtendOwnedShards:[[5]]"} {
		assertCalled(t, spy, want)
	}
}

// Seed regression (#157, #253): the outbox settles are forwarded; a silent
// default would leave a cancelled or dead workflow's rows claimable.
func TestForwardsOutboxSettles(t *testing.T) {
	spy := conformance.NewSpy(conformance.CapOutbox)
	spy.SetError(errSettle)
	o := outbox(newHarness(t).wrap(t, spy.Store()))
	ctx := context.Background()

	if err := o.SettleOutboxRowCancelled(ctx, "wf-7"); err != errSettle {
		t.Errorf("SettleOutboxRowCancelled = %v, want the spy's error, not a silent nil", err)
	}
	assertCalled(t, spy, "SettleOutboxRowCancelled:[wf-7]")

	wf := eventstore.NewWorkflowID()
	if _, err := o.SettleWorkflowOutboxRowsCancelled(ctx, wf); err != errSettle {
		t.Errorf("SettleWorkflowOutboxRowsCancelled = %v, want the spy's error", err)
	}
	assertCalled(t, spy, fmt.Sprintf("SettleWorkflowOutboxRowsCancelled:[%v]", wf))
}

var errSettle = errors.New("settle refused")

// The shared contract suites, run on the decorators.
func TestDecoratorConformance(t *testing.T) {
	conformance.TestDecorator(t, func(inner eventstore.Store) eventstore.Store {
		s, err := otelstore.New(inner, newHarness(t).options()...)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestEventStoreConformance(t *testing.T) {
	conformance.TestEventStore(t, func(t *testing.T) eventstore.Store {
		return newHarness(t).wrap(t, eventstore.NewMemory())
	})
}

func TestKeyspaceConformance(t *testing.T) {
	conformance.TestKeyspace(t, func(t *testing.T) keyspace.Store {
		return newKeyspace(t, newHarness(t))
	})
}
