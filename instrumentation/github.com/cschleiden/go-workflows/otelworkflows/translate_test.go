package otelworkflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/workflow"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/pairing"
)

// workflowError is the error a finished execution records, as go-workflows
// serialises it (workflowerrors.Error, internal to go-workflows, is
// reached through the attributes' JSON).
func finished(t *testing.T, errJSON string) *history.Event {
	t.Helper()
	attrs := &history.ExecutionCompletedAttributes{}
	if errJSON != "" {
		raw := []byte(`{"error":` + errJSON + `}`)
		a, err := history.DeserializeAttributes(history.EventType_WorkflowExecutionFinished, raw)
		if err != nil {
			t.Fatal(err)
		}
		attrs = a.(*history.ExecutionCompletedAttributes)
	}
	return history.NewHistoryEvent(5, time.Unix(10, 0), history.EventType_WorkflowExecutionFinished, attrs)
}

// TestTranslateStatus: how an execution's close becomes a status.
func TestTranslateStatus(t *testing.T) {
	wf := executionKey("i", "e")
	testCases := []struct {
		name string
		ev   *history.Event
		want int
		kind eventstore.Event
	}{
		{"completed", finished(t, ""), statusCompleted, eventstore.WorkflowCompleted{}},
		{"failed", finished(t, `{"type":"","message":"boom"}`), statusFailed, eventstore.WorkflowFailed{}},
		{"cancelled", finished(t, `{"type":"","message":"context canceled"}`), statusCancelled, eventstore.WorkflowCancelled{}},
		{"cancelled, wrapped", finished(t, `{"type":"wrapError","message":"waiting: context canceled","cause":{"type":"","message":"context canceled"}}`), statusCancelled, eventstore.WorkflowCancelled{}},
		{"failed, mentions cancel", finished(t, `{"type":"","message":"context canceled by the bank"}`), statusFailed, eventstore.WorkflowFailed{}},
		{"continued as new", history.NewHistoryEvent(5, time.Unix(10, 0), history.EventType_WorkflowExecutionContinuedAsNew, &history.ExecutionContinuedAsNewAttributes{ContinuedExecutionID: "e2"}), statusContinuedAsNew, pairing.ContinuedAsNew{}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			tr := translate(wf, "i", tc.ev)
			if tr.status != tc.want || fmt.Sprintf("%T", tr.ev) != fmt.Sprintf("%T", tc.kind) {
				t.Fatalf("status %d (%T), want %d (%T)", tr.status, tr.ev, tc.want, tc.kind)
			}
			env := tr.ev.EventEnvelope()
			if env.WorkflowID != wf || env.RunID != eventstore.RunID(wf) || env.Seq != 5 || !env.RecordedAt.Equal(time.Unix(10, 0)) {
				t.Fatalf("envelope %+v", env)
			}
			if c, ok := tr.ev.(pairing.ContinuedAsNew); ok {
				if next := executionKey("i", "e2"); c.NewRunID != eventstore.RunID(next) || c.NewWorkflowID != next {
					t.Fatalf("next run %v of workflow %v, want the key of (i, e2) as both", c.NewRunID, c.NewWorkflowID)
				}
			}
		})
	}
}

