package otelworkflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/workflow"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// racingStore fails its first CompleteWorkflowTask without committing and
// commits every later one; a history read waits for release, then gives
// what is committed.
type racingStore struct {
	nopBackend
	mu        sync.Mutex
	calls     int
	committed []*history.Event
	release   chan struct{}
}

func (s *racingStore) CompleteWorkflowTask(_ context.Context, _ *backend.WorkflowTask, _ core.WorkflowInstanceState, executed, _, _ []*history.Event, _ []*history.WorkflowEvent) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.calls == 1 {
		return errors.New("injected: not committed")
	}
	s.committed = append(s.committed, executed...)
	return nil
}

func (s *racingStore) GetWorkflowInstanceHistory(ctx context.Context, _ *workflow.Instance, last *int64) ([]*history.Event, error) {
	<-s.release
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*history.Event
	for _, e := range s.committed {
		if last == nil || e.SequenceID > *last {
			out = append(out, e)
		}
	}
	return out, nil
}

// TestFailedTaskRetriedBeforeItsCheck: a task whose batch is made of the
// events it carried in (a signal: same event IDs on every attempt) fails
// without committing; its retry commits the same events before the check
// of the failed call reads the history. The check finds the batch there,
// and the signal is counted once, not by the retry and the check both.
func TestFailedTaskRetriedBeforeItsCheck(t *testing.T) {
	ctx := context.Background()
	inner := &racingStore{release: make(chan struct{})}
	r := sdkmetric.NewManualReader()
	b := New(inner, WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))))
	defer b.Close()
	at := time.Unix(1_700_000_000, 0)
	start := history.NewHistoryEvent(1, at, history.EventType_WorkflowExecutionStarted, &history.ExecutionStartedAttributes{Name: "W"})
	signal := history.NewHistoryEvent(2, at, history.EventType_SignalReceived, &history.SignalReceivedAttributes{Name: "go"})
	task := &backend.WorkflowTask{WorkflowInstance: core.NewWorkflowInstance("i", "e")}
	batch := []*history.Event{start, signal}
	if err := b.CompleteWorkflowTask(ctx, task, core.WorkflowInstanceStateActive, batch, nil, nil, nil); err == nil {
		t.Fatal("the first attempt did not fail")
	}
	if err := b.CompleteWorkflowTask(ctx, task, core.WorkflowInstanceStateActive, batch, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	close(inner.release) // the check reads now, and finds the retry's commit
	if err := Flush(ctx, b); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"aion.signals.delivered": 1, "aion.workflows.started": 1} {
		var got int64
		for _, p := range collect(t, r, name) {
			got += p.value
		}
		if got != want {
			t.Errorf("%s: %d, want %d", name, got, want)
		}
	}
}

// TestBatchClaims: a batch is claimed once, once its execution had a failed
// call; before that, every claim passes without a lock.
func TestBatchClaims(t *testing.T) {
	c := newBatchClaims(1)
	a, b := executionKey("a", "1"), executionKey("b", "1")
	for range 2 {
		if !c.claim(a, 1) {
			t.Fatal("no failed call yet: a claim was refused")
		}
	}
	c.failed(a)
	if !c.claim(a, 3) || c.claim(a, 3) || !c.claim(a, 5) {
		t.Fatal("after a failed call: a batch claimed twice, or a new one refused")
	}
	c.failed(b) // past the bound: a forgotten
	if !c.claim(a, 3) || !c.claim(b, 3) || c.claim(b, 3) {
		t.Fatal("the bound does not forget the oldest execution")
	}
}
