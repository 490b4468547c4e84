package conformance

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
)

func TestCapabilitiesString(t *testing.T) {
	for caps, want := range map[Capabilities]string{
		0:                         "store",
		CapOutbox:                 "outbox",
		CapShardOwner:             "shardowner",
		CapOutbox | CapShardOwner: "outbox+shardowner",
		capAll:                    "outbox+shardowner+historiesreader",
	} {
		if got := caps.String(); got != want {
			t.Errorf("Capabilities(%d).String() = %q, want %q", caps, got, want)
		}
	}
}

func TestSpyHasExactlyItsCapabilities(t *testing.T) {
	for caps := range capAll + 1 {
		t.Run(caps.String(), func(t *testing.T) {
			spy := NewSpy(caps)
			if got := capabilitiesOf(spy.Store()); got != caps {
				t.Errorf("the store of NewSpy(%s) implements %s", caps, got)
			}
			if spy.Capabilities() != caps {
				t.Errorf("Capabilities() = %s, want %s", spy.Capabilities(), caps)
			}
			if spy.Store() != spy.Store() {
				t.Error("Store() returns a different value each time")
			}
		})
	}
	if got := NewSpy(0xff).Capabilities(); got != capAll {
		t.Errorf("NewSpy(0xff) has capabilities %s, want the known bits only", got)
	}
}

// allMethods calls every method of the interfaces on a full spy's store by
// reflection with distinctive arguments and yields what it sent and got.
func allMethods(t *testing.T, spy *Spy, each func(m reflect.Method, args, out []reflect.Value)) {
	t.Helper()
	g := newGen(newRand(1, "spy"))
	for _, iface := range storeInterfaces {
		for m := range iface.typ.Methods() {
			ctx := context.WithValue(t.Context(), diffCtxKey{}, m.Name)
			args := []reflect.Value{reflect.ValueOf(&ctx).Elem()}
			for i := 1; i < m.Type.NumIn(); i++ {
				args = append(args, g.value(m.Type.In(i), 2))
			}
			out, err := callMethod(spy.Store(), m.Name, args)
			if err != nil {
				t.Fatal(err)
			}
			each(m, args, out)
		}
	}
}

// The hand-written spy methods record what they received and what they
// returned, for every method the interfaces declare.
func TestSpyRecordsEveryMethod(t *testing.T) {
	spy := NewSpy(capAll)
	n := 0
	allMethods(t, spy, func(m reflect.Method, args, out []reflect.Value) {
		n++
		calls := spy.Calls()
		if len(calls) != n {
			t.Fatalf("%s: %d calls recorded after %d calls", m.Name, len(calls), n)
		}
		c := calls[n-1]
		if c.Method != m.Name {
			t.Errorf("recorded method %q, want %q", c.Method, m.Name)
		}
		if c.Ctx == nil || c.Ctx.Value(diffCtxKey{}) != m.Name {
			t.Errorf("%s: the recorded context is not the caller's", m.Name)
		}
		if len(c.Args) != len(args)-1 {
			t.Fatalf("%s: recorded %d args, want %d", m.Name, len(c.Args), len(args)-1)
		}
		for i, a := range args[1:] {
			if !reflect.DeepEqual(c.Args[i], a.Interface()) {
				t.Errorf("%s: recorded arg %d = %v, want %v", m.Name, i, c.Args[i], a.Interface())
			}
		}
		if len(c.Results) != m.Type.NumOut() || len(out) != m.Type.NumOut() {
			t.Fatalf("%s: recorded %d results, returned %d, want %d", m.Name, len(c.Results), len(out), m.Type.NumOut())
		}
		for i, o := range out {
			if !reflect.DeepEqual(o.Interface(), c.Results[i]) {
				t.Errorf("%s: returned result %d = %v, recorded %v", m.Name, i, o.Interface(), c.Results[i])
			}
		}
	})
}

