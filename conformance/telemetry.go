package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// SuiteTelemetry is the name of the telemetry suite in [RuleError.Suite].
const SuiteTelemetry = "telemetry"

// The telemetry rules, run by [TestTelemetry] and [CheckTelemetry]. Each is
// seeded: it draws the same histories from the seed, drives them through
// a fresh decorator and judges one part of what it emitted.
const (
	// RuleTelCounters (seeded): aion.workflows.started by type, .completed by status (every close, a reopened run's second too, each status in every history), .reopened, aion.signals.delivered, aion.schedules.fired, aion.activities.dispatched by type, .completed by type and outcome (abandoned for a run closed with the activity in flight; a duplicate terminal, next to the first or after other events, counts nothing), .retried by type, aion.inflight_activities by type (what history leaves in flight), and aion.activity.oldest_inflight_age by type (the time since the oldest dispatch in flight, 0 with none), against the model; no ID attribute on any metric.
	RuleTelCounters = "counters"
	// RuleTelDurations (seeded): aion.activity.duration by type and outcome, aion.workflow.duration by type and status: count, sum, min, max and bucket counts (in the decorator's own bounds) of the durations history's RecordedAt gives, in seconds.
	RuleTelDurations = "durations"
	// RuleTelCalls (seeded): one aion.store.operation.duration point and one ended client span per store call, by db.operation.name and error.type (a refused call: its error.type and span status Error; a call the inner store committed, also one whose context ended before it returned: no error.type, status not Error, its events observed, nil to the caller).
	RuleTelCalls = "calls"
	// RuleTelTimeline (seeded; only with [WithTimeline]): one ended span "workflow <type>" per closed run, from its WorkflowStarted to its first closing event, with aion.workflow.status; one ended span "activity <type>" per settled activity, from its dispatch to its settler, a child of its run's span, with aion.activity.outcome, aion.activity.retry_count and one aion.activity.retry event per retry at its RecordedAt; status Error exactly for failed and timed_out; no span of an open run or of an activity in flight ends.
	RuleTelTimeline = "timeline"
	// RuleTelConcurrent (seeded): the other rules' checks (the timeline's with [WithTimeline]) when each workflow's batches are appended from a goroutine of its own, all at once, so that appends of different workflows race through the decorator.
	RuleTelConcurrent = "concurrent"
)

// TelemetryWrap is what [TestTelemetry] and [CheckTelemetry] test: a
// function that decorates inner, recording its metrics on mp and its spans
// on tp.
type TelemetryWrap = func(inner eventstore.Store, mp metric.MeterProvider, tp trace.TracerProvider) eventstore.Store

// WithTimeline makes the telemetry suite check the timeline spans
// ([RuleTelTimeline]); without it that rule is skipped, and spans other
// than client spans are not judged. The other suites ignore it.
func WithTimeline() Option { return optionFunc(func(c *config) { c.timeline = true }) }

// TestTelemetry tests the telemetry a decorator of [eventstore.Store]
// emits, as otelstore.New does, whatever engine it is written for: each
// rule draws workflow histories from the seed (several workflows; runs
// dispatching activities, retrying them, ending them with every outcome,
// twice, or leaving them in flight; every close status, continue-as-new
// chains, signals, schedules, timers, pauses, reopened runs, runs left
// open), appends them through wrap over a fresh [eventstore.Memory] in
// random batches, with stale appends and reads between, and compares what
// an SDK ManualReader and a tracetest.SpanRecorder collected with a model
// of the histories alone (the RuleTel* rules), in the names of the
// otelstore catalog. A mismatch names the instrument, the attributes, want
// and got.
//
// Now and then the caller's context ends once the inner store has committed
// an append, before the call returns: the call committed, so the caller
// gets nil and the telemetry records a success and observes its events.
//
// A refused append is expected as a failed call (error.type
// sequence_conflict, span status Error), as the semantic conventions say:
// a decorator configured to treat conflicts as expected answers
// (otelstore.WithConflictAsError(false)) fails rule calls.
//
// wrap runs once per rule on the rule's goroutine: report trouble with
// t.Error, never t.Fatal.
//
//	conformance.TestTelemetry(t, func(inner eventstore.Store, mp metric.MeterProvider, tp trace.TracerProvider) eventstore.Store {
//		s, err := otelstore.New(inner, otelstore.WithMeterProvider(mp), otelstore.WithTracerProvider(tp))
//		if err != nil {
//			t.Error(err)
//		}
//		return s
//	}, conformance.WithTimeline())
func TestTelemetry(t *testing.T, wrap TelemetryWrap, opts ...Option) {
	t.Helper()
	if wrap == nil {
		t.Fatal("conformance: TestTelemetry: nil wrap function")
	}
	cfg := newConfig(opts)
	telemetrySuite(cfg.timeline).test(t, cfg, func(*testing.T) TelemetryWrap { return wrap })
}

// CheckTelemetry is the error-returning core of [TestTelemetry]: nil when
// every rule holds, else the errors.Join of one *[RuleError] per broken
// rule.
func CheckTelemetry(ctx context.Context, wrap TelemetryWrap, opts ...Option) error {
	cfg := newConfig(opts)
	return telemetrySuite(cfg.timeline).check(ctx, cfg, given(wrap))
}

