package pairing

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/metric"

	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/instrument"
	"github.com/aionotel/aionotel/internal/version"
)

// ScopeName is the instrumentation scope of the tracker's meter: this
// package's import path. The scope version is the aionotel module version.
const ScopeName = "github.com/aionotel/aionotel/pairing"

// Version is the version of the aionotel module, without a leading "v": the
// instrumentation scope version of the tracker's meter.
func Version() string { return version.Version }

// instruments are the pairing instruments of the telemetry catalog.
type instruments struct {
	dispatched       metric.Int64Counter
	inflight         metric.Int64UpDownCounter
	completed        metric.Int64Counter
	duration         metric.Float64Histogram
	wait             metric.Float64Histogram
	retried          metric.Int64Counter
	evicted          metric.Int64Counter
	workflowDuration metric.Float64Histogram
	runEvicted       metric.Int64Counter
	forgotten        metric.Int64Counter
	resumed          metric.Int64Counter
	released         metric.Int64Counter
}

// ageCallback observes the oldest-in-flight and oldest-waiting gauges; a
// nil one was not created.
type ageCallback func(ctx context.Context, o metric.Observer, inflight, waiting metric.Float64Observable)

// newInstruments creates the instruments from mp with internal/instrument:
// creation never fails the caller, an instrument returned together with an
// error is kept and a missing one replaced by a no-op one, so the live table
// stays correct whatever the provider does. The errors are joined and
// reported once through handle.
//
// The oldest-in-flight and oldest-waiting gauges are observed by ages once
// per collection.
func newInstruments(mp metric.MeterProvider, handle func(error), ages ageCallback) instruments {
	var errs []error
	m := instrument.New(mp.Meter(ScopeName, metric.WithInstrumentationVersion(version.Version),
		metric.WithSchemaURL(catalog.SchemaURL)), "pairing",
		func(err error) { errs = append(errs, err) })
	in := instruments{
		dispatched: m.Int64Counter(catalog.ActivitiesDispatched, catalog.UnitActivity,
			"Activities dispatched to a worker (first dispatch of each activity)."),
		inflight: m.Int64UpDownCounter(catalog.InflightActivities, catalog.UnitActivity,
			"Activities dispatched and not yet finished, as seen by this process."),
		completed: m.Int64Counter(catalog.ActivitiesCompleted, catalog.UnitActivity,
			"Dispatched activities that reached their first terminal, by outcome."),
		duration: m.Float64Histogram(catalog.ActivityDuration, catalog.UnitSeconds,
			"Time from an activity's dispatch to its first terminal, across all attempts.", catalog.WorkflowDurationBoundaries),
		wait: m.Float64Histogram(catalog.ActivityWaitDuration, catalog.UnitSeconds,
			"Time an activity waited for a worker: from its dispatch to the first claim of its outbox row.", catalog.WorkflowDurationBoundaries),
		retried: m.Int64Counter(catalog.ActivitiesRetried, catalog.UnitActivity,
			"Retries of activities that stay in flight."),
		evicted: m.Int64Counter(catalog.ActivityPairingEvicted, catalog.UnitActivity,
			"Live activity entries dropped by the pairing tracker's memory bound."),
		workflowDuration: m.Float64Histogram(catalog.WorkflowDuration, catalog.UnitSeconds,
			"Time from a run's start to its close, by workflow type and status.", catalog.WorkflowDurationBoundaries),
		runEvicted: m.Int64Counter(catalog.WorkflowPairingEvicted, catalog.UnitWorkflow,
			"Open runs dropped by the pairing tracker's memory bound; their run span is not emitted."),
		forgotten: m.Int64Counter(catalog.PairingForgotten, catalog.UnitFact,
			"Facts the pairing tracker remembered for a partner that had not arrived, dropped by its memory bound."),
		resumed: m.Int64Counter(catalog.PairingResumed, catalog.UnitWorkflow,
			"Open workflows whose history a resume read (error.type when it could not)."),
		released: m.Int64Counter(catalog.PairingReleased, catalog.UnitEntry,
			"Activities in flight and open runs given up when their shard moved to another node."),
	}
	registerAges(m, ages)
	if len(errs) > 0 {
		handle(errors.Join(errs...))
	}
	return in
}

// registerAges creates aion.activity.oldest_inflight_age and
// aion.activity.oldest_waiting_age and registers one callback for both;
// trouble is reported like the other instruments' and leaves the gauge out.
func registerAges(m *instrument.Meter, ages ageCallback) {
	gauge := func(name, desc string) metric.Float64ObservableGauge {
		g, err := m.Meter().Float64ObservableGauge(name, metric.WithUnit(catalog.UnitSeconds), metric.WithDescription(desc))
		if err != nil || g == nil {
			m.Report(name, errors.Join(err, errNilInstrument(g == nil)))
		}
		return g
	}
	inflight := gauge(catalog.ActivityOldestInflightAge,
		"Age of the oldest activity of its type still in flight (dispatched and not finished, waiting or running), as seen by this process.")
	waiting := gauge(catalog.ActivityOldestWaitingAge,
		"Age of the oldest activity of its type waiting for a worker (its outbox row staged and not yet claimed), as seen by this process.")
	var observed []metric.Observable
	var in, wait metric.Float64Observable // nil interfaces for missing gauges
	if inflight != nil {
		in = inflight
		observed = append(observed, inflight)
	}
	if waiting != nil {
		wait = waiting
		observed = append(observed, waiting)
	}
	if len(observed) == 0 {
		return
	}
	_, err := m.Meter().RegisterCallback(func(ctx context.Context, o metric.Observer) error {
		ages(ctx, o, in, wait)
		return nil
	}, observed...)
	m.Report(catalog.ActivityOldestInflightAge, err)
}

func errNilInstrument(isNil bool) error {
	if isNil {
		return errors.New("the meter returned a nil instrument")
	}
	return nil
}
