package conformance

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// Capabilities selects the optional interfaces a [Spy]'s store implements on
// top of [eventstore.Store].
type Capabilities uint8

const (
	// CapOutbox makes the spy's store an [eventstore.Outbox].
	CapOutbox Capabilities = 1 << iota
	// CapShardOwner makes the spy's store an [eventstore.ShardOwner].
	CapShardOwner
	// CapHistoriesReader makes the spy's store an
	// [eventstore.HistoriesReader]. [WithRequiredCapabilities] does not
	// require it of an event store: the suite reads through ReadHistories
	// whenever a store has it.
	CapHistoriesReader

	capAll = CapOutbox | CapShardOwner | CapHistoriesReader
)

// String returns "store" for none, else the capabilities joined with "+":
// "outbox", "shardowner", "outbox+shardowner+historiesreader".
func (c Capabilities) String() string {
	var parts []string
	for _, iface := range storeInterfaces {
		if c&iface.caps != 0 {
			parts = append(parts, strings.ToLower(strings.TrimPrefix(iface.name, "eventstore.")))
		}
	}
	if len(parts) == 0 {
		return "store"
	}
	return strings.Join(parts, "+")
}

// capabilitiesOf returns the optional interfaces v implements.
func capabilitiesOf(v any) Capabilities {
	var c Capabilities
	for _, iface := range storeInterfaces {
		if v != nil && reflect.TypeOf(v).Implements(iface.typ) {
			c |= iface.caps
		}
	}
	return c
}

// lacks is the skip of a rule that needs caps, nil when v has them.
func lacks(v any, caps Capabilities) error {
	for _, iface := range storeInterfaces {
		if caps&iface.caps&^capabilitiesOf(v) != 0 {
			return skipf(iface.caps, "%T does not implement %s", v, iface.name)
		}
	}
	return nil
}

// Call is one method call a [Spy] received.
type Call struct {
	// Method is the Go method name: "Append", "ClaimOutboxRows", ...
	Method string
	// Ctx is the context the call carried.
	Ctx context.Context
	// CtxErr and Deadline are what Ctx reported when the call arrived
	// (Ctx.Err() and Ctx.Deadline()): a decorator must hand the inner store
	// a context that is cancelled when the caller's is, with the same
	// deadline.
	CtxErr      error
	Deadline    time.Time
	HasDeadline bool
	// Args are the arguments after the context, in order, as received.
	Args []any
	// Results are what the spy returned, in order, the error last for a
	// method that returns one (a nil error is recorded as nil).
	Results []any
}

// Spy is a recording [eventstore.Store] for testing decorators: it remembers
// every call (method, context, arguments, results) and answers with fixed,
// distinctive results, so a decorator that forgets to forward a call, alters
// an argument or a result, or invents a capability is caught. [TestDecorator]
// is built on it; use it directly to test what a decorator adds (telemetry,
// for example) without a real store.
//
// Its store (see [Spy.Store]) implements [eventstore.Store] plus exactly the
// capabilities given to [NewSpy]. Unless told otherwise it returns:
//
//   - for each read, one distinctive element, never an empty slice (so a
//     decorator that returns nothing is caught): ReadHistory one
//     WorkflowStarted, ReadHistoryFrom one SignalReceived, ListWorkflowIDs,
//     ListActive and ListPaused one ID each (three different ones),
//     StreamHeads a head of 42, CountClaimedOutboxRows 7, and so on;
//   - RetireTimer [eventstore.TimerSuperseded], neither the zero value nor
//     the "retired" a lazy decorator would assume;
//   - IsCurrentOwner false, because the answer a method that was never
//     forwarded tends to invent is true;
//   - AcquireOwnedShard and PublishShardOwner an error matching
//     [eventstore.ErrNotOwner], and SettleOutboxRowCancelled one matching
//     [eventstore.ErrNotFound], because the silent success a forgotten
//     forward returns is nil;
//   - nil from every other error-returning method (Append succeeds, so a
//     decorator's success path runs).
//
// A ShardOwner Spy also has a ShardCount method (returning
// [SpyShardCount]), not recorded, for decorators that follow shards: a
// decorator need not have one, but one it has must answer the same.
//
// [Spy.SetError] makes every error-returning method return one error
// instead; [Spy.SetResults] replaces one method's other results.
//
// A Spy is safe for concurrent use. Its zero value is not ready: use
// [NewSpy]. It must not be copied after first use.
type Spy struct {
	caps  Capabilities
	store eventstore.Store

	mu        sync.Mutex
	calls     []Call
	err       error
	overrides map[string][]any
}

