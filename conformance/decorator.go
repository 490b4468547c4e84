package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// TestDecorator tests a decorator of [eventstore.Store] (a function that
// wraps an inner store, as otelstore.New does) for faithful forwarding. For
// each capability combination of a [Spy] it runs every RuleDec* rule as
// the subtest "<capabilities>/<rule>" on a fresh spy, forward/<Method> for
// every method of the inner's interfaces and error/<Method> for every one
// that returns an error, found by reflection (so a method added later is
// covered without touching the suite).
//
// wrap is called once per rule with the spy's store and must return the
// decorated store. It runs on the rule's goroutine, not the test's, so it
// must report trouble with t.Error (safe from any goroutine), never t.Fatal
// (a rule aborted that way fails with [ErrRuleAborted]). Typical usage:
//
//	func TestDecoratorConformance(t *testing.T) {
//		conformance.TestDecorator(t, func(inner eventstore.Store) eventstore.Store {
//			s, err := mydecorator.New(inner)
//			if err != nil {
//				t.Error(err)
//				return nil // fails the rule: wrap returned nil
//			}
//			return s
//		})
//	}
func TestDecorator(t *testing.T, wrap func(inner eventstore.Store) eventstore.Store, opts ...Option) {
	t.Helper()
	if wrap == nil {
		t.Fatal("conformance: TestDecorator: nil wrap function")
	}
	decoratorSuite.test(t, newConfig(opts), func(*testing.T) wrapFunc { return wrap })
}

// CheckDecorator is the error-returning core of [TestDecorator]: it runs
// every decorator rule and returns nil when all hold, or the errors.Join of
// one *[RuleError] per broken rule. It never stops at the first failure.
func CheckDecorator(ctx context.Context, wrap func(inner eventstore.Store) eventstore.Store, opts ...Option) error {
	return decoratorSuite.check(ctx, newConfig(opts), given(wrap))
}

type wrapFunc = func(inner eventstore.Store) eventstore.Store

// storeInterface is one interface whose methods the decorator suite and
// the Spy reach by reflection.
type storeInterface struct {
	name string
	caps Capabilities // the capability bit it stands for; 0 for Store itself
	typ  reflect.Type
}

var storeInterfaces = []storeInterface{
	{"eventstore.Store", 0, reflect.TypeFor[eventstore.Store]()},
	{"eventstore.Outbox", CapOutbox, reflect.TypeFor[eventstore.Outbox]()},
	{"eventstore.ShardOwner", CapShardOwner, reflect.TypeFor[eventstore.ShardOwner]()},
	{"eventstore.HistoriesReader", CapHistoriesReader, reflect.TypeFor[eventstore.HistoriesReader]()},
}

// methodsOf returns the methods of the interfaces a store with caps has.
func methodsOf(caps Capabilities) []reflect.Method {
	var out []reflect.Method
	for _, iface := range storeInterfaces {
		if iface.caps == 0 || caps&iface.caps != 0 {
			for m := range iface.typ.Methods() {
				out = append(out, m)
			}
		}
	}
	return out
}

// returnsError reports whether a method type's last result is an error.
func returnsError(fn reflect.Type) bool {
	return fn.NumOut() > 0 && fn.Out(fn.NumOut()-1) == errorType
}

var decoratorSuite = func() suite[wrapFunc] {
	s := suite[wrapFunc]{name: SuiteDecorator}
	for caps := range capAll + 1 {
		s.rules = append(s.rules,
			fixed(caps.String()+"/"+RuleDecCapabilities, func(ctx context.Context, wrap wrapFunc) error { return decCapabilities(wrap, caps) }),
			fixed(caps.String()+"/"+RuleDecUnwrap, func(ctx context.Context, wrap wrapFunc) error { return decUnwrap(wrap, caps) }),
			seeded(caps.String()+"/"+RuleDecDifferential, func(ctx context.Context, env *ruleEnv[wrapFunc], wrap wrapFunc) error {
				return decDifferential(ctx, env, wrap, caps)
			}),
		)
		for _, m := range methodsOf(caps) {
			s.rules = append(s.rules, fixed(fmt.Sprintf("%s/%s%s", caps, RuleDecForward, m.Name), func(ctx context.Context, wrap wrapFunc) error {
				return decCall(ctx, wrap, caps, m, nil, true)
			}))
			if returnsError(m.Type) {
				s.rules = append(s.rules, fixed(fmt.Sprintf("%s/%s%s", caps, RuleDecError, m.Name), func(ctx context.Context, wrap wrapFunc) error {
					var errs []error
					for _, e := range spyErrors(m.Name) {
						errs = append(errs, decCall(ctx, wrap, caps, m, e, false))
					}
					return errors.Join(errs...)
				}))
			}
		}
	}
	return s
}()

