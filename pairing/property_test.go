package pairing

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// The property test drives the tracker with seeded random operation
// sequences and compares it with a deliberately naive model after every step.
//
// After EVERY step it checks: each call's return value against the model's
// prediction, InFlight and the exact set of live keys against the model, and
// the live table's structural invariants. The exported telemetry (read via
// the ManualReader) is checked every collectEvery steps and at the end of
// each sequence, against the model's expected value of every data point of
// every instrument: the gauge per (namespace, type), per namespace equal to
// the live entries and never negative, counters, histogram counts and sums
// (activities' and runs'), and completions + evictions == removals. Open
// runs share the bound and the eviction order with activities.
const (
	sequences    = 10_000
	maxSteps     = 40
	collectEvery = 5
)

var (
	propNamespaces = []string{"", "default", "tenant-a", "tenant-b"} // "" aliases "default"
	propTypes      = []string{"charge", "ship", "email", ""}         // with a type limit of 2
	propOutcomes   = []Outcome{OutcomeSucceeded, OutcomeFailed, OutcomeCancelled, OutcomeTimedOut}
	propStatuses   = []eventstore.WorkflowStatus{eventstore.StatusCompleted, eventstore.StatusFailed, eventstore.StatusContinuedAsNew, eventstore.StatusRunning}
)

func TestTrackerMatchesModel(t *testing.T) {
	const shards = 4 // sequences are independent; spread them over the CPUs
	for shard := range shards {
		t.Run(fmt.Sprintf("shard-%d", shard), func(t *testing.T) {
			t.Parallel()
			for seq := shard; seq < sequences; seq += shards {
				if err := runSequence(uint64(seq)); err != nil {
					t.Fatalf("sequence %d: %v\n(replay: runSequence(%d))", seq, err, seq)
				}
			}
		})
	}
}

// nt and nto name a data point by its attribute values.
type nt struct{ ns, typ string }
type nto struct {
	ns, typ string
	outcome Outcome
}

type durAgg struct {
	count uint64
	sum   float64
}

// markerID is the activity ID of an open run's marker in model.order: the
// sequences use activity IDs 0 to 2 only.
const markerID = eventstore.ActivityID(math.MaxUint64)

type mRun struct {
	ns, typ string // recorded
	at      time.Time
	started bool
}

type ntos struct {
	ns, typ string
	status  eventstore.WorkflowStatus
}

type mEntry struct {
	ns  string // recorded namespace
	typ string // recorded type
	at  time.Time
}

// model is the obvious implementation: a map and a slice in dispatch order.
type model struct {
	max        int
	limit      int
	nsLimit    int
	admitted   map[string]map[string]bool // recorded namespace -> admitted types
	admittedNS map[string]bool

	live  map[Key]mEntry
	order []Key // live keys and open-run markers (ActivityID markerID), oldest first
	runs  map[runKey]mRun

	admittedWF       map[string]map[string]bool // recorded namespace -> admitted workflow types
	workflowDuration map[ntos]durAgg
	runEvicted       map[string]int64
	badStatuses      int

	dispatched, inflight, retried map[nt]int64
	completed                     map[nto]int64
	duration                      map[nto]durAgg
	evicted                       map[string]int64
	removals                      int64
	badOutcomes                   int
}

func newModel(max, limit, nsLimit int) *model {
	return &model{
		max: max, limit: limit, nsLimit: nsLimit,
		admitted: map[string]map[string]bool{}, admittedNS: map[string]bool{},
		live:       map[Key]mEntry{},
		dispatched: map[nt]int64{}, inflight: map[nt]int64{}, retried: map[nt]int64{},
		completed: map[nto]int64{}, duration: map[nto]durAgg{}, evicted: map[string]int64{},
		runs: map[runKey]mRun{}, admittedWF: map[string]map[string]bool{},
		workflowDuration: map[ntos]durAgg{}, runEvicted: map[string]int64{},
	}
}

// makeRoom evicts the oldest live activity or open run if the bound is
// reached.
func (m *model) makeRoom() {
	if len(m.live)+len(m.runs) < m.max {
		return
	}
	old := m.order[0]
	if old.ActivityID == markerID {
		rk := old.run()
		m.runEvicted[m.runs[rk].ns]++
		m.dropRun(rk)
		return
	}
	e := m.live[old]
	m.drop(old)
	m.inflight[nt{e.ns, e.typ}]--
	m.evicted[e.ns]++
}

