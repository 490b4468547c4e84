package otelstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/attrcache"
	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/instrument"
	"github.com/aionotel/aionotel/pairing"
)

// lifecycle turns committed events into the workflow counters and the
// activity pairing calls, in history order per workflow (see order.go).
type lifecycle struct {
	namespace string
	now       func() time.Time
	tracker   *pairing.Tracker
	handle    func(error)

	started   metric.Int64Counter
	completed metric.Int64Counter
	reopened  metric.Int64Counter
	signals   metric.Int64Counter
	schedules metric.Int64Counter
	unordered metric.Int64Counter

	nsOpts     []metric.AddOption // aion.namespace (+ extras)
	signalOpts []metric.AddOption // + aion.signal.delivery=resident
	statusOpts [numStatuses][]metric.AddOption

	types *attrcache.Cache[[]metric.AddOption] // workflow type -> started options

	order [64]orderShard
}

func newLifecycle(c *config, meter *instrument.Meter) (*lifecycle, error) {
	l := &lifecycle{namespace: c.namespace, now: c.now, tracker: c.tracker, handle: c.handle}
	if l.now == nil {
		l.now = time.Now
	}
	if l.tracker == nil {
		t, err := pairing.New(
			pairing.WithMeterProvider(c.meterProvider),
			pairing.WithTracerProvider(c.tracerProvider),
			pairing.WithTimelineSpans(c.timeline),
			pairing.WithAttributes(c.attributes...),
			pairing.WithTypeCardinalityLimit(c.typeLimit),
		)
		if err != nil {
			return nil, fmt.Errorf("otelstore: pairing tracker: %w", err)
		}
		l.tracker = t
	}
	l.started = meter.Int64Counter(catalog.WorkflowsStarted, catalog.UnitWorkflow, "Workflow runs started.")
	l.completed = meter.Int64Counter(catalog.WorkflowsCompleted, catalog.UnitWorkflow, "Workflow runs closed, by status.")
	l.reopened = meter.Int64Counter(catalog.WorkflowsReopened, catalog.UnitWorkflow, "Closed workflow runs reopened.")
	l.signals = meter.Int64Counter(catalog.SignalsDelivered, catalog.UnitSignal, "Signals delivered to workflows.")
	l.schedules = meter.Int64Counter(catalog.SchedulesFired, catalog.UnitSchedule, "Schedules that fired a workflow.")
	l.unordered = meter.Int64Counter(catalog.StoreLifecycleUnordered, catalog.UnitBatch,
		"Committed append batches observed before an earlier append of the same workflow returned.")

	opts := func(attrs ...attribute.KeyValue) []metric.AddOption {
		attrs = append(append(attrs, catalog.Namespace.String(c.namespace)), c.attributes...)
		return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
	}
	l.nsOpts = opts()
	l.signalOpts = opts(catalog.SignalDelivery.String(catalog.DeliveryResident))
	for s, status := range statuses {
		l.statusOpts[s] = opts(catalog.WorkflowStatus.String(string(status)))
	}
	l.types = attrcache.New(c.typeLimit, catalog.UnknownType, catalog.OtherType, func(recorded string) []metric.AddOption {
		return opts(catalog.WorkflowType.String(recorded))
	})
	return l, nil
}

// statuses are the values of aion.workflow.status, indexed by kind -
// kindCompleted.
var statuses = [...]eventstore.WorkflowStatus{
	eventstore.StatusCompleted, eventstore.StatusFailed, eventstore.StatusCancelled,
	eventstore.StatusTimedOut, eventstore.StatusContinuedAsNew,
}

const numStatuses = len(statuses)

// kind is what observation needs to know of an event's type.
type kind uint8

const (
	kindNone kind = iota // nothing to observe
	kindStarted
	kindCompleted // the five run-closing kinds, in the order of statuses
	kindFailed
	kindCancelled
	kindTimedOut
	kindContinuedAsNew
	kindReopened
	kindSignal
	kindSchedule
	kindDispatched
	kindSucceeded
	kindRetried
	kindActivityFailed
	kindActivityCancelled
	kindActivityTimedOut
)

// fact is what observation reads of one event: no payload, and nothing that
// points into the caller's memory except an immutable string.
type fact struct {
	kind     kind
	activity eventstore.ActivityID
	run      eventstore.RunID
	next     eventstore.RunID // the new run of kindContinuedAsNew
	at       time.Time
	typ      string // workflow type of kindStarted, activity type of kindDispatched
}

