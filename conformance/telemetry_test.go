package conformance

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/eventstore"
)

// telFaults makes the reference telemetry decorator wrong one way at a
// time.
type telFaults struct {
	doubleCompletion bool   // aion.activities.completed counted twice per terminal
	noDecrementOn    string // the gauge is not lowered when an activity ends with this outcome
	noRetries        bool   // a Retryable failure counts nothing
	millis           bool   // activity durations recorded in milliseconds
	observeRefused   bool   // the events of a refused append are observed too
	noAbandon        bool   // a run's close leaves its activities in flight
	timelineNow      bool   // timeline spans at the time of observation, not history's
	orphanActivities bool   // activity spans are roots, not children of their run's span
	untracedReads    bool   // ReadHistory makes no span and no duration point
	idOnMetrics      bool   // aion.activities.dispatched carries aion.workflow.id
	ageZero          bool   // the oldest in-flight age is always 0
	lateCancel       bool   // a call whose context ended while it ran is recorded as failed, though it committed

	countAs         [2]eventstore.WorkflowStatus // a run closed with status [0] counts on aion.workflows.completed as [1]
	uncountedStatus eventstore.WorkflowStatus    // a run closed with it counts nothing on aion.workflows.completed
	untimedStatus   eventstore.WorkflowStatus    // a run closed with it records no aion.workflow.duration
	recountApart    bool                         // a duplicate terminal counts again unless it follows the first directly
}

// refTel is a small, correct telemetry decorator written from the catalog
// (for the calls the suite makes), made faulty by f.
type refTel struct {
	eventstore.Store
	f      telFaults
	tracer trace.Tracer

	opDur, actDur, wfDur                                                           metric.Float64Histogram
	started, completed, reopened, signals, schedules, dispatched, actDone, retried metric.Int64Counter
	inflight                                                                       metric.Int64UpDownCounter

	mu   sync.Mutex
	runs map[eventstore.RunID]*refRun
	acts map[telActKey]*refAct
	last map[eventstore.WorkflowID]*refAct // settled by the workflow's last event
}

type refRun struct {
	typ    string
	start  time.Time
	span   trace.Span
	closed bool
}

type refAct struct {
	typ     string
	start   time.Time
	retries int
	span    trace.Span
	done    bool
}

func newRefTel(f telFaults) TelemetryWrap {
	return func(inner eventstore.Store, mp metric.MeterProvider, tp trace.TracerProvider) eventstore.Store {
		m := mp.Meter("ref")
		d := &refTel{Store: inner, f: f, tracer: tp.Tracer("ref"), runs: map[eventstore.RunID]*refRun{}, acts: map[telActKey]*refAct{}, last: map[eventstore.WorkflowID]*refAct{}}
		d.opDur, _ = m.Float64Histogram(telOpDuration, metric.WithUnit("s"))
		d.actDur, _ = m.Float64Histogram(telActDuration, metric.WithUnit("s"))
		d.wfDur, _ = m.Float64Histogram(telWfDuration, metric.WithUnit("s"))
		d.started, _ = m.Int64Counter(telStarted)
		d.completed, _ = m.Int64Counter(telCompleted)
		d.signals, _ = m.Int64Counter(telSignals)
		d.reopened, _ = m.Int64Counter(telReopened)
		d.schedules, _ = m.Int64Counter(telSchedules)
		d.dispatched, _ = m.Int64Counter(telDispatched)
		d.actDone, _ = m.Int64Counter(telActDone)
		d.retried, _ = m.Int64Counter(telRetried)
		d.inflight, _ = m.Int64UpDownCounter(telInflight)
		_, _ = m.Float64ObservableGauge(telAge, metric.WithUnit("s"), metric.WithFloat64Callback(d.ages))
		return d
	}
}

// ages reports, per type ever dispatched, the age of the oldest activity in
// flight, 0 for none.
func (d *refTel) ages(_ context.Context, o metric.Float64Observer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	oldest := map[string]time.Time{}
	for _, a := range d.acts {
		if _, ok := oldest[a.typ]; !ok {
			oldest[a.typ] = time.Time{}
		}
		if at := oldest[a.typ]; !a.done && (at.IsZero() || a.start.Before(at)) {
			oldest[a.typ] = a.start
		}
	}
	for typ, at := range oldest {
		age := 0.0
		if !at.IsZero() && !d.f.ageZero {
			age = time.Since(at).Seconds()
		}
		o.Observe(age, metric.WithAttributes(keyActType.String(typ)))
	}
	return nil
}

