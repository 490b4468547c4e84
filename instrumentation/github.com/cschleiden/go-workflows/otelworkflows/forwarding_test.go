package otelworkflows_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/backend/metrics"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/diag"
	"github.com/cschleiden/go-workflows/workflow"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/instrumentation/github.com/cschleiden/go-workflows/otelworkflows"
)

// spy is a backend.Backend that records each call's arguments and returns
// what it is told to.
type spy struct {
	mu      sync.Mutex
	calls   []string
	args    []any
	err     error
	wfTask  *backend.WorkflowTask
	actTask *backend.ActivityTask
	hist    []*history.Event
	stats   *backend.Stats
	opts    *backend.Options
	tracer  trace.Tracer
	metrics metrics.Client
	closed  int
}

func (s *spy) rec(name string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		s.args = args
	}
	s.calls = append(s.calls, name)
}

func (s *spy) CreateWorkflowInstance(_ context.Context, i *workflow.Instance, e *history.Event) error {
	s.rec("CreateWorkflowInstance", i, e)
	return s.err
}
func (s *spy) CancelWorkflowInstance(_ context.Context, i *workflow.Instance, e *history.Event) error {
	s.rec("CancelWorkflowInstance", i, e)
	return s.err
}
func (s *spy) RemoveWorkflowInstance(_ context.Context, i *workflow.Instance) error {
	s.rec("RemoveWorkflowInstance", i)
	return s.err
}
func (s *spy) RemoveWorkflowInstances(_ context.Context, o ...backend.RemovalOption) error {
	s.rec("RemoveWorkflowInstances", len(o))
	return s.err
}
func (s *spy) GetWorkflowInstanceState(_ context.Context, i *workflow.Instance) (core.WorkflowInstanceState, error) {
	s.rec("GetWorkflowInstanceState", i)
	return core.WorkflowInstanceStateContinuedAsNew, s.err
}
func (s *spy) GetWorkflowInstanceHistory(_ context.Context, i *workflow.Instance, last *int64) ([]*history.Event, error) {
	s.rec("GetWorkflowInstanceHistory", i, last)
	return s.hist, s.err
}
func (s *spy) SignalWorkflow(_ context.Context, id string, e *history.Event) error {
	s.rec("SignalWorkflow", id, e)
	return s.err
}
func (s *spy) PrepareWorkflowQueues(_ context.Context, q []workflow.Queue) error {
	s.rec("PrepareWorkflowQueues", fmt.Sprint(q))
	return s.err
}
func (s *spy) PrepareActivityQueues(_ context.Context, q []workflow.Queue) error {
	s.rec("PrepareActivityQueues", fmt.Sprint(q))
	return s.err
}
func (s *spy) GetWorkflowTask(_ context.Context, q []workflow.Queue) (*backend.WorkflowTask, error) {
	s.rec("GetWorkflowTask", fmt.Sprint(q))
	return s.wfTask, s.err
}
func (s *spy) ExtendWorkflowTask(_ context.Context, t *backend.WorkflowTask) error {
	s.rec("ExtendWorkflowTask", t)
	return s.err
}
func (s *spy) CompleteWorkflowTask(_ context.Context, t *backend.WorkflowTask, st core.WorkflowInstanceState, ex, ac, ti []*history.Event, we []*history.WorkflowEvent) error {
	s.rec("CompleteWorkflowTask", t, st, len(ex), len(ac), len(ti), len(we))
	return s.err
}
func (s *spy) GetActivityTask(_ context.Context, q []workflow.Queue) (*backend.ActivityTask, error) {
	s.rec("GetActivityTask", fmt.Sprint(q))
	return s.actTask, s.err
}
func (s *spy) ExtendActivityTask(_ context.Context, t *backend.ActivityTask) error {
	s.rec("ExtendActivityTask", t)
	return s.err
}
func (s *spy) CompleteActivityTask(_ context.Context, t *backend.ActivityTask, e *history.Event) error {
	s.rec("CompleteActivityTask", t, e)
	return s.err
}
func (s *spy) GetStats(context.Context) (*backend.Stats, error) {
	s.rec("GetStats")
	return s.stats, s.err
}
func (s *spy) Tracer() trace.Tracer                    { return s.tracer }
func (s *spy) Metrics() metrics.Client                 { return s.metrics }
func (s *spy) Options() *backend.Options               { return s.opts }
func (s *spy) FeatureSupported(f backend.Feature) bool { return f == backend.Feature_Expiration }
func (s *spy) Close() error                            { s.closed++; return s.err }

