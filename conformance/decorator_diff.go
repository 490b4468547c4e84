package conformance

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// decDiffRounds is how many generated calls the differential rule makes per
// capability combination at scale 1.
const decDiffRounds = 400

// decDifferential is the differential decorator rule: the same generated
// call goes to the wrapped store and, through it, to the spy; the inner
// spy must see exactly the caller's arguments and context (values, Err and
// Deadline), and the caller must get exactly what the spy answered. The
// spy answers each call with freshly generated results (nil, empty and
// multi-element slices, zero values) or an error, so a decorator that
// caches, reorders, truncates, swaps nil and empty, or trips over an empty
// result is caught; every call is made twice in a row about one time in
// three, with new answers, so caching shows.
func decDifferential(ctx context.Context, env *ruleEnv[wrapFunc], wrap wrapFunc, caps Capabilities) error {
	spy, w, err := wrapSpy(wrap, caps)
	if err != nil {
		return err
	}
	rng := newRand(env.cfg.seed, "differential/"+caps.String())
	ids := newIDGen(rng)
	g := &diffGen{rng: rng, shape: -1, wfs: []eventstore.WorkflowID{ids.workflow(), ids.workflow(), ids.workflow()}, run: ids.run()}
	var methods []reflect.Method
	for _, iface := range storeInterfaces {
		if iface.caps == 0 || caps&iface.caps != 0 {
			for m := range iface.typ.Methods() {
				methods = append(methods, m)
			}
		}
	}
	// Methods, result shapes, contexts, errors and repeats are visited in
	// turn, not drawn, so every method meets every shape and context kind
	// whatever the seed; the seed draws the values.
	for round := range decDiffRounds * env.cfg.scale {
		m := methods[round%len(methods)]
		visit := round / len(methods)
		repeats := 1
		if visit%3 == 2 {
			repeats = 2
		}
		args, cancel := g.args(ctx, m, (visit+visit/4)%4)
		for rep := range repeats {
			if err := g.oneCall(spy, w, m, args, visit); err != nil {
				cancel()
				return fmt.Errorf("generated call %d (%s, call %d of %d): %w", round+1, m.Name, rep+1, repeats, err)
			}
		}
		cancel()
	}
	return nil
}

type diffGen struct {
	rng   *rand.Rand
	wfs   []eventstore.WorkflowID
	run   eventstore.RunID
	n     int
	shape int // 0: nil slices, 1: empty, 2 and 3: several elements; -1: drawn
}

type diffCtxKey struct{}

// args generates the arguments of m, a context first: plain, cancelled,
// past its deadline, or with a deadline to come, always carrying a value.
// It detaches from the rule's context (whose watchdog deadline every call
// would otherwise carry), so the plain and cancelled kinds have no deadline
// and a decorator that adds one of its own is seen; the spy never blocks,
// so the watchdog loses nothing.
func (g *diffGen) args(parent context.Context, m reflect.Method, ctxKind int) ([]reflect.Value, context.CancelFunc) {
	g.n++
	ctx := context.WithValue(context.WithoutCancel(parent), diffCtxKey{}, g.n)
	cancel := context.CancelFunc(func() {})
	switch ctxKind {
	case 1:
		ctx, cancel = context.WithCancel(ctx)
		cancel()
	case 2:
		ctx, cancel = context.WithDeadline(ctx, time.Unix(1_000_000_000, 0))
	case 3:
		ctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Duration(1+g.rng.IntN(1000))*time.Hour))
	}
	args := []reflect.Value{reflect.ValueOf(&ctx).Elem()}
	for i := 1; i < m.Type.NumIn(); i++ {
		args = append(args, g.value(m.Type.In(i)))
	}
	return args, cancel
}