// spyErrors are the errors the spy answers with: every sentinel bare and
// wrapped, a conflict with its fields, the context errors, a join, and a
// private one, which only the identical value equals.
func spyErrors(method string) []error {
	conflict := &eventstore.SequenceConflictError{Expected: 1<<32 + 7, Found: 3}
	private := errors.New("conformance: sentinel error for " + method)
	return []error{
		private, conflict, fmt.Errorf("conformance: wrapped %w", conflict),
		eventstore.ErrSequenceConflict, eventstore.ErrInvalidToken, eventstore.ErrNotFound, eventstore.ErrNotOwner,
		eventstore.ErrInvalidArgument, eventstore.ErrUnsupported, fmt.Errorf("conformance: wrapped %w", eventstore.ErrNotOwner),
		context.Canceled, context.DeadlineExceeded, fmt.Errorf("conformance: %w", context.DeadlineExceeded),
		errors.Join(eventstore.ErrNotFound, private),
	}
}

// wrapSpy makes a fresh spy with caps and wraps its store.
func wrapSpy(wrap wrapFunc, caps Capabilities) (*Spy, eventstore.Store, error) {
	spy := NewSpy(caps)
	w, err := guardWrap(func() eventstore.Store { return wrap(spy.Store()) })
	if err != nil {
		return nil, nil, fmt.Errorf("a %s spy: %w", caps, err)
	}
	return spy, w, nil
}

// guardWrap calls wrap, turning a panic or a nil result into an error.
func guardWrap(wrap func() eventstore.Store) (s eventstore.Store, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: wrap panicked: %v", ErrRulePanicked, p)
		}
	}()
	if s = wrap(); isNil(s) {
		return nil, errors.New("wrap returned nil")
	}
	return s, nil
}

func decCapabilities(wrap wrapFunc, caps Capabilities) error {
	_, w, err := wrapSpy(wrap, caps)
	if err != nil {
		return err
	}
	var errs []error
	got := capabilitiesOf(w)
	if hidden := caps &^ got; hidden != 0 {
		errs = append(errs, fmt.Errorf("the wrapped %T hides %s, which the inner store implements", w, hidden))
	}
	if invented := got &^ caps; invented != 0 {
		errs = append(errs, fmt.Errorf("the wrapped %T claims %s, which the inner store lacks", w, invented))
	}
	// An outer decorator that follows shards takes their number from a
	// ShardCount method: one that answers wrong releases the wrong workflows.
	if sc, ok := w.(interface{ ShardCount() int }); ok && caps&CapShardOwner == 0 {
		errs = append(errs, fmt.Errorf("the wrapped %T has a ShardCount method, which the inner store lacks", w))
	} else if ok && sc.ShardCount() != SpyShardCount {
		errs = append(errs, fmt.Errorf("the wrapped %T's ShardCount() is %d, the inner store's %d", w, sc.ShardCount(), SpyShardCount))
	}
	return errors.Join(errs...)
}

func decUnwrap(wrap wrapFunc, caps Capabilities) error {
	spy, w, err := wrapSpy(wrap, caps)
	if err != nil {
		return err
	}
	u, ok := w.(interface{ Unwrap() eventstore.Store })
	if !ok {
		return fmt.Errorf("the wrapped %T has no Unwrap() eventstore.Store method", w)
	}
	if got := u.Unwrap(); got != spy.Store() {
		return fmt.Errorf("Unwrap() returned %T(%v), not the inner store (a %T)", got, got, spy.Store())
	}
	return nil
}

// decCall calls method m once on a fresh wrapped spy answering spyErr
// (nil: its default answer) with generated arguments (distinct ones, when
// apart) and checks that exactly one inner call saw them, and that the
// caller got exactly the inner's answer.
func decCall(ctx context.Context, wrap wrapFunc, caps Capabilities, m reflect.Method, spyErr error, apart bool) error {
	spy, w, err := wrapSpy(wrap, caps)
	if err != nil {
		return err
	}
	g := newGen(newRand(int64(len(m.Name)), m.Name))
	g.nanos = true
	var args []reflect.Value
	for try := 0; try == 0 || (apart && !distinct(args[1:]) && try <= 21); try++ {
		args = g.args(context.WithValue(ctx, diffCtxKey{}, m.Name), m, 2)
	}
	spy.SetError(spyErr)
	return compareCall(spy, w, m, args, spyErr)
}

