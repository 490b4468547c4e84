package pairing

import (
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"

	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/version"
)

// ScopeName is the instrumentation scope of the tracker's meter: this
// package's import path. The scope version is the aionotel module version.
const ScopeName = "github.com/aionotel/aionotel/pairing"

// instruments are the six pairing instruments of the telemetry catalog.
type instruments struct {
	dispatched metric.Int64Counter
	inflight   metric.Int64UpDownCounter
	completed  metric.Int64Counter
	duration   metric.Float64Histogram
	retried    metric.Int64Counter
	evicted    metric.Int64Counter
}

// newInstruments creates the instruments from mp. Creation never fails the
// caller: every error is joined and reported once through handle, and an
// instrument the provider did not return is replaced by a no-op one, so the
// tracker's live table stays correct whatever the provider does.
func newInstruments(mp metric.MeterProvider, handle func(error)) instruments {
	meter := mp.Meter(ScopeName, metric.WithInstrumentationVersion(version.Version))
	var errs []error
	if meter == nil {
		errs = append(errs, errors.New("meter provider returned a nil meter"))
		meter = noop.Meter{}
	}
	fallback := noop.Meter{}

	var in instruments
	var err error
	if in.dispatched, err = meter.Int64Counter(catalog.ActivitiesDispatched,
		metric.WithUnit(catalog.UnitActivity),
		metric.WithDescription("Activities dispatched to a worker (first dispatch of each activity)."),
	); err != nil || in.dispatched == nil {
		errs = append(errs, instrumentErr(catalog.ActivitiesDispatched, err))
	}
	if in.inflight, err = meter.Int64UpDownCounter(catalog.InflightActivities,
		metric.WithUnit(catalog.UnitActivity),
		metric.WithDescription("Activities dispatched and not yet finished, as seen by this process."),
	); err != nil || in.inflight == nil {
		errs = append(errs, instrumentErr(catalog.InflightActivities, err))
	}
	if in.completed, err = meter.Int64Counter(catalog.ActivitiesCompleted,
		metric.WithUnit(catalog.UnitActivity),
		metric.WithDescription("Dispatched activities that reached their first terminal, by outcome."),
	); err != nil || in.completed == nil {
		errs = append(errs, instrumentErr(catalog.ActivitiesCompleted, err))
	}
	if in.duration, err = meter.Float64Histogram(catalog.ActivityDuration,
		metric.WithUnit(catalog.UnitSeconds),
		metric.WithDescription("Time from an activity's dispatch to its first terminal, across all attempts."),
		metric.WithExplicitBucketBoundaries(catalog.DurationBoundaries...),
	); err != nil || in.duration == nil {
		errs = append(errs, instrumentErr(catalog.ActivityDuration, err))
	}
	if in.retried, err = meter.Int64Counter(catalog.ActivitiesRetried,
		metric.WithUnit(catalog.UnitActivity),
		metric.WithDescription("Retries of activities that stay in flight."),
	); err != nil || in.retried == nil {
		errs = append(errs, instrumentErr(catalog.ActivitiesRetried, err))
	}
	if in.evicted, err = meter.Int64Counter(catalog.ActivityPairingEvicted,
		metric.WithUnit(catalog.UnitActivity),
		metric.WithDescription("Live activity entries dropped by the pairing tracker's memory bound."),
	); err != nil || in.evicted == nil {
		errs = append(errs, instrumentErr(catalog.ActivityPairingEvicted, err))
	}

	// An SDK may return a usable instrument together with an error (an
	// invalid name, a conflicting view); keep it. Only a nil one is replaced.
	if in.dispatched == nil {
		in.dispatched, _ = fallback.Int64Counter(catalog.ActivitiesDispatched)
	}
	if in.inflight == nil {
		in.inflight, _ = fallback.Int64UpDownCounter(catalog.InflightActivities)
	}
	if in.completed == nil {
		in.completed, _ = fallback.Int64Counter(catalog.ActivitiesCompleted)
	}
	if in.duration == nil {
		in.duration, _ = fallback.Float64Histogram(catalog.ActivityDuration)
	}
	if in.retried == nil {
		in.retried, _ = fallback.Int64Counter(catalog.ActivitiesRetried)
	}
	if in.evicted == nil {
		in.evicted, _ = fallback.Int64Counter(catalog.ActivityPairingEvicted)
	}

	if len(errs) > 0 {
		handle(fmt.Errorf("pairing: creating instruments: %w", errors.Join(errs...)))
	}
	return in
}

func instrumentErr(name string, err error) error {
	if err == nil {
		return fmt.Errorf("%s: meter returned a nil instrument", name)
	}
	return fmt.Errorf("%s: %w", name, err)
}
