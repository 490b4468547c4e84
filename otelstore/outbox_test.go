package otelstore_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/otelstore"
)

// Capability shapes cut out of a Memory, which has Outbox and ShardOwner,
// and a loopReader, which adds HistoriesReader.
type (
	plainOnly  struct{ eventstore.Store }
	outboxOnly struct {
		plainOnly
		eventstore.Outbox
	}
	shardsOnly struct {
		plainOnly
		eventstore.ShardOwner
	}
	outboxShard struct {
		plainOnly
		eventstore.Outbox
		eventstore.ShardOwner
	}
	historiesOnly struct {
		plainOnly
		eventstore.HistoriesReader
	}
	outboxHistories struct {
		outboxOnly
		eventstore.HistoriesReader
	}
	shardsHistories struct {
		shardsOnly
		eventstore.HistoriesReader
	}
	allThree struct {
		outboxShard
		eventstore.HistoriesReader
	}
)

// loopReader is ReadHistories as a loop of a store's ReadHistory.
type loopReader struct{ eventstore.Store }

func (l loopReader) ReadHistories(ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
	out := make([][]eventstore.Event, len(ids))
	for i, id := range ids {
		h, err := l.ReadHistory(ctx, id)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// The decorator has exactly the inner store's capabilities, in all eight
// combinations: hiding Outbox would silently stop fan-out staging, hiding
// HistoriesReader would make a resume a round trip per workflow, claiming
// a capability the inner store lacks would be a lie. ReadHistories is
// forwarded as one read_histories call.
func TestCapabilitiesPreserved(t *testing.T) {
	m := eventstore.NewMemory()
	wf, run := ids()
	if err := m.Append(context.Background(), eventstore.RecorderToken(), wf, []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "checkout"}}, 0); err != nil {
		t.Fatal(err)
	}
	p, r := plainOnly{m}, loopReader{m}
	testCases := []struct {
		name                        string
		inner                       eventstore.Store
		wantOutbox, wantSO, wantHis bool
	}{
		{"plain", p, false, false, false},
		{"outbox", outboxOnly{p, m}, true, false, false},
		{"shard owner", shardsOnly{p, m}, false, true, false},
		{"outbox and shard owner", outboxShard{p, m, m}, true, true, false},
		{"histories", historiesOnly{p, r}, false, false, true},
		{"outbox and histories", outboxHistories{outboxOnly{p, m}, r}, true, false, true},
		{"shard owner and histories", shardsHistories{shardsOnly{p, m}, r}, false, true, true},
		{"all three", allThree{outboxShard{p, m, m}, r}, true, true, true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			s := h.wrap(t, tc.inner)
			_, gotOutbox := s.(eventstore.Outbox)
			_, gotSO := s.(eventstore.ShardOwner)
			hr, gotHis := s.(eventstore.HistoriesReader)
			if gotOutbox != tc.wantOutbox || gotSO != tc.wantSO || gotHis != tc.wantHis {
				t.Fatalf("Outbox=%v ShardOwner=%v HistoriesReader=%v, want %v %v %v", gotOutbox, gotSO, gotHis, tc.wantOutbox, tc.wantSO, tc.wantHis)
			}
			if !gotHis {
				return
			}
			got, err := hr.ReadHistories(context.Background(), []eventstore.WorkflowID{wf, wf})
			if err != nil || len(got) != 2 || len(got[0]) != 1 || len(got[1]) != 1 {
				t.Fatalf("ReadHistories = %v, %v; want the one event twice", got, err)
			}
			var names []string
			for _, sp := range h.spans.Ended() {
				names = append(names, sp.Name())
			}
			if !slices.Contains(names, string(otelstore.OpReadHistories)) {
				t.Errorf("spans %v, want a %s span", names, otelstore.OpReadHistories)
			}
		})
	}
}

// stageRow appends a WorkflowStarted with the given outbox rows at expectedSeq.
func stageRow(t *testing.T, s eventstore.Store, wf eventstore.WorkflowID, run eventstore.RunID, expectedSeq uint64, rows []eventstore.OutboxRow) error {
	t.Helper()
	ev := []eventstore.Event{eventstore.WorkflowStarted{Envelope: env(run, 0), WorkflowType: "checkout"}}
	return outbox(s).AppendWithOutbox(context.Background(), eventstore.RecorderToken(), wf, ev, expectedSeq, rows)
}