func markerKey(rk runKey) Key {
	return Key{Namespace: rk.namespace, WorkflowID: rk.workflowID, RunID: rk.runID, ActivityID: markerID}
}

func (m *model) dropRun(rk runKey) {
	delete(m.runs, rk)
	mk := markerKey(rk)
	m.order = slices.DeleteFunc(m.order, func(o Key) bool { return o == mk })
}

func (m *model) runStarted(k Key, typ string, at time.Time) bool {
	rk := modelKey(k).run()
	rns := m.recordedNS(rk.namespace)
	rt := m.recordedWorkflowType(rns, typ)
	r, open := m.runs[rk]
	if open && r.started {
		return false
	}
	if !open {
		m.makeRoom()
		m.order = append(m.order, markerKey(rk))
	}
	m.runs[rk] = mRun{ns: rns, typ: rt, at: at, started: true}
	return true
}

func (m *model) runClosed(k Key, status eventstore.WorkflowStatus, next eventstore.RunID, at time.Time) int {
	if statusIndex(status) < 0 {
		m.badStatuses++
		return 0
	}
	rk := modelKey(k).run()
	r, open := m.runs[rk]
	if open {
		m.dropRun(rk)
	}
	n := m.abandon(rk.namespace, rk.workflowID, rk.runID, at)
	if open && r.started {
		d := max(at.Sub(r.at).Seconds(), 0)
		agg := m.workflowDuration[ntos{r.ns, r.typ, status}]
		agg.count++
		agg.sum += d
		m.workflowDuration[ntos{r.ns, r.typ, status}] = agg
	}
	if next != (eventstore.RunID{}) && next != rk.runID {
		nk := runKey{namespace: rk.namespace, workflowID: rk.workflowID, runID: next}
		rns := m.recordedNS(nk.namespace)
		if _, open := m.runs[nk]; !open {
			m.makeRoom()
			m.order = append(m.order, markerKey(nk))
			m.runs[nk] = mRun{ns: rns}
		}
	}
	return n
}

// modelKey spells the empty namespace "default", independently of the
// tracker's own normalisation.
func modelKey(k Key) Key {
	if k.Namespace == "" {
		k.Namespace = "default"
	}
	return k
}

// recordedNS is the namespace k's (normalised) namespace is recorded as: the
// first nsLimit distinct ones besides "default" as themselves.
func (m *model) recordedNS(ns string) string {
	switch {
	case ns == "default", m.admittedNS[ns]:
		return ns
	case len(m.admittedNS) < m.nsLimit:
		m.admittedNS[ns] = true
		return ns
	default:
		return catalog.OtherType
	}
}

// recordedType is the type typ is recorded as in recorded namespace ns: the
// limit is per namespace.
func (m *model) recordedType(ns, typ string) string {
	return m.admit(m.admitted, ns, typ)
}

// recordedWorkflowType is recordedType for workflow types, admitted apart.
func (m *model) recordedWorkflowType(ns, typ string) string {
	return m.admit(m.admittedWF, ns, typ)
}

// admit records typ in namespace ns of admitted: the first limit distinct
// types as themselves, "" as "_unknown", later ones as "_other".
func (m *model) admit(admitted map[string]map[string]bool, ns, typ string) string {
	seen := admitted[ns]
	if seen == nil {
		seen = map[string]bool{}
		admitted[ns] = seen
	}
	switch {
	case typ == "":
		return catalog.UnknownType
	case seen[typ]:
		return typ
	case len(seen) < m.limit:
		seen[typ] = true
		return typ
	default:
		return catalog.OtherType
	}
}

func (m *model) dispatch(k Key, typ string, at time.Time) bool {
	k = modelKey(k)
	rns := m.recordedNS(k.Namespace) // resolved on every call, duplicate or not
	rt := m.recordedType(rns, typ)
	if _, ok := m.live[k]; ok {
		return false
	}
	m.makeRoom()
	m.live[k] = mEntry{ns: rns, typ: rt, at: at}
	m.order = append(m.order, k)
	m.dispatched[nt{rns, rt}]++
	m.inflight[nt{rns, rt}]++
	return true
}