func (d *refTel) call(ctx context.Context, op string, do func(context.Context) error) error {
	ctx, span := d.tracer.Start(ctx, op, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(keyOp.String(op)))
	start := time.Now()
	err := do(ctx)
	attrs := []attribute.KeyValue{keyOp.String(op), attribute.String("aion.namespace", "default")}
	if err != nil || (d.f.lateCancel && ctx.Err() != nil) {
		et := "_OTHER"
		if errors.Is(err, eventstore.ErrSequenceConflict) {
			et = "sequence_conflict"
		}
		attrs = append(attrs, keyErrType.String(et))
		span.SetAttributes(keyErrType.String(et))
		span.SetStatus(codes.Error, et)
	}
	d.opDur.Record(ctx, time.Since(start).Seconds(), metric.WithAttributes(attrs...))
	span.End()
	return err
}

func (d *refTel) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	err := d.call(ctx, "append", func(ctx context.Context) error { return d.Store.Append(ctx, tok, wf, events, expectedSeq) })
	if err == nil || d.f.observeRefused {
		d.observe(ctx, wf, events)
	}
	return err
}

func (d *refTel) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) ([]eventstore.Event, error) {
	if d.f.untracedReads {
		return d.Store.ReadHistory(ctx, wf)
	}
	var out []eventstore.Event
	err := d.call(ctx, "read_history", func(ctx context.Context) (err error) {
		out, err = d.Store.ReadHistory(ctx, wf)
		return err
	})
	return out, err
}

func (d *refTel) at(t time.Time) time.Time {
	if d.f.timelineNow {
		return time.Now()
	}
	return t
}

func (d *refTel) settle(ctx context.Context, a *refAct, outcome string, at time.Time) {
	if a == nil || a.done {
		return
	}
	a.done = true
	typ := attribute.String(string(keyActType), a.typ)
	both := metric.WithAttributes(typ, keyOutcome.String(outcome))
	d.actDone.Add(ctx, 1, both)
	if d.f.doubleCompletion {
		d.actDone.Add(ctx, 1, both)
	}
	if d.f.noDecrementOn != outcome {
		d.inflight.Add(ctx, -1, metric.WithAttributes(typ))
	}
	dur := at.Sub(a.start).Seconds()
	if d.f.millis {
		dur *= 1000
	}
	d.actDur.Record(ctx, dur, both)
	a.span.SetAttributes(keyOutcome.String(outcome), keyRetries.Int(a.retries))
	if outcome == "failed" || outcome == "timed_out" {
		a.span.SetStatus(codes.Error, outcome)
	}
	a.span.End(trace.WithTimestamp(d.at(at)))
}