var errSentinel = errors.New("sentinel")

// TestForwarding: every method reaches the inner backend once with the
// caller's arguments, and returns the inner results and the very error
// value; each timed call gets its span and duration point.
func TestForwarding(t *testing.T) {
	wi := core.NewWorkflowInstance("i", "e")
	ev := history.NewPendingEvent(timeZero, history.EventType_SignalReceived, &history.SignalReceivedAttributes{})
	wt := &backend.WorkflowTask{WorkflowInstance: wi, LastSequenceID: 3}
	at := &backend.ActivityTask{WorkflowInstance: wi, Event: history.NewPendingEvent(timeZero, history.EventType_ActivityScheduled, &history.ActivityScheduledAttributes{Name: "a"}, history.ScheduleEventID(2))}
	last := int64(4)
	queues := []workflow.Queue{"q"}
	testCases := []struct {
		name string
		op   otelworkflows.Operation
		call func(context.Context, backend.Backend) (any, error)
		args []any
		want any
		read bool // an unknown instance: its history is read once
	}{
		{"CreateWorkflowInstance", otelworkflows.OpCreateWorkflowInstance, func(ctx context.Context, b backend.Backend) (any, error) {
			return nil, b.CreateWorkflowInstance(ctx, wi, ev)
		}, []any{wi, ev}, nil, false},
		{"CancelWorkflowInstance", otelworkflows.OpCancelWorkflowInstance, func(ctx context.Context, b backend.Backend) (any, error) {
			return nil, b.CancelWorkflowInstance(ctx, wi, ev)
		}, []any{wi, ev}, nil, false},
		{"RemoveWorkflowInstance", otelworkflows.OpRemoveWorkflowInstance, func(ctx context.Context, b backend.Backend) (any, error) {
			return nil, b.RemoveWorkflowInstance(ctx, wi)
		}, []any{wi}, nil, false},
		{"RemoveWorkflowInstances", otelworkflows.OpRemoveWorkflowInstances, func(ctx context.Context, b backend.Backend) (any, error) {
			return nil, b.RemoveWorkflowInstances(ctx, backend.RemoveFinishedBatchSize(3), backend.RemoveFinishedBatchSize(4))
		}, []any{2}, nil, false},
		{"GetWorkflowInstanceState", otelworkflows.OpGetWorkflowInstanceState, func(ctx context.Context, b backend.Backend) (any, error) {
			return b.GetWorkflowInstanceState(ctx, wi)
		}, []any{wi}, core.WorkflowInstanceStateContinuedAsNew, false},
		{"GetWorkflowInstanceHistory", otelworkflows.OpGetWorkflowInstanceHistory, func(ctx context.Context, b backend.Backend) (any, error) {
			h, err := b.GetWorkflowInstanceHistory(ctx, wi, &last)
			return fmt.Sprintf("%p", h), err
		}, []any{wi, &last}, "history", false},
		{"SignalWorkflow", otelworkflows.OpSignalWorkflow, func(ctx context.Context, b backend.Backend) (any, error) {
			return nil, b.SignalWorkflow(ctx, "i", ev)
		}, []any{"i", ev}, nil, false},
		{"PrepareWorkflowQueues", otelworkflows.OpPrepareWorkflowQueues, func(ctx context.Context, b backend.Backend) (any, error) {
			return nil, b.PrepareWorkflowQueues(ctx, queues)
		}, []any{"[q]"}, nil, false},
		{"PrepareActivityQueues", otelworkflows.OpPrepareActivityQueues, func(ctx context.Context, b backend.Backend) (any, error) {
			return nil, b.PrepareActivityQueues(ctx, queues)
		}, []any{"[q]"}, nil, false},
		{"GetWorkflowTask", otelworkflows.OpGetWorkflowTask, func(ctx context.Context, b backend.Backend) (any, error) {
			return b.GetWorkflowTask(ctx, queues)
		}, []any{"[q]"}, wt, true},
		{"ExtendWorkflowTask", otelworkflows.OpExtendWorkflowTask, func(ctx context.Context, b backend.Backend) (any, error) {
			return nil, b.ExtendWorkflowTask(ctx, wt)
		}, []any{wt}, nil, false},
		{"CompleteWorkflowTask", otelworkflows.OpCompleteWorkflowTask, func(ctx context.Context, b backend.Backend) (any, error) {
			return nil, b.CompleteWorkflowTask(ctx, wt, core.WorkflowInstanceStateFinished, []*history.Event{ev}, nil, []*history.Event{ev, ev}, nil)
		}, []any{wt, core.WorkflowInstanceStateFinished, 1, 0, 2, 0}, nil, true},
		{"GetActivityTask", otelworkflows.OpGetActivityTask, func(ctx context.Context, b backend.Backend) (any, error) {
			return b.GetActivityTask(ctx, queues)
		}, []any{"[q]"}, at, true},
		{"ExtendActivityTask", otelworkflows.OpExtendActivityTask, func(ctx context.Context, b backend.Backend) (any, error) {
			return nil, b.ExtendActivityTask(ctx, at)
		}, []any{at}, nil, false},
		{"CompleteActivityTask", otelworkflows.OpCompleteActivityTask, func(ctx context.Context, b backend.Backend) (any, error) {
			return nil, b.CompleteActivityTask(ctx, at, ev)
		}, []any{at, ev}, nil, true},
		{"GetStats", otelworkflows.OpGetStats, func(ctx context.Context, b backend.Backend) (any, error) {
			return b.GetStats(ctx)
		}, nil, "stats", false},
	}
	for _, tc := range testCases {
		for _, fail := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/fail=%v", tc.name, fail), func(t *testing.T) {
				s := &spy{wfTask: wt, actTask: at, hist: []*history.Event{ev}, stats: &backend.Stats{}}
				if fail {
					s.err = errSentinel
				}
				reader := sdkmetric.NewManualReader()
				rec := tracetest.NewSpanRecorder()
				b := otelworkflows.New(s,
					otelworkflows.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
					otelworkflows.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))),
					otelworkflows.WithPairingOptions())
				got, err := tc.call(context.Background(), b)
				if err != s.err {
					t.Fatalf("error %v, want the inner's %v", err, s.err)
				}
				if err := otelworkflows.Flush(context.Background(), b); err != nil {
					t.Fatal(err)
				}
				want := []string{tc.name}
				// A failed Complete*Task may have committed all the
				// same: its history is read (checked) as after a success.
				if tc.read && (!fail || tc.name == "CompleteWorkflowTask" || tc.name == "CompleteActivityTask") {
					want = append(want, "GetWorkflowInstanceHistory")
				}
				if fmt.Sprint(s.calls) != fmt.Sprint(want) {
					t.Fatalf("inner calls %v, want %v", s.calls, want)
				}
				if fmt.Sprint(s.args) != fmt.Sprint(tc.args) {
					t.Fatalf("inner args %v, want %v", s.args, tc.args)
				}
				switch tc.want {
				case "history":
					if got != fmt.Sprintf("%p", s.hist) {
						t.Fatalf("history not the inner's")
					}
				case "stats":
					if got != s.stats {
						t.Fatalf("stats not the inner's")
					}
				case nil:
				default:
					if got != tc.want {
						t.Fatalf("result %v, want %v", got, tc.want)
					}
				}
				spans := rec.Ended()
				var span sdktrace.ReadOnlySpan
				for _, sp := range spans {
					if sp.Name() == string(tc.op) {
						span = sp
					}
				}
				if span == nil {
					t.Fatalf("no span %q among %d", tc.op, len(spans))
				}
				if span.SpanKind() != trace.SpanKindClient || !hasAttr(span.Attributes(), "db.operation.name", string(tc.op)) || !hasAttr(span.Attributes(), "aion.namespace", "default") {
					t.Errorf("span %q: kind %v attrs %v", span.Name(), span.SpanKind(), span.Attributes())
				}
				if fail != (span.Status().Code == codes.Error) || fail != hasAttr(span.Attributes(), "error.type", "_OTHER") {
					t.Errorf("span %q: status %v attrs %v", span.Name(), span.Status(), span.Attributes())
				}
				var rm metricdata.ResourceMetrics
				if err := reader.Collect(context.Background(), &rm); err != nil {
					t.Fatal(err)
				}
				found := false
				for _, sm := range rm.ScopeMetrics {
					for _, m := range sm.Metrics {
						if m.Name != "aion.store.operation.duration" {
							continue
						}
						for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
							op, _ := dp.Attributes.Value("db.operation.name")
							et, hasET := dp.Attributes.Value("error.type")
							if op.AsString() == string(tc.op) && dp.Count == 1 && hasET == fail && (!fail || et.AsString() == "_OTHER") {
								found = true
							}
						}
					}
				}
				if !found {
					t.Errorf("no aion.store.operation.duration point for %s (fail=%v)", tc.op, fail)
				}
			})
		}
	}
}