func (m *model) drop(k Key) {
	delete(m.live, k)
	m.order = slices.DeleteFunc(m.order, func(o Key) bool { return o == k })
	m.removals++
}

func (m *model) settle(k Key, o Outcome, at time.Time) {
	e := m.live[k]
	m.drop(k)
	m.inflight[nt{e.ns, e.typ}]--
	m.completed[nto{e.ns, e.typ, o}]++
	d := at.Sub(e.at).Seconds()
	if d < 0 {
		d = 0
	}
	agg := m.duration[nto{e.ns, e.typ, o}]
	agg.count++
	agg.sum += d
	m.duration[nto{e.ns, e.typ, o}] = agg
}

func (m *model) finish(k Key, o Outcome, at time.Time) bool {
	if !slices.Contains(propOutcomes, o) && o != OutcomeAbandoned {
		m.badOutcomes++
		return false
	}
	k = modelKey(k)
	if _, ok := m.live[k]; !ok {
		return false
	}
	m.settle(k, o, at)
	return true
}

func (m *model) retry(k Key) bool {
	k = modelKey(k)
	e, ok := m.live[k]
	if ok {
		m.retried[nt{e.ns, e.typ}]++
	}
	return ok
}

func (m *model) abandon(ns string, wf eventstore.WorkflowID, run eventstore.RunID, at time.Time) int {
	if ns == "" {
		ns = "default"
	}
	var victims []Key
	for _, k := range m.order {
		if k.Namespace == ns && k.WorkflowID == wf && k.RunID == run && k.ActivityID != markerID {
			victims = append(victims, k)
		}
	}
	for _, k := range victims {
		m.settle(k, OutcomeAbandoned, at)
	}
	return len(victims)
}