// The defaults are what a forgetful decorator would not produce by itself.
func TestSpyDefaultsAreDistinctive(t *testing.T) {
	spy := NewSpy(capAll)
	wantErr := map[string]error{
		"AcquireOwnedShard":        eventstore.ErrNotOwner,
		"PublishShardOwner":        eventstore.ErrNotOwner,
		"SettleOutboxRowCancelled": eventstore.ErrNotFound,
	}
	allMethods(t, spy, func(m reflect.Method, _, out []reflect.Value) {
		for i, o := range out {
			if i == len(out)-1 && returnsError(m.Type) {
				err, _ := o.Interface().(error)
				if want := wantErr[m.Name]; want != nil && !errors.Is(err, want) || want == nil && err != nil {
					t.Errorf("%s returned error %v by default, want %v", m.Name, err, want)
				}
				continue
			}
			switch m.Name {
			case "IsCurrentOwner":
				if o.Bool() {
					t.Error("IsCurrentOwner returns true by default, the answer an unforwarded call invents")
				}
			case "RetireTimer":
				if o.Interface() != eventstore.TimerSuperseded {
					t.Errorf("RetireTimer returns %v by default, want superseded", o.Interface())
				}
			default:
				if o.IsZero() || o.Kind() == reflect.Slice && o.Len() == 0 {
					t.Errorf("%s returns a zero or empty result %d by default", m.Name, i)
				}
			}
		}
	})
	a, _ := spy.Store().ListWorkflowIDs(t.Context())
	b, _ := spy.Store().ListActive(t.Context())
	c, _ := spy.Store().ListPaused(t.Context())
	if a[0] == b[0] || b[0] == c[0] || a[0] == c[0] {
		t.Error("the three listings return the same ID: swapping them would go unnoticed")
	}
}

func TestSpySetError(t *testing.T) {
	spy := NewSpy(capAll)
	sentinel := errors.New("sentinel")
	spy.SetError(sentinel)
	allMethods(t, spy, func(m reflect.Method, _, out []reflect.Value) {
		if returnsError(m.Type) {
			if err, _ := out[len(out)-1].Interface().(error); err != sentinel {
				t.Errorf("%s returned %v, want the sentinel itself", m.Name, err)
			}
		}
	})
	spy.SetError(nil)
	if err := spy.Store().Append(t.Context(), eventstore.RecorderToken(), spyWorkflow, nil, 0); err != nil {
		t.Errorf("after SetError(nil) Append returned %v, want the default nil", err)
	}
	if err := spy.Store().(eventstore.ShardOwner).PublishShardOwner(t.Context(), 1); !errors.Is(err, eventstore.ErrNotOwner) {
		t.Errorf("after SetError(nil) PublishShardOwner returned %v, want the default ErrNotOwner", err)
	}
}

func TestSpySetResults(t *testing.T) {
	spy := NewSpy(capAll)
	ids := []eventstore.WorkflowID{eventstore.NewWorkflowID(), eventstore.NewWorkflowID()}
	testCases := []struct {
		name    string
		method  string
		results []any
		ok      bool
	}{
		{"valid", "ListActive", []any{ids}, true},
		{"bool", "IsCurrentOwner", []any{true}, true},
		{"nil slice", "ListPaused", []any{nil}, true},
		{"unknown method", "Nope", []any{ids}, false},
		{"too many", "ListActive", []any{ids, ids}, false},
		{"none for a result", "CountClaimedOutboxRows", nil, false},
		{"wrong type", "CountClaimedOutboxRows", []any{"seven"}, false},
		{"error-only method takes none", "Append", nil, true},
		{"error-only method refuses a value", "Append", []any{errors.New("x")}, false},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := spy.SetResults(tc.method, tc.results...)
			if tc.ok != (err == nil) {
				t.Fatalf("SetResults(%s, %v) = %v, want ok %v", tc.method, tc.results, err, tc.ok)
			}
			if err != nil && !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Errorf("SetResults error %v does not match ErrInvalidArgument", err)
			}
		})
	}
	ctx := t.Context()
	store := spy.Store()
	if got, _ := store.ListActive(ctx); !reflect.DeepEqual(got, ids) {
		t.Errorf("ListActive = %v, want the set %v", got, ids)
	}
	if got, _ := store.ListPaused(ctx); got != nil {
		t.Errorf("ListPaused = %v, want nil", got)
	}
	if !store.(eventstore.ShardOwner).IsCurrentOwner(ctx, 0) {
		t.Error("IsCurrentOwner = false, want the set true")
	}
	if n, _ := store.(eventstore.Outbox).CountClaimedOutboxRows(ctx); n != 7 {
		t.Errorf("a refused SetResults changed CountClaimedOutboxRows to %d", n)
	}
}