func telemetrySuite(timeline bool) suite[TelemetryWrap] {
	s := suite[TelemetryWrap]{name: SuiteTelemetry}
	type check = func(*telGot, *telModel) error
	concurrent := []check{telCounters, telDurations, telCalls}
	if timeline {
		concurrent = append(concurrent, telTimeline)
	}
	for _, r := range []struct {
		name   string
		checks []check
	}{{RuleTelCounters, []check{telCounters}}, {RuleTelDurations, []check{telDurations}}, {RuleTelCalls, []check{telCalls}},
		{RuleTelTimeline, []check{telTimeline}}, {RuleTelConcurrent, concurrent}} {
		s.rules = append(s.rules, seeded(r.name, func(ctx context.Context, env *ruleEnv[TelemetryWrap], wrap TelemetryWrap) error {
			if r.name == RuleTelTimeline && !timeline {
				return skipf(0, "the timeline is checked only with conformance.WithTimeline()")
			}
			got, m, err := telDrive(ctx, env.cfg, wrap, r.name == RuleTelConcurrent)
			if err != nil {
				return err
			}
			var errs []error
			for _, c := range r.checks {
				errs = append(errs, c(got, m))
			}
			return errors.Join(errs...)
		}))
	}
	return s
}

// Catalog names the suite judges (the otelstore package's catalog), by the
// short names the model uses.
const (
	telStarted     = catalog.WorkflowsStarted
	telCompleted   = catalog.WorkflowsCompleted
	telSignals     = catalog.SignalsDelivered
	telSchedules   = catalog.SchedulesFired
	telReopened    = catalog.WorkflowsReopened
	telDispatched  = catalog.ActivitiesDispatched
	telActDone     = catalog.ActivitiesCompleted
	telRetried     = catalog.ActivitiesRetried
	telInflight    = catalog.InflightActivities
	telActDuration = catalog.ActivityDuration
	telWfDuration  = catalog.WorkflowDuration
	telOpDuration  = catalog.StoreOperationDuration
	telAge         = catalog.ActivityOldestInflightAge

	keyWfType    = catalog.WorkflowType
	keyWfStatus  = catalog.WorkflowStatus
	keyActType   = catalog.ActivityType
	keyOutcome   = catalog.ActivityOutcome
	keyDelivery  = catalog.SignalDelivery
	keyOp        = attribute.Key("db.operation.name")
	keyErrType   = attribute.Key("error.type")
	keyWfID      = catalog.WorkflowID
	keyRunID     = catalog.RunID
	keyActID     = catalog.ActivityID
	keyRetries   = catalog.RetryCount
	retryEvent   = catalog.RetryEvent
	outAbandoned = "abandoned"
)

// telKeys are the attributes each judged instrument is compared on.
var telKeys = map[string][]attribute.Key{
	telStarted: {keyWfType}, telCompleted: {keyWfStatus}, telSignals: {keyDelivery}, telSchedules: nil, telReopened: nil,
	telDispatched: {keyActType}, telActDone: {keyActType, keyOutcome}, telRetried: {keyActType},
	telInflight: {keyActType}, telActDuration: {keyActType, keyOutcome}, telWfDuration: {keyWfType, keyWfStatus},
	telOpDuration: {keyOp, keyErrType},
}

// telModel is what the histories say the telemetry must be.
type telModel struct {
	sums  map[string]map[attribute.Distinct]*telPoint // counters and the up-down counter
	hists map[string]map[attribute.Distinct]*telPoint // durations, in seconds
	calls map[attribute.Distinct]*telPoint            // store calls by operation and error.type
	runs  map[eventstore.RunID]*telRunSpan            // closed runs
	acts  map[telActKey]*telActSpan                   // settled activities
	open  int                                         // runs and activities left open: no span of theirs may end
}

type telPoint struct {
	set  attribute.Set
	n    int64
	vals []float64
}

type telActKey struct {
	run eventstore.RunID
	id  eventstore.ActivityID
}

type telRunSpan struct {
	typ, status string
	start, end  time.Time
	closed      bool
}

type telActSpan struct {
	typ, outcome string
	start, end   time.Time
	retries      []time.Time // when each Retryable failure was recorded
	settled      bool
}

func (m *telModel) add(hist bool, name string, n int64, v float64, kvs ...attribute.KeyValue) {
	table := m.sums
	if hist {
		table = m.hists
	}
	if table[name] == nil {
		table[name] = map[attribute.Distinct]*telPoint{}
	}
	if p := bump(table[name], attribute.NewSet(kvs...), n); hist {
		p.vals = append(p.vals, v)
	}
}

// bump adds n to the point of set in table, making it if need be.
func bump(table map[attribute.Distinct]*telPoint, set attribute.Set, n int64) *telPoint {
	p := table[set.Equivalent()]
	if p == nil {
		p = &telPoint{set: set}
		table[set.Equivalent()] = p
	}
	p.n += n
	return p
}

// telWorkflow is one generated workflow: its ID and its whole history.
type telWorkflow struct {
	id     eventstore.WorkflowID
	events []eventstore.Event
}

var (
	telWfTypes  = []string{"order", "refund", "Order", "ship-é"}
	telActTypes = []string{"charge", "email", "reserve", "Charge"}
)

