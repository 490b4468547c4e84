package otelworkflows

import (
	"context"
	"fmt"
	"sync"

	"github.com/cschleiden/go-workflows/backend/history"
	"github.com/cschleiden/go-workflows/core"
	"go.opentelemetry.io/otel"

	"github.com/aionotel/aionotel/eventstore"
)

// knownSet remembers the executions this process has seen from their
// start (or has read), at most max of them, oldest forgotten first. It only
// decides whether a history is read: forgetting costs a read, never a
// wrong figure, since the tracker's join takes a fact read twice once.
type knownSet struct {
	mu   sync.Mutex
	set  map[eventstore.WorkflowID]struct{}
	ring []eventstore.WorkflowID
	next int
	max  int
}

func newKnownSet(max int) *knownSet {
	if max <= 0 {
		max = DefaultMaxKnownInstances
	}
	return &knownSet{set: make(map[eventstore.WorkflowID]struct{}), max: max}
}

func (k *knownSet) has(wf eventstore.WorkflowID) bool {
	k.mu.Lock()
	_, ok := k.set[wf]
	k.mu.Unlock()
	return ok
}

// add remembers wf and reports whether it was new.
func (k *knownSet) add(wf eventstore.WorkflowID) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.set[wf]; ok {
		return false
	}
	k.set[wf] = struct{}{}
	if len(k.ring) < k.max {
		k.ring = append(k.ring, wf)
		return true
	}
	delete(k.set, k.ring[k.next])
	k.ring[k.next] = wf
	k.next = (k.next + 1) % k.max
	return true
}

// reader reads, off the callers' path, the histories of executions first
// seen part-way through, and joins them into the tracker as facts read
// back (pairing's Resume: counted nothing again, opened what is still
// open).
type reader struct {
	d       *decorated
	queue   chan readRequest
	workers int
	once    sync.Once
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the workers
	mu      sync.Mutex
	idle    *sync.Cond // signalled when pending drops to 0
	pending int        // requests queued or being read
	stopped bool
}

type readRequest struct {
	instance core.WorkflowInstance
	wf       eventstore.WorkflowID
	// check, when set, is the batch of a CompleteWorkflowTask that returned
	// an error: the read decides whether it committed (see checkBatch).
	check *failedBatch
}

// failedBatch is what a CompleteWorkflowTask that returned an error tried
// to commit.
type failedBatch struct {
	executed, activities []*history.Event
}

func newReader(d *decorated, workers, queue int) *reader {
	ctx, cancel := context.WithCancel(context.Background())
	r := &reader{d: d, queue: make(chan readRequest, queue), workers: workers, ctx: ctx, cancel: cancel}
	r.idle = sync.NewCond(&r.mu)
	return r
}

// request queues one read of wi's history, unless it is known (then it was
// or is being read) or the queue is full (then it is forgotten, and read
// when next seen).
func (r *reader) request(wi *core.WorkflowInstance, wf eventstore.WorkflowID) {
	if !r.d.known.add(wf) {
		return
	}
	r.enqueue(readRequest{instance: core.WorkflowInstance{InstanceID: wi.InstanceID, ExecutionID: wi.ExecutionID}, wf: wf})
}

// check queues the check of a batch whose CompleteWorkflowTask returned an
// error, whether or not wf is known.
func (r *reader) check(wi *core.WorkflowInstance, wf eventstore.WorkflowID, b *failedBatch) {
	r.enqueue(readRequest{instance: core.WorkflowInstance{InstanceID: wi.InstanceID, ExecutionID: wi.ExecutionID}, wf: wf, check: b})
}

func (r *reader) enqueue(req readRequest) {
	wi, wf := &req.instance, req.wf
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	r.once.Do(func() {
		for range r.workers {
			r.wg.Go(r.work)
		}
	})
	select {
	case r.queue <- req:
		r.pending++
	default:
		r.d.known.forget(wf)
		if req.check != nil {
			otel.Handle(fmt.Errorf("otelworkflows: history read queue full: a failed workflow task of instance %q not checked; its history read back when next seen", wi.InstanceID))
			return
		}
		otel.Handle(fmt.Errorf("otelworkflows: history read queue full: instance %q read when next seen", wi.InstanceID))
	}
}