func hasAttr(attrs []attribute.KeyValue, k, v string) bool {
	for _, kv := range attrs {
		if string(kv.Key) == k && kv.Value.String() == v {
			return true
		}
	}
	return false
}

// TestPassThrough: Tracer, Metrics, Options, FeatureSupported and Close are
// the inner backend's, Close's error unchanged.
func TestPassThrough(t *testing.T) {
	s := &spy{tracer: noop.NewTracerProvider().Tracer("x"), opts: &backend.Options{WorkerName: "w"}, err: errSentinel}
	b := otelworkflows.New(s)
	if b.Tracer() != s.tracer || b.Options() != s.opts || b.Metrics() != s.metrics {
		t.Error("Tracer, Options or Metrics is not the inner's")
	}
	if !b.FeatureSupported(backend.Feature_Expiration) || b.FeatureSupported(backend.Feature(7)) {
		t.Error("FeatureSupported is not the inner's answer")
	}
	if err := b.Close(); err != errSentinel || s.closed != 1 {
		t.Errorf("Close: %v, inner closed %d times", err, s.closed)
	}
}

// TestCapabilities: the decorated backend has diag.Backend and
// GetFutureEvents exactly when the inner one has them.
func TestCapabilities(t *testing.T) {
	type futureEventser interface {
		GetFutureEvents(context.Context) ([]*history.Event, error)
	}
	plain := otelworkflows.New(&spy{})
	if _, ok := plain.(diag.Backend); ok {
		t.Error("a plain backend decorated claims diag.Backend")
	}
	if _, ok := plain.(futureEventser); ok {
		t.Error("a plain backend decorated claims GetFutureEvents")
	}
	inner := sqlite.NewInMemoryBackend()
	full := otelworkflows.New(inner)
	defer full.Close()
	if _, ok := full.(diag.Backend); !ok {
		t.Error("the decorated SQLite backend lost diag.Backend")
	}
	if _, ok := full.(futureEventser); !ok {
		t.Error("the decorated SQLite backend lost GetFutureEvents")
	}
	if u, ok := full.(interface{ Unwrap() backend.Backend }); !ok || u.Unwrap() != backend.Backend(inner) {
		t.Error("Unwrap does not return the inner backend")
	}
}