// telGenerate draws the histories: a few workflows, each a chain of runs
// (continue-as-new), each run a random sequence of lifecycle events.
// RecordedAt advances by drawn steps from a fixed base, so durations are
// exact and replay with the seed.
func telGenerate(g *gen, scale int) []telWorkflow {
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var out []telWorkflow
	for w := range (8 + g.IntN(6)) * scale {
		wf := telWorkflow{id: g.workflow()}
		at := base.Add(time.Duration(g.IntN(3600)) * time.Second)
		next := func() time.Time {
			// Steps from a millisecond to an hour, so that a duration
			// recorded in the wrong unit lands elsewhere.
			at = at.Add(pick(g, time.Millisecond, 7*time.Millisecond, 130*time.Millisecond, 2*time.Second, 45*time.Second, time.Hour) * time.Duration(1+g.IntN(3)))
			return at
		}
		run := g.run()
		typ := pick(g, telWfTypes...)
		for chain := 0; ; chain++ {
			env := func() eventstore.Envelope { return eventstore.Envelope{RunID: run, RecordedAt: next()} }
			add := func(e eventstore.Event) { wf.events = append(wf.events, e) }
			add(eventstore.WorkflowStarted{Envelope: env(), WorkflowType: typ})
			type act struct {
				id      eventstore.ActivityID
				attempt uint32
				done    bool
			}
			var acts []*act
			if w == 0 && chain == 0 {
				// Every history has each outcome, a retry and a duplicate
				// terminal, next to the first and apart from it (appended
				// again after a conflict), whatever the seed; the first
				// workflow's first run also leaves one in flight for its
				// continue-as-new to abandon.
				for i := range 5 {
					id := eventstore.ActivityID(len(wf.events) + 1)
					add(eventstore.ActivityScheduled{Envelope: env(), ActivityID: id, ActivityType: pick(g, telActTypes...)})
					if i == 0 {
						add(eventstore.ActivityFailed{Envelope: env(), ActivityID: id, Attempt: 1, Error: eventstore.ActivityError{Kind: eventstore.Retryable}})
					}
					for range boolInt(i < 4) + boolInt(i == 1) {
						add(telOutcome(i, env(), id, 1+uint32(boolInt(i == 0))))
					}
					if i == 3 {
						add(telOutcome(2, env(), id-2, 1)) // the third's, cancelled
					}
				}
			}
			for range 2 + g.IntN(10) {
				inflight := slices.DeleteFunc(slices.Clone(acts), func(a *act) bool { return a.done })
				switch k := g.IntN(10); {
				case k < 3 || len(inflight) == 0 && k < 8:
					a := &act{id: eventstore.ActivityID(len(wf.events) + 1), attempt: 1}
					acts = append(acts, a)
					add(eventstore.ActivityScheduled{Envelope: env(), ActivityID: a.id, ActivityType: pick(g, telActTypes...)})
				case k < 5 && len(inflight) > 0:
					a := pick(g, inflight...)
					add(eventstore.ActivityFailed{Envelope: env(), ActivityID: a.id, Attempt: a.attempt, Error: eventstore.ActivityError{Kind: eventstore.Retryable, Message: "again"}})
					a.attempt++
				case k < 8 && len(inflight) > 0:
					a := pick(g, inflight...)
					a.done = true
					add(telTerminal(g, env(), a.id, a.attempt))
					if g.IntN(3) == 0 { // a duplicate terminal: counts nothing
						add(telTerminal(g, env(), a.id, a.attempt))
					}
				default:
					e := env()
					add(pick[eventstore.Event](g,
						eventstore.SignalReceived{Envelope: e, SignalName: "poke"},
						eventstore.ScheduleTriggered{Envelope: e},
						eventstore.TimerScheduled{Envelope: e, TimerID: "t", FireAt: at.Add(time.Minute)},
						eventstore.TimerFired{Envelope: e, TimerID: "t"},
						eventstore.WorkflowPaused{Envelope: e},
						eventstore.WorkflowResumed{Envelope: e},
					))
				}
			}
			// Close the run (the activities still in flight are abandoned),
			// continue it as new, or leave it open. Every history has a
			// continue-as-new (the first workflow's first run), a run left
			// open with an activity in flight (the second workflow's) and a
			// run closed with each other status (the next four's first runs).
			forced := w >= 2 && w < 6 && chain == 0
			switch k := g.IntN(8); {
			case w == 1 || k == 0 && w != 0 && !forced:
				if w == 1 {
					add(eventstore.ActivityScheduled{Envelope: env(), ActivityID: eventstore.ActivityID(len(wf.events) + 1), ActivityType: pick(g, telActTypes...)})
				}
			case w == 0 && chain == 0 || k <= 2 && chain < 3 && !forced:
				next := g.run()
				add(eventstore.WorkflowContinuedAsNew{Envelope: env(), NewRunID: next})
				run = next
				continue
			default:
				closing := func(status int) eventstore.Event {
					e := env()
					return []eventstore.Event{eventstore.WorkflowCompleted{Envelope: e}, eventstore.WorkflowFailed{Envelope: e},
						eventstore.WorkflowCancelled{Envelope: e}, eventstore.WorkflowTimedOut{Envelope: e}}[status]
				}
				status := g.IntN(4)
				if forced {
					status = w - 2
				}
				add(closing(status))
				if g.IntN(4) == 0 {
					// Reopened: an activity dispatched, perhaps ended, and a
					// second close, which abandons it if it did not.
					id := eventstore.ActivityID(len(wf.events) + 2)
					add(eventstore.WorkflowReopened{Envelope: env()})
					add(eventstore.ActivityScheduled{Envelope: env(), ActivityID: id, ActivityType: pick(g, telActTypes...)})
					if g.IntN(2) == 0 {
						add(telTerminal(g, env(), id, 1))
					}
					add(closing(g.IntN(4)))
				}
			}
			break
		}
		out = append(out, wf)
	}
	return out
}

func telTerminal(g *gen, env eventstore.Envelope, id eventstore.ActivityID, attempt uint32) eventstore.Event {
	return telOutcome(g.IntN(4), env, id, attempt)
}