func (r *reader) work() {
	for {
		select {
		case <-r.ctx.Done():
			return
		case req := <-r.queue:
			if req.check != nil {
				r.checkBatch(req)
			} else {
				r.read(req)
			}
			r.done()
		}
	}
}

// read joins one execution's history.
func (r *reader) read(req readRequest) {
	defer func() {
		if p := recover(); p != nil {
			otel.Handle(fmt.Errorf("otelworkflows: panic while reading a history: %v", p))
		}
	}()
	src := &historySource{d: r.d, req: req}
	if _, err := r.d.tracker.Resume(r.ctx, r.d.ns, src); err != nil {
		r.d.known.forget(req.wf) // read again when next seen
		otel.Handle(fmt.Errorf("otelworkflows: reading the history of instance %q: %w", req.instance.InstanceID, err))
	}
}

// checkBatch reads the history of a CompleteWorkflowTask that returned an
// error and, when the batch is in it (the call committed, then failed),
// observes the batch as that call would have: as facts seen committing,
// counted. When it is not (the error was real), it observes nothing: the
// task is retried, and its retry observed. A read that fails leaves the
// execution unknown, so that its history is read back when next seen.
func (r *reader) checkBatch(req readRequest) {
	defer func() {
		if p := recover(); p != nil {
			otel.Handle(fmt.Errorf("otelworkflows: panic while checking a failed workflow task: %v", p))
		}
	}()
	wi := req.instance
	from := firstSeq(req.check.executed) - 1
	var last *int64
	if from > 0 {
		last = &from
	}
	h, err := r.d.inner.GetWorkflowInstanceHistory(r.ctx, &wi, last)
	if err != nil {
		r.d.known.forget(req.wf)
		otel.Handle(fmt.Errorf("otelworkflows: checking a failed workflow task of instance %q: %w", wi.InstanceID, err))
		return
	}
	if !committed(req.check.executed, h) || !r.d.claims.claim(req.wf, firstSeq(req.check.executed)) {
		return
	}
	r.d.observeTask(r.ctx, &wi, req.wf, req.check.executed, req.check.activities)
}

func (r *reader) done() {
	r.mu.Lock()
	r.pending--
	if r.pending == 0 {
		r.idle.Broadcast()
	}
	r.mu.Unlock()
}

// wait blocks until every read requested so far is joined, or ctx ends.
func (r *reader) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		r.mu.Lock()
		for r.pending > 0 && ctx.Err() == nil {
			r.idle.Wait()
		}
		r.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		r.mu.Lock()
		r.idle.Broadcast()
		r.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// stop ends the workers after the reads in progress; queued ones are
// dropped.
func (r *reader) stop() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
	for {
		select {
		case <-r.queue:
			r.done()
		default:
			return
		}
	}
}

// historySource is the one-workflow eventstore.Store pairing's Resume reads:
// it lists the execution as open and gives its go-workflows history,
// translated. Resume calls no other method.
type historySource struct {
	eventstore.Store
	d   *decorated
	req readRequest
}

func (s *historySource) ListActive(context.Context) ([]eventstore.WorkflowID, error) {
	return []eventstore.WorkflowID{s.req.wf}, nil
}

func (s *historySource) ListPaused(context.Context) ([]eventstore.WorkflowID, error) {
	return nil, nil
}

func (s *historySource) ReadHistory(ctx context.Context, _ eventstore.WorkflowID) ([]eventstore.Event, error) {
	wi := s.req.instance
	if s.d.names != nil {
		s.d.names.remember(s.req.wf, wi.InstanceID, wi.ExecutionID)
	}
	h, err := s.d.inner.GetWorkflowInstanceHistory(ctx, &wi, nil)
	if err != nil {
		return nil, err
	}
	events := make([]eventstore.Event, 0, len(h))
	for _, e := range h {
		if e != nil {
			events = append(events, translate(s.req.wf, wi.InstanceID, e).ev)
		}
	}
	return events, nil
}

// forget drops wf, so that it is read when next seen.
func (k *knownSet) forget(wf eventstore.WorkflowID) {
	k.mu.Lock()
	delete(k.set, wf)
	k.mu.Unlock()
}
