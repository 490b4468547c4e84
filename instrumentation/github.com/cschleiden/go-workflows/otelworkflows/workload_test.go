package otelworkflows

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cschleiden/go-workflows/activity"
	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/client"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/diag"
	"github.com/cschleiden/go-workflows/worker"
	"github.com/cschleiden/go-workflows/workflow"
)

// The workload: every kind of history the decorator translates.
//
//   - "ok": an activity, an activity that fails twice and succeeds on its
//     third attempt (two retries), a timer, a sub-workflow with an activity.
//   - "fail": as "ok", then an activity that fails on both its attempts;
//     the workflow fails.
//   - "can": an activity, then continue-as-new twice (three executions).
//   - "cancel": an activity, then a timer of an hour; the test cancels it.

func Succeed(ctx context.Context, n int) (int, error) { return n + 1, nil }

func Flaky(ctx context.Context) (string, error) {
	if activity.Attempt(ctx) < 2 {
		return "", fmt.Errorf("flaky: attempt %d", activity.Attempt(ctx))
	}
	return "ok", nil
}

func Doomed(ctx context.Context) error { return errors.New("doomed") }

var retry = workflow.RetryOptions{MaxAttempts: 3, FirstRetryInterval: time.Millisecond, BackoffCoefficient: 1}

func Child(ctx workflow.Context) (int, error) {
	return workflow.ExecuteActivity[int](ctx, workflow.ActivityOptions{}, Succeed, 10).Get(ctx)
}

func Main(ctx workflow.Context, kind string, n int) (int, error) {
	if _, err := workflow.ExecuteActivity[int](ctx, workflow.ActivityOptions{}, Succeed, n).Get(ctx); err != nil {
		return 0, err
	}
	switch kind {
	case "can":
		if n > 0 {
			return 0, workflow.ContinueAsNew(ctx, kind, n-1)
		}
		return n, nil
	case "cancel":
		_, err := workflow.ScheduleTimer(ctx, time.Hour).Get(ctx)
		return 0, err
	}
	if _, err := workflow.ExecuteActivity[string](ctx, workflow.ActivityOptions{RetryOptions: retry}, Flaky).Get(ctx); err != nil {
		return 0, err
	}
	if _, err := workflow.ScheduleTimer(ctx, time.Millisecond).Get(ctx); err != nil {
		return 0, err
	}
	if _, err := workflow.CreateSubWorkflowInstance[int](ctx, workflow.SubWorkflowOptions{}, Child).Get(ctx); err != nil {
		return 0, err
	}
	if kind == "fail" {
		if _, err := workflow.ExecuteActivity[any](ctx, workflow.ActivityOptions{RetryOptions: workflow.RetryOptions{MaxAttempts: 2, FirstRetryInterval: time.Millisecond, BackoffCoefficient: 1}}, Doomed).Get(ctx); err != nil {
			return 0, err
		}
	}
	return n, nil
}

// workload is the instances a test starts, by kind.
var workload = map[string]int{"ok": 6, "fail": 3, "can": 3, "cancel": 2}

var instanceSeq atomic.Int64

// startWorkload creates the instances through c and returns them by kind.
func startWorkload(t *testing.T, ctx context.Context, c *client.Client) map[string][]*workflow.Instance {
	t.Helper()
	out := map[string][]*workflow.Instance{}
	kinds := []string{"ok", "fail", "can", "cancel"}
	for _, kind := range kinds {
		for range workload[kind] {
			id := fmt.Sprintf("%s-%d", kind, instanceSeq.Add(1))
			wi, err := c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: id}, Main, kind, 2)
			if err != nil {
				t.Fatalf("creating %s: %v", id, err)
			}
			out[kind] = append(out[kind], wi)
		}
	}
	return out
}

func newWorker(t *testing.T, b backend.Backend, workflows, activities bool) *worker.Worker {
	t.Helper()
	opts := worker.DefaultOptions
	var w *worker.Worker
	switch {
	case workflows && activities:
		w = worker.New(b, &opts)
	case workflows:
		w = worker.NewWorkflowWorker(b, &opts.WorkflowWorkerOptions)
	default:
		w = worker.NewActivityWorker(b, &opts.ActivityWorkerOptions)
	}
	if workflows {
		for _, wf := range []any{Main, Child} {
			if err := w.RegisterWorkflow(wf); err != nil {
				t.Fatal(err)
			}
		}
	}
	if activities {
		for _, a := range []any{Succeed, Flaky, Doomed} {
			if err := w.RegisterActivity(a); err != nil {
				t.Fatal(err)
			}
		}
	}
	return w
}

// waitFor polls cond (a state of the database, not of the telemetry) until
// it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for d := time.Millisecond; !cond(); d = min(2*d, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(d)
	}
}