// telOutcome is the terminal event of outcome k: completed, failed,
// cancelled, timed out.
func telOutcome(k int, env eventstore.Envelope, id eventstore.ActivityID, attempt uint32) eventstore.Event {
	return []eventstore.Event{
		eventstore.ActivityCompleted{Envelope: env, ActivityID: id, Attempt: attempt},
		eventstore.ActivityFailed{Envelope: env, ActivityID: id, Attempt: attempt, Error: eventstore.ActivityError{Kind: eventstore.Terminal, Message: "no"}},
		eventstore.ActivityCancelled{Envelope: env, ActivityID: id, Attempt: attempt},
		eventstore.ActivityTimedOut{Envelope: env, ActivityID: id, Attempt: attempt},
	}[k]
}

// telModelOf computes the model from the histories alone.
func telModelOf(wfs []telWorkflow) *telModel {
	m := &telModel{sums: map[string]map[attribute.Distinct]*telPoint{}, hists: map[string]map[attribute.Distinct]*telPoint{},
		runs: map[eventstore.RunID]*telRunSpan{}, acts: map[telActKey]*telActSpan{}}
	for _, wf := range wfs {
		for _, e := range wf.events {
			env := e.EventEnvelope()
			run := m.runs[env.RunID]
			settle := func(id eventstore.ActivityID, outcome string) {
				a := m.acts[telActKey{env.RunID, id}]
				if a == nil || a.settled {
					return // a duplicate terminal
				}
				a.settled, a.outcome, a.end = true, outcome, env.RecordedAt
				m.add(false, telActDone, 1, 0, keyActType.String(a.typ), keyOutcome.String(outcome))
				m.add(false, telInflight, -1, 0, keyActType.String(a.typ))
				m.add(true, telActDuration, 1, a.end.Sub(a.start).Seconds(), keyActType.String(a.typ), keyOutcome.String(outcome))
			}
			closeRun := func(status eventstore.WorkflowStatus) {
				m.add(false, telCompleted, 1, 0, keyWfStatus.String(string(status)))
				if run == nil {
					return
				}
				// A reopened run's span and duration end at its first
				// close; every close abandons what is in flight.
				if !run.closed {
					run.closed, run.status, run.end = true, string(status), env.RecordedAt
					m.add(true, telWfDuration, 1, run.end.Sub(run.start).Seconds(), keyWfType.String(run.typ), keyWfStatus.String(string(status)))
				}
				for k, a := range m.acts {
					if k.run == env.RunID && !a.settled {
						settle(k.id, outAbandoned)
					}
				}
			}
			if status, ok := closingStatus(e); ok {
				closeRun(status)
			}
			switch e := e.(type) {
			case eventstore.WorkflowStarted:
				m.add(false, telStarted, 1, 0, keyWfType.String(e.WorkflowType))
				m.runs[env.RunID] = &telRunSpan{typ: e.WorkflowType, start: env.RecordedAt}
			case eventstore.WorkflowReopened:
				m.add(false, telReopened, 1, 0)
			case eventstore.SignalReceived:
				m.add(false, telSignals, 1, 0, keyDelivery.String("resident"))
			case eventstore.ScheduleTriggered:
				m.add(false, telSchedules, 1, 0)
			case eventstore.ActivityScheduled:
				m.acts[telActKey{env.RunID, e.ActivityID}] = &telActSpan{typ: e.ActivityType, start: env.RecordedAt}
				m.add(false, telDispatched, 1, 0, keyActType.String(e.ActivityType))
				m.add(false, telInflight, 1, 0, keyActType.String(e.ActivityType))
			case eventstore.ActivityFailed:
				if e.Error.Kind == eventstore.Retryable {
					a := m.acts[telActKey{env.RunID, e.ActivityID}]
					a.retries = append(a.retries, env.RecordedAt)
					m.add(false, telRetried, 1, 0, keyActType.String(a.typ))
				} else {
					settle(e.ActivityID, "failed")
				}
			case eventstore.ActivityCompleted:
				settle(e.ActivityID, "succeeded")
			case eventstore.ActivityCancelled:
				settle(e.ActivityID, "cancelled")
			case eventstore.ActivityTimedOut:
				settle(e.ActivityID, "timed_out")
			}
		}
	}
	for _, r := range m.runs {
		m.open += boolInt(!r.closed)
	}
	for _, a := range m.acts {
		m.open += boolInt(!a.settled)
	}
	return m
}

// telGot is what one drive collected.
type telGot struct {
	metrics []metricdata.Metrics
	spans   []sdktrace.ReadOnlySpan
	// from and to bound the collection's time: a gauge of an age is
	// between from and to minus what it is the age of.
	from, to time.Time
}

