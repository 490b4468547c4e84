package otelworkflows

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/backend/metrics"
	"github.com/cschleiden/go-workflows/core"
	"github.com/cschleiden/go-workflows/workflow"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/pairing"
)

// ErrNilBackend is returned by every method of the decorator New returns
// for a nil backend (or a nil pointer in the interface): the mistake shows
// at the first call, as an error, never as a panic.
var ErrNilBackend = errors.New("otelworkflows: nil backend")

// New wraps b: every method of backend.Backend (and of diag.Backend and the
// test package's GetFutureEvents, when b has them) is forwarded once with
// its arguments, and its results and error come back unchanged; Tracer,
// Metrics, Options, FeatureSupported are b's. Each call that can fail gets
// a span and an aion.store.operation.duration point; what a completed
// workflow task commits to history is fed to a [pairing.Tracker] (see the
// package doc). Close stops the history reads, then closes b.
func New(b backend.Backend, opts ...Option) backend.Backend {
	if isNil(b) {
		b = nil // a nil pointer in the interface: ErrNilBackend, never a panic
	}
	c := newConfig(opts)
	c.attrs = admitAttrs(c.attrs)
	d := &decorated{inner: b, cfg: c, tel: newTelemetry(&c), ns: c.namespace}
	d.tracker = c.tracker
	if d.tracker == nil {
		popts := []pairing.Option{}
		switch c.tp.(type) {
		case nil:
			// The global provider, followed by the tracker as it changes;
			// its spans carry the derived IDs only.
		case noop.TracerProvider, *noop.TracerProvider:
			popts = append(popts, pairing.WithTracerProvider(c.tp))
		default:
			d.names = newIDNames(c.maxKnown)
			popts = append(popts, pairing.WithTracerProvider(&namingProvider{inner: c.tp, names: d.names}))
		}
		if c.mp != nil {
			popts = append(popts, pairing.WithMeterProvider(c.mp))
		}
		if c.typeLimit > 0 {
			popts = append(popts, pairing.WithTypeCardinalityLimit(c.typeLimit))
		}
		popts = append(popts, c.pairingOpts...)
		t, err := pairing.New(append(popts, pairing.WithAttributes(c.attrs...))...)
		if err != nil {
			otel.Handle(fmt.Errorf("otelworkflows: %w; the tracker records without WithAttributes", err))
			t, err = pairing.New(popts...)
			if err != nil {
				otel.Handle(err)
			}
		}
		d.tracker = t
	}
	d.known = newKnownSet(c.maxKnown)
	d.claims = newBatchClaims(c.maxKnown)
	d.reads = newReader(d, c.readers, c.readQueue)
	return wrap(d)
}

// decorated is the decorator of backend.Backend.
type decorated struct {
	inner   backend.Backend
	cfg     config
	tel     *telemetry
	tracker *pairing.Tracker
	ns      string
	known   *knownSet
	claims  *batchClaims
	reads   *reader
	names   *idNames // nil with WithPairing: the tracker's spans are the caller's
}

var _ backend.Backend = (*decorated)(nil)

// Unwrap returns the wrapped backend.
func (d *decorated) Unwrap() backend.Backend { return d.inner }

func instanceAttrs(wi *core.WorkflowInstance) []attribute.KeyValue {
	if wi == nil {
		return nil
	}
	return []attribute.KeyValue{attribute.String(keyWorkflowID, clean(wi.InstanceID)), attribute.String(keyRunID, clean(wi.ExecutionID))}
}

func (d *decorated) CreateWorkflowInstance(ctx context.Context, instance *workflow.Instance, event *history.Event) error {
	if d.inner == nil {
		return ErrNilBackend
	}
	c := d.tel.begin(ctx, OpCreateWorkflowInstance, instanceAttrs(instance)...)
	err := d.inner.CreateWorkflowInstance(c.ctx, instance, event)
	d.tel.end(c, err)
	return err
}

func (d *decorated) CancelWorkflowInstance(ctx context.Context, instance *workflow.Instance, cancelEvent *history.Event) error {
	if d.inner == nil {
		return ErrNilBackend
	}
	c := d.tel.begin(ctx, OpCancelWorkflowInstance, instanceAttrs(instance)...)
	err := d.inner.CancelWorkflowInstance(c.ctx, instance, cancelEvent)
	d.tel.end(c, err)
	return err
}

func (d *decorated) RemoveWorkflowInstance(ctx context.Context, instance *workflow.Instance) error {
	if d.inner == nil {
		return ErrNilBackend
	}
	c := d.tel.begin(ctx, OpRemoveWorkflowInstance, instanceAttrs(instance)...)
	err := d.inner.RemoveWorkflowInstance(c.ctx, instance)
	d.tel.end(c, err)
	return err
}

func (d *decorated) RemoveWorkflowInstances(ctx context.Context, options ...backend.RemovalOption) error {
	if d.inner == nil {
		return ErrNilBackend
	}
	c := d.tel.begin(ctx, OpRemoveWorkflowInstances)
	err := d.inner.RemoveWorkflowInstances(c.ctx, options...)
	d.tel.end(c, err)
	return err
}