func (d *refTel) observe(ctx context.Context, wf eventstore.WorkflowID, events []eventstore.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range events {
		env := e.EventEnvelope()
		run := d.runs[env.RunID]
		closeRun := func(status eventstore.WorkflowStatus) {
			counted := status
			if status == d.f.countAs[0] {
				counted = d.f.countAs[1]
			}
			if status != d.f.uncountedStatus {
				d.completed.Add(ctx, 1, metric.WithAttributes(keyWfStatus.String(string(counted))))
			}
			if run == nil {
				return
			}
			if !run.closed {
				run.closed = true
				if status != d.f.untimedStatus {
					d.wfDur.Record(ctx, env.RecordedAt.Sub(run.start).Seconds(), metric.WithAttributes(keyWfType.String(run.typ), keyWfStatus.String(string(status))))
				}
				run.span.SetAttributes(keyWfStatus.String(string(status)))
				if status == eventstore.StatusFailed || status == eventstore.StatusTimedOut {
					run.span.SetStatus(codes.Error, string(status))
				}
				run.span.End(trace.WithTimestamp(d.at(env.RecordedAt)))
			}
			if d.f.noAbandon {
				return
			}
			for k, a := range d.acts {
				if k.run == env.RunID {
					d.settle(ctx, a, outAbandoned, env.RecordedAt)
				}
			}
		}
		act := func(id eventstore.ActivityID) *refAct { return d.acts[telActKey{env.RunID, id}] }
		last := d.last[wf]
		d.last[wf] = nil
		terminal := func(id eventstore.ActivityID, outcome string) {
			a := act(id)
			if a != nil && a.done && d.f.recountApart && a != last {
				d.actDone.Add(ctx, 1, metric.WithAttributes(keyActType.String(a.typ), keyOutcome.String(outcome)))
			}
			d.settle(ctx, a, outcome, env.RecordedAt)
			d.last[wf] = a
		}
		if status, ok := closingStatus(e); ok {
			closeRun(status)
		}
		switch e := e.(type) {
		case eventstore.WorkflowStarted:
			d.started.Add(ctx, 1, metric.WithAttributes(keyWfType.String(e.WorkflowType)))
			_, span := d.tracer.Start(context.Background(), "workflow "+e.WorkflowType, trace.WithTimestamp(d.at(env.RecordedAt)),
				trace.WithAttributes(keyWfID.String(wf.String()), keyRunID.String(env.RunID.String())))
			d.runs[env.RunID] = &refRun{typ: e.WorkflowType, start: env.RecordedAt, span: span}
		case eventstore.WorkflowReopened:
			d.reopened.Add(ctx, 1)
		case eventstore.SignalReceived:
			d.signals.Add(ctx, 1, metric.WithAttributes(keyDelivery.String("resident")))
		case eventstore.ScheduleTriggered:
			d.schedules.Add(ctx, 1)
		case eventstore.ActivityScheduled:
			attrs := []attribute.KeyValue{keyActType.String(e.ActivityType)}
			if d.f.idOnMetrics {
				attrs = append(attrs, keyWfID.String(wf.String()))
			}
			d.dispatched.Add(ctx, 1, metric.WithAttributes(attrs...))
			d.inflight.Add(ctx, 1, metric.WithAttributes(keyActType.String(e.ActivityType)))
			parent := context.Background()
			if run != nil && !d.f.orphanActivities {
				parent = trace.ContextWithSpan(parent, run.span)
			}
			_, span := d.tracer.Start(parent, "activity "+e.ActivityType, trace.WithTimestamp(d.at(env.RecordedAt)),
				trace.WithAttributes(keyWfID.String(wf.String()), keyRunID.String(env.RunID.String()), keyActID.Int64(int64(e.ActivityID))))
			d.acts[telActKey{env.RunID, e.ActivityID}] = &refAct{typ: e.ActivityType, start: env.RecordedAt, span: span}
		case eventstore.ActivityFailed:
			if e.Error.Kind != eventstore.Retryable {
				terminal(e.ActivityID, "failed")
				continue
			}
			if a := act(e.ActivityID); a != nil && !a.done {
				a.retries++
				a.span.AddEvent(retryEvent, trace.WithTimestamp(env.RecordedAt))
				if !d.f.noRetries {
					d.retried.Add(ctx, 1, metric.WithAttributes(keyActType.String(a.typ)))
				}
			}
		case eventstore.ActivityCompleted:
			terminal(e.ActivityID, "succeeded")
		case eventstore.ActivityCancelled:
			terminal(e.ActivityID, "cancelled")
		case eventstore.ActivityTimedOut:
			terminal(e.ActivityID, "timed_out")
		}
	}
}

// TestTelemetryReference: the reference decorator passes every rule, over
// several seeds, so the model and the reference agree on what is right.
func TestTelemetryReference(t *testing.T) {
	for seed := int64(1); seed <= 5; seed++ {
		if err := CheckTelemetry(t.Context(), newRefTel(telFaults{}), WithSeed(seed), WithTimeline()); err != nil {
			t.Errorf("seed %d: %v", seed, err)
		}
	}
	TestTelemetry(t, newRefTel(telFaults{}), WithTimeline())
}

// TestTelemetryCaught: each broken decorator fails the rule its bug
// belongs to, with a message naming the instrument, for every seed tried.
func TestTelemetryCaught(t *testing.T) {
	cases := []struct {
		name string
		f    telFaults
		rule string
		want string // in the rule's message
	}{
		{"completion counted twice", telFaults{doubleCompletion: true}, RuleTelCounters, telActDone},
		{"gauge not lowered on cancelled", telFaults{noDecrementOn: "cancelled"}, RuleTelCounters, telInflight},
		{"gauge not lowered on abandoned", telFaults{noDecrementOn: outAbandoned}, RuleTelCounters, telInflight},
		{"retries forgotten", telFaults{noRetries: true}, RuleTelCounters, telRetried},
		{"durations in milliseconds", telFaults{millis: true}, RuleTelDurations, telActDuration},
		{"refused appends observed", telFaults{observeRefused: true}, RuleTelCounters, "want"},
		{"closes abandon nothing", telFaults{noAbandon: true}, RuleTelCounters, "abandoned"},
		{"timeline at observation time", telFaults{timelineNow: true}, RuleTelTimeline, "history's RecordedAt"},
		{"activity spans orphaned", telFaults{orphanActivities: true}, RuleTelTimeline, "want its run span"},
		{"reads untraced", telFaults{untracedReads: true}, RuleTelCalls, "read_history"},
		{"age gauge stuck at 0", telFaults{ageZero: true}, RuleTelCounters, telAge},
		{"IDs on metrics", telFaults{idOnMetrics: true}, RuleTelCounters, "ID attribute"},
		{"committed call recorded as failed", telFaults{lateCancel: true}, RuleTelCalls, "append"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for seed := int64(1); seed <= 3; seed++ {
				err := CheckTelemetry(t.Context(), newRefTel(c.f), WithSeed(seed), WithTimeline())
				var rules []string
				for _, re := range RuleErrors(err) {
					rules = append(rules, re.Rule)
					if re.Seed != seed {
						t.Errorf("seed %d: the rule error names seed %d", seed, re.Seed)
					}
					if re.Rule == c.rule && !strings.Contains(re.Error(), c.want) {
						t.Errorf("seed %d: rule %s caught it but its message does not name %q: %v", seed, c.rule, c.want, re)
					}
				}
				if !slices.Contains(rules, c.rule) {
					t.Errorf("seed %d: not caught by rule %q (failed rules: %v)", seed, c.rule, rules)
				}
			}
		})
	}
}