// telDrive draws the histories, appends them through a fresh decorator in
// random batches, interleaving workflows (parallel: each workflow from a
// goroutine of its own), with stale appends and reads between, and
// collects what the decorator emitted. It returns the model,
// whose calls are those it made.
func telDrive(ctx context.Context, cfg config, wrap TelemetryWrap, parallel bool) (*telGot, *telModel, error) {
	g := newGen(newRand(cfg.seed, SuiteTelemetry))
	wfs := telGenerate(g, cfg.scale)
	m := telModelOf(wfs)
	m.calls = map[attribute.Distinct]*telPoint{}
	var mu sync.Mutex
	call := func(op string, errType string) {
		mu.Lock()
		defer mu.Unlock()
		kvs := []attribute.KeyValue{keyOp.String(op)}
		if errType != "" {
			kvs = append(kvs, keyErrType.String(errType))
		}
		bump(m.calls, attribute.NewSet(kvs...), 1)
	}

	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer func() { _ = mp.Shutdown(context.WithoutCancel(ctx)); _ = tp.Shutdown(context.WithoutCancel(ctx)) }()
	store, err := guardWrap(func() eventstore.Store { return wrap(commitCancels{eventstore.NewMemory()}, mp, tp) })
	if err != nil {
		return nil, nil, err
	}

	tok := eventstore.RecorderToken()
	// next appends the next batch of wf, whose first at events are in,
	// and returns how many it appended.
	next := func(g *rand.Rand, wf *telWorkflow, at int) (int, error) {
		n := min(1+g.IntN(4), len(wf.events)-at)
		// The store's copy is its own: hand it a fresh slice each time.
		batch := slices.Clone(wf.events[at : at+n])
		switch g.IntN(6) {
		case 0: // a stale append: refused, observed as nothing
			stale := uint64(at + 1)
			if at > 0 && g.IntN(2) == 0 {
				stale = uint64(at - 1)
			}
			err := store.Append(ctx, tok, wf.id, slices.Clone(batch), stale)
			if !errors.Is(err, eventstore.ErrSequenceConflict) {
				return 0, fmt.Errorf("an Append at stale expectedSeq %d (history length %d) through the decorator returned %v, want a sequence conflict", stale, at, err)
			}
			call("append", "sequence_conflict")
		case 1:
			if _, err := store.ReadHistory(ctx, wf.id); err != nil {
				return 0, fmt.Errorf("ReadHistory through the decorator: %w", err)
			}
			call("read_history", "")
		}
		actx, cancel := context.WithCancel(ctx)
		if g.IntN(5) == 0 {
			actx = context.WithValue(actx, commitCancelKey{}, cancel) // ended once committed
		}
		err := store.Append(actx, tok, wf.id, batch, uint64(at))
		cancel()
		if err != nil {
			return 0, fmt.Errorf("Append of events %d..%d of workflow %v at expectedSeq %d through the decorator: %w (a committed call, also when its context ended before it returned)", at+1, at+n, wf.id, at, err)
		}
		call("append", "")
		tick(ctx)
		return n, ctx.Err()
	}
	if parallel {
		// One goroutine per workflow, each drawing from a seed of its own,
		// released together.
		rngs := make([]*rand.Rand, len(wfs))
		for i := range wfs {
			rngs[i] = rand.New(rand.NewPCG(g.Uint64(), uint64(i)))
		}
		if err := errors.Join(race(len(wfs), func(i int) error {
			for at := 0; at < len(wfs[i].events); {
				n, err := next(rngs[i], &wfs[i], at)
				if err != nil {
					return err
				}
				at += n
			}
			return nil
		})...); err != nil {
			return nil, nil, err
		}
	}
	done := make([]int, len(wfs))
	var left []int
	for i := range wfs {
		if !parallel {
			left = append(left, i)
		}
	}
	for len(left) > 0 {
		li := g.IntN(len(left))
		n, err := next(g.Rand, &wfs[left[li]], done[left[li]])
		if err != nil {
			return nil, nil, err
		}
		if done[left[li]] += n; done[left[li]] == len(wfs[left[li]].events) {
			left = slices.Delete(left, li, li+1)
		}
	}
	var rm metricdata.ResourceMetrics
	from := time.Now()
	if err := reader.Collect(ctx, &rm); err != nil {
		return nil, nil, fmt.Errorf("collecting the metrics: %w", err)
	}
	got := &telGot{spans: rec.Ended(), from: from, to: time.Now()}
	for _, sm := range rm.ScopeMetrics {
		got.metrics = append(got.metrics, sm.Metrics...)
	}
	return got, m, nil
}

// commitCancels is the inner store of the telemetry rules: a Memory whose
// Append, once committed, cancels the caller's context when that carries
// its cancel function (under commitCancelKey).
type commitCancels struct{ *eventstore.Memory }

type commitCancelKey struct{}

func (s commitCancels) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	err := s.Memory.Append(ctx, tok, wf, events, expectedSeq)
	if cancel, ok := ctx.Value(commitCancelKey{}).(context.CancelFunc); ok {
		cancel()
	}
	return err
}

// project sums the points of the named instrument over every attribute
// but keys (so aion.namespace and attributes a program adds do not
// matter). It reports the attribute sets of its points that carry an ID.
func project(got []metricdata.Metrics, name string, keys []attribute.Key) (sums map[attribute.Distinct]*telPoint, hist map[attribute.Distinct]*metricdata.HistogramDataPoint[float64], found *metricdata.Metrics) {
	sums = map[attribute.Distinct]*telPoint{}
	hist = map[attribute.Distinct]*metricdata.HistogramDataPoint[float64]{}
	keep := func(s attribute.Set) attribute.Set {
		f, _ := s.Filter(func(kv attribute.KeyValue) bool { return slices.Contains(keys, kv.Key) })
		return f
	}
	for i := range got {
		if got[i].Name != name {
			continue
		}
		found = &got[i]
		switch d := got[i].Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				bump(sums, keep(p.Attributes), p.Value)
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				s := keep(p.Attributes)
				h := hist[s.Equivalent()]
				if h == nil {
					h = &metricdata.HistogramDataPoint[float64]{Attributes: s, Bounds: p.Bounds, BucketCounts: make([]uint64, len(p.BucketCounts))}
					hist[s.Equivalent()] = h
				}
				h.Count += p.Count
				h.Sum += p.Sum
				if len(p.BucketCounts) == len(h.BucketCounts) {
					for b := range p.BucketCounts {
						h.BucketCounts[b] += p.BucketCounts[b]
					}
				}
				h.Min = telExtremum(h.Min, p.Min, math.Min)
				h.Max = telExtremum(h.Max, p.Max, math.Max)
			}
		}
	}
	return sums, hist, found
}

func telExtremum(a, b metricdata.Extrema[float64], f func(x, y float64) float64) metricdata.Extrema[float64] {
	av, aok := a.Value()
	bv, bok := b.Value()
	switch {
	case !aok:
		return b
	case !bok:
		return a
	}
	return metricdata.NewExtrema(f(av, bv))
}