// TestTranslateActivities: each attempt is a dispatch keyed by its schedule
// event ID; a later attempt is a retry; a failure settles its attempt.
func TestTranslateActivities(t *testing.T) {
	wf := executionKey("i", "e")
	at := time.Unix(20, 5).Add(0) // a wall time
	sched := history.NewHistoryEvent(3, at, history.EventType_ActivityScheduled, &history.ActivityScheduledAttributes{Name: "pay", Attempt: 1}, history.ScheduleEventID(9))
	tr := translate(wf, "i", sched)
	if s, ok := tr.ev.(eventstore.ActivityScheduled); !ok || s.ActivityID != 9 || s.ActivityType != "pay" || !tr.retry {
		t.Fatalf("scheduled: %+v retry %v", tr.ev, tr.retry)
	}
	failed := history.NewHistoryEvent(4, at, history.EventType_ActivityFailed, &history.ActivityFailedAttributes{}, history.ScheduleEventID(9))
	if f, ok := translate(wf, "i", failed).ev.(eventstore.ActivityFailed); !ok || f.ActivityID != 9 || f.Error.Kind != eventstore.Terminal {
		t.Fatalf("failed: %+v", f)
	}
	done := history.NewHistoryEvent(4, at, history.EventType_ActivityCompleted, &history.ActivityCompletedAttributes{}, history.ScheduleEventID(9))
	if c, ok := translate(wf, "i", done).ev.(eventstore.ActivityCompleted); !ok || c.ActivityID != 9 {
		t.Fatalf("completed: %+v", c)
	}
	timer := history.NewHistoryEvent(6, at, history.EventType_TimerFired, &history.TimerFiredAttributes{}, history.ScheduleEventID(2))
	if e := translate(wf, "i", timer).ev.EventEnvelope(); e.Seq != 6 {
		t.Fatalf("a timer keeps its position: %+v", e)
	}
}

// TestExecutionKey: the derivation is stable (a fixed value: every process
// and version must agree), injective on the pair's boundary, and
// different per execution.
func TestExecutionKey(t *testing.T) {
	if got := executionKey("order-1", "exec-1").String(); got != executionKey("order-1", "exec-1").String() {
		t.Fatal("not deterministic")
	}
	// The same as RFC 9562's version 5 of the length-prefixed pair.
	if want := uuid.NewSHA1(keySpace, append([]byte{7}, "order-1exec-1"...)); executionKey("order-1", "exec-1") != eventstore.WorkflowID(want) {
		t.Errorf("executionKey is not uuid.NewSHA1 of the length-prefixed pair: %v, want %v", executionKey("order-1", "exec-1"), want)
	}
	if executionKey("ab", "c") == executionKey("a", "bc") {
		t.Error("(ab, c) and (a, bc) share a key")
	}
	if executionKey("i", "e1") == executionKey("i", "e2") {
		t.Error("two executions of one instance share a key")
	}
	const golden = "cc1cc369-6969-5d73-9450-5c897e355451"
	if got := executionKey("order-1", "exec-1").String(); got != golden {
		t.Errorf("executionKey(order-1, exec-1) = %s: the derivation changed (was %s); trace IDs would no longer agree across versions", got, golden)
	}
}