func row(wf eventstore.WorkflowID, run eventstore.RunID) []eventstore.OutboxRow {
	return []eventstore.OutboxRow{{WorkflowID: wf, RunID: run, Ordinal: 0, ActivityType: "charge", Input: payload}}
}

// Seed rule: a successful AppendWithOutbox that staged a row wakes the
// dispatcher once; wakes coalesce in a one-slot channel.
func TestOutboxWakeOnSuccessfulStage(t *testing.T) {
	wake := make(chan struct{}, 1)
	s := newHarness(t).wrap(t, eventstore.NewMemory(), otelstore.WithOutboxWake(wake))
	for range 2 {
		wf, run := ids()
		if err := stageRow(t, s, wf, run, 0, row(wf, run)); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-wake:
	default:
		t.Fatal("a successful non-empty stage did not wake the dispatcher")
	}
	select {
	case <-wake:
		t.Fatal("two wakes were delivered to a one-slot channel; they must coalesce")
	default:
	}
}

// Seed rule: no wake for an empty row slice, nor for a failed append.
func TestOutboxNoWake(t *testing.T) {
	testCases := []struct {
		name        string
		expectedSeq uint64
		rows        func(eventstore.WorkflowID, eventstore.RunID) []eventstore.OutboxRow
		wantErr     bool
	}{
		{"empty row slice", 0, func(eventstore.WorkflowID, eventstore.RunID) []eventstore.OutboxRow { return nil }, false},
		{"failed append", 9, row, true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			wake := make(chan struct{}, 1)
			s := newHarness(t).wrap(t, eventstore.NewMemory(), otelstore.WithOutboxWake(wake))
			wf, run := ids()
			err := stageRow(t, s, wf, run, tc.expectedSeq, tc.rows(wf, run))
			if (err != nil) != tc.wantErr {
				t.Fatalf("AppendWithOutbox: %v, want error %v", err, tc.wantErr)
			}
			select {
			case <-wake:
				t.Fatal("woken, but nothing was staged")
			default:
			}
		})
	}
}

// A full wake channel never blocks the append.
func TestOutboxWakeNeverBlocks(t *testing.T) {
	wake := make(chan struct{}) // unbuffered, nobody receiving
	s := newHarness(t).wrap(t, eventstore.NewMemory(), otelstore.WithOutboxWake(wake))
	wf, run := ids()
	if err := stageRow(t, s, wf, run, 0, row(wf, run)); err != nil {
		t.Fatal(err)
	}
}

// AppendWithOutbox feeds the lifecycle metrics like Append.
func TestAppendWithOutboxObservesLifecycle(t *testing.T) {
	h := newHarness(t)
	s := h.wrap(t, eventstore.NewMemory())
	wf, run := ids()
	if err := stageRow(t, s, wf, run, 0, row(wf, run)); err != nil {
		t.Fatal(err)
	}
	h.assertSum(t, "aion.workflows.started", true, point(1, ns, otelstore.AttrWorkflowType.String("checkout")))
	assertSpanAttr(t, h.spans.Ended()[0], otelstore.AttrOutboxRowCount.Int(1))
}

// queue is a workflow whose activities are dispatched through the outbox
// of a decorated store, for the tests of the wait for a worker.
type queue struct {
	t    *testing.T
	s    eventstore.Store
	wf   eventstore.WorkflowID
	run  eventstore.RunID
	next eventstore.ActivityID // the next activity's ordinal
	seq  uint64                // the history's length
}

func newQueue(t *testing.T, s eventstore.Store) *queue {
	wf, run := ids()
	return &queue{t: t, s: s, wf: wf, run: run}
}

func (q *queue) env() eventstore.Envelope {
	return eventstore.Envelope{RunID: q.run, RecordedAt: time.Now()}
}

// dispatch schedules one activity of each type, now, with an outbox row
// each, in one commit; the first call also starts the run.
func (q *queue) dispatch(types ...string) {
	q.t.Helper()
	events, rows := q.scheduled(types...)
	q.appendWithOutbox(events, rows)
}

