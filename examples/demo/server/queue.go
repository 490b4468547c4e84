package server

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// task is a unit of work for a pool.
type task func(ctx context.Context)

// pool is a FIFO of tasks run by a fixed number of goroutines. Submitting
// never blocks: the queue is unbounded, and its length is the backlog the
// starter throttles on.
type pool struct {
	mu     sync.Mutex
	cond   *sync.Cond
	queue  []task
	closed bool
}

func newPool() *pool {
	p := &pool{}
	p.cond = sync.NewCond(&p.mu)
	return p
}

// submit queues t; after close it is dropped.
func (p *pool) submit(t task) {
	p.mu.Lock()
	if !p.closed {
		p.queue = append(p.queue, t)
		p.cond.Signal()
	}
	p.mu.Unlock()
}

// backlog returns the number of queued tasks.
func (p *pool) backlog() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.queue)
}

// start runs n goroutines that take tasks until close; wg tracks them.
func (p *pool) start(ctx context.Context, n int, wg *sync.WaitGroup) {
	for range n {
		wg.Go(func() {
			for {
				t, ok := p.next()
				if !ok {
					return
				}
				t(ctx)
			}
		})
	}
}

func (p *pool) next() (task, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.queue) == 0 && !p.closed {
		p.cond.Wait()
	}
	if p.closed {
		return nil, false
	}
	t := p.queue[0]
	p.queue[0] = nil
	p.queue = p.queue[1:]
	return t, true
}

// close stops the goroutines after their current task and drops the queue.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.queue = nil
	p.cond.Broadcast()
	p.mu.Unlock()
}

// delayed is a function due at a point in (monotonic) time.
type delayed struct {
	at  time.Time
	seq uint64 // ties keep submission order
	fn  func()
}

type delayHeap []delayed

func (h delayHeap) Len() int { return len(h) }
func (h delayHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h delayHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)   { *h = append(*h, x.(delayed)) }
func (h *delayHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// delayQueue runs functions after a delay, on one goroutine, without a
// goroutine or a runtime timer per pending function: it is how simulated work
// takes time. The functions it runs must be quick (they submit tasks to a
// pool).
type delayQueue struct {
	mu     sync.Mutex
	items  delayHeap
	seq    uint64
	wake   chan struct{}
	closed bool
}

func newDelayQueue() *delayQueue {
	return &delayQueue{wake: make(chan struct{}, 1)}
}

// after runs fn once d has passed (real time); after close it is dropped.
func (q *delayQueue) after(d time.Duration, fn func()) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.seq++
	heap.Push(&q.items, delayed{at: time.Now().Add(d), seq: q.seq, fn: fn})
	first := q.items[0].seq == q.seq
	q.mu.Unlock()
	if first {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// pending returns the number of functions waiting.
func (q *delayQueue) pending() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// run calls the due functions until ctx is done, then drops the rest.
func (q *delayQueue) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		var due []func()
		q.mu.Lock()
		now := time.Now()
		for len(q.items) > 0 && !q.items[0].at.After(now) {
			due = append(due, heap.Pop(&q.items).(delayed).fn)
		}
		wait := time.Hour
		if len(q.items) > 0 {
			wait = q.items[0].at.Sub(now)
		}
		q.mu.Unlock()
		for _, fn := range due {
			fn()
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			q.mu.Lock()
			q.closed = true
			q.items = nil
			q.mu.Unlock()
			return
		case <-q.wake:
		case <-timer.C:
		}
	}
}