func runSequence(seed uint64) error {
	rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	maxInFlight := []int{1, 2, 3, 5, 1000}[rng.IntN(5)]
	tb := &seqTB{}
	// Exemplars are off: they are tested elsewhere and collecting them
	// would dominate the run time.
	nsLimit := []int{1, 64}[rng.IntN(2)] // 1 folds one of tenant-a and tenant-b into "_other"
	h := newHarnessSDK(tb, []sdkmetric.Option{sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter)},
		WithMaxInFlight(maxInFlight), WithTypeCardinalityLimit(2), WithNamespaceCardinalityLimit(nsLimit))
	defer tb.cleanup()
	m := newModel(maxInFlight, 2, nsLimit)

	randKey := func() Key {
		return key(propNamespaces[rng.IntN(len(propNamespaces))], byte(rng.IntN(2)), byte(rng.IntN(2)), uint64(rng.IntN(3)))
	}
	// liveKey picks a live key, respelling "default" as "" half the time.
	liveKey := func() (Key, bool) {
		if len(m.live) == 0 {
			return Key{}, false
		}
		acts := m.activities()
		k := acts[rng.IntN(len(acts))]
		if k.Namespace == "default" && rng.IntN(2) == 0 {
			k.Namespace = ""
		}
		return k, true
	}
	var finished []Key // keys settled by a terminal, for duplicate terminals
	now := 0

	steps := 1 + rng.IntN(maxSteps)
	for step := range steps {
		now += rng.IntN(50)
		at := ts(now + rng.IntN(40) - 20) // sometimes earlier than a dispatch
		var op string
		var got, want int
		switch r := rng.IntN(100); {
		case r < 35:
			op = "dispatch"
			k, typ := randKey(), propTypes[rng.IntN(len(propTypes))]
			got, want = b2i(h.tr.Dispatched(bg, k, typ, at)), b2i(m.dispatch(k, typ, at))
		case r < 42:
			k, ok := liveKey()
			if !ok {
				continue
			}
			op = "duplicate dispatch"
			typ := propTypes[rng.IntN(len(propTypes))]
			got, want = b2i(h.tr.Dispatched(bg, k, typ, at)), b2i(m.dispatch(k, typ, at))
		case r < 62:
			k, ok := liveKey()
			if !ok {
				continue
			}
			op = "terminal"
			o := propOutcomes[rng.IntN(len(propOutcomes))]
			got, want = b2i(h.tr.Finished(bg, k, o, at)), b2i(m.finish(k, o, at))
			finished = append(finished, k)
		case r < 68:
			if len(finished) == 0 {
				continue
			}
			op = "duplicate terminal"
			k, o := finished[rng.IntN(len(finished))], propOutcomes[rng.IntN(len(propOutcomes))]
			got, want = b2i(h.tr.Finished(bg, k, o, at)), b2i(m.finish(k, o, at))
		case r < 75:
			op = "unmatched terminal"
			k, o := randKey(), propOutcomes[rng.IntN(len(propOutcomes))]
			got, want = b2i(h.tr.Finished(bg, k, o, at)), b2i(m.finish(k, o, at))
		case r < 77:
			op = "invalid outcome"
			k := randKey()
			got, want = b2i(h.tr.Finished(bg, k, "bogus", at)), b2i(m.finish(k, "bogus", at))
		case r < 84:
			op = "retry"
			k := randKey()
			if lk, ok := liveKey(); ok && rng.IntN(2) == 0 {
				k = lk
			}
			got, want = b2i(h.tr.Retried(bg, k, at)), b2i(m.retry(k))
		case r < 88:
			op = "abandon run"
			k := randKey()
			got = h.tr.AbandonRun(bg, k.Namespace, k.WorkflowID, k.RunID, at)
			want = m.abandon(k.Namespace, k.WorkflowID, k.RunID, at)
		case r < 93:
			op = "run started"
			k, typ := randKey(), propTypes[rng.IntN(len(propTypes))]
			got, want = b2i(h.tr.RunStarted(bg, k.Namespace, k.WorkflowID, k.RunID, typ, at)), b2i(m.runStarted(k, typ, at))
		case r < 98:
			op = "run closed"
			k, st := randKey(), propStatuses[rng.IntN(len(propStatuses))]
			got = h.tr.RunClosed(bg, k.Namespace, k.WorkflowID, k.RunID, st, at)
			want = m.runClosed(k, st, eventstore.RunID{}, at)
		default:
			op = "run continued"
			k, next := randKey(), runID(byte(rng.IntN(2)))
			got = h.tr.RunContinued(bg, k.Namespace, k.WorkflowID, k.RunID, next, at)
			want = m.runClosed(k, eventstore.StatusContinuedAsNew, next, at)
		}
		where := fmt.Sprintf("step %d (%s, max %d)", step, op, maxInFlight)
		if got != want {
			return fmt.Errorf("%s: tracker returned %d, model %d", where, got, want)
		}
		if err := compareLive(h.tr, m); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if step%collectEvery == 0 || step == steps-1 {
			if err := compareTelemetry(h, m); err != nil {
				return fmt.Errorf("%s: %w", where, err)
			}
		}
		if tb.failed != nil {
			return fmt.Errorf("%s: %w", where, tb.failed)
		}
	}
	if len(h.errs) != m.badOutcomes+m.badStatuses {
		return fmt.Errorf("error handler got %d errors, want %d", len(h.errs), m.badOutcomes+m.badStatuses)
	}
	for _, err := range h.errs {
		if !errors.Is(err, ErrInvalidOutcome) && !errors.Is(err, ErrInvalidStatus) {
			return fmt.Errorf("unexpected handled error: %v", err)
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// compareLive checks the tracker's live table against the model.
func compareLive(tr *Tracker, m *model) error {
	if got := tr.InFlight(); got != len(m.live) {
		return fmt.Errorf("InFlight = %d, model %d", got, len(m.live))
	}
	order, err := tr.live.check()
	if err != nil {
		return fmt.Errorf("live table: %w", err)
	}
	if want := m.activities(); !slices.Equal(order, want) {
		return fmt.Errorf("live keys in dispatch order = %v, model %v", order, want)
	}
	if got := len(tr.live.runs); got > len(m.runs)+len(m.live) {
		return fmt.Errorf("table holds %d runs for %d open runs and %d activities", got, len(m.runs), len(m.live))
	}
	return nil
}

// activities returns the live activity keys, oldest first.
func (m *model) activities() []Key {
	var out []Key
	for _, k := range m.order {
		if k.ActivityID != markerID {
			out = append(out, k)
		}
	}
	return out
}

// compareTelemetry collects and compares every exported data point with the
// model.
func compareTelemetry(h *harness, m *model) error {
	s := readSnapshot(h.scope())
	if err := equalCounts("inflight", s.inflight, m.inflight); err != nil {
		return err
	}
	perNS := map[string]int64{}
	for k, v := range s.inflight {
		if v < 0 {
			return fmt.Errorf("gauge for %v is negative: %d", k, v)
		}
		perNS[k.ns] += v
	}
	liveNS := map[string]int64{}
	for _, e := range m.live {
		liveNS[e.ns]++
	}
	for _, ns := range []string{"default", "tenant-a", "tenant-b", catalog.OtherType} {
		if perNS[ns] != liveNS[ns] {
			return fmt.Errorf("gauge for namespace %s = %d, live entries %d", ns, perNS[ns], liveNS[ns])
		}
	}
	if err := equalCounts("dispatched", s.dispatched, m.dispatched); err != nil {
		return err
	}
	if err := equalCounts("retried", s.retried, m.retried); err != nil {
		return err
	}
	if err := equalCounts("completed", s.completed, m.completed); err != nil {
		return err
	}
	if err := equalCounts("evicted", s.evicted, m.evicted); err != nil {
		return err
	}
	for k, want := range m.duration {
		got := s.duration[k]
		// AbandonRun settles a run's entries in no promised order, so sums
		// may differ from the model's in the last bits.
		if got.count != want.count || math.Abs(got.sum-want.sum) > 1e-9 {
			return fmt.Errorf("duration %v = %+v, model %+v", k, got, want)
		}
	}
	if len(s.duration) != len(m.duration) {
		return fmt.Errorf("duration has %d points, model %d", len(s.duration), len(m.duration))
	}
	for k, want := range m.workflowDuration {
		if got := s.workflowDuration[k]; got.count != want.count || math.Abs(got.sum-want.sum) > 1e-9 {
			return fmt.Errorf("workflow duration %v = %+v, model %+v", k, got, want)
		}
	}
	if len(s.workflowDuration) != len(m.workflowDuration) {
		return fmt.Errorf("workflow duration has %d points, model %d", len(s.workflowDuration), len(m.workflowDuration))
	}
	if err := equalCounts("run evicted", s.runEvicted, m.runEvicted); err != nil {
		return err
	}
	var done int64
	for _, v := range s.completed {
		done += v
	}
	for _, v := range s.evicted {
		done += v
	}
	if done != m.removals {
		return fmt.Errorf("completions + evictions = %d, removals %d", done, m.removals)
	}
	return nil
}

// equalCounts compares exported points with the model's, treating a missing
// point as 0 on either side (an up-down counter keeps a point at 0).
func equalCounts[K comparable](name string, got, want map[K]int64) error {
	for _, k := range slices.Collect(maps.Keys(got)) {
		if got[k] != want[k] {
			return fmt.Errorf("%s %v = %d, model %d", name, k, got[k], want[k])
		}
	}
	for k, v := range want {
		if got[k] != v {
			return fmt.Errorf("%s %v = %d, model %d", name, k, got[k], v)
		}
	}
	return nil
}

// snapshot is the exported pairing telemetry, keyed by attribute values.
type snapshot struct {
	dispatched, inflight, retried map[nt]int64
	completed                     map[nto]int64
	duration                      map[nto]durAgg
	evicted                       map[string]int64
	workflowDuration              map[ntos]durAgg
	runEvicted                    map[string]int64
}

func readSnapshot(sm metricdata.ScopeMetrics) snapshot {
	s := snapshot{
		dispatched: map[nt]int64{}, inflight: map[nt]int64{}, retried: map[nt]int64{},
		completed: map[nto]int64{}, duration: map[nto]durAgg{}, evicted: map[string]int64{},
		workflowDuration: map[ntos]durAgg{}, runEvicted: map[string]int64{},
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

func (s *seqTB) cleanup() {
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}