// A decorator's own read (a resume, say) may release what it got in place;
// the caller's answer to the same set results, and the record, stay whole.
func TestSpySetResultsCopiedPerCall(t *testing.T) {
	spy := NewSpy(CapHistoriesReader)
	set := [][]eventstore.Event{{eventstore.SignalReceived{SignalName: "a"}}, {}, nil}
	if err := spy.SetResults("ReadHistories", set); err != nil {
		t.Fatal(err)
	}
	r := spy.Store().(eventstore.HistoriesReader)
	own, _ := r.ReadHistories(t.Context(), nil)
	own[0], own[1], own[2] = nil, nil, []eventstore.Event{}
	got, _ := r.ReadHistories(t.Context(), nil)
	want := [][]eventstore.Event{{eventstore.SignalReceived{SignalName: "a"}}, {}, nil}
	if !same(got, want) || !same(set, want) {
		t.Errorf("after one caller edited its answer, the next got %s (set: %s), want %s", describe(got), describe(set), describe(want))
	}
	for i, c := range spy.Calls() {
		if !same(c.Results[0], want) {
			t.Errorf("call %d recorded %s, want %s", i+1, describe(c.Results[0]), describe(want))
		}
	}
}

func TestSpyCallsAreCopies(t *testing.T) {
	spy := NewSpy(0)
	ctx := t.Context()
	hist, _ := spy.Store().ReadHistory(ctx, spyWorkflow)
	hist[0] = nil
	calls := spy.Calls()
	calls[0].Method = "changed"
	again := spy.Calls()
	if again[0].Method != "ReadHistory" {
		t.Error("changing the slice Calls returned changed the spy's log")
	}
	if recorded := again[0].Results[0].([]eventstore.Event); recorded[0] == nil {
		t.Error("changing the returned history changed the recorded result")
	}
}

func TestSpyConcurrentSafe(t *testing.T) {
	spy := NewSpy(capAll)
	const goroutines, perG = 8, 100
	sentinel := errors.New("sentinel")
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			ctx := context.Background()
			store := spy.Store()
			for i := range perG {
				switch i % 4 {
				case 0:
					_ = store.Append(ctx, eventstore.RecorderToken(), spyWorkflow, nil, uint64(i))
				case 1:
					_, _ = store.(eventstore.Outbox).ClaimOutboxRows(ctx, g)
				case 2:
					store.(eventstore.ShardOwner).SetOwnedShards(ctx, []int{g})
				case 3:
					_ = store.(eventstore.ShardOwner).IsCurrentOwner(ctx, i)
				}
				if i%10 == 0 {
					spy.SetError(sentinel)
					_ = spy.Calls()
					spy.SetError(nil)
				}
			}
		})
	}
	wg.Wait()
	calls := spy.Calls()
	if len(calls) != goroutines*perG {
		t.Fatalf("%d calls recorded, want %d", len(calls), goroutines*perG)
	}
	per := map[string]int{}
	for _, c := range calls {
		per[c.Method]++
	}
	for _, m := range []string{"Append", "ClaimOutboxRows", "SetOwnedShards", "IsCurrentOwner"} {
		if per[m] != goroutines*perG/4 {
			t.Errorf("%d %s calls recorded, want %d", per[m], m, goroutines*perG/4)
		}
	}
}