// TestNilBackend: a nil backend is an error at every call, never a panic.
func TestNilBackend(t *testing.T) {
	b := otelworkflows.New(nil)
	ctx := context.Background()
	wi := core.NewWorkflowInstance("i", "e")
	errs := []error{
		b.CreateWorkflowInstance(ctx, wi, nil),
		b.CancelWorkflowInstance(ctx, wi, nil),
		b.RemoveWorkflowInstance(ctx, wi),
		b.RemoveWorkflowInstances(ctx),
		b.SignalWorkflow(ctx, "i", nil),
		b.PrepareWorkflowQueues(ctx, nil),
		b.PrepareActivityQueues(ctx, nil),
		b.ExtendWorkflowTask(ctx, nil),
		b.CompleteWorkflowTask(ctx, nil, 0, nil, nil, nil, nil),
		b.ExtendActivityTask(ctx, nil),
		b.CompleteActivityTask(ctx, nil, nil),
		b.Close(),
	}
	_, err := b.GetWorkflowInstanceState(ctx, wi)
	errs = append(errs, err)
	_, err = b.GetWorkflowInstanceHistory(ctx, wi, nil)
	errs = append(errs, err)
	_, err = b.GetWorkflowTask(ctx, nil)
	errs = append(errs, err)
	_, err = b.GetActivityTask(ctx, nil)
	errs = append(errs, err)
	_, err = b.GetStats(ctx)
	errs = append(errs, err)
	for i, err := range errs {
		if !errors.Is(err, otelworkflows.ErrNilBackend) {
			t.Errorf("call %d: %v, want ErrNilBackend", i, err)
		}
	}
	if b.FeatureSupported(backend.Feature_Expiration) || b.Options() != nil {
		t.Error("a nil backend supports features or has options")
	}
}

