package otelstore

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/attrcache"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/instrument"
	"github.com/aionotel/aionotel/internal/livetracer"
	"github.com/aionotel/aionotel/internal/pairinghook"
	"github.com/aionotel/aionotel/pairing"
)

// lifecycle turns committed events into the workflow counters and hands
// them to the pairing tracker, which joins them whatever order appends
// return in.
type lifecycle struct {
	namespace string
	tracker   *pairing.Tracker
	// history is the inner store: a gap is filled from it.
	history pairing.HistoryReader
	// calls are tracker's, taking the store call's look at the global
	// tracer provider.
	calls  pairinghook.Calls
	handle func(error)

	started   metric.Int64Counter
	completed metric.Int64Counter
	reopened  metric.Int64Counter
	signals   metric.Int64Counter
	schedules metric.Int64Counter

	nsOpts     []metric.AddOption // aion.namespace (+ extras)
	signalOpts []metric.AddOption // + aion.signal.delivery=resident
	statusOpts [numStatuses][]metric.AddOption

	types *attrcache.Cache[[]metric.AddOption] // workflow type -> started options
}

func newLifecycle(c *config, meter *instrument.Meter, history pairing.HistoryReader) (*lifecycle, error) {
	l := &lifecycle{namespace: c.namespace, tracker: c.tracker, handle: c.handle, history: history}
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
	l.calls = pairinghook.For(l.tracker, history)
	l.started = meter.Int64Counter(catalog.WorkflowsStarted, catalog.UnitWorkflow, "Workflow runs started.")
	l.completed = meter.Int64Counter(catalog.WorkflowsCompleted, catalog.UnitWorkflow, "Workflow runs closed, by status.")
	l.reopened = meter.Int64Counter(catalog.WorkflowsReopened, catalog.UnitWorkflow, "Closed workflow runs reopened.")
	l.signals = meter.Int64Counter(catalog.SignalsDelivered, catalog.UnitSignal, "Signals delivered to workflows.")
	l.schedules = meter.Int64Counter(catalog.SchedulesFired, catalog.UnitSchedule, "Schedules that fired a workflow.")

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

// statuses are the values of aion.workflow.status, in the order the
// options are cached.
var statuses = [...]eventstore.WorkflowStatus{
	eventstore.StatusCompleted, eventstore.StatusFailed, eventstore.StatusCancelled,
	eventstore.StatusTimedOut, eventstore.StatusContinuedAsNew,
}

const numStatuses = len(statuses)

// observe records what a committed batch means: the workflow counters, and,
// with pair, the batch itself to the pairing tracker, with its first
// position. A
// panic of the telemetry it calls (a MeterProvider's instrument, say) is
// reported to the error handler: the events are committed.
func (l *lifecycle) observe(ctx context.Context, lk livetracer.Lookup, workflowID eventstore.WorkflowID, firstSeq uint64, events []eventstore.Event, pair bool) {
	defer l.recovered()
	for _, ev := range events {
		switch e := ev.(type) {
		case eventstore.WorkflowStarted:
			l.started.Add(ctx, 1, l.types.Get(e.WorkflowType)...)
		case eventstore.WorkflowCompleted:
			l.completed.Add(ctx, 1, l.statusOpts[0]...)
		case eventstore.WorkflowFailed:
			l.completed.Add(ctx, 1, l.statusOpts[1]...)
		case eventstore.WorkflowCancelled:
			l.completed.Add(ctx, 1, l.statusOpts[2]...)
		case eventstore.WorkflowTimedOut:
			l.completed.Add(ctx, 1, l.statusOpts[3]...)
		case eventstore.WorkflowContinuedAsNew:
			l.completed.Add(ctx, 1, l.statusOpts[4]...)
		case eventstore.WorkflowReopened:
			l.reopened.Add(ctx, 1, l.nsOpts...)
		case eventstore.SignalReceived:
			l.signals.Add(ctx, 1, l.signalOpts...)
		case eventstore.ScheduleTriggered:
			l.schedules.Add(ctx, 1, l.nsOpts...)
		}
	}
	if pair {
		l.calls.ObserveFrom(ctx, lk, l.namespace, workflowID, firstSeq, events)
	}
}

// recovered is deferred by observe.
func (l *lifecycle) recovered() {
	if r := recover(); r != nil {
		l.handle(fmt.Errorf("otelstore: observing a committed batch: panic: %v", r))
	}
}
