package otelstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/cardinality"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/pairing"
)

// lifecycle turns committed events into the workflow counters and the
// activity pairing calls.
type lifecycle struct {
	namespace string
	now       func() time.Time
	tracker   *pairing.Tracker

	started   metric.Int64Counter
	completed metric.Int64Counter
	reopened  metric.Int64Counter
	signals   metric.Int64Counter
	schedules metric.Int64Counter

	nsOpts     []metric.AddOption // aion.namespace (+ extras)
	signalOpts []metric.AddOption // + aion.signal.delivery=resident
	statusOpts map[eventstore.WorkflowStatus][]metric.AddOption

	order orderer // observation in history order, per workflow

	types     *cardinality.Limiter
	extra     []attribute.KeyValue
	typeMu    sync.RWMutex
	typeCache map[string][]metric.AddOption // admitted workflow type -> options
}

func newLifecycle(c *config, meter metric.Meter, handle func(error)) (*lifecycle, error) {
	l := &lifecycle{
		namespace: c.namespace,
		now:       c.now,
		tracker:   c.tracker,
		types:     cardinality.New(c.typeLimit, catalog.OtherType),
		extra:     c.attributes,
		typeCache: make(map[string][]metric.AddOption),
	}
	if l.tracker == nil {
		t, err := pairing.New(
			pairing.WithMeterProvider(c.meterProvider),
			pairing.WithAttributes(c.attributes...),
			pairing.WithTypeCardinalityLimit(c.typeLimit),
		)
		if err != nil {
			return nil, fmt.Errorf("otelstore: pairing tracker: %w", err)
		}
		l.tracker = t
	}

	counter := func(name, unit, desc string) metric.Int64Counter {
		ctr, err := meter.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		if err != nil {
			handle(fmt.Errorf("otelstore: creating %s: %w", name, err))
		}
		if ctr == nil {
			ctr = noop.Int64Counter{}
		}
		return ctr
	}
	l.started = counter(catalog.WorkflowsStarted, catalog.UnitWorkflow, "Workflow runs started.")
	l.completed = counter(catalog.WorkflowsCompleted, catalog.UnitWorkflow, "Workflow runs closed, by status.")
	l.reopened = counter(catalog.WorkflowsReopened, catalog.UnitWorkflow, "Closed workflow runs reopened.")
	l.signals = counter(catalog.SignalsDelivered, catalog.UnitSignal, "Signals delivered to workflows.")
	l.schedules = counter(catalog.SchedulesFired, catalog.UnitSchedule, "Schedules that fired a workflow.")

	ns := catalog.Namespace.String(c.namespace)
	l.nsOpts = l.addOpts(ns)
	l.signalOpts = l.addOpts(ns, catalog.SignalDelivery.String(catalog.DeliveryResident))
	l.statusOpts = make(map[eventstore.WorkflowStatus][]metric.AddOption)
	for _, s := range []eventstore.WorkflowStatus{
		eventstore.StatusCompleted, eventstore.StatusFailed, eventstore.StatusCancelled,
		eventstore.StatusTimedOut, eventstore.StatusContinuedAsNew,
	} {
		l.statusOpts[s] = l.addOpts(ns, catalog.WorkflowStatus.String(string(s)))
	}
	return l, nil
}

func (l *lifecycle) addOpts(attrs ...attribute.KeyValue) []metric.AddOption {
	attrs = append(attrs, l.extra...)
	return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(attrs...))}
}

// typeOpts returns the options of aion.workflows.started for a workflow type,
// after the cardinality guard.
func (l *lifecycle) typeOpts(workflowType string) []metric.AddOption {
	if workflowType == "" {
		workflowType = catalog.UnknownType
	}
	workflowType = l.types.Admit(workflowType)
	l.typeMu.RLock()
	opts, ok := l.typeCache[workflowType]
	l.typeMu.RUnlock()
	if ok {
		return opts
	}
	opts = l.addOpts(catalog.Namespace.String(l.namespace), catalog.WorkflowType.String(workflowType))
	l.typeMu.Lock()
	l.typeCache[workflowType] = opts
	l.typeMu.Unlock()
	return opts
}