func factOf(ev eventstore.Event) fact {
	var f fact
	switch e := ev.(type) {
	case eventstore.WorkflowStarted:
		f.kind, f.typ = kindStarted, e.WorkflowType
	case eventstore.WorkflowCompleted:
		f.kind = kindCompleted
	case eventstore.WorkflowFailed:
		f.kind = kindFailed
	case eventstore.WorkflowCancelled:
		f.kind = kindCancelled
	case eventstore.WorkflowTimedOut:
		f.kind = kindTimedOut
	case eventstore.WorkflowContinuedAsNew:
		f.kind, f.next = kindContinuedAsNew, e.NewRunID
	case eventstore.WorkflowReopened:
		f.kind = kindReopened
	case eventstore.SignalReceived:
		f.kind = kindSignal
	case eventstore.ScheduleTriggered:
		f.kind = kindSchedule
	case eventstore.ActivityScheduled:
		f.kind, f.activity, f.typ = kindDispatched, e.ActivityID, e.ActivityType
	case eventstore.ActivityCompleted:
		f.kind, f.activity = kindSucceeded, e.ActivityID
	case eventstore.ActivityFailed:
		f.kind, f.activity = kindActivityFailed, e.ActivityID
		if e.Error.Kind == eventstore.Retryable {
			f.kind = kindRetried
		}
	case eventstore.ActivityCancelled:
		f.kind, f.activity = kindActivityCancelled, e.ActivityID
	case eventstore.ActivityTimedOut:
		f.kind, f.activity = kindActivityTimedOut, e.ActivityID
	default:
		// Nothing to observe; and a nil event, a nil pointer or a foreign
		// Event type that an inner store accepted must not be asked for
		// its envelope.
		return f
	}
	env := ev.EventEnvelope()
	f.run, f.at = env.RunID, env.RecordedAt
	return f
}

// facts copies what observation needs of a batch that must wait: a type
// longer than any recorded value is cleaned and copied, so a waiting batch
// holds neither the caller's slice nor a large string.
func facts(events []eventstore.Event) []fact {
	var out []fact
	for _, ev := range events {
		f := factOf(ev)
		if f.kind == kindNone {
			continue
		}
		if len(f.typ) > attrvalue.MaxLen {
			f.typ = strings.Clone(attrvalue.String(f.typ))
		}
		out = append(out, f)
	}
	return out
}

// observe records what one committed event means. A panic of the
// telemetry it calls (a MeterProvider's instrument, say) is reported to the
// error handler: the event is committed, and the history order state of
// its workflow must stay consistent for the appends that follow.
func (l *lifecycle) observe(ctx context.Context, workflowID eventstore.WorkflowID, f fact) {
	if f.kind == kindNone {
		return
	}
	defer l.recovered()
	if f.at.IsZero() {
		f.at = l.now()
	}
	key := pairing.Key{Namespace: l.namespace, WorkflowID: workflowID, RunID: f.run, ActivityID: f.activity}
	switch f.kind {
	case kindStarted:
		l.started.Add(ctx, 1, l.types.Get(f.typ)...)
		l.tracker.RunStarted(ctx, l.namespace, workflowID, f.run, f.typ, f.at)
	case kindContinuedAsNew:
		l.completed.Add(ctx, 1, l.statusOpts[f.kind-kindCompleted]...)
		l.tracker.RunContinued(ctx, l.namespace, workflowID, f.run, f.next, f.at)
	case kindCompleted, kindFailed, kindCancelled, kindTimedOut:
		// A closed run settles its activities still in flight as
		// abandoned, so a run that ends without activity terminals leaks
		// no gauge slot.
		l.completed.Add(ctx, 1, l.statusOpts[f.kind-kindCompleted]...)
		l.tracker.RunClosed(ctx, l.namespace, workflowID, f.run, statuses[f.kind-kindCompleted], f.at)
	case kindReopened:
		l.reopened.Add(ctx, 1, l.nsOpts...)
	case kindSignal:
		l.signals.Add(ctx, 1, l.signalOpts...)
	case kindSchedule:
		l.schedules.Add(ctx, 1, l.nsOpts...)
	case kindDispatched:
		l.tracker.Dispatched(ctx, key, f.typ, f.at)
	case kindSucceeded:
		l.tracker.Finished(ctx, key, pairing.OutcomeSucceeded, f.at)
	case kindRetried:
		l.tracker.Retried(ctx, key, f.at)
	case kindActivityFailed:
		l.tracker.Finished(ctx, key, pairing.OutcomeFailed, f.at)
	case kindActivityCancelled:
		l.tracker.Finished(ctx, key, pairing.OutcomeCancelled, f.at)
	case kindActivityTimedOut:
		l.tracker.Finished(ctx, key, pairing.OutcomeTimedOut, f.at)
	}
}

// recovered is deferred by observe.
func (l *lifecycle) recovered() {
	if r := recover(); r != nil {
		l.handle(fmt.Errorf("otelstore: observing a committed event: panic: %v", r))
	}
}