// oneCall makes one call on the wrapped store with fresh spy answers and
// compares what both sides saw.
func (g *diffGen) oneCall(spy *Spy, w eventstore.Store, m reflect.Method, args []reflect.Value, visit int) error {
	fn := m.Type
	nRes := fn.NumOut()
	if returnsError(fn) {
		nRes--
	}
	// Generate the answers twice from one seed: one copy for the spy, one
	// to compare with, so that a decorator that edits what it got in place
	// cannot hide it.
	seed := g.rng.Uint64()
	answers := func() []any {
		r := rand.New(rand.NewPCG(seed, 1))
		sub := &diffGen{rng: r, wfs: g.wfs, run: g.run, shape: visit % 4}
		out := make([]any, nRes)
		for i := range out {
			out[i] = sub.value(fn.Out(i)).Interface()
		}
		return out
	}
	give, want := answers(), answers()
	if nRes > 0 {
		if err := spy.SetResults(m.Name, give...); err != nil {
			return err
		}
	}
	var wantErr error
	switch visit % 7 {
	case 3:
		wantErr = &sentinelError{method: m.Name}
	case 5:
		wantErr = fmt.Errorf("conformance: generated %w", eventstore.ErrNotFound)
	}
	spy.SetError(wantErr)
	defer spy.SetError(nil)

	before := len(spy.Calls())
	out, err := callMethod(w, m.Name, args)
	if err != nil {
		return err
	}
	calls := spy.Calls()[before:]
	if len(calls) != 1 || calls[0].Method != m.Name {
		names := make([]string, len(calls))
		for i, c := range calls {
			names[i] = c.Method
		}
		return fmt.Errorf("the inner store got calls %v, want exactly one %s", names, m.Name)
	}
	call := calls[0]
	callerCtx := args[0].Interface().(context.Context)
	for i, a := range args[1:] {
		if !reflect.DeepEqual(call.Args[i], a.Interface()) {
			return fmt.Errorf("argument %d reached the inner store as %#v, the caller passed %#v", i+1, call.Args[i], a.Interface())
		}
	}
	if call.Ctx == nil || call.Ctx.Value(diffCtxKey{}) != callerCtx.Value(diffCtxKey{}) {
		return fmt.Errorf("the inner store's context does not carry the caller's values")
	}
	if call.CtxErr != callerCtx.Err() {
		return fmt.Errorf("the inner store's context had Err() = %v when the caller's had %v: cancellation does not reach the inner store", call.CtxErr, callerCtx.Err())
	}
	dl, ok := callerCtx.Deadline()
	if call.HasDeadline != ok || !call.Deadline.Equal(dl) {
		return fmt.Errorf("the inner store's context had Deadline() = %v, %v when the caller's had %v, %v", call.Deadline, call.HasDeadline, dl, ok)
	}
	for i := range nRes {
		if got := out[i].Interface(); !reflect.DeepEqual(got, want[i]) {
			return fmt.Errorf("result %d is %s, the inner store answered %s", i, describe(got), describe(want[i]))
		}
	}
	if returnsError(fn) {
		ge, _ := out[len(out)-1].Interface().(error)
		if wantErr == nil {
			wantErr = spyDefaultErrors[m.Name]
		}
		if err := sameError(ge, wantErr); err != nil {
			return err
		}
	}
	return nil
}

// describe renders a value so that nil and empty slices differ.
func describe(v any) string {
	rv := reflect.ValueOf(v)
	if rv.Kind() == reflect.Slice {
		if rv.IsNil() {
			return fmt.Sprintf("a nil %T", v)
		}
		return fmt.Sprintf("a %T of %d elements %+v", v, rv.Len(), v)
	}
	return fmt.Sprintf("%T %+v", v, v)
}

func (g *diffGen) pick(n int) int { return g.rng.IntN(n) }

func (g *diffGen) wf() eventstore.WorkflowID {
	if g.pick(5) == 0 {
		return eventstore.WorkflowID{}
	}
	return g.wfs[g.pick(len(g.wfs))]
}

func (g *diffGen) time() time.Time {
	switch g.pick(5) {
	case 0:
		return time.Time{}
	case 1:
		return time.Unix(0, 0).UTC()
	case 2:
		return time.Unix(1_700_000_000, int64(g.pick(1e9))).In(time.FixedZone("X", 3600))
	default:
		return time.Unix(1_700_000_000+int64(g.pick(1e6)), 0).UTC()
	}
}

func (g *diffGen) str() string {
	if g.pick(4) == 0 {
		return ""
	}
	return hostile(g.rng)
}

func (g *diffGen) payload() eventstore.Payload {
	switch g.pick(3) {
	case 0:
		return eventstore.Payload{}
	case 1:
		return eventstore.Payload{ContentType: "t", Data: []byte{}}
	}
	return eventstore.Payload{ContentType: g.str(), Data: []byte(g.str() + "x")}
}

// sliceLen chooses nil (-1), empty (0) or a few elements.
func (g *diffGen) sliceLen() int {
	switch g.shape {
	case 0:
		return -1
	case 1:
		return 0
	case 2, 3:
		return 2 + g.pick(4)
	}
	switch g.pick(4) {
	case 0:
		return -1
	case 1:
		return 0
	}
	return 1 + g.pick(5)
}

func (g *diffGen) event(i int) eventstore.Event {
	env := eventstore.Envelope{WorkflowID: g.wf(), RunID: g.run, Seq: uint64(i + 1), RecordedAt: g.time()}
	switch g.pick(5) {
	case 0:
		return eventstore.WorkflowStarted{Envelope: env, WorkflowType: g.str(), Input: g.payload()}
	case 1:
		return eventstore.SignalReceived{Envelope: env, SignalName: g.str(), Input: g.payload()}
	case 2:
		return eventstore.ActivityFailed{Envelope: env, ActivityID: eventstore.ActivityID(i), Error: eventstore.ActivityError{Kind: eventstore.Retryable, Message: g.str()}}
	case 3:
		return nil // a nil event: the spy accepts what a real store refuses
	}
	return eventstore.TimerScheduled{Envelope: env, TimerID: eventstore.TimerID(g.str()), FireAt: g.time()}
}