func (d *decorated) GetWorkflowInstanceState(ctx context.Context, instance *workflow.Instance) (core.WorkflowInstanceState, error) {
	if d.inner == nil {
		return 0, ErrNilBackend
	}
	c := d.tel.begin(ctx, OpGetWorkflowInstanceState, instanceAttrs(instance)...)
	s, err := d.inner.GetWorkflowInstanceState(c.ctx, instance)
	d.tel.end(c, err)
	return s, err
}

func (d *decorated) GetWorkflowInstanceHistory(ctx context.Context, instance *workflow.Instance, lastSequenceID *int64) ([]*history.Event, error) {
	if d.inner == nil {
		return nil, ErrNilBackend
	}
	c := d.tel.begin(ctx, OpGetWorkflowInstanceHistory, instanceAttrs(instance)...)
	h, err := d.inner.GetWorkflowInstanceHistory(c.ctx, instance, lastSequenceID)
	d.tel.end(c, err)
	return h, err
}

func (d *decorated) SignalWorkflow(ctx context.Context, instanceID string, event *history.Event) error {
	if d.inner == nil {
		return ErrNilBackend
	}
	c := d.tel.begin(ctx, OpSignalWorkflow, attribute.String(keyWorkflowID, clean(instanceID)))
	err := d.inner.SignalWorkflow(c.ctx, instanceID, event)
	d.tel.end(c, err)
	return err
}

func (d *decorated) PrepareWorkflowQueues(ctx context.Context, queues []workflow.Queue) error {
	if d.inner == nil {
		return ErrNilBackend
	}
	c := d.tel.begin(ctx, OpPrepareWorkflowQueues)
	err := d.inner.PrepareWorkflowQueues(c.ctx, queues)
	d.tel.end(c, err)
	return err
}

func (d *decorated) PrepareActivityQueues(ctx context.Context, queues []workflow.Queue) error {
	if d.inner == nil {
		return ErrNilBackend
	}
	c := d.tel.begin(ctx, OpPrepareActivityQueues)
	err := d.inner.PrepareActivityQueues(c.ctx, queues)
	d.tel.end(c, err)
	return err
}

func (d *decorated) GetWorkflowTask(ctx context.Context, queues []workflow.Queue) (*backend.WorkflowTask, error) {
	if d.inner == nil {
		return nil, ErrNilBackend
	}
	c := d.tel.begin(ctx, OpGetWorkflowTask)
	t, err := d.inner.GetWorkflowTask(c.ctx, queues)
	var attrs []attribute.KeyValue
	if err == nil && t != nil {
		attrs = instanceAttrs(t.WorkflowInstance)
	}
	d.tel.end(c, err, attrs...)
	if err == nil && t != nil && t.WorkflowInstance != nil {
		claimed := d.cfg.now()
		d.guarded(func() {
			if len(t.NewEvents) > 0 {
				d.tel.workflowTaskClaimed(c.ctx, t.NewEvents[0], claimed)
			}
			wf := keyOf(t.WorkflowInstance)
			if t.LastSequenceID == 0 {
				d.known.add(wf) // seen from its start: its first task
			} else if !d.known.has(wf) {
				d.reads.request(t.WorkflowInstance, wf)
			}
		})
	}
	return t, err
}

func (d *decorated) ExtendWorkflowTask(ctx context.Context, task *backend.WorkflowTask) error {
	if d.inner == nil {
		return ErrNilBackend
	}
	c := d.tel.begin(ctx, OpExtendWorkflowTask, taskAttrs(task)...)
	err := d.inner.ExtendWorkflowTask(c.ctx, task)
	d.tel.end(c, err)
	return err
}

func taskAttrs(task *backend.WorkflowTask) []attribute.KeyValue {
	if task == nil {
		return nil
	}
	return instanceAttrs(task.WorkflowInstance)
}