// TestErrorType: go-workflows' errors get their error.type.
func TestErrorType(t *testing.T) {
	tel := newTelemetry(&config{namespace: "default"})
	testCases := []struct {
		err  error
		want string
	}{
		{backend.ErrInstanceNotFound, "instance_not_found"},
		{fmt.Errorf("x: %w", backend.ErrInstanceAlreadyExists), "instance_already_exists"},
		{backend.ErrInstanceNotFinished, "instance_not_finished"},
		{backend.ErrNotSupported{Message: "m"}, "not_supported"},
		{context.Canceled, "canceled"},
		{context.DeadlineExceeded, "deadline_exceeded"},
		{errors.New("other"), "_OTHER"},
	}
	for _, tc := range testCases {
		if got := tel.errorType(tc.err); got != tc.want {
			t.Errorf("errorType(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

// TestHostileNames: a workflow type that is not valid UTF-8 and huge is
// recorded cleaned, so the export cannot fail.
func TestHostileNames(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	d := New(&nopBackend{}, WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	defer Flush(context.Background(), d)
	typ := "\xff" + string(make([]byte, 1000))
	wi := core.NewWorkflowInstance("i\xff", "e")
	start := history.NewHistoryEvent(2, time.Unix(1, 0), history.EventType_WorkflowExecutionStarted, &history.ExecutionStartedAttributes{Name: typ})
	task := history.NewHistoryEvent(1, time.Unix(1, 0), history.EventType_WorkflowTaskStarted, &history.WorkflowTaskStartedAttributes{})
	if err := d.CompleteWorkflowTask(context.Background(), &backend.WorkflowTask{WorkflowInstance: wi}, core.WorkflowInstanceStateActive, []*history.Event{task, start}, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "aion.workflows.started" {
				continue
			}
			metricdatatest.AssertEqual(t, metricdata.Metrics{Name: m.Name, Description: m.Description, Unit: m.Unit, Data: metricdata.Sum[int64]{
				Temporality: metricdata.CumulativeTemporality, IsMonotonic: true,
				DataPoints: []metricdata.DataPoint[int64]{{Attributes: attribute.NewSet(attribute.String("aion.namespace", "default"), attribute.String("aion.workflow.type", clean(typ))), Value: 1}},
			}}, m, metricdatatest.IgnoreTimestamp())
			v := clean(typ)
			if !utf8.ValidString(v) || len(v) > 256 {
				t.Errorf("cleaned type %q", v)
			}
			return
		}
	}
	t.Fatal("no aion.workflows.started")
}

// nopBackend accepts every call.
type nopBackend struct{ backend.Backend }

func (nopBackend) CompleteWorkflowTask(context.Context, *backend.WorkflowTask, core.WorkflowInstanceState, []*history.Event, []*history.Event, []*history.Event, []*history.WorkflowEvent) error {
	return nil
}

// taskBackend hands out one workflow task.
type taskBackend struct {
	nopBackend
	task *backend.WorkflowTask
}

func (b taskBackend) GetWorkflowTask(context.Context, []workflow.Queue) (*backend.WorkflowTask, error) {
	return b.task, nil
}

// TestWorkflowTaskWait: a workflow task's time in queue runs from its first
// new event (a fired timer's due time) to the claim, by trigger.
func TestWorkflowTaskWait(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	testCases := []struct {
		name    string
		first   *history.Event
		trigger string
		want    float64
	}{
		{"signal", history.NewHistoryEvent(0, t0, history.EventType_SignalReceived, &history.SignalReceivedAttributes{}), "SignalReceived", 2.5},
		{"timer: from its due time", history.NewHistoryEvent(0, t0.Add(-time.Hour), history.EventType_TimerFired, &history.TimerFiredAttributes{At: t0.Add(time.Second)}), "TimerFired", 1.5},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			reader := sdkmetric.NewManualReader()
			inner := taskBackend{task: &backend.WorkflowTask{WorkflowInstance: core.NewWorkflowInstance("i", "e"), NewEvents: []*history.Event{tc.first}}}
			b := New(inner, WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
			b.(*decorated).cfg.now = func() time.Time { return t0.Add(2500 * time.Millisecond) }
			if _, err := b.GetWorkflowTask(context.Background(), nil); err != nil {
				t.Fatal(err)
			}
			var rm metricdata.ResourceMetrics
			if err := reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			for _, sm := range rm.ScopeMetrics {
				for _, m := range sm.Metrics {
					if m.Name != "aion.workflow.task.wait.duration" {
						continue
					}
					if m.Unit != "s" || m.Description == "" {
						t.Errorf("unit %q, description %q: want seconds, described", m.Unit, m.Description)
					}
					dps := m.Data.(metricdata.Histogram[float64]).DataPoints
					if len(dps) == 1 && !slices.Equal(dps[0].Bounds, durationBoundaries) {
						t.Errorf("bounds %v, want the catalog's %v", dps[0].Bounds, durationBoundaries)
					}
					if len(dps) != 1 || dps[0].Count != 1 || dps[0].Sum != tc.want {
						t.Fatalf("points %+v, want one of %g s", dps, tc.want)
					}
					if v, _ := dps[0].Attributes.Value("aion.workflow.task.trigger"); v.AsString() != tc.trigger {
						t.Fatalf("trigger %q, want %q", v.AsString(), tc.trigger)
					}
					return
				}
			}
			t.Fatal("no aion.workflow.task.wait.duration")
		})
	}
}

func (nopBackend) Close() error { return nil }