var timeZero = time.Unix(1_700_000_000, 0)

// diagSpy is a spy with diag.Backend and GetFutureEvents.
type diagSpy struct {
	spy
	ref  *diag.WorkflowInstanceRef
	refs []*diag.WorkflowInstanceRef
	tree *diag.WorkflowInstanceTree
	fut  []*history.Event
}

func (s *diagSpy) GetWorkflowInstance(_ context.Context, i *core.WorkflowInstance) (*diag.WorkflowInstanceRef, error) {
	s.rec("GetWorkflowInstance", i)
	return s.ref, s.err
}
func (s *diagSpy) GetWorkflowInstances(_ context.Context, after, afterExec string, n int) ([]*diag.WorkflowInstanceRef, error) {
	s.rec("GetWorkflowInstances", after, afterExec, n)
	return s.refs, s.err
}
func (s *diagSpy) GetWorkflowTree(_ context.Context, i *core.WorkflowInstance) (*diag.WorkflowInstanceTree, error) {
	s.rec("GetWorkflowTree", i)
	return s.tree, s.err
}
func (s *diagSpy) GetFutureEvents(context.Context) ([]*history.Event, error) {
	s.rec("GetFutureEvents")
	return s.fut, s.err
}

// TestOptionalInterfacesForwarded: diag.Backend's methods and
// GetFutureEvents reach the inner backend once with the caller's
// arguments, return its very results and error, and each gets its span and
// duration point, with error.type on failure.
func TestOptionalInterfacesForwarded(t *testing.T) {
	wi := core.NewWorkflowInstance("i", "e")
	for _, fail := range []bool{false, true} {
		s := &diagSpy{ref: &diag.WorkflowInstanceRef{}, refs: []*diag.WorkflowInstanceRef{{}}, tree: &diag.WorkflowInstanceTree{}, fut: []*history.Event{{}}}
		if fail {
			s.err = errSentinel
		}
		rec := tracetest.NewSpanRecorder()
		reader := sdkmetric.NewManualReader()
		b := otelworkflows.New(s, otelworkflows.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
			otelworkflows.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))))
		db := b.(diag.Backend)
		fe := b.(interface {
			GetFutureEvents(context.Context) ([]*history.Event, error)
		})
		ctx := context.Background()
		ref, err1 := db.GetWorkflowInstance(ctx, wi)
		refs, err2 := db.GetWorkflowInstances(ctx, "a", "b", 7)
		tree, err3 := db.GetWorkflowTree(ctx, wi)
		fut, err4 := fe.GetFutureEvents(ctx)
		for i, err := range []error{err1, err2, err3, err4} {
			if err != s.err {
				t.Errorf("fail=%v call %d: error %v, want the inner's %v", fail, i, err, s.err)
			}
		}
		if ref != s.ref || &refs[0] != &s.refs[0] || tree != s.tree || &fut[0] != &s.fut[0] {
			t.Errorf("fail=%v: results are not the inner's", fail)
		}
		if got := fmt.Sprint(s.calls); got != "[GetWorkflowInstance GetWorkflowInstances GetWorkflowTree GetFutureEvents]" {
			t.Errorf("inner calls %s", got)
		}
		if fmt.Sprint(s.args) != fmt.Sprint([]any{wi}) {
			t.Errorf("inner args %v", s.args)
		}
		ops := map[string]bool{}
		for _, sp := range rec.Ended() {
			ops[sp.Name()] = hasAttr(sp.Attributes(), "error.type", "_OTHER") == fail
		}
		for _, op := range []otelworkflows.Operation{otelworkflows.OpGetWorkflowInstance, otelworkflows.OpGetWorkflowInstances,
			otelworkflows.OpGetWorkflowTree, otelworkflows.OpGetFutureEvents} {
			if !ops[string(op)] {
				t.Errorf("fail=%v: no span %s with the right error.type (spans %v)", fail, op, ops)
			}
		}
		var rm metricdata.ResourceMetrics
		if err := reader.Collect(ctx, &rm); err != nil {
			t.Fatal(err)
		}
		points := 0
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name == "aion.store.operation.duration" {
					points += len(m.Data.(metricdata.Histogram[float64]).DataPoints)
				}
			}
		}
		if points != 4 {
			t.Errorf("fail=%v: %d duration series, want 4", fail, points)
		}
	}
}