// scheduled returns the events and rows that dispatch one activity of
// each type now; the first call's events also start the run.
func (q *queue) scheduled(types ...string) ([]eventstore.Event, []eventstore.OutboxRow) {
	var events []eventstore.Event
	if q.seq == 0 {
		events = append(events, eventstore.WorkflowStarted{Envelope: q.env(), WorkflowType: "order"})
	}
	var rows []eventstore.OutboxRow
	for _, typ := range types {
		events = append(events, eventstore.ActivityScheduled{Envelope: q.env(), ActivityID: q.next, ActivityType: typ})
		rows = append(rows, eventstore.OutboxRow{RunID: q.run, Ordinal: q.next, ActivityType: typ})
		q.next++
	}
	return events, rows
}

func (q *queue) appendWithOutbox(events []eventstore.Event, rows []eventstore.OutboxRow) {
	q.t.Helper()
	if err := outbox(q.s).AppendWithOutbox(context.Background(), eventstore.RecorderToken(), q.wf, events, q.seq, rows); err != nil {
		q.t.Fatal(err)
	}
	q.seq += uint64(len(events))
}

// claim claims up to n rows and returns their ordinals.
func (q *queue) claim(n int) []eventstore.ActivityID {
	q.t.Helper()
	rows, err := outbox(q.s).ClaimOutboxRows(context.Background(), n)
	if err != nil {
		q.t.Fatal(err)
	}
	out := []eventstore.ActivityID{}
	for _, r := range rows {
		out = append(out, r.Ordinal)
	}
	return out
}

// complete appends the completion of each activity, now.
func (q *queue) complete(ids ...eventstore.ActivityID) {
	q.t.Helper()
	var events []eventstore.Event
	for _, id := range ids {
		events = append(events, eventstore.ActivityCompleted{Envelope: q.env(), ActivityID: id})
	}
	if err := q.s.Append(context.Background(), eventstore.RecorderToken(), q.wf, events, q.seq); err != nil {
		q.t.Fatal(err)
	}
	q.seq += uint64(len(events))
}

var (
	shop = otelstore.AttrNamespace.String("shop")
	ship = otelstore.AttrActivityType.String("ship")
)

// waits returns the wait histogram's samples count and sum by type.
func (h *harness) waits(t *testing.T) map[attribute.Distinct]histPoint {
	t.Helper()
	return histogramPoints[float64](t, h, "aion.activity.wait.duration", catalog.WorkflowDurationBoundaries)
}

// waitingAges returns the oldest-waiting gauge by attribute set.
func (h *harness) waitingAges(t *testing.T) map[attribute.Distinct]float64 {
	t.Helper()
	out := map[attribute.Distinct]float64{}
	if m, ok := h.metrics(t)["aion.activity.oldest_waiting_age"]; ok {
		for _, dp := range m.Data.(metricdata.Gauge[float64]).DataPoints {
			out[dp.Attributes.Equivalent()] = dp.Value
		}
	}
	return out
}

// claimEvents renders the claim events of a span as "count@seconds" after
// start.
func claimEvents(s sdktrace.ReadOnlySpan, start time.Time) []string {
	var out []string
	for _, e := range s.Events() {
		if e.Name != "aion.activity.claim" {
			continue
		}
		var n int64
		for _, kv := range e.Attributes {
			if kv.Key == "aion.activity.claim_count" {
				n = kv.Value.AsInt64()
			}
		}
		out = append(out, fmt.Sprintf("%d@%gs", n, e.Time.Sub(start).Seconds()))
	}
	return out
}

// activityClaims returns the claim events of each ended activity span, by
// its aion.activity.id.
func (h *harness) activityClaims(start time.Time) map[int64][]string {
	out := map[int64][]string{}
	for _, s := range h.spans.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == otelstore.AttrActivityID {
				out[kv.Value.AsInt64()] = claimEvents(s, start)
			}
		}
	}
	return out
}