func showSet(s attribute.Set) string {
	if s.Len() == 0 {
		return "{}"
	}
	var parts []string
	for _, kv := range s.ToSlice() {
		parts = append(parts, fmt.Sprintf("%s=%q", kv.Key, kv.Value.String()))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// compareSums compares a counter's points with want (a missing point is
// 0).
func compareSums(name string, got, want map[attribute.Distinct]*telPoint) []error {
	var errs []error
	seen := map[attribute.Distinct]bool{}
	for k, w := range want {
		seen[k] = true
		var g int64
		if p := got[k]; p != nil {
			g = p.n
		}
		if g != w.n {
			errs = append(errs, fmt.Errorf("%s %s: want %d, got %d", name, showSet(w.set), w.n, g))
		}
	}
	for k, p := range got {
		if !seen[k] && p.n != 0 {
			errs = append(errs, fmt.Errorf("%s %s: want 0 (history has nothing of it), got %d", name, showSet(p.set), p.n))
		}
	}
	sortErrs(errs)
	return errs
}

func sortErrs(errs []error) {
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
}

// tb collects what metricdatatest reports, for an error-returning core.
type tb struct{ msgs []string }

func (*tb) Helper()             {}
func (t *tb) Error(args ...any) { t.msgs = append(t.msgs, fmt.Sprint(args...)) }

func telCounters(got *telGot, m *telModel) error {
	var errs []error
	for _, name := range []string{telStarted, telCompleted, telReopened, telSignals, telSchedules, telDispatched, telActDone, telRetried, telInflight} {
		sums, _, found := project(got.metrics, name, telKeys[name])
		want := m.sums[name]
		if found == nil {
			if len(want) > 0 {
				errs = append(errs, fmt.Errorf("%s: no such instrument collected, want %d points", name, len(want)))
			}
			continue
		}
		sum, ok := found.Data.(metricdata.Sum[int64])
		if !ok {
			errs = append(errs, fmt.Errorf("%s: collected as %T, want an int64 sum", name, found.Data))
			continue
		}
		// The kind of instrument: cumulative, monotonic for the counters,
		// not for the in-flight gauge.
		shape := metricdata.Sum[int64]{Temporality: metricdata.CumulativeTemporality, IsMonotonic: name != telInflight, DataPoints: sum.DataPoints}
		rec := &tb{}
		if !metricdatatest.AssertAggregationsEqual(rec, shape, sum, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()) {
			errs = append(errs, fmt.Errorf("%s: the instrument's kind: %s", name, strings.Join(rec.msgs, "; ")))
		}
		errs = append(errs, compareSums(name, sums, want)...)
	}
	errs = append(errs, telAges(got, m)...)
	errs = append(errs, noIDs(got.metrics)...)
	return errors.Join(errs...)
}

// telAges: aion.activity.oldest_inflight_age is, per type, the time since
// the oldest dispatch still in flight (history's RecordedAt), 0 for a type
// with none in flight.
func telAges(got *telGot, m *telModel) []error {
	oldest := map[string]time.Time{}
	for _, a := range m.acts {
		if o, ok := oldest[a.typ]; !a.settled && (!ok || a.start.Before(o)) {
			oldest[a.typ] = a.start
		}
	}
	var errs []error
	seen := map[string]bool{}
	for _, mt := range got.metrics {
		if mt.Name != telAge {
			continue
		}
		g, ok := mt.Data.(metricdata.Gauge[float64])
		if !ok {
			return []error{fmt.Errorf("%s: collected as %T, want a float64 gauge", telAge, mt.Data)}
		}
		for _, p := range g.DataPoints {
			typ, _ := p.Attributes.Value(keyActType)
			seen[typ.String()] = true
			o, inflight := oldest[typ.String()]
			switch {
			case !inflight && p.Value != 0:
				errs = append(errs, fmt.Errorf("%s {%s=%q}: want 0 (none in flight), got %g", telAge, keyActType, typ.String(), p.Value))
			case inflight && (p.Value < got.from.Sub(o).Seconds()-1e-3 || p.Value > got.to.Sub(o).Seconds()+1e-3):
				errs = append(errs, fmt.Errorf("%s {%s=%q}: want %g to %g (since the oldest dispatch in flight, at %v), got %g", telAge, keyActType, typ.String(), got.from.Sub(o).Seconds(), got.to.Sub(o).Seconds(), o, p.Value))
			}
		}
	}
	for typ := range oldest {
		if !seen[typ] {
			errs = append(errs, fmt.Errorf("%s {%s=%q}: no point, want the age of the oldest dispatch in flight", telAge, keyActType, typ))
		}
	}
	sortErrs(errs)
	return errs
}

// noIDs: IDs go on spans only, never on metrics.
func noIDs(ms []metricdata.Metrics) []error {
	for _, mt := range ms {
		// Every kind of data has DataPoints, every point its Attributes.
		points := reflect.Indirect(reflect.ValueOf(mt.Data))
		if points.Kind() == reflect.Struct {
			points = points.FieldByName("DataPoints")
		}
		for i := 0; points.Kind() == reflect.Slice && i < points.Len(); i++ {
			s, _ := points.Index(i).FieldByName("Attributes").Interface().(attribute.Set)
			for _, k := range []attribute.Key{keyWfID, keyRunID, keyActID} {
				if s.HasValue(k) {
					return []error{fmt.Errorf("%s %s: carries the ID attribute %s (IDs go on spans only)", mt.Name, showSet(s), k)}
				}
			}
		}
	}
	return nil
}

// telClose reports whether two durations in seconds agree (the decorator
// may compute a duration in another order of float operations).
func telClose(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func telDurations(got *telGot, m *telModel) error {
	var errs []error
	for _, name := range []string{telActDuration, telWfDuration} {
		_, hist, found := project(got.metrics, name, telKeys[name])
		want := m.hists[name]
		if found == nil {
			if len(want) > 0 {
				errs = append(errs, fmt.Errorf("%s: no such instrument collected, want %d points", name, len(want)))
			}
			continue
		}
		if _, ok := found.Data.(metricdata.Histogram[float64]); !ok {
			errs = append(errs, fmt.Errorf("%s: collected as %T, want a float64 histogram", name, found.Data))
			continue
		}
		if found.Unit != "s" {
			errs = append(errs, fmt.Errorf("%s: unit %q, want \"s\"", name, found.Unit))
		}
		for k, w := range want {
			g := hist[k]
			if g == nil {
				errs = append(errs, fmt.Errorf("%s %s: want %d durations (sum %gs), got none", name, showSet(w.set), w.n, telSum(w.vals)))
				continue
			}
			errs = append(errs, telHistDiff(name, w, g)...)
		}
		for k, g := range hist {
			if want[k] == nil && g.Count != 0 {
				errs = append(errs, fmt.Errorf("%s %s: want no durations (history has none), got %d (sum %gs)", name, showSet(g.Attributes), g.Count, g.Sum))
			}
		}
	}
	sortErrs(errs)
	return errors.Join(errs...)
}

func telSum(vals []float64) float64 {
	var s float64
	for _, v := range vals {
		s += v
	}
	return s
}

// telHistDiff compares one histogram point with the durations the model
// has for it: count, sum, min, max and, in the point's own bounds, the
// bucket counts.
func telHistDiff(name string, w *telPoint, g *metricdata.HistogramDataPoint[float64]) []error {
	where := name + " " + showSet(w.set)
	if uint64(len(w.vals)) != g.Count {
		return []error{fmt.Errorf("%s: want %d durations (sum %gs), got %d (sum %gs)", where, len(w.vals), telSum(w.vals), g.Count, g.Sum)}
	}
	var errs []error
	if s := telSum(w.vals); !telClose(s, g.Sum) {
		errs = append(errs, fmt.Errorf("%s: want a sum of %gs, got %g", where, s, g.Sum))
	}
	lo, hi := slices.Min(w.vals), slices.Max(w.vals)
	if v, ok := g.Min.Value(); ok && !telClose(v, lo) {
		errs = append(errs, fmt.Errorf("%s: want min %gs, got %g", where, lo, v))
	}
	if v, ok := g.Max.Value(); ok && !telClose(v, hi) {
		errs = append(errs, fmt.Errorf("%s: want max %gs, got %g", where, hi, v))
	}
	if len(g.BucketCounts) == len(g.Bounds)+1 {
		want := make([]uint64, len(g.BucketCounts))
		for _, v := range w.vals {
			want[sort.SearchFloat64s(g.Bounds, v)]++ // bucket i holds (bounds[i-1], bounds[i]]
		}
		if !slices.Equal(want, g.BucketCounts) && !telOnBound(w.vals, g.Bounds) {
			errs = append(errs, fmt.Errorf("%s: bucket counts over bounds %v: want %v, got %v", where, g.Bounds, want, g.BucketCounts))
		}
	}
	return errs
}

// telOnBound reports whether a value sits within rounding of a bound,
// where the bucket it falls in depends on float rounding.
func telOnBound(vals, bounds []float64) bool {
	for _, v := range vals {
		for _, b := range bounds {
			if telClose(v, b) {
				return true
			}
		}
	}
	return false
}

// telCalls: one aion.store.operation.duration point and one client span
// per store call, by operation and error.type.
func telCalls(got *telGot, m *telModel) error {
	var errs []error
	_, hist, found := project(got.metrics, telOpDuration, telKeys[telOpDuration])
	if found == nil {
		errs = append(errs, fmt.Errorf("%s: no such instrument collected", telOpDuration))
	} else {
		counts := map[attribute.Distinct]*telPoint{}
		for k, h := range hist {
			counts[k] = &telPoint{set: h.Attributes, n: int64(h.Count)}
		}
		errs = append(errs, compareSums(telOpDuration+" (points)", counts, m.calls)...)
		if found.Unit != "s" {
			errs = append(errs, fmt.Errorf("%s: unit %q, want \"s\"", telOpDuration, found.Unit))
		}
	}
	spans := map[attribute.Distinct]*telPoint{}
	for _, s := range got.spans {
		if s.SpanKind() != trace.SpanKindClient {
			continue
		}
		var kvs []attribute.KeyValue
		for _, kv := range s.Attributes() {
			if kv.Key == keyOp || kv.Key == keyErrType {
				kvs = append(kvs, kv)
			}
		}
		set := bump(spans, attribute.NewSet(kvs...), 1).set
		if failed := set.HasValue(keyErrType); failed != (s.Status().Code == codes.Error) {
			errs = append(errs, fmt.Errorf("client span %q %s: status %v, want %s", s.Name(), showSet(set), s.Status().Code, map[bool]string{true: "Error", false: "not Error"}[failed]))
		}
	}
	errs = append(errs, compareSums("client spans", spans, m.calls)...)
	return errors.Join(errs...)
}

// telTimeline: one ended run span per closed run and one activity span per
// settled activity, at history's times; none of what is still open.
func telTimeline(got *telGot, m *telModel) error {
	var errs []error
	runs := map[string]*telRunSpan{}
	acts := map[string]*telActSpan{}
	for id, r := range m.runs {
		if r.closed {
			runs[id.String()] = r
		}
	}
	for k, a := range m.acts {
		if a.settled {
			acts[fmt.Sprint(k.run.String(), "/", uint64(k.id))] = a
		}
	}
	seenRuns, seenActs := map[string]bool{}, map[string]bool{}
	runSpans := map[string]trace.SpanContext{}
	type child struct {
		id, run string
		parent  trace.SpanContext
	}
	var children []child
	for _, s := range got.spans {
		if s.SpanKind() == trace.SpanKindClient {
			continue
		}
		at := attribute.NewSet(s.Attributes()...)
		run, _ := at.Value(keyRunID)
		switch {
		case strings.HasPrefix(s.Name(), "workflow "):
			id := run.String()
			r := runs[id]
			if r == nil {
				errs = append(errs, fmt.Errorf("run span %q of run %s ended, want none: the run is open or unknown", s.Name(), id))
				continue
			}
			if seenRuns[id] {
				errs = append(errs, fmt.Errorf("run span %q of run %s ended twice", s.Name(), id))
			}
			seenRuns[id] = true
			runSpans[id] = s.SpanContext()
			st, _ := at.Value(keyWfStatus)
			errs = append(errs, telSpanDiff("run span of run "+id, s, "workflow "+r.typ, r.start, r.end, keyWfStatus, r.status, st.String())...)
		case strings.HasPrefix(s.Name(), "activity "):
			aid, _ := at.Value(keyActID)
			id := run.String() + "/" + aid.String()
			a := acts[id]
			if a == nil {
				errs = append(errs, fmt.Errorf("activity span %q of activity %s ended, want none: the activity is in flight or unknown", s.Name(), id))
				continue
			}
			if seenActs[id] {
				errs = append(errs, fmt.Errorf("activity span %q of activity %s ended twice", s.Name(), id))
			}
			seenActs[id] = true
			children = append(children, child{id, run.String(), s.Parent()})
			out, _ := at.Value(keyOutcome)
			errs = append(errs, telSpanDiff("activity span of activity "+id, s, "activity "+a.typ, a.start, a.end, keyOutcome, a.outcome, out.String())...)
			if rc, _ := at.Value(keyRetries); rc.AsInt64() != int64(len(a.retries)) {
				errs = append(errs, fmt.Errorf("activity span of activity %s: %s = %d, want %d", id, keyRetries, rc.AsInt64(), len(a.retries)))
			}
			var retries []time.Time
			for _, ev := range s.Events() {
				if ev.Name == retryEvent {
					retries = append(retries, ev.Time)
				}
			}
			if !slices.EqualFunc(retries, a.retries, time.Time.Equal) {
				errs = append(errs, fmt.Errorf("activity span of activity %s: %s events at %v, want one per retry, at %v", id, retryEvent, retries, a.retries))
			}
		}
	}
	// An activity span is a child of its run's span (checked where the
	// run closed, so its span is known).
	for _, c := range children {
		if rs, ok := runSpans[c.run]; ok && (c.parent.TraceID() != rs.TraceID() || c.parent.SpanID() != rs.SpanID()) {
			errs = append(errs, fmt.Errorf("activity span of activity %s: parent %s/%s, want its run span %s/%s", c.id, c.parent.TraceID(), c.parent.SpanID(), rs.TraceID(), rs.SpanID()))
		}
	}
	for id, r := range runs {
		if !seenRuns[id] {
			errs = append(errs, fmt.Errorf("run %s (%s, closed %s): no run span ended", id, r.typ, r.status))
		}
	}
	for id, a := range acts {
		if !seenActs[id] {
			errs = append(errs, fmt.Errorf("activity %s (%s, %s): no activity span ended", id, a.typ, a.outcome))
		}
	}
	sortErrs(errs)
	return errors.Join(errs...)
}

func telSpanDiff(what string, s sdktrace.ReadOnlySpan, name string, start, end time.Time, key attribute.Key, want, got string) []error {
	var errs []error
	if s.Name() != name {
		errs = append(errs, fmt.Errorf("%s: named %q, want %q", what, s.Name(), name))
	}
	if !s.StartTime().Equal(start) || !s.EndTime().Equal(end) {
		errs = append(errs, fmt.Errorf("%s: from %v to %v, want %v to %v (history's RecordedAt)", what, s.StartTime().UTC(), s.EndTime().UTC(), start, end))
	}
	if got != want {
		errs = append(errs, fmt.Errorf("%s: %s = %q, want %q", what, key, got, want))
	}
	// A run failed or timed out, an activity failed or timed out, is an
	// error; nothing else is.
	if failed := want == "failed" || want == "timed_out"; failed != (s.Status().Code == codes.Error) {
		errs = append(errs, fmt.Errorf("%s: status %v with %s %q, want %s", what, s.Status().Code, key, want, map[bool]string{true: "Error", false: "not Error"}[failed]))
	}
	return errs
}

// closingStatus is the status a run-closing event closes its run with.
func closingStatus(e eventstore.Event) (eventstore.WorkflowStatus, bool) {
	s, ok := closingStatuses[reflect.TypeOf(e)]
	return s, ok
}

var closingStatuses = map[reflect.Type]eventstore.WorkflowStatus{
	reflect.TypeFor[eventstore.WorkflowCompleted](): eventstore.StatusCompleted, reflect.TypeFor[eventstore.WorkflowFailed](): eventstore.StatusFailed,
	reflect.TypeFor[eventstore.WorkflowCancelled](): eventstore.StatusCancelled, reflect.TypeFor[eventstore.WorkflowTimedOut](): eventstore.StatusTimedOut,
	reflect.TypeFor[eventstore.WorkflowContinuedAsNew](): eventstore.StatusContinuedAsNew,
}
