package otelworkflows

import (
	"context"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/diag"
)

// futureEventser is the method backend/test's TestBackend adds.
type futureEventser interface {
	GetFutureEvents(ctx context.Context) ([]*history.Event, error)
}

// wrap returns d as a value with exactly the optional interfaces of its
// inner backend: diag.Backend and GetFutureEvents, each only when the inner
// backend has it.
func wrap(d *decorated) backend.Backend {
	_, isDiag := d.inner.(diag.Backend)
	_, isFuture := d.inner.(futureEventser)
	switch {
	case isDiag && isFuture:
		return &diagFutureBackend{d}
	case isDiag:
		return &diagBackend{d}
	case isFuture:
		return &futureBackend{d}
	}
	return d
}

type diagBackend struct{ *decorated }
type futureBackend struct{ *decorated }
type diagFutureBackend struct{ *decorated }

var (
	_ diag.Backend   = (*diagBackend)(nil)
	_ futureEventser = (*futureBackend)(nil)
	_ diag.Backend   = (*diagFutureBackend)(nil)
	_ futureEventser = (*diagFutureBackend)(nil)
)

func (b *diagBackend) GetWorkflowInstance(ctx context.Context, instance *core.WorkflowInstance) (*diag.WorkflowInstanceRef, error) {
	return b.getWorkflowInstance(ctx, instance)
}

func (b *diagBackend) GetWorkflowInstances(ctx context.Context, afterInstanceID, afterExecutionID string, count int) ([]*diag.WorkflowInstanceRef, error) {
	return b.getWorkflowInstances(ctx, afterInstanceID, afterExecutionID, count)
}

func (b *diagBackend) GetWorkflowTree(ctx context.Context, instance *core.WorkflowInstance) (*diag.WorkflowInstanceTree, error) {
	return b.getWorkflowTree(ctx, instance)
}

func (b *futureBackend) GetFutureEvents(ctx context.Context) ([]*history.Event, error) {
	return b.getFutureEvents(ctx)
}

func (b *diagFutureBackend) GetWorkflowInstance(ctx context.Context, instance *core.WorkflowInstance) (*diag.WorkflowInstanceRef, error) {
	return b.getWorkflowInstance(ctx, instance)
}

func (b *diagFutureBackend) GetWorkflowInstances(ctx context.Context, afterInstanceID, afterExecutionID string, count int) ([]*diag.WorkflowInstanceRef, error) {
	return b.getWorkflowInstances(ctx, afterInstanceID, afterExecutionID, count)
}

func (b *diagFutureBackend) GetWorkflowTree(ctx context.Context, instance *core.WorkflowInstance) (*diag.WorkflowInstanceTree, error) {
	return b.getWorkflowTree(ctx, instance)
}

func (b *diagFutureBackend) GetFutureEvents(ctx context.Context) ([]*history.Event, error) {
	return b.getFutureEvents(ctx)
}

func (d *decorated) getWorkflowInstance(ctx context.Context, instance *core.WorkflowInstance) (*diag.WorkflowInstanceRef, error) {
	c := d.tel.begin(ctx, OpGetWorkflowInstance, instanceAttrs(instance)...)
	r, err := d.inner.(diag.Backend).GetWorkflowInstance(c.ctx, instance)
	d.tel.end(c, err)
	return r, err
}

func (d *decorated) getWorkflowInstances(ctx context.Context, afterInstanceID, afterExecutionID string, count int) ([]*diag.WorkflowInstanceRef, error) {
	c := d.tel.begin(ctx, OpGetWorkflowInstances)
	r, err := d.inner.(diag.Backend).GetWorkflowInstances(c.ctx, afterInstanceID, afterExecutionID, count)
	d.tel.end(c, err)
	return r, err
}

func (d *decorated) getWorkflowTree(ctx context.Context, instance *core.WorkflowInstance) (*diag.WorkflowInstanceTree, error) {
	c := d.tel.begin(ctx, OpGetWorkflowTree, instanceAttrs(instance)...)
	r, err := d.inner.(diag.Backend).GetWorkflowTree(c.ctx, instance)
	d.tel.end(c, err)
	return r, err
}

func (d *decorated) getFutureEvents(ctx context.Context) ([]*history.Event, error) {
	c := d.tel.begin(ctx, OpGetFutureEvents)
	r, err := d.inner.(futureEventser).GetFutureEvents(c.ctx)
	d.tel.end(c, err)
	return r, err
}

// flusher is what Flush looks for.
type flusher interface{ flush(context.Context) error }

func (d *decorated) flush(ctx context.Context) error { return d.reads.wait(ctx) }

// Flush waits until every history read the decorator b has requested so
// far (to join an instance first seen part-way through its history) is
// joined into its tracker, or ctx ends (its error is returned). A program
// or test that reads the telemetry after a restart calls it first; for b
// not made by [New] it returns nil at once.
func Flush(ctx context.Context, b backend.Backend) error {
	if f, ok := b.(flusher); ok {
		return f.flush(ctx)
	}
	return nil
}