// Through the decorator, on a fake clock: activities dispatched through
// the outbox wait until a claim returns their rows; the wait histogram
// gets exactly the delays, the waiting age follows the clock and drops to
// 0 once the last row is claimed, the in-flight age goes on counting the
// claimed ones, and each activity span has its claim as an event.
func TestClaimsRecordTheWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		q := newQueue(t, h.wrap(t, eventstore.NewMemory(), otelstore.WithNamespace("shop")))
		start := time.Now()
		chargeSet, shipSet := distinct(shop, charge), distinct(shop, ship)
		ages := func(step string, c, s float64) {
			t.Helper()
			got := h.waitingAges(t)
			if len(got) != 2 || got[chargeSet] != c || got[shipSet] != s {
				t.Errorf("%s: waiting ages %v, want charge %v and ship %v", step, got, c, s)
			}
		}
		q.dispatch("charge", "charge", "ship") // activities 0, 1, 2
		ages("dispatched", 0, 0)
		time.Sleep(2 * time.Second)
		ages("2s later", 2, 2)
		if got := q.claim(1); !slices.Equal(got, []eventstore.ActivityID{0}) {
			t.Fatalf("claimed %v, want the oldest row", got)
		}
		ages("one charge claimed", 2, 2)
		time.Sleep(3 * time.Second)
		q.dispatch("ship") // activity 3, at 5s
		ages("5s", 5, 5)
		time.Sleep(time.Second)
		if got := q.claim(2); !slices.Equal(got, []eventstore.ActivityID{1, 2}) {
			t.Fatalf("claimed %v, want 1 and 2", got)
		}
		ages("6s, two more claimed", 0, 1)
		time.Sleep(4 * time.Second)
		q.claim(10)
		ages("10s, the last row claimed", 0, 0)
		if got := h.waits(t); len(got) != 2 || got[chargeSet] != (histPoint{2, 2 + 6}) || got[shipSet] != (histPoint{2, 6 + 5}) {
			t.Errorf("waits %v, want charge 2s and 6s, ship 6s and 5s", got)
		}
		if in := h.metrics(t)["aion.activity.oldest_inflight_age"].Data.(metricdata.Gauge[float64]).DataPoints; len(in) != 2 || in[0].Value != 10 || in[1].Value != 10 {
			t.Errorf("in-flight ages %+v, want 10s for both types: claimed is still in flight", in)
		}
		q.complete(0, 1, 2, 3)
		want := map[int64][]string{0: {"1@2s"}, 1: {"1@6s"}, 2: {"1@6s"}, 3: {"1@10s"}}
		if got := h.activityClaims(start); !maps.EqualFunc(got, want, slices.Equal) {
			t.Errorf("claim events %v, want %v", got, want)
		}
		for _, s := range h.spansNamed("claim_outbox_rows") {
			if n, ok := spanAttr(s, otelstore.AttrOutboxRowCount); !ok || n.AsInt64() < 1 {
				t.Errorf("claim span row count %v, want the rows claimed", n)
			}
		}
	})
}

// spanAttr returns a span's attribute key.
func spanAttr(s sdktrace.ReadOnlySpan, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// A row re-armed (its worker was lost) and claimed again: one wait, to the
// first claim; the second claim is the second event on the span.
func TestReclaimRecordsNoSecondWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		q := newQueue(t, h.wrap(t, eventstore.NewMemory()))
		start := time.Now()
		q.dispatch("charge")
		time.Sleep(time.Second)
		q.claim(1)
		time.Sleep(4 * time.Second)
		if err := outbox(q.s).RearmOutboxPending(context.Background(), []eventstore.OutboxRow{{DispatchKey: eventstore.DispatchKey(q.wf, q.run, 0)}}); err != nil {
			t.Fatal(err)
		}
		if got := q.claim(1); len(got) != 1 {
			t.Fatalf("re-claimed %v, want the re-armed row", got)
		}
		q.complete(0)
		if got := h.waits(t); got[distinct(ns, charge)] != (histPoint{1, 1}) {
			t.Errorf("waits %v, want one of 1s", got)
		}
		if got := h.activityClaims(start)[0]; !slices.Equal(got, []string{"1@1s", "2@5s"}) {
			t.Errorf("claim events %v, want the claim at 1s and the re-claim at 5s", got)
		}
	})
}

// lateReturn commits AppendWithOutbox at once and holds its return until
// released: the append returns late, after its rows were claimed.
type lateReturn struct {
	*eventstore.Memory
	committed, release chan struct{}
}

