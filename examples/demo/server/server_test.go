package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/eventstore"
)

// runFor runs srv for d (a time-bounded run, not a sleep: Run drains and
// returns by itself) and fails the test on a setup error.
func runFor(t *testing.T, srv *Server, d time.Duration) Summary {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	sum, err := srv.Run(ctx)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return sum
}

// TestRun runs one simulation for a short while, with a clock far from the
// wall clock, and checks what a user of the demo relies on: the drain leaves
// nothing in flight, the library's metrics agree with the server's own
// counts, conflicts happened and were retried, transcripts were stored, and
// every history is well formed and stamped by the server's clock.
func TestRun(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	spans := tracetest.NewSpanRecorder()
	tp := trace.NewTracerProvider(trace.WithSpanProcessor(spans))
	const offset = 10 * 365 * 24 * time.Hour
	clock := func() time.Time { return time.Now().Add(-offset) }
	before := clock()

	srv, err := New(WithMeterProvider(mp), WithTracerProvider(tp), WithClock(clock),
		WithRate(100), WithWorkers(8), WithSeed(7), WithDrainGrace(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	sum := runFor(t, srv, 1500*time.Millisecond)
	logSummary(t, sum)
	after := clock()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	metrics := indexMetrics(rm)

	t.Run("no errors", func(t *testing.T) {
		if sum.Errors != 0 {
			t.Fatalf("%d unexpected errors, the first: %v", sum.Errors, sum.FirstError)
		}
	})

	t.Run("workload ran", func(t *testing.T) {
		checks := []struct {
			name string
			got  int64
		}{
			{"workflows started", sum.WorkflowsStarted},
			{"completed", sum.Completed},
			{"continued as new", sum.ContinuedAsNew},
			{"activities succeeded", sum.Succeeded},
			{"retries", sum.Retried},
			{"signals", sum.Signals},
			{"schedules fired", sum.SchedulesFired},
			{"timers fired", sum.TimersFired},
			{"conflicts retried", sum.Conflicts},
			{"transcript events stored", sum.TranscriptEvents},
			{"transcript duplicates dropped", sum.TranscriptDuplicates},
			{"ephemeral events forwarded", sum.EphemeralEvents},
			{"cancelled at shutdown", sum.CancelledAtShutdown},
			{"store calls", sum.StoreCalls},
			{"keyspace calls", sum.KeyspaceCalls},
		}
		for _, c := range checks {
			if c.got <= 0 {
				t.Errorf("%s = %d, want > 0", c.name, c.got)
			}
		}
	})

	t.Run("drained to zero", func(t *testing.T) {
		if sum.OpenAtEnd != 0 || sum.InFlightAtEnd != 0 || sum.ClaimedRowsAtEnd != 0 {
			t.Errorf("after the drain: %d workflows open, %d activities in flight, %d outbox rows claimed; want 0, 0, 0",
				sum.OpenAtEnd, sum.InFlightAtEnd, sum.ClaimedRowsAtEnd)
		}
		inflight := sumPoints(t, metrics, "aion.inflight_activities", nil)
		if len(inflight) == 0 {
			t.Fatal("no aion.inflight_activities series")
		}
		for set, v := range inflight {
			if v != 0 {
				t.Errorf("aion.inflight_activities{%s} = %v after the drain, want 0", set, v)
			}
		}
	})

	t.Run("every dispatch paired", func(t *testing.T) {
		dispatched := total(sumPoints(t, metrics, "aion.activities.dispatched", nil))
		completed := total(sumPoints(t, metrics, "aion.activities.completed", nil))
		if dispatched != float64(sum.Dispatched) || completed != dispatched {
			t.Errorf("dispatched %v (server counted %d), completed %v: want all equal", dispatched, sum.Dispatched, completed)
		}
		ended := sum.Succeeded + sum.ActivitiesFailed + sum.ActivitiesCancelled + sum.ActivitiesTimedOut + sum.Abandoned
		if ended != sum.Dispatched {
			t.Errorf("activities ended %d, dispatched %d", ended, sum.Dispatched)
		}
	})

	t.Run("metrics agree with the server", func(t *testing.T) {
		byOutcome := func(outcome string) float64 {
			return total(sumPoints(t, metrics, "aion.activities.completed", func(s attribute.Set) bool {
				v, _ := s.Value("aion.activity.outcome")
				return v.AsString() == outcome
			}))
		}
		byStatus := func(status string) float64 {
			return total(sumPoints(t, metrics, "aion.workflows.completed", func(s attribute.Set) bool {
				v, _ := s.Value("aion.workflow.status")
				return v.AsString() == status
			}))
		}
		// Activity outcomes and retries match the history exactly: otelstore
		// observes each workflow's batches in history order even when two
		// appends race, so no terminal is seen after its run's close.
		outcomes := []struct {
			name   string
			metric float64
			server int64
		}{
			{"succeeded", byOutcome("succeeded"), sum.Succeeded},
			{"failed", byOutcome("failed"), sum.ActivitiesFailed},
			{"cancelled", byOutcome("cancelled"), sum.ActivitiesCancelled},
			{"timed_out", byOutcome("timed_out"), sum.ActivitiesTimedOut},
			{"abandoned", byOutcome("abandoned"), sum.Abandoned},
			{"retried", total(sumPoints(t, metrics, "aion.activities.retried", nil)), sum.Retried},
		}
		for _, o := range outcomes {
			if o.metric != float64(o.server) {
				t.Errorf("activities %s: metric %v, server counted %d", o.name, o.metric, o.server)
			}
		}

		checks := []struct {
			name   string
			metric float64
			server int64
		}{
			{"workflows started (every run)", total(sumPoints(t, metrics, "aion.workflows.started", nil)), sum.WorkflowsStarted + sum.ContinuedAsNew},
			{"completed", byStatus("completed"), sum.Completed},
			{"failed", byStatus("failed"), sum.Failed},
			{"cancelled", byStatus("cancelled"), sum.Cancelled},
			{"timed_out", byStatus("timed_out"), sum.TimedOut},
			{"continued_as_new", byStatus("continued_as_new"), sum.ContinuedAsNew},
			{"reopened", total(sumPoints(t, metrics, "aion.workflows.reopened", nil)), sum.Reopened},
			{"signals", total(sumPoints(t, metrics, "aion.signals.delivered", nil)), sum.Signals},
			{"schedules", total(sumPoints(t, metrics, "aion.schedules.fired", nil)), sum.SchedulesFired},
		}
		for _, c := range checks {
			if c.metric != float64(c.server) {
				t.Errorf("%s: metric %v, server counted %d", c.name, c.metric, c.server)
			}
		}
		finished := sum.Completed + sum.Failed + sum.Cancelled + sum.TimedOut - sum.Reopened
		if finished != sum.WorkflowsStarted {
			t.Errorf("workflows finished for good %d, started %d (none open)", finished, sum.WorkflowsStarted)
		}
	})

	t.Run("conflicts show on spans", func(t *testing.T) {
		conflicts := 0
		for _, s := range spans.Ended() {
			for _, kv := range s.Attributes() {
				if kv.Key == "error.type" && kv.Value.AsString() == "sequence_conflict" {
					conflicts++
				}
			}
		}
		if conflicts == 0 {
			t.Error("no span recorded a sequence conflict")
		}
	})

	t.Run("histories", func(t *testing.T) {
		checkHistories(t, srv, before, after, sum)
	})

	t.Run("transcripts", func(t *testing.T) {
		checkTranscripts(t, srv, sum)
	})

	t.Run("runs once", func(t *testing.T) {
		if _, err := srv.Run(t.Context()); !errors.Is(err, ErrAlreadyRun) {
			t.Errorf("second Run: %v, want ErrAlreadyRun", err)
		}
	})
}

// checkHistories reads every history back from the inner store and checks
// that it is one an engine could have written: each run opens with
// WorkflowStarted, numbers its activities from 0, ends each activity once, and
// closes (the drain closes every run); a continue-as-new hands over to the
// run it names; nothing of a run is recorded after it closed except a
// reopen; every event names its run and was stamped by the server's clock.
func checkHistories(t *testing.T, srv *Server, before, after time.Time, sum Summary) {
	ctx := t.Context()
	ids, err := srv.mem.ListWorkflowIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(ids)) != sum.WorkflowsStarted {
		t.Errorf("%d histories, %d workflows started", len(ids), sum.WorkflowsStarted)
	}
	var abandoned int64
	for _, id := range ids {
		events, err := srv.mem.ReadHistory(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := events[0].(eventstore.WorkflowStarted); !ok {
			t.Errorf("workflow %s: first event %T", id, events[0])
			continue
		}
		runs := map[eventstore.RunID]*historyRun{}
		var current eventstore.RunID
		var handover eventstore.RunID
		for i, ev := range events {
			env := ev.EventEnvelope()
			if env.RunID.IsZero() {
				t.Errorf("workflow %s event %d (%T): zero RunID", id, env.Seq, ev)
			}
			if env.RecordedAt.Before(before) || env.RecordedAt.After(after) {
				t.Errorf("workflow %s event %d (%T): RecordedAt %v not from the server clock [%v, %v]", id, env.Seq, ev, env.RecordedAt, before, after)
			}
			if started, ok := ev.(eventstore.WorkflowStarted); ok {
				if i > 0 && started.RunID != handover {
					t.Errorf("workflow %s: run %s started without a continue-as-new naming it", id, started.RunID)
				}
				runs[started.RunID] = &historyRun{ended: map[eventstore.ActivityID]bool{}}
				current = started.RunID
				continue
			}
			r := runs[env.RunID]
			if r == nil || env.RunID != current {
				t.Errorf("workflow %s event %d (%T): not of the current run", id, env.Seq, ev)
				continue
			}
			if r.closed {
				if _, ok := ev.(eventstore.WorkflowReopened); !ok {
					t.Errorf("workflow %s event %d (%T): after the run closed", id, env.Seq, ev)
					continue
				}
			}
			switch e := ev.(type) {
			case eventstore.ActivityScheduled:
				if e.ActivityID != r.next {
					t.Errorf("workflow %s: activity %d scheduled, want %d", id, e.ActivityID, r.next)
				}
				r.next++
			case eventstore.ActivityCompleted:
				r.end(t, id, e.ActivityID)
			case eventstore.ActivityFailed:
				if e.Error.Kind == eventstore.Terminal {
					r.end(t, id, e.ActivityID)
				}
			case eventstore.ActivityCancelled:
				r.end(t, id, e.ActivityID)
			case eventstore.ActivityTimedOut:
				r.end(t, id, e.ActivityID)
			case eventstore.WorkflowReopened:
				r.closed = false
			case eventstore.WorkflowContinuedAsNew:
				r.closed, handover = true, e.NewRunID
			case eventstore.WorkflowTimedOut:
				r.closed = true
				abandoned += int64(int(r.next) - len(r.ended))
			case eventstore.WorkflowCompleted, eventstore.WorkflowFailed, eventstore.WorkflowCancelled:
				r.closed = true
			}
		}
		for runID, r := range runs {
			if !r.closed {
				t.Errorf("workflow %s run %s: still open after the drain", id, runID)
			}
		}
	}
	if abandoned != sum.Abandoned {
		t.Errorf("histories leave %d activities open at a workflow timeout, server counted %d abandoned", abandoned, sum.Abandoned)
	}
}

// historyRun is what checkHistories tracks of one run.
type historyRun struct {
	next   eventstore.ActivityID
	ended  map[eventstore.ActivityID]bool
	closed bool
}

func (r *historyRun) end(t *testing.T, wf eventstore.WorkflowID, id eventstore.ActivityID) {
	t.Helper()
	if id >= r.next {
		t.Errorf("workflow %s: activity %d ended before it was scheduled", wf, id)
	}
	if r.ended[id] {
		t.Errorf("workflow %s: activity %d ended twice", wf, id)
	}
	r.ended[id] = true
}

// checkTranscripts reads back every transcript stream of every run and checks
// that store seqs are contiguous from 0, that no (agent, worker seq) pair was
// stored twice despite the re-deliveries, and that the total matches what the
// Sequencer reported.
func checkTranscripts(t *testing.T, srv *Server, sum Summary) {
	ctx := t.Context()
	ids, err := srv.mem.ListWorkflowIDs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	kinds := map[string]int{}
	for _, id := range ids {
		chain, err := srv.mem.ReadRunChain(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		for _, run := range chain {
			streams, err := srv.keys.ListStreams(ctx, id, run.RunID)
			if err != nil {
				t.Fatal(err)
			}
			for _, st := range streams {
				recs, err := srv.keys.ReadFrom(ctx, st.Key, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				seen := map[uint64]bool{}
				for i, r := range recs {
					if r.StoreSeq != uint64(i) {
						t.Errorf("stream %s: record %d has store seq %d", st.Key, i, r.StoreSeq)
					}
					if seen[r.Event.WorkerSeq] {
						t.Errorf("stream %s: worker seq %d stored twice", st.Key, r.Event.WorkerSeq)
					}
					seen[r.Event.WorkerSeq] = true
					kinds[r.Event.Content.ContentKind()]++
				}
				stored += int64(len(recs))
			}
		}
	}
	if stored != sum.TranscriptEvents {
		t.Errorf("keyspace holds %d transcript events, the Sequencer reported %d written", stored, sum.TranscriptEvents)
	}
	for _, k := range []string{"message", "tool_call", "tool_result", "usage"} {
		if kinds[k] == 0 {
			t.Errorf("no %s stored", k)
		}
	}
	if kinds["status"] != 0 {
		t.Errorf("%d status events stored; they are ephemeral", kinds["status"])
	}
}

// indexMetrics maps instrument names to their data.
func indexMetrics(rm metricdata.ResourceMetrics) map[string]metricdata.Aggregation {
	out := map[string]metricdata.Aggregation{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m.Data
		}
	}
	return out
}

// sumPoints returns the values of a sum instrument's points, by attribute
// set, keeping those keep accepts (all if nil).
func sumPoints(t *testing.T, metrics map[string]metricdata.Aggregation, name string, keep func(attribute.Set) bool) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	switch data := metrics[name].(type) {
	case metricdata.Sum[int64]:
		for _, p := range data.DataPoints {
			if keep == nil || keep(p.Attributes) {
				out[p.Attributes.Encoded(attribute.DefaultEncoder())] += float64(p.Value)
			}
		}
	case metricdata.Sum[float64]:
		for _, p := range data.DataPoints {
			if keep == nil || keep(p.Attributes) {
				out[p.Attributes.Encoded(attribute.DefaultEncoder())] += p.Value
			}
		}
	case nil:
	default:
		t.Fatalf("%s: unexpected data %T", name, data)
	}
	return out
}

func total(m map[string]float64) float64 {
	var n float64
	for _, v := range m {
		n += v
	}
	return n
}

func logSummary(t *testing.T, sum Summary) {
	t.Helper()
	var b strings.Builder
	if _, err := sum.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + b.String())
}