func (d *decorated) CompleteWorkflowTask(ctx context.Context, task *backend.WorkflowTask, state core.WorkflowInstanceState,
	executedEvents, activityEvents, timerEvents []*history.Event, workflowEvents []*history.WorkflowEvent) error {
	if d.inner == nil {
		return ErrNilBackend
	}
	attrs := append(taskAttrs(task), attribute.Int(keyEventCount, len(executedEvents)))
	c := d.tel.begin(ctx, OpCompleteWorkflowTask, attrs...)
	var wf eventstore.WorkflowID
	fromStart := false
	if task != nil && task.WorkflowInstance != nil {
		wf = keyOf(task.WorkflowInstance)
		if len(executedEvents) > 0 && executedEvents[0] != nil && executedEvents[0].SequenceID == 1 {
			fromStart = true
			d.known.add(wf) // before the commit: a claim racing it must not read
		}
	}
	err := d.inner.CompleteWorkflowTask(c.ctx, task, state, executedEvents, activityEvents, timerEvents, workflowEvents)
	d.tel.end(c, err)
	if task == nil || task.WorkflowInstance == nil {
		return err
	}
	if err != nil {
		// The error does not say whether the batch committed (a network
		// error or a timeout after the commit): the history says, read off
		// the caller's path; the batch is observed then, or not at all.
		if len(executedEvents) > 0 {
			d.guarded(func() {
				d.claims.failed(wf)
				d.reads.check(task.WorkflowInstance, wf, &failedBatch{
					executed:   slices.Clone(executedEvents),
					activities: slices.Clone(activityEvents),
				})
			})
		}
		return err
	}
	d.guarded(func() {
		if d.claims.claim(wf, firstSeq(executedEvents)) {
			d.observeTask(c.ctx, task.WorkflowInstance, wf, executedEvents, activityEvents)
		}
		if !fromStart && !d.known.has(wf) {
			d.reads.request(task.WorkflowInstance, wf)
		}
	})
	return err
}

func (d *decorated) GetActivityTask(ctx context.Context, queues []workflow.Queue) (*backend.ActivityTask, error) {
	if d.inner == nil {
		return nil, ErrNilBackend
	}
	c := d.tel.begin(ctx, OpGetActivityTask)
	t, err := d.inner.GetActivityTask(c.ctx, queues)
	var attrs []attribute.KeyValue
	if err == nil && t != nil {
		attrs = activityAttrs(t)
	}
	d.tel.end(c, err, attrs...)
	if err == nil && t != nil && t.WorkflowInstance != nil {
		claimed := d.cfg.now()
		d.guarded(func() { d.observeClaim(c.ctx, t, claimed) })
	}
	return t, err
}

func activityAttrs(t *backend.ActivityTask) []attribute.KeyValue {
	if t == nil {
		return nil
	}
	attrs := instanceAttrs(t.WorkflowInstance)
	if t.Event != nil {
		attrs = append(attrs, attribute.Int64(keyActivityID, t.Event.ScheduleEventID))
	}
	return attrs
}

func (d *decorated) ExtendActivityTask(ctx context.Context, task *backend.ActivityTask) error {
	if d.inner == nil {
		return ErrNilBackend
	}
	c := d.tel.begin(ctx, OpExtendActivityTask, activityAttrs(task)...)
	err := d.inner.ExtendActivityTask(c.ctx, task)
	d.tel.end(c, err)
	return err
}

func (d *decorated) CompleteActivityTask(ctx context.Context, task *backend.ActivityTask, result *history.Event) error {
	if d.inner == nil {
		return ErrNilBackend
	}
	c := d.tel.begin(ctx, OpCompleteActivityTask, activityAttrs(task)...)
	err := d.inner.CompleteActivityTask(c.ctx, task, result)
	d.tel.end(c, err)
	// With or without an error: the result may have committed all the same,
	// and reading an unknown execution's history is harmless.
	if task != nil && task.WorkflowInstance != nil {
		d.guarded(func() {
			if wf := keyOf(task.WorkflowInstance); !d.known.has(wf) {
				d.reads.request(task.WorkflowInstance, wf)
			}
		})
	}
	return err
}

func (d *decorated) GetStats(ctx context.Context) (*backend.Stats, error) {
	if d.inner == nil {
		return nil, ErrNilBackend
	}
	c := d.tel.begin(ctx, OpGetStats)
	s, err := d.inner.GetStats(c.ctx)
	d.tel.end(c, err)
	return s, err
}

// Tracer returns the wrapped backend's tracer (go-workflows' own spans).
func (d *decorated) Tracer() trace.Tracer {
	if d.inner == nil {
		return nil
	}
	return d.inner.Tracer()
}

// Metrics returns the wrapped backend's metrics client.
func (d *decorated) Metrics() metrics.Client {
	if d.inner == nil {
		return nil
	}
	return d.inner.Metrics()
}

// Options returns the wrapped backend's options.
func (d *decorated) Options() *backend.Options {
	if d.inner == nil {
		return nil
	}
	return d.inner.Options()
}

// FeatureSupported is the wrapped backend's answer.
func (d *decorated) FeatureSupported(feature backend.Feature) bool {
	if d.inner == nil {
		return false
	}
	return d.inner.FeatureSupported(feature)
}

// Close waits for the history reads in progress (queued ones are dropped),
// then closes the wrapped backend and returns its error unchanged.
func (d *decorated) Close() error {
	if d.inner == nil {
		return ErrNilBackend
	}
	d.reads.stop()
	return d.inner.Close()
}

// guarded runs observation code: a panic in it (of user code it reaches: an
// instrument, a span processor) is reported, never passed to the caller.
func (d *decorated) guarded(f func()) {
	defer func() {
		if r := recover(); r != nil {
			otel.Handle(fmt.Errorf("otelworkflows: panic while observing a call: %v", r))
		}
	}()
	f()
}