// TestTelemetryHistories: the generator draws every class the rules judge,
// so no rule passes for want of a case.
func TestTelemetryHistories(t *testing.T) {
	reopened := 0
	for seed := int64(1); seed <= 50; seed++ {
		wfs := telGenerate(newGen(newRand(seed, SuiteTelemetry)), 1)
		for _, wf := range wfs {
			for _, e := range wf.events {
				if _, ok := e.(eventstore.WorkflowReopened); ok {
					reopened++
				}
			}
		}
		m := telModelOf(wfs)
		outcomes := map[string]bool{}
		dup, openAct, retried := false, false, false
		for _, a := range m.acts {
			if a.settled {
				outcomes[a.outcome] = true
			}
			openAct = openAct || !a.settled
			retried = retried || len(a.retries) > 0
		}
		statuses := map[string]bool{}
		for _, r := range m.runs {
			statuses[r.status] = true // every status, and "" for the runs left open
		}
		for _, wf := range wfs {
			seen := map[telActKey]bool{}
			for _, e := range wf.events {
				env := e.EventEnvelope()
				var id eventstore.ActivityID
				switch e := e.(type) {
				case eventstore.ActivityCompleted:
					id = e.ActivityID
				case eventstore.ActivityCancelled:
					id = e.ActivityID
				case eventstore.ActivityTimedOut:
					id = e.ActivityID
				case eventstore.ActivityFailed:
					if e.Error.Kind == eventstore.Retryable {
						continue
					}
					id = e.ActivityID
				default:
					continue
				}
				k := telActKey{env.RunID, id}
				dup = dup || seen[k]
				seen[k] = true
			}
		}
		if !dup || !retried || !outcomes[outAbandoned] || len(statuses) < 6 || len(outcomes) < 5 || !openAct {
			t.Errorf("seed %d: a class is missing: duplicate terminal %v, retry %v, outcomes %v, statuses %v, in flight at the end %v", seed, dup, retried, outcomes, statuses, openAct)
		}
	}
	if reopened < 10 {
		t.Errorf("50 seeds drew %d reopened runs, want at least 10", reopened)
	}
}

type hangingStore struct{ eventstore.Store }

func (hangingStore) Append(ctx context.Context, _ eventstore.WriteToken, _ eventstore.WorkflowID, _ []eventstore.Event, _ uint64) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestTelemetryBrokenWraps: a wrap that returns nil or panics fails every
// rule it runs; a decorator whose Append hangs is reported by the
// watchdog as timed out, not as a wrong answer.
func TestTelemetryBrokenWraps(t *testing.T) {
	only := optionFunc(func(c *config) { c.only = map[string]bool{RuleTelCounters: true, RuleTelCalls: true} })
	for name, wrap := range map[string]TelemetryWrap{
		"nil":   func(eventstore.Store, metric.MeterProvider, trace.TracerProvider) eventstore.Store { return nil },
		"panic": func(eventstore.Store, metric.MeterProvider, trace.TracerProvider) eventstore.Store { panic("boom") },
	} {
		if n := len(RuleErrors(CheckTelemetry(t.Context(), wrap, only))); n != 2 {
			t.Errorf("a wrap that %s: %d rules failed, want 2", name, n)
		}
	}
	hang := func(inner eventstore.Store, _ metric.MeterProvider, _ trace.TracerProvider) eventstore.Store {
		return hangingStore{inner}
	}
	fast := optionFunc(func(c *config) {
		c.only = map[string]bool{RuleTelCounters: true}
		c.watchdog = func(time.Duration) <-chan time.Time { return time.Tick(time.Millisecond) }
	})
	if err := CheckTelemetry(t.Context(), hang, fast); !errors.Is(err, ErrRuleTimedOut) {
		t.Errorf("a hanging Append: %v, want an error matching ErrRuleTimedOut", err)
	}
	if err := CheckTelemetry(t.Context(), nil); err == nil {
		t.Error("a nil wrap function passed")
	}
}