// value generates a value of t, a parameter or result type of the store
// interfaces: zero, boundary and ordinary values, nil and empty slices.
func (g *diffGen) value(t reflect.Type) reflect.Value {
	if t.Kind() == reflect.Slice {
		n := g.sliceLen()
		if n < 0 {
			return reflect.Zero(t)
		}
		s := reflect.MakeSlice(t, n, n)
		for i := range n {
			if t.Elem() == reflect.TypeFor[eventstore.Event]() {
				if ev := g.event(i); ev != nil {
					s.Index(i).Set(reflect.ValueOf(ev))
				}
				continue
			}
			s.Index(i).Set(g.value(t.Elem()))
		}
		return s
	}
	var v any
	switch t {
	case reflect.TypeFor[eventstore.WriteToken]():
		v = eventstore.WriteToken{}
		if g.pick(3) != 0 {
			v = eventstore.RecorderToken()
		}
	case reflect.TypeFor[eventstore.WorkflowID]():
		v = g.wf()
	case reflect.TypeFor[eventstore.TimerID]():
		v = eventstore.TimerID(g.str())
	case reflect.TypeFor[time.Time]():
		v = g.time()
	case reflect.TypeFor[uint64]():
		v = []uint64{0, 1, 2, math.MaxUint64, uint64(g.pick(1 << 20))}[g.pick(5)]
	case reflect.TypeFor[int]():
		v = []int{0, -1, 1, math.MinInt, math.MaxInt, g.pick(100)}[g.pick(6)]
	case reflect.TypeFor[bool]():
		v = g.pick(2) == 0
	case reflect.TypeFor[string]():
		v = g.str()
	case reflect.TypeFor[eventstore.TimerRetirement]():
		v = eventstore.TimerRetirement(g.pick(5))
	case reflect.TypeFor[eventstore.WorkflowStatus]():
		v = []eventstore.WorkflowStatus{"", eventstore.StatusRunning, eventstore.StatusPaused, eventstore.StatusContinuedAsNew}[g.pick(4)]
	case reflect.TypeFor[eventstore.OutboxRow]():
		v = eventstore.OutboxRow{DispatchKey: g.str(), WorkflowID: g.wf(), RunID: g.run, Ordinal: eventstore.ActivityID(g.pick(9)), ActivityType: g.str(), Input: g.payload(), CreatedAt: g.time(), State: eventstore.OutboxState(g.pick(5))}
	case reflect.TypeFor[eventstore.PackageRecord]():
		v = eventstore.PackageRecord{WorkflowType: g.str(), ContentHash: g.str(), Data: g.payload().Data, CreatedAt: g.time()}
	case reflect.TypeFor[eventstore.PackageRoute]():
		v = eventstore.PackageRoute{WorkflowType: g.str(), ContentHash: g.str()}
	case reflect.TypeFor[eventstore.WorkflowFilter]():
		v = eventstore.WorkflowFilter{}
		if g.pick(2) == 0 {
			v = eventstore.WorkflowFilter{WorkflowType: g.str(), Status: eventstore.StatusPaused, StartedAfter: g.time(), StartedBefore: g.time(), Limit: []int{-1, 0, 1, 7}[g.pick(4)]}
		}
	case reflect.TypeFor[eventstore.RunSummary]():
		v = eventstore.RunSummary{RunID: g.run, WorkflowType: g.str(), Status: eventstore.StatusCompleted, StartedAt: g.time(), ClosedAt: g.time(), FirstSeq: uint64(g.pick(9)), LastSeq: uint64(g.pick(99))}
	case reflect.TypeFor[eventstore.StreamHead]():
		v = eventstore.StreamHead{WorkflowID: g.wf(), Head: uint64(g.pick(1 << 20))}
	case reflect.TypeFor[eventstore.WorkflowSummary]():
		v = eventstore.WorkflowSummary{WorkflowID: g.wf(), RunID: g.run, WorkflowType: g.str(), Status: eventstore.StatusFailed, StartedAt: g.time(), ClosedAt: g.time(), Head: uint64(g.pick(50))}
	case reflect.TypeFor[eventstore.TimerEntry]():
		v = eventstore.TimerEntry{WorkflowID: g.wf(), TimerID: eventstore.TimerID(g.str()), FireAt: g.time(), ArmedSeq: uint64(g.pick(50))}
	default:
		// A type the generator does not know: the zero value still tests
		// forwarding; TestDecoratorDifferentialKnowsEveryType catches it.
		return reflect.Zero(t)
	}
	return reflect.ValueOf(v)
}