func (l *lateReturn) AppendWithOutbox(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64, rows []eventstore.OutboxRow) error {
	err := l.Memory.AppendWithOutbox(ctx, tok, wf, events, expectedSeq, rows)
	l.committed <- struct{}{}
	<-l.release
	return err
}

// A worker claims the rows before the append that staged them returns (and
// so before the decorator observes their dispatch): the claims wait for
// their dispatch and the waits are the same.
func TestClaimBeforeTheAppendReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		inner := &lateReturn{Memory: eventstore.NewMemory(), committed: make(chan struct{}), release: make(chan struct{})}
		q := newQueue(t, h.wrap(t, inner))
		start := time.Now()
		events, rows := q.scheduled("charge", "ship")
		done := make(chan struct{})
		go func() {
			defer close(done)
			q.appendWithOutbox(events, rows)
		}()
		<-inner.committed
		time.Sleep(3 * time.Second)
		if got := q.claim(5); len(got) != 2 {
			t.Fatalf("claimed %v, want both rows", got)
		}
		if got := h.waits(t); len(got) != 0 {
			t.Errorf("waits %v before the dispatch was observed, want none yet", got)
		}
		close(inner.release)
		<-done
		if got := h.waits(t); got[distinct(ns, charge)] != (histPoint{1, 3}) || got[distinct(ns, ship)] != (histPoint{1, 3}) {
			t.Errorf("waits %v, want 3s for each", got)
		}
		if got := h.waitingAges(t); got[distinct(ns, charge)] != 0 || got[distinct(ns, ship)] != 0 {
			t.Errorf("waiting ages %v, want 0: both rows are claimed", got)
		}
		q.complete(0, 1)
		if got := h.activityClaims(start); !slices.Equal(got[0], []string{"1@3s"}) || !slices.Equal(got[1], []string{"1@3s"}) {
			t.Errorf("claim events %v, want one at 3s on each span", got)
		}
	})
}

// An activity scheduled by a plain Append has no row: it never waits. A
// row staged later, alone, for it makes it wait from its dispatch.
func TestOnlyStagedActivitiesWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t)
		q := newQueue(t, h.wrap(t, eventstore.NewMemory()))
		events, rows := q.scheduled("charge")
		if err := q.s.Append(context.Background(), eventstore.RecorderToken(), q.wf, events, 0); err != nil {
			t.Fatal(err)
		}
		q.seq += uint64(len(events))
		time.Sleep(time.Minute)
		if got := h.waitingAges(t); len(got) != 0 {
			t.Errorf("waiting ages %v with no row staged, want none", got)
		}
		q.appendWithOutbox(nil, rows)
		if got := h.waitingAges(t); got[distinct(ns, charge)] != 60 {
			t.Errorf("waiting ages %v, want charge 60s: dispatched a minute ago", got)
		}
	})
}

// A claim that fails or claims nothing records nothing; the span of a claim
// says how many rows it returned.
func TestEmptyOrFailedClaimRecordsNothing(t *testing.T) {
	h := newHarness(t)
	q := newQueue(t, h.wrap(t, eventstore.NewMemory()))
	q.dispatch("charge")
	if _, err := outbox(q.s).ClaimOutboxRows(context.Background(), 0); err == nil {
		t.Fatal("a claim limit of 0 did not fail")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := outbox(q.s).ClaimOutboxRows(ctx, 1); err == nil {
		t.Fatal("a claim on a done context did not fail")
	}
	if got := h.waits(t); len(got) != 0 {
		t.Errorf("waits %v after failed claims", got)
	}
	q.claim(1)
	q.claim(1) // nothing left
	spans := h.spansNamed("claim_outbox_rows")
	var counts []int64
	for _, s := range spans {
		if v, ok := spanAttr(s, otelstore.AttrOutboxRowCount); ok {
			counts = append(counts, v.AsInt64())
		}
	}
	if !slices.Equal(counts, []int64{1, 0}) {
		t.Errorf("claim spans' row counts %v, want [1 0] (the failed claims carry none)", counts)
	}
	if got := h.waits(t); got[distinct(ns, charge)].count != 1 {
		t.Errorf("waits %v, want one", got)
	}
}
