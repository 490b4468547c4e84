package pairing

import (
	"fmt"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// The exported pairing telemetry read into maps keyed by attribute values,
// for tests that compare it with a model or with another run.

var propOutcomes = []Outcome{OutcomeSucceeded, OutcomeFailed, OutcomeCancelled, OutcomeTimedOut}

// nt and nto name a data point by its attribute values.
type nt struct{ ns, typ string }
type nto struct {
	ns, typ string
	outcome Outcome
}

type ntos struct {
	ns, typ string
	status  eventstore.WorkflowStatus
}

type durAgg struct {
	count uint64
	sum   float64
}

// snapshot is the exported pairing telemetry, keyed by attribute values.
type snapshot struct {
	dispatched, inflight, retried map[nt]int64
	completed                     map[nto]int64
	duration                      map[nto]durAgg
	evicted                       map[string]int64
	workflowDuration              map[ntos]durAgg
	runEvicted                    map[string]int64
	forgotten                     map[string]int64
}

func readSnapshot(sm metricdata.ScopeMetrics) snapshot {
	s := snapshot{
		dispatched: map[nt]int64{}, inflight: map[nt]int64{}, retried: map[nt]int64{},
		completed: map[nto]int64{}, duration: map[nto]durAgg{}, evicted: map[string]int64{},
		workflowDuration: map[ntos]durAgg{}, runEvicted: map[string]int64{}, forgotten: map[string]int64{},
	}
	str := func(set attribute.Set, k attribute.Key) string {
		v, _ := set.Value(k)
		return v.AsString()
	}
	for _, mt := range sm.Metrics {
		switch d := mt.Data.(type) {
		case metricdata.Sum[int64]:
			for _, dp := range d.DataPoints {
				ns, typ := str(dp.Attributes, catalog.Namespace), str(dp.Attributes, catalog.ActivityType)
				switch mt.Name {
				case catalog.ActivitiesDispatched:
					s.dispatched[nt{ns, typ}] += dp.Value
				case catalog.InflightActivities:
					s.inflight[nt{ns, typ}] += dp.Value
				case catalog.ActivitiesRetried:
					s.retried[nt{ns, typ}] += dp.Value
				case catalog.ActivitiesCompleted:
					s.completed[nto{ns, typ, Outcome(str(dp.Attributes, catalog.ActivityOutcome))}] += dp.Value
				case catalog.ActivityPairingEvicted:
					s.evicted[ns] += dp.Value
				case catalog.WorkflowPairingEvicted:
					s.runEvicted[ns] += dp.Value
				case catalog.PairingForgotten:
					s.forgotten[ns] += dp.Value
				}
			}
		case metricdata.Histogram[float64]:
			if mt.Name == catalog.WorkflowDuration {
				for _, dp := range d.DataPoints {
					k := ntos{str(dp.Attributes, catalog.Namespace), str(dp.Attributes, catalog.WorkflowType), eventstore.WorkflowStatus(str(dp.Attributes, catalog.WorkflowStatus))}
					s.workflowDuration[k] = durAgg{count: dp.Count, sum: dp.Sum}
				}
				continue
			}
			for _, dp := range d.DataPoints {
				k := nto{str(dp.Attributes, catalog.Namespace), str(dp.Attributes, catalog.ActivityType), Outcome(str(dp.Attributes, catalog.ActivityOutcome))}
				s.duration[k] = durAgg{count: dp.Count, sum: dp.Sum}
			}
		}
	}
	return s
}

// seqTB lets the harness run inside one of thousands of sequences without a
// subtest each: it records the first failure and runs cleanups on demand.
type seqTB struct {
	testing.TB
	failed   error
	cleanups []func()
}

func (s *seqTB) Helper()          {}
func (s *seqTB) Cleanup(f func()) { s.cleanups = append(s.cleanups, f) }
func (s *seqTB) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
func (s *seqTB) Errorf(format string, args ...any) {
	if s.failed == nil {
		s.failed = fmt.Errorf(format, args...)
	}
}

func (s *seqTB) Error(args ...any) {
	if s.failed == nil {
		s.failed = fmt.Errorf("%s", fmt.Sprint(args...))
	}
}
