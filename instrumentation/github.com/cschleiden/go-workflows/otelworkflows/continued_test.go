package otelworkflows

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/client"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/aionotel/aionotel/internal/catalog"
)

// TestContinuedAsNewLinksNextExecution runs workflows that continue as new
// twice on a real worker: the run span of each execution that continued
// links (aion.timeline.link next_run) to the run span of the execution
// that continued it, the one its ContinuedAsNew event names, in that
// span's own trace, although each execution is keyed as a workflow of its
// own.
func TestContinuedAsNewLinksNextExecution(t *testing.T) {
	ctx := context.Background()
	bare := sqliteAt(filepath.Join(t.TempDir(), "workflows.sqlite"))
	p := newProcess(bare)
	defer p.b.Close()
	wctx, stop := context.WithCancel(ctx)
	w := newWorker(t, p.b, true, true)
	if err := w.Start(wctx); err != nil {
		t.Fatal(err)
	}
	c := client.New(p.b)
	const chains = 2
	for i := range chains {
		if _, err := c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: fmt.Sprintf("chain-%d", i)}, Main, "can", 2); err != nil {
			t.Fatal(err)
		}
	}
	executions := drain(t, ctx, bare)
	stop()
	if err := w.WaitForCompletion(); err != nil {
		t.Fatal(err)
	}
	if err := Flush(ctx, p.b); err != nil {
		t.Fatal(err)
	}

	runs := map[string]sdktrace.ReadOnlySpan{} // by aion.run.id
	for _, s := range p.spans.Ended() {
		if !strings.HasPrefix(s.Name(), "workflow ") {
			continue
		}
		for _, kv := range s.Attributes() {
			if kv.Key == catalog.RunID {
				runs[kv.Value.AsString()] = s
			}
		}
	}
	links := 0
	for _, wi := range executions {
		h, err := bare.GetWorkflowInstanceHistory(ctx, wi, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range h {
			if e.Type != history.EventType_WorkflowExecutionContinuedAsNew {
				continue
			}
			next := e.Attributes.(*history.ExecutionContinuedAsNewAttributes).ContinuedExecutionID
			cur, ok := runs[executionKey(wi.InstanceID, wi.ExecutionID).String()]
			if !ok {
				t.Fatalf("no run span for %s/%s", wi.InstanceID, wi.ExecutionID)
			}
			nxt, ok := runs[executionKey(wi.InstanceID, next).String()]
			if !ok {
				t.Fatalf("no run span for %s/%s, the execution %s/%s continued as", wi.InstanceID, next, wi.InstanceID, wi.ExecutionID)
			}
			found := false
			for _, l := range cur.Links() {
				for _, kv := range l.Attributes {
					if kv.Key != catalog.TimelineLink || kv.Value.AsString() != catalog.LinkNextRun {
						continue
					}
					found = true
					links++
					if got, want := l.SpanContext.TraceID(), nxt.SpanContext().TraceID(); got != want {
						t.Errorf("%s/%s: next_run link to trace %s, the next execution's run span is in trace %s", wi.InstanceID, wi.ExecutionID, got, want)
					}
					if got, want := l.SpanContext.SpanID(), nxt.SpanContext().SpanID(); got != want {
						t.Errorf("%s/%s: next_run link to span %s, the next execution's run span is %s", wi.InstanceID, wi.ExecutionID, got, want)
					}
				}
			}
			if !found {
				t.Errorf("%s/%s continued as %s: its run span has no next_run link", wi.InstanceID, wi.ExecutionID, next)
			}
		}
	}
	if links != 2*chains {
		t.Errorf("%d next_run links, want %d (each chain continues twice)", links, 2*chains)
	}
}