// distinct reports whether no argument is zero and no two of one type are
// equal, so that a dropped, zeroed or swapped argument shows.
func distinct(args []reflect.Value) bool {
	for i, a := range args {
		if a.IsZero() {
			return false
		}
		for _, b := range args[:i] {
			if a.Type() == b.Type() && reflect.DeepEqual(a.Interface(), b.Interface()) {
				return false
			}
		}
	}
	return true
}

type diffCtxKey struct{}

// decDiffRounds is how many generated calls the differential rule makes per
// capability combination at scale 1.
const decDiffRounds = 400

// decDifferential: the same generated call goes to the wrapped store and,
// through it, to the spy; the spy must see exactly the caller's arguments
// and context (values, Err and Deadline), and the caller must get exactly
// what the spy answered. Methods, result shapes, contexts, errors and
// repeats are visited in turn, not drawn, so every method meets every
// shape, context kind and error whatever the seed; the seed draws the
// values.
func decDifferential(ctx context.Context, env *ruleEnv[wrapFunc], wrap wrapFunc, caps Capabilities) error {
	spy, w, err := wrapSpy(wrap, caps)
	if err != nil {
		return err
	}
	g := newGen(newRand(env.cfg.seed, "differential/"+caps.String()))
	// One combination, the one with every method, gets slices past 65,536
	// elements: a cap does not depend on the inner's capabilities.
	g.huge, g.nanos = caps == capAll && !raceDetector, true
	methods := methodsOf(caps)
	rounds := decDiffRounds * env.cfg.scale
	if raceDetector {
		rounds /= 2
	}
	var late atomic.Bool // a poisoned event was read
	scanned := 0         // the spy's calls made before the last poisoning
	type keptArg struct {
		call    string
		v, mark reflect.Value // a caller's argument and a copy of it, marked
	}
	var kept []keptArg
	for round := range rounds {
		tick(ctx)
		m := methods[round%len(methods)]
		visit := round / len(methods)
		// Detached from the rule's context, which the watchdog may cancel:
		// a decorator that adds a deadline of its own shows.
		cctx, cancel := ctxFor(context.WithValue(context.WithoutCancel(ctx), diffCtxKey{}, round), []ctxMode{ctxLive, ctxCancelled, ctxExpired, ctxLive}[visit%4], 0)
		if visit%4 == 3 {
			cancel()
			cctx, cancel = context.WithDeadline(cctx, time.Now().Add(time.Duration(1+g.IntN(1000))*time.Hour))
		}
		if visit%8 == 0 {
			// The spy cancels it once it has the call, before it answers.
			cctx, cancel = context.WithCancel(cctx)
			cctx = context.WithValue(cctx, spyCancelKey{}, cancel)
		}
		args := g.args(cctx, m, visit)
		errs := spyErrors(m.Name)
		var spyErr error
		if visit%3 == 1 {
			spyErr = errs[(round/3)%len(errs)]
		}
		for rep := range 1 + boolInt(visit%5 == 3) {
			// Fresh answers each time, generated twice from one seed: one
			// copy for the spy, one to compare with, so a decorator that
			// edits what it got in place cannot hide it.
			seed, nRes := g.Uint64(), m.Type.NumOut()-boolInt(returnsError(m.Type))
			answers := func() []any {
				ag := newGen(rand.New(rand.NewPCG(seed, 1)))
				ag.huge, ag.nanos = g.huge, true
				out := make([]any, nRes)
				for i := range out {
					out[i] = ag.value(m.Type.Out(i), visit).Interface()
				}
				return out
			}
			if err := spy.SetResults(m.Name, answers()...); err != nil {
				cancel()
				return err
			}
			spy.SetError(spyErr)
			if err := compareCall(spy, w, m, args, spyErr, answers()...); err != nil {
				cancel()
				return fmt.Errorf("generated call %d (%s, call %d): %w", round+1, m.Name, rep+1, err)
			}
		}
		// The call returned: the caller's slices are its own again, and it
		// marks them (see mark), which the race detector alone would catch
		// only on the schedules it sees.
		cancel()
		if late.Load() {
			return fmt.Errorf("generated call %d (%s): the decorator read the caller's events after the call that passed them returned (it kept the slice)", round+1, m.Name)
		}
		for _, c := range spy.Calls()[scanned:] {
			if slices.ContainsFunc(c.Args, func(a any) bool { return mark(reflect.ValueOf(a), false, nil) }) {
				return fmt.Errorf("generated call %d (%s): the decorator called the inner %s with a value of a caller's slice poisoned once the call that passed it returned (it kept the slice and read it later)", round+1, m.Name, c.Method)
			}
		}
		for i, a := range args[1:] {
			mark(a, true, &late)
			kept = append(kept, keptArg{fmt.Sprintf("%d (%s, argument %d)", round+1, m.Name, i+1), a, copyValue(a)})
		}
		scanned = len(spy.Calls())
	}
	// The marks stay as the caller left them: a decorator that wrote into
	// a slice it kept, during a later call or from a goroutine, changed them.
	for _, k := range kept {
		if !same(k.v.Interface(), k.mark.Interface()) {
			return fmt.Errorf("generated call %s: the caller's value changed after the call returned (%s): the decorator kept it and wrote into it later", k.call, diff(k.v.Interface(), k.mark.Interface()))
		}
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// readMethods are the methods that change nothing in a store.
var readMethods = map[string]bool{
	"ReadHistory": true, "ReadHistoryFrom": true, "ReadRunChain": true, "ListWorkflowIDs": true, "ListActive": true,
	"ListPaused": true, "StreamHeads": true, "Query": true, "ExpiredTimers": true, "ListPackages": true,
	"ListPackageRoutes": true, "CountClaimedOutboxRows": true, "IsCurrentOwner": true, "ReadHistories": true,
}

// onBehalf keeps the inner calls made while the caller's call of method
// ran that are the decorator's forward of it: the calls of method, and
// every write. A decorator may read on its own account (one that follows
// shards reads what it resumes, on contexts of its own, perhaps in the
// background): its reads of other methods, and its reads of this method
// on another call's context, are not the caller's.
func onBehalf(calls []Call, method string, callerCtx context.Context) []Call {
	mine := callerCtx.Value(diffCtxKey{})
	var out []Call
	for _, c := range calls {
		switch {
		case !readMethods[c.Method]:
			out = append(out, c) // a write: the caller's, or one the decorator must not make
		case c.Method != method:
		case mine != nil && c.Ctx != nil && c.Ctx.Value(diffCtxKey{}) != mine:
		default:
			out = append(out, c)
		}
	}
	return out
}

// compareCall calls m on w with args and checks that the spy got exactly
// one call of m with the caller's arguments and context, and that the
// caller got the spy's results (want, when given, else what the spy
// recorded) and its very error.
func compareCall(spy *Spy, w eventstore.Store, m reflect.Method, args []reflect.Value, spyErr error, want ...any) error {
	before := len(spy.Calls())
	callerCtx := args[0].Interface().(context.Context)
	callerErr := callerCtx.Err() // before the call: the spy may cancel it during
	given := make([]any, len(args)-1)
	for i, a := range args[1:] {
		given[i] = copyValue(a).Interface()
	}
	out, err := callMethod(w, m.Name, args)
	if err != nil {
		return err
	}
	all := spy.Calls()[before:]
	calls := onBehalf(all, m.Name, callerCtx)
	if len(calls) != 1 || calls[0].Method != m.Name {
		names := make([]string, len(all))
		for i, c := range all {
			names[i] = c.Method
		}
		return fmt.Errorf("%s on the wrapped store made the inner calls %v, want exactly one %s (and no write of its own)", m.Name, names, m.Name)
	}
	call := calls[0]
	for i, a := range args[1:] {
		if !same(a.Interface(), given[i]) {
			return fmt.Errorf("%s changed the caller's argument %d in place: %s", m.Name, i+1, diff(a.Interface(), given[i]))
		}
		if !same(call.Args[i], given[i]) {
			return fmt.Errorf("%s: argument %d reached the inner store as %s, the caller passed %s", m.Name, i+1, describe(call.Args[i]), describe(given[i]))
		}
	}
	dl, ok := callerCtx.Deadline()
	switch {
	case call.Ctx == nil || call.Ctx.Value(diffCtxKey{}) != callerCtx.Value(diffCtxKey{}):
		return fmt.Errorf("%s reached the inner store with a context that does not carry the caller's values", m.Name)
	case call.CtxErr != callerErr:
		return fmt.Errorf("%s: the inner store's context had Err() = %v when the caller's had %v", m.Name, call.CtxErr, callerErr)
	case call.HasDeadline != ok || !call.Deadline.Equal(dl):
		return fmt.Errorf("%s: the inner store's context had Deadline() = %v, %v when the caller's had %v, %v", m.Name, call.Deadline, call.HasDeadline, dl, ok)
	}
	if want == nil {
		want = call.Results
	}
	nRes := m.Type.NumOut() - boolInt(returnsError(m.Type))
	for i := range nRes {
		if got := out[i].Interface(); !same(got, want[i]) {
			return fmt.Errorf("%s: result %d is %s, the inner store answered %s", m.Name, i, describe(got), describe(want[i]))
		}
	}
	if returnsError(m.Type) {
		got, _ := out[len(out)-1].Interface().(error)
		if spyErr == nil {
			spyErr, _ = call.Results[len(call.Results)-1].(error)
		}
		if err := sameError(got, spyErr); err != nil {
			return fmt.Errorf("%s: %w", m.Name, err)
		}
	}
	return nil
}

// sameError checks that a decorator returned the inner store's very error.
func sameError(got, want error) error {
	switch {
	case want == nil && got == nil:
		return nil
	case want == nil:
		return fmt.Errorf("returned error %q, the inner store returned nil", got)
	case got == nil:
		return fmt.Errorf("returned nil, swallowing the inner store's error %q", want)
	case !reflect.TypeOf(got).Comparable() || got != want:
		return fmt.Errorf("returned error %q (%T), not the inner store's error value %q (%T): a decorator must return the very value", got, got, want, want)
	}
	return nil
}

// describe renders a value so that nil and empty slices differ and a long
// one is summarised.
func describe(v any) string {
	rv := reflect.ValueOf(v)
	switch {
	case rv.Kind() == reflect.Slice && rv.IsNil():
		return fmt.Sprintf("a nil %T", v)
	case rv.Kind() == reflect.Slice && rv.Len() > 4:
		return fmt.Sprintf("a %T of %d elements", v, rv.Len())
	}
	return fmt.Sprintf("%T %+v", v, v)
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

// eventKinds are the event kinds the generators draw, one value of each.
var eventKinds = []eventstore.Event{
	eventstore.WorkflowStarted{}, eventstore.WorkflowCompleted{}, eventstore.WorkflowFailed{}, eventstore.WorkflowCancelled{},
	eventstore.WorkflowTimedOut{}, eventstore.WorkflowContinuedAsNew{}, eventstore.WorkflowReopened{}, eventstore.WorkflowPaused{},
	eventstore.WorkflowResumed{}, eventstore.SignalReceived{}, eventstore.ScheduleTriggered{}, eventstore.TimerScheduled{},
	eventstore.TimerFired{}, eventstore.ActivityScheduled{}, eventstore.ActivityCompleted{}, eventstore.ActivityFailed{},
	eventstore.ActivityCancelled{}, eventstore.ActivityTimedOut{},
}

// decSizes are the slice lengths of the decorator generators, visited in
// turn: nil, empty, a few, and past 64, 256, 4,096 and 65,536.
var decSizes = []int{-1, 0, 3, 65, 1, 257, 2, 4097, 5, 65537, -1, 0, 3, 65, 1, 257, 2, 4097, 5, 1025}

// args returns ctx and drawn arguments for a call of m.
func (g *gen) args(ctx context.Context, m reflect.Method, visit int) []reflect.Value {
	args := []reflect.Value{reflect.ValueOf(&ctx).Elem()}
	for i := 1; i < m.Type.NumIn(); i++ {
		args = append(args, g.value(m.Type.In(i), visit))
	}
	return args
}

// value returns a value of t: a struct with every field drawn, a slice of
// the visit's length (its elements tiled from eight drawn ones, so a long
// one stays cheap; a nested slice nil, empty or short in turn), an event
// of a drawn kind, or nil.
func (g *gen) value(t reflect.Type, visit int) reflect.Value {
	switch {
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		n := decSizes[visit%len(decSizes)]
		if n > 65536 && !g.huge {
			n = 1025
		}
		if n < 0 {
			return reflect.Zero(t)
		}
		s := reflect.MakeSlice(t, n, n)
		for i := range n {
			if i < 8 {
				s.Index(i).Set(g.value(t.Elem(), i%3))
			} else {
				s.Index(i).Set(s.Index(i % 8))
			}
		}
		return s
	case t == reflect.TypeFor[eventstore.Event]():
		if g.IntN(9) == 0 {
			return reflect.Zero(t) // a nil event: the spy accepts what a store refuses
		}
		e := reflect.New(reflect.TypeOf(pick(g, eventKinds...))).Elem()
		g.fill(e)
		v := reflect.New(t).Elem()
		v.Set(e)
		return v
	}
	v := reflect.New(t).Elem()
	g.fill(v)
	return v
}