// beginAppend registers an append about to reach the inner store; endAppend,
// deferred right after it, observes the batch if it committed, in history
// order (see orderer).
func (l *lifecycle) beginAppend(workflowID eventstore.WorkflowID, expectedSeq uint64) {
	l.order.start(workflowID, expectedSeq)
}

func (l *lifecycle) endAppend(ctx context.Context, workflowID eventstore.WorkflowID, expectedSeq uint64, events []eventstore.Event, committed bool) {
	l.order.finish(ctx, workflowID, expectedSeq, events, committed, l)
}

// observe records what the committed events mean. It runs only after the
// inner store accepted them, and for one workflow in history order.
func (l *lifecycle) observe(ctx context.Context, workflowID eventstore.WorkflowID, events []eventstore.Event) {
	for _, ev := range events {
		env := ev.EventEnvelope()
		at := env.RecordedAt
		if at.IsZero() {
			at = l.now()
		}
		key := pairing.Key{Namespace: l.namespace, WorkflowID: workflowID, RunID: env.RunID}
		switch e := ev.(type) {
		case eventstore.WorkflowStarted:
			l.started.Add(ctx, 1, l.typeOpts(e.WorkflowType)...)
		case eventstore.WorkflowCompleted:
			l.closeRun(ctx, eventstore.StatusCompleted, key, at)
		case eventstore.WorkflowFailed:
			l.closeRun(ctx, eventstore.StatusFailed, key, at)
		case eventstore.WorkflowCancelled:
			l.closeRun(ctx, eventstore.StatusCancelled, key, at)
		case eventstore.WorkflowTimedOut:
			l.closeRun(ctx, eventstore.StatusTimedOut, key, at)
		case eventstore.WorkflowContinuedAsNew:
			l.closeRun(ctx, eventstore.StatusContinuedAsNew, key, at)
		case eventstore.WorkflowReopened:
			l.reopened.Add(ctx, 1, l.nsOpts...)
		case eventstore.SignalReceived:
			l.signals.Add(ctx, 1, l.signalOpts...)
		case eventstore.ScheduleTriggered:
			l.schedules.Add(ctx, 1, l.nsOpts...)
		case eventstore.ActivityScheduled:
			key.ActivityID = e.ActivityID
			l.tracker.Dispatched(ctx, key, e.ActivityType, at)
		case eventstore.ActivityCompleted:
			key.ActivityID = e.ActivityID
			l.tracker.Finished(ctx, key, pairing.OutcomeSucceeded, at)
		case eventstore.ActivityFailed:
			key.ActivityID = e.ActivityID
			if e.Error.Kind == eventstore.Retryable {
				l.tracker.Retried(ctx, key, at)
			} else {
				l.tracker.Finished(ctx, key, pairing.OutcomeFailed, at)
			}
		case eventstore.ActivityCancelled:
			key.ActivityID = e.ActivityID
			l.tracker.Finished(ctx, key, pairing.OutcomeCancelled, at)
		case eventstore.ActivityTimedOut:
			key.ActivityID = e.ActivityID
			l.tracker.Finished(ctx, key, pairing.OutcomeTimedOut, at)
		}
	}
}

// closeRun counts a closed run and settles its activities still in flight as
// abandoned, so a run that ends without activity terminals leaks no gauge
// slot.
func (l *lifecycle) closeRun(ctx context.Context, status eventstore.WorkflowStatus, key pairing.Key, at time.Time) {
	l.completed.Add(ctx, 1, l.statusOpts[status]...)
	l.tracker.AbandonRun(ctx, l.namespace, key.WorkflowID, key.RunID, at)
}