// cancelWhenWaiting cancels each instance once its hour-long timer is in
// its history.
func cancelWhenWaiting(t *testing.T, ctx context.Context, c *client.Client, bare backend.Backend, instances []*workflow.Instance) {
	t.Helper()
	for _, wi := range instances {
		waitFor(t, "the timer of "+wi.InstanceID, func() bool {
			h, err := bare.GetWorkflowInstanceHistory(ctx, wi, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range h {
				if e.Type == history.EventType_TimerScheduled {
					return true
				}
			}
			return false
		})
		if err := c.CancelWorkflowInstance(ctx, wi); err != nil {
			t.Fatal(err)
		}
	}
}

// drain waits until every execution the database holds (sub-workflows and
// continued executions included) has finished, and returns them.
func drain(t *testing.T, ctx context.Context, bare backend.Backend) []*core.WorkflowInstance {
	t.Helper()
	var out []*core.WorkflowInstance
	waitFor(t, "every execution to finish", func() bool {
		refs := listExecutions(t, ctx, bare)
		out = out[:0]
		for _, r := range refs {
			if r.State == core.WorkflowInstanceStateActive {
				return false
			}
			out = append(out, r.Instance)
		}
		return true
	})
	return out
}

func listExecutions(t *testing.T, ctx context.Context, bare backend.Backend) []*diag.WorkflowInstanceRef {
	t.Helper()
	db := bare.(diag.Backend)
	var all []*diag.WorkflowInstanceRef
	after, afterExec := "", ""
	for {
		page, err := db.GetWorkflowInstances(ctx, after, afterExec, 100)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, page...)
		if len(page) < 100 {
			return all
		}
		last := page[len(page)-1].Instance
		after, afterExec = last.InstanceID, last.ExecutionID
	}
}

// truth is what the histories, read back through the bare backend, say.
type truth struct {
	started    map[string]int64 // by workflow type
	closed     map[string]int64 // by status
	dispatched map[string]int64 // by activity type
	retried    map[string]int64
	completed  map[[2]string]int64               // (type, outcome)
	durations  map[[2]string][]float64           // (type, outcome) -> seconds
	runs       map[string][2]time.Time           // execution key -> start, close
	runType    map[string]string                 // execution key -> workflow type
	activities map[string][2]time.Time           // execution key/seid -> dispatch, settle
	runDur     map[[2]string][]float64           // (type, status) -> seconds
	instances  map[string]*core.WorkflowInstance // execution key -> instance
}

func readTruth(t *testing.T, ctx context.Context, bare backend.Backend, executions []*core.WorkflowInstance) truth {
	t.Helper()
	tr := truth{started: map[string]int64{}, closed: map[string]int64{}, dispatched: map[string]int64{}, retried: map[string]int64{},
		completed: map[[2]string]int64{}, durations: map[[2]string][]float64{}, runs: map[string][2]time.Time{}, runType: map[string]string{},
		activities: map[string][2]time.Time{}, runDur: map[[2]string][]float64{}, instances: map[string]*core.WorkflowInstance{}}
	for _, wi := range executions {
		h, err := bare.GetWorkflowInstanceHistory(ctx, wi, nil)
		if err != nil {
			t.Fatal(err)
		}
		key := executionKey(wi.InstanceID, wi.ExecutionID).String()
		tr.instances[key] = wi
		var typ string
		var start time.Time
		type sched struct {
			name string
			at   time.Time
		}
		open := map[int64]sched{}
		for _, e := range h {
			switch e.Type {
			case history.EventType_WorkflowExecutionStarted:
				typ, start = e.Attributes.(*history.ExecutionStartedAttributes).Name, e.Timestamp
				tr.started[typ]++
				tr.runType[key] = typ
			case history.EventType_ActivityScheduled:
				a := e.Attributes.(*history.ActivityScheduledAttributes)
				tr.dispatched[a.Name]++
				if a.Attempt > 0 {
					tr.retried[a.Name]++
				}
				open[e.ScheduleEventID] = sched{a.Name, e.Timestamp}
			case history.EventType_ActivityCompleted, history.EventType_ActivityFailed:
				s := open[e.ScheduleEventID]
				delete(open, e.ScheduleEventID)
				outcome := "succeeded"
				if e.Type == history.EventType_ActivityFailed {
					outcome = "failed"
				}
				k := [2]string{s.name, outcome}
				tr.completed[k]++
				tr.durations[k] = append(tr.durations[k], e.Timestamp.Sub(s.at).Seconds())
				tr.activities[fmt.Sprintf("%s/%d", key, e.ScheduleEventID)] = [2]time.Time{s.at, e.Timestamp}
			case history.EventType_WorkflowExecutionFinished, history.EventType_WorkflowExecutionContinuedAsNew:
				status := "continued_as_new"
				if e.Type == history.EventType_WorkflowExecutionFinished {
					status = "completed"
					if a := e.Attributes.(*history.ExecutionCompletedAttributes); a.Error != nil {
						status = "failed"
						if strings.HasSuffix(a.Error.Message, "context canceled") {
							status = "cancelled"
						}
					}
				}
				tr.closed[status]++
				tr.runs[key] = [2]time.Time{start, e.Timestamp}
				tr.runDur[[2]string{typ, status}] = append(tr.runDur[[2]string{typ, status}], e.Timestamp.Sub(start).Seconds())
				for seid, s := range open { // settled by the close
					k := [2]string{s.name, "abandoned"}
					tr.completed[k]++
					tr.durations[k] = append(tr.durations[k], e.Timestamp.Sub(s.at).Seconds())
					tr.activities[fmt.Sprintf("%s/%d", key, seid)] = [2]time.Time{s.at, e.Timestamp}
				}
				open = map[int64]sched{}
			}
		}
	}
	return tr
}

func sortedKeys[K comparable, V any](m map[K]V, less func(a, b K) bool) []K {
	out := make([]K, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return less(out[i], out[j]) })
	return out
}