// NewSpy returns a Spy whose store has the given capabilities. Bits other
// than the Cap* constants are ignored.
func NewSpy(caps Capabilities) *Spy {
	s := &Spy{caps: caps & capAll}
	v := reflect.New(spyShapes[s.caps]).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Interface {
			f.Set(reflect.ValueOf(spyStore{s}))
		}
	}
	s.store = v.Addr().Interface().(eventstore.Store)
	return s
}

// Capabilities returns the capabilities the spy's store implements.
func (s *Spy) Capabilities() Capabilities { return s.caps }

// Store returns the spy's store: always the same value, which implements
// [eventstore.Store] and exactly the spy's capabilities. Its dynamic type is
// a pointer, so it can be compared with == (to check an Unwrap, say).
func (s *Spy) Store() eventstore.Store { return s.store }

// Calls returns a copy of the calls received so far, oldest first.
func (s *Spy) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Call, len(s.calls))
	copy(out, s.calls)
	return out
}

// SetError makes every error-returning method return err (the very value,
// so a caller can compare it with ==). SetError(nil) restores the defaults.
func (s *Spy) SetError(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.err = err
}

// SetResults makes the named method (its Go name, as in [Call.Method]) return
// results, which are its results other than the error, in order; nil stands
// for a nil slice. Each call gets a deep copy of its own, so that a caller
// that edits what it got (a decorator's own read, say, releasing what it
// has used) cannot change another call's answer or the record. It returns
// an error matching [eventstore.ErrInvalidArgument] for an unknown method or
// results that do not fit its signature, and changes nothing then.
func (s *Spy) SetResults(method string, results ...any) error {
	fn, ok := spyMethod(method)
	if !ok {
		return fmt.Errorf("%w: conformance: spy has no method %q", eventstore.ErrInvalidArgument, method)
	}
	n := fn.NumOut() - boolInt(returnsError(fn))
	if len(results) != n {
		return fmt.Errorf("%w: conformance: %s has %d non-error results, got %d values", eventstore.ErrInvalidArgument, method, n, len(results))
	}
	typed := make([]any, n)
	for i, r := range results {
		want := fn.Out(i)
		v := reflect.New(want).Elem()
		if r != nil {
			rv := reflect.ValueOf(r)
			if !rv.Type().AssignableTo(want) {
				return fmt.Errorf("%w: conformance: %s result %d is a %v, got a %T", eventstore.ErrInvalidArgument, method, i, want, r)
			}
			v.Set(rv)
		}
		typed[i] = v.Interface()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.overrides == nil {
		s.overrides = map[string][]any{}
	}
	s.overrides[method] = typed
	return nil
}

// call records one call and returns its results (the error last for a
// method that returns one). The recorded results are a separate copy, so a
// caller that mutates what it got cannot change the record.
func (s *Spy) call(method string, ctx context.Context, args ...any) []any {
	if ctx != nil {
		if cancel, ok := ctx.Value(spyCancelKey{}).(context.CancelFunc); ok {
			defer cancel() // once recorded, before the answer
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	results := func() []any {
		if o, ok := s.overrides[method]; ok {
			return deepCopy(o)
		}
		return spyDefaults(method)
	}
	out, rec := results(), results()
	if fn, _ := spyMethod(method); returnsError(fn) {
		err := s.err
		if err == nil {
			err = spyDefaultErrors[method]
		}
		out, rec = append(out, err), append(rec, err)
	}
	c := Call{Method: method, Ctx: ctx, Args: args, Results: rec}
	if ctx != nil {
		c.CtxErr = ctx.Err()
		c.Deadline, c.HasDeadline = ctx.Deadline()
	}
	s.calls = append(s.calls, c)
	return out
}

// spyCancelKey marks a context of the decorator suite that the Spy cancels
// once it has recorded the call: a call cancelled while it ran, which took
// effect all the same.
type spyCancelKey struct{}

// spyMethod returns the type of the named method of the store interfaces.
func spyMethod(name string) (reflect.Type, bool) {
	m, ok := reflect.TypeFor[spyStore]().MethodByName(name)
	return m.Type, ok
}

// The spy's fixed identities and time, distinct from anything a suite
// generates.
var (
	spyWorkflow  = eventstore.WorkflowID{0: 0x5b, 6: 0x40, 8: 0x80, 15: 0x01}
	spyWorkflow2 = eventstore.WorkflowID{0: 0x5b, 6: 0x40, 8: 0x80, 15: 0x02}
	spyWorkflow3 = eventstore.WorkflowID{0: 0x5b, 6: 0x40, 8: 0x80, 15: 0x03}
	spyRun       = eventstore.RunID{0: 0x5c, 6: 0x40, 8: 0x80, 15: 0x01}
	spyTime      = time.Unix(1_600_000_000, 0).UTC()
)

// spyDefaultErrors are the errors returned when SetError has not been
// called; a method not listed returns nil.
var spyDefaultErrors = map[string]error{
	"AcquireOwnedShard":        fmt.Errorf("conformance: spy default answer: %w", eventstore.ErrNotOwner),
	"PublishShardOwner":        fmt.Errorf("conformance: spy default answer: %w", eventstore.ErrNotOwner),
	"SettleOutboxRowCancelled": fmt.Errorf("conformance: spy default answer: %w", eventstore.ErrNotFound),
}

// spyDefaults returns fresh default non-error results of a method.
func spyDefaults(method string) []any {
	env := func(seq uint64) eventstore.Envelope {
		return eventstore.Envelope{WorkflowID: spyWorkflow, RunID: spyRun, Seq: seq, RecordedAt: spyTime}
	}
	pl := func(s string) eventstore.Payload {
		return eventstore.Payload{ContentType: "text/plain", Data: []byte(s)}
	}
	switch method {
	case "ReadHistory":
		return []any{[]eventstore.Event{eventstore.WorkflowStarted{Envelope: env(1), WorkflowType: "spy-workflow", Input: pl("spy-input"), PackageVersion: "spy-package"}}}
	case "ReadHistories":
		return []any{[][]eventstore.Event{spyDefaults("ReadHistory")[0].([]eventstore.Event)}}
	case "ReadHistoryFrom":
		return []any{[]eventstore.Event{eventstore.SignalReceived{Envelope: env(2), SignalName: "spy-signal", Input: pl("spy-signal-input")}}}
	case "ReadRunChain":
		return []any{[]eventstore.RunSummary{{RunID: spyRun, WorkflowType: "spy-workflow", Status: eventstore.StatusContinuedAsNew, StartedAt: spyTime, ClosedAt: spyTime.Add(time.Second), FirstSeq: 1, LastSeq: 2}}}
	case "ListWorkflowIDs":
		return []any{[]eventstore.WorkflowID{spyWorkflow}}
	case "ListActive":
		return []any{[]eventstore.WorkflowID{spyWorkflow2}}
	case "ListPaused":
		return []any{[]eventstore.WorkflowID{spyWorkflow3}}
	case "StreamHeads":
		return []any{[]eventstore.StreamHead{{WorkflowID: spyWorkflow, Head: 42}}}
	case "Query":
		return []any{[]eventstore.WorkflowSummary{{WorkflowID: spyWorkflow, RunID: spyRun, WorkflowType: "spy-workflow", Status: eventstore.StatusPaused, StartedAt: spyTime, Head: 42}}}
	case "ExpiredTimers":
		return []any{[]eventstore.TimerEntry{{WorkflowID: spyWorkflow, TimerID: "spy-timer", FireAt: spyTime, ArmedSeq: 7}}}
	case "RetireTimer":
		return []any{eventstore.TimerSuperseded}
	case "ListPackages":
		return []any{[]eventstore.PackageRecord{{WorkflowType: "spy-workflow", ContentHash: "spy-hash", Data: []byte("spy-package"), CreatedAt: spyTime}}}
	case "ListPackageRoutes":
		return []any{[]eventstore.PackageRoute{{WorkflowType: "spy-workflow", ContentHash: "spy-hash"}}}
	case "ClaimOutboxRows":
		return []any{[]eventstore.OutboxRow{{DispatchKey: eventstore.DispatchKey(spyWorkflow, spyRun, 3), WorkflowID: spyWorkflow, RunID: spyRun, Ordinal: 3, ActivityType: "spy-activity", Input: pl("spy-activity-input"), CreatedAt: spyTime, State: eventstore.OutboxClaimed}}}
	case "CountClaimedOutboxRows":
		return []any{7}
	case "SettleWorkflowOutboxRowsCancelled":
		return []any{[]string{eventstore.DispatchKey(spyWorkflow, spyRun, 3)}}
	case "IsCurrentOwner":
		return []any{false}
	}
	return nil // error-only and result-less methods
}

// lastErr returns the error at the end of r.
func lastErr(r []any) error {
	err, _ := r[len(r)-1].(error)
	return err
}

// ret returns a call's first result as a T (or T's zero value) and its
// error (nil for a method without one).
func ret[T any](r []any) (T, error) {
	v, _ := r[0].(T)
	return v, lastErr(r)
}

// spyStore has the methods of every interface a spy can offer. The store
// NewSpy returns is a struct of spyShapes, which holds it in the fields of
// the interfaces of its capabilities only: a value has the methods of its
// type, so each capability combination is a type of its own.
type spyStore struct{ s *Spy }

// spyShardCount gives a ShardOwner spy its ShardCount.
type spyShardCount struct{}

// spyShapes are the types of the spy's store, by capabilities.
var spyShapes = [capAll + 1]reflect.Type{
	reflect.TypeFor[struct{ eventstore.Store }](),
	reflect.TypeFor[struct {
		eventstore.Store
		eventstore.Outbox
	}](),
	reflect.TypeFor[struct {
		eventstore.Store
		eventstore.ShardOwner
		spyShardCount
	}](),
	reflect.TypeFor[struct {
		eventstore.Store
		eventstore.Outbox
		eventstore.ShardOwner
		spyShardCount
	}](),
	reflect.TypeFor[struct {
		eventstore.Store
		eventstore.HistoriesReader
	}](),
	reflect.TypeFor[struct {
		eventstore.Store
		eventstore.Outbox
		eventstore.HistoriesReader
	}](),
	reflect.TypeFor[struct {
		eventstore.Store
		eventstore.ShardOwner
		spyShardCount
		eventstore.HistoriesReader
	}](),
	reflect.TypeFor[struct {
		eventstore.Store
		eventstore.Outbox
		eventstore.ShardOwner
		spyShardCount
		eventstore.HistoriesReader
	}](),
}

func (b spyStore) Append(ctx context.Context, token eventstore.WriteToken, workflowID eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	return lastErr(b.s.call("Append", ctx, token, workflowID, events, expectedSeq))
}

func (b spyStore) ReadHistory(ctx context.Context, workflowID eventstore.WorkflowID) ([]eventstore.Event, error) {
	return ret[[]eventstore.Event](b.s.call("ReadHistory", ctx, workflowID))
}

func (b spyStore) ReadHistoryFrom(ctx context.Context, workflowID eventstore.WorkflowID, fromSeq uint64) ([]eventstore.Event, error) {
	return ret[[]eventstore.Event](b.s.call("ReadHistoryFrom", ctx, workflowID, fromSeq))
}

func (b spyStore) ReadRunChain(ctx context.Context, workflowID eventstore.WorkflowID) ([]eventstore.RunSummary, error) {
	return ret[[]eventstore.RunSummary](b.s.call("ReadRunChain", ctx, workflowID))
}

func (b spyStore) ListWorkflowIDs(ctx context.Context) ([]eventstore.WorkflowID, error) {
	return ret[[]eventstore.WorkflowID](b.s.call("ListWorkflowIDs", ctx))
}

func (b spyStore) ListActive(ctx context.Context) ([]eventstore.WorkflowID, error) {
	return ret[[]eventstore.WorkflowID](b.s.call("ListActive", ctx))
}

func (b spyStore) ListPaused(ctx context.Context) ([]eventstore.WorkflowID, error) {
	return ret[[]eventstore.WorkflowID](b.s.call("ListPaused", ctx))
}

func (b spyStore) StreamHeads(ctx context.Context) ([]eventstore.StreamHead, error) {
	return ret[[]eventstore.StreamHead](b.s.call("StreamHeads", ctx))
}

func (b spyStore) Query(ctx context.Context, filter eventstore.WorkflowFilter) ([]eventstore.WorkflowSummary, error) {
	return ret[[]eventstore.WorkflowSummary](b.s.call("Query", ctx, filter))
}

func (b spyStore) ScheduleTimer(ctx context.Context, workflowID eventstore.WorkflowID, timerID eventstore.TimerID, fireAt time.Time, armedSeq uint64) error {
	return lastErr(b.s.call("ScheduleTimer", ctx, workflowID, timerID, fireAt, armedSeq))
}

func (b spyStore) ExpiredTimers(ctx context.Context, asOf time.Time) ([]eventstore.TimerEntry, error) {
	return ret[[]eventstore.TimerEntry](b.s.call("ExpiredTimers", ctx, asOf))
}

func (b spyStore) RetireTimer(ctx context.Context, workflowID eventstore.WorkflowID, timerID eventstore.TimerID, fireAt time.Time, armedSeq uint64) (eventstore.TimerRetirement, error) {
	return ret[eventstore.TimerRetirement](b.s.call("RetireTimer", ctx, workflowID, timerID, fireAt, armedSeq))
}

func (b spyStore) PutPackage(ctx context.Context, record eventstore.PackageRecord) error {
	return lastErr(b.s.call("PutPackage", ctx, record))
}

func (b spyStore) PutPackageWithRoutes(ctx context.Context, record eventstore.PackageRecord, routeWorkflowTypes []string) error {
	return lastErr(b.s.call("PutPackageWithRoutes", ctx, record, routeWorkflowTypes))
}

func (b spyStore) ListPackages(ctx context.Context) ([]eventstore.PackageRecord, error) {
	return ret[[]eventstore.PackageRecord](b.s.call("ListPackages", ctx))
}

func (b spyStore) DeletePackage(ctx context.Context, workflowType, contentHash string) error {
	return lastErr(b.s.call("DeletePackage", ctx, workflowType, contentHash))
}

func (b spyStore) PutPackageRoute(ctx context.Context, workflowType, contentHash string) error {
	return lastErr(b.s.call("PutPackageRoute", ctx, workflowType, contentHash))
}

func (b spyStore) ListPackageRoutes(ctx context.Context) ([]eventstore.PackageRoute, error) {
	return ret[[]eventstore.PackageRoute](b.s.call("ListPackageRoutes", ctx))
}

func (b spyStore) AppendWithOutbox(ctx context.Context, token eventstore.WriteToken, workflowID eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64, rows []eventstore.OutboxRow) error {
	return lastErr(b.s.call("AppendWithOutbox", ctx, token, workflowID, events, expectedSeq, rows))
}

func (b spyStore) RearmOutboxPending(ctx context.Context, rows []eventstore.OutboxRow) error {
	return lastErr(b.s.call("RearmOutboxPending", ctx, rows))
}

func (b spyStore) ClaimOutboxRows(ctx context.Context, limit int) ([]eventstore.OutboxRow, error) {
	return ret[[]eventstore.OutboxRow](b.s.call("ClaimOutboxRows", ctx, limit))
}

func (b spyStore) CountClaimedOutboxRows(ctx context.Context) (int, error) {
	return ret[int](b.s.call("CountClaimedOutboxRows", ctx))
}

func (b spyStore) SettleOutboxRowCancelled(ctx context.Context, dispatchKey string) error {
	return lastErr(b.s.call("SettleOutboxRowCancelled", ctx, dispatchKey))
}

func (b spyStore) SettleWorkflowOutboxRowsCancelled(ctx context.Context, workflowID eventstore.WorkflowID) ([]string, error) {
	return ret[[]string](b.s.call("SettleWorkflowOutboxRowsCancelled", ctx, workflowID))
}

func (b spyStore) ReadHistories(ctx context.Context, workflowIDs []eventstore.WorkflowID) ([][]eventstore.Event, error) {
	return ret[[][]eventstore.Event](b.s.call("ReadHistories", ctx, workflowIDs))
}

// SpyShardCount is what ShardCount returns on a Spy that is an
// [eventstore.ShardOwner].
const SpyShardCount = 4

// ShardCount returns [SpyShardCount]: a ShardOwner Spy says how many
// shards it has, as eventstore.Memory and the PostgreSQL store do, so that
// a decorator that follows shards when the store tells it their number
// takes that path under the decorator suite. The call is not recorded: it
// is not a method of the contract.
func (spyShardCount) ShardCount() int { return SpyShardCount }

func (b spyStore) SetOwnedShards(ctx context.Context, shards []int) {
	b.s.call("SetOwnedShards", ctx, shards)
}

func (b spyStore) AcquireOwnedShards(ctx context.Context, shards []int) error {
	return lastErr(b.s.call("AcquireOwnedShards", ctx, shards))
}

func (b spyStore) AcquireOwnedShard(ctx context.Context, shard int) error {
	return lastErr(b.s.call("AcquireOwnedShard", ctx, shard))
}

func (b spyStore) ExtendOwnedShards(ctx context.Context, shards []int) {
	b.s.call("ExtendOwnedShards", ctx, shards)
}

func (b spyStore) IsCurrentOwner(ctx context.Context, shard int) bool {
	owner, _ := ret[bool](b.s.call("IsCurrentOwner", ctx, shard))
	return owner
}

func (b spyStore) PublishShardOwner(ctx context.Context, shard int) error {
	return lastErr(b.s.call("PublishShardOwner", ctx, shard))
}
