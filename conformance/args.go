package conformance

import (
	"context"
	"fmt"
	"reflect"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// storeInterface is one interface whose methods the suites reach by
// reflection, so that a method added to it later is covered without editing
// the suites.
type storeInterface struct {
	name string
	caps Capabilities // the capability bit it stands for; 0 for Store itself
	typ  reflect.Type
}

var storeInterfaces = []storeInterface{
	{"eventstore.Store", 0, reflect.TypeFor[eventstore.Store]()},
	{"eventstore.Outbox", CapOutbox, reflect.TypeFor[eventstore.Outbox]()},
	{"eventstore.ShardOwner", CapShardOwner, reflect.TypeFor[eventstore.ShardOwner]()},
}

var (
	errorType   = reflect.TypeFor[error]()
	contextType = reflect.TypeFor[context.Context]()
)

// returnsError reports whether a method type's last result is an error.
func returnsError(fn reflect.Type) bool {
	return fn.NumOut() > 0 && fn.Out(fn.NumOut()-1) == errorType
}

// argGen makes arguments for any method of [storeInterfaces]. In distinctive
// mode every parameter gets a non-zero value that differs from every other
// parameter of the same type in the same method, so a decorator that drops,
// zeroes or swaps an argument is caught. In valid mode the values are ones a
// conforming store accepts on a fresh store (expected sequence 0, a first
// event that starts the workflow, positive limits, shard 0), so the only
// reason left to fail is the one under test.
//
// A parameter type it does not know is an error naming the method and the
// type: a method added to the interfaces with a new type is noticed at once,
// not silently skipped.
type argGen struct {
	valid bool
	wf    eventstore.WorkflowID
	run   eventstore.RunID
	tag   string
}

func newArgGen(valid bool) *argGen {
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	return &argGen{valid: valid, wf: wf, run: run, tag: wf.String()[:8]}
}

func (g *argGen) time(pos int) time.Time {
	return time.Unix(1_700_000_000+int64(pos)*1000, 0).UTC()
}

func (g *argGen) packageType() string { return "conformance-package-" + g.tag }

// args returns the arguments of m (a method of an interface type, so
// m.Type has no receiver), with ctx first.
func (g *argGen) args(m reflect.Method, ctx context.Context) ([]reflect.Value, error) {
	fn := m.Type
	if fn.NumIn() == 0 || fn.In(0) != contextType {
		return nil, fmt.Errorf("conformance: method %s does not take a context.Context first", m.Name)
	}
	args := []reflect.Value{reflect.ValueOf(&ctx).Elem()}
	for pos := 1; pos < fn.NumIn(); pos++ {
		v, err := g.value(fn.In(pos), pos, m.Name)
		if err != nil {
			return nil, err
		}
		args = append(args, v)
	}
	return args, nil
}

func (g *argGen) value(t reflect.Type, pos int, method string) (reflect.Value, error) {
	env := eventstore.Envelope{WorkflowID: g.wf, RunID: g.run}
	var v any
	switch t {
	case reflect.TypeFor[eventstore.WriteToken]():
		v = eventstore.RecorderToken()
	case reflect.TypeFor[eventstore.WorkflowID]():
		v = g.wf
	case reflect.TypeFor[eventstore.RunID]():
		v = g.run
	case reflect.TypeFor[eventstore.TimerID]():
		v = eventstore.TimerID(fmt.Sprintf("conformance-timer-%d", pos))
	case reflect.TypeFor[time.Time]():
		v = g.time(pos)
	case reflect.TypeFor[uint64]():
		v = uint64(40 + pos)
		if g.valid {
			v = uint64(0)
		}
	case reflect.TypeFor[int]():
		v = 3 + pos
		if g.valid {
			v = 1
		}
	case reflect.TypeFor[[]int]():
		v = []int{5 + pos}
		if g.valid {
			v = []int{0}
		}
	case reflect.TypeFor[string]():
		v = fmt.Sprintf("conformance-%s-%d", g.tag, pos)
	case reflect.TypeFor[[]string]():
		v = []string{fmt.Sprintf("conformance-route-%d", pos)}
		if g.valid {
			v = []string{g.packageType()}
		}
	case reflect.TypeFor[[]eventstore.Event]():
		if g.valid {
			v = []eventstore.Event{eventstore.WorkflowStarted{Envelope: env, WorkflowType: "conformance", Input: payload("input")}}
		} else {
			v = []eventstore.Event{eventstore.SignalReceived{Envelope: env, SignalName: fmt.Sprintf("signal-%d", pos), Input: payload("signal")}}
		}
	case reflect.TypeFor[[]eventstore.OutboxRow]():
		v = []eventstore.OutboxRow{{
			DispatchKey:  eventstore.DispatchKey(g.wf, g.run, 0),
			WorkflowID:   g.wf,
			RunID:        g.run,
			ActivityType: fmt.Sprintf("conformance-activity-%d", pos),
			Input:        payload("row"),
			CreatedAt:    g.time(pos),
		}}
	case reflect.TypeFor[eventstore.PackageRecord]():
		v = eventstore.PackageRecord{WorkflowType: g.packageType(), ContentHash: fmt.Sprintf("hash-%d", pos), Data: []byte("package"), CreatedAt: g.time(pos)}
	case reflect.TypeFor[eventstore.WorkflowFilter]():
		v = eventstore.WorkflowFilter{WorkflowType: "conformance-filter", Status: eventstore.StatusPaused, StartedAfter: g.time(pos), StartedBefore: g.time(pos + 1), Limit: 5}
	default:
		return reflect.Value{}, fmt.Errorf("conformance: no argument generator for parameter %d of type %v of method %s; teach argGen.value about it", pos, t, method)
	}
	return reflect.ValueOf(v), nil
}

// callMethod calls the named method of recv by reflection. A missing method
// or a panic is an error, never a crash of the suite.
func callMethod(recv any, name string, args []reflect.Value) (out []reflect.Value, err error) {
	m := reflect.ValueOf(recv).MethodByName(name)
	if !m.IsValid() {
		return nil, fmt.Errorf("%T has no method %s", recv, name)
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s panicked: %v", ErrRulePanicked, name, p)
		}
	}()
	return m.Call(args), nil
}
