package otelworkflows_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/client"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/worker"
	"github.com/cschleiden/go-workflows/workflow"
	"github.com/cschleiden/go-workflows/workflow/executor"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/aionotel/aionotel/instrumentation/github.com/cschleiden/go-workflows/otelworkflows"
	"github.com/aionotel/aionotel/pairing"
)

// Twice runs two activities, one after the other: its history has a batch
// that schedules, batches that settle and schedule, and one that closes.
func Twice(ctx workflow.Context) error {
	for i := range 2 {
		if _, err := workflow.ExecuteActivity[int](ctx, workflow.ActivityOptions{}, Quick, i).Get(ctx); err != nil {
			return err
		}
	}
	return nil
}

// noCache gives every task a new executor, replaying the history; it
// closes each executor when the next one of its instance is stored.
type noCache struct {
	mu   sync.Mutex
	held map[string]executor.WorkflowExecutor
}

func (c *noCache) Store(_ context.Context, wi *core.WorkflowInstance, e executor.WorkflowExecutor) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.held[wi.InstanceID]; ok && old != e {
		old.Close()
	}
	c.held[wi.InstanceID] = e
	return nil
}

func (c *noCache) Evict(_ context.Context, wi *core.WorkflowInstance) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.held[wi.InstanceID]; ok {
		old.Close()
		delete(c.held, wi.InstanceID)
	}
	return nil
}

func (c *noCache) Get(context.Context, *core.WorkflowInstance) (executor.WorkflowExecutor, bool, error) {
	return nil, false, nil
}

func (c *noCache) StartEviction(context.Context) {}

var errInjected = errors.New("injected: connection reset")

// faulty fails CompleteWorkflowTask once for each batch of an instance whose
// ID starts with "commit-" (after the wrapped backend committed it: the
// error of a network after the commit) or "lost-" (without calling it: a
// real error, the task retried after its lock expires).
type faulty struct {
	backend.Backend
	mu                 sync.Mutex
	tried              map[string]bool // instance|first sequence ID
	afterCommit, early int
}

func (f *faulty) CompleteWorkflowTask(ctx context.Context, task *backend.WorkflowTask, state core.WorkflowInstanceState,
	executed, activities, timers []*history.Event, events []*history.WorkflowEvent) error {
	id := task.WorkflowInstance.InstanceID
	key := ""
	if len(executed) > 0 {
		key = fmt.Sprintf("%s|%d", id, executed[0].SequenceID)
	}
	f.mu.Lock()
	first := key != "" && !f.tried[key]
	f.tried[key] = true
	f.mu.Unlock()
	switch {
	case first && strings.HasPrefix(id, "commit-"):
		if err := f.Backend.CompleteWorkflowTask(ctx, task, state, executed, activities, timers, events); err != nil {
			return err
		}
		f.mu.Lock()
		f.afterCommit++
		f.mu.Unlock()
		return errInjected
	case first && strings.HasPrefix(id, "lost-"):
		f.mu.Lock()
		f.early++
		f.mu.Unlock()
		return errInjected
	}
	return f.Backend.CompleteWorkflowTask(ctx, task, state, executed, activities, timers, events)
}

// TestFailedCompleteWorkflowTask: every workflow task fails once, half of
// them after their batch committed, half before. The completions,
// durations, in-flight gauge and spans equal the histories: nothing of a
// batch that committed is lost, nothing of one that did not and was
// retried is counted twice.
func TestFailedCompleteWorkflowTask(t *testing.T) {
	t.Run("after commit", func(t *testing.T) { runFaulted(t, "commit", nil) })
	// An executor cached past a task that failed before its commit
	// refuses the task's retry (its state is ahead of the history): no
	// cache, as after a worker restart.
	opts := worker.DefaultOptions
	opts.WorkflowExecutorCache = &noCache{held: map[string]executor.WorkflowExecutor{}}
	t.Run("before commit", func(t *testing.T) { runFaulted(t, "lost", &opts) })
}

func runFaulted(t *testing.T, kind string, opts *worker.Options) {
	ctx := context.Background()
	bare := sqlite.NewSqliteBackend(filepath.Join(t.TempDir(), "wf.sqlite"), sqlite.WithBackendOptions(
		backend.WithStickyTimeout(0),
		backend.WithWorkflowLockTimeout(300*time.Millisecond)))
	inner := &faulty{Backend: bare, tried: map[string]bool{}}
	reader, spans := sdkmetric.NewManualReader(), tracetest.NewSpanRecorder()
	b := otelworkflows.New(inner,
		otelworkflows.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))),
		otelworkflows.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans), sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)))))
	defer b.Close()

	wctx, stop := context.WithCancel(ctx)
	w := worker.New(b, opts)
	if err := w.RegisterWorkflow(Twice); err != nil {
		t.Fatal(err)
	}
	if err := w.RegisterActivity(Quick); err != nil {
		t.Fatal(err)
	}
	c := client.New(b)
	const n = 3
	for i := range n {
		if _, err := c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: fmt.Sprintf("%s-%d", kind, i)}, Twice); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Start(wctx); err != nil {
		t.Fatal(err)
	}
	executions := finishedExecutions(t, ctx, bare, n)
	stop()
	if err := w.WaitForCompletion(); err != nil {
		t.Fatal(err)
	}
	if err := otelworkflows.Flush(ctx, b); err != nil {
		t.Fatal(err)
	}
	// Each Twice history has three batches: start and schedule; settle
	// and schedule; settle and close.
	wantAfter, wantEarly := 3*n, 0
	if kind == "lost" {
		wantAfter, wantEarly = 0, 3*n
	}
	if inner.afterCommit != wantAfter || inner.early != wantEarly {
		t.Fatalf("%d batches failed after their commit and %d before, want %d and %d", inner.afterCommit, inner.early, wantAfter, wantEarly)
	}

	want := historyFigures(t, ctx, bare, executions)
	if want.completed["Quick|succeeded"] != 2*n || want.closed["completed"] != n {
		t.Fatalf("the workload did not run as designed: %+v", want)
	}
	checkHistoryFigures(t, collectAll(t, reader), want)
	// One run span per execution, ended at its close; one activity span
	// per activity.
	runs, acts := map[string]int{}, 0
	for _, sp := range spans.Ended() {
		switch {
		case strings.HasPrefix(sp.Name(), "workflow "):
			for _, kv := range sp.Attributes() {
				if kv.Key == "go_workflows.instance.id" {
					runs[kv.Value.AsString()]++
				}
			}
		case strings.HasPrefix(sp.Name(), "activity "):
			acts++
		}
	}
	if len(runs) != n || acts != 2*n {
		t.Errorf("run spans %v and %d activity spans, want one for each of %d executions and %d", runs, acts, n, 2*n)
	}
	for id, k := range runs {
		if k != 1 {
			t.Errorf("execution %s: %d run spans, want 1", id, k)
		}
	}
}
