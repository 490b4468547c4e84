package server

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestPoolRunsTasksInOrder(t *testing.T) {
	p := newPool()
	var got []int
	done := make(chan struct{})
	for i := range 5 {
		p.submit(func(context.Context) {
			got = append(got, i)
			if i == 4 {
				close(done)
			}
		})
	}
	if p.backlog() != 5 {
		t.Errorf("backlog %d before start, want 5", p.backlog())
	}
	var wg sync.WaitGroup
	p.start(t.Context(), 1, &wg)
	<-done
	p.close()
	wg.Wait()
	for i, v := range got {
		if v != i {
			t.Fatalf("ran %v, want 0..4 in order", got)
		}
	}
}

func TestPoolCloseDropsQueuedAndLaterTasks(t *testing.T) {
	p := newPool()
	ran := 0
	p.submit(func(context.Context) { ran++ })
	p.close()
	p.submit(func(context.Context) { ran++ })
	var wg sync.WaitGroup
	p.start(t.Context(), 2, &wg)
	wg.Wait() // the workers exit at once: the pool is closed
	if ran != 0 || p.backlog() != 0 {
		t.Errorf("ran %d, backlog %d after close; want 0, 0", ran, p.backlog())
	}
}

func TestPoolConcurrentSafe(t *testing.T) {
	p := newPool()
	var wg sync.WaitGroup
	p.start(t.Context(), 4, &wg)
	const n = 1000
	var mu sync.Mutex
	count := 0
	all := make(chan struct{})
	var producers sync.WaitGroup
	for range 4 {
		producers.Go(func() {
			for range n / 4 {
				p.submit(func(context.Context) {
					mu.Lock()
					count++
					if count == n {
						close(all)
					}
					mu.Unlock()
				})
			}
		})
	}
	producers.Wait()
	<-all
	p.close()
	wg.Wait()
}

func TestDelayQueueRunsInDueOrder(t *testing.T) {
	q := newDelayQueue()
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan struct{})
	go func() { q.run(ctx); close(stopped) }()

	got := make(chan int, 3)
	q.after(4*time.Millisecond, func() { got <- 3 })
	q.after(0, func() { got <- 1 })
	q.after(2*time.Millisecond, func() { got <- 2 })
	for want := 1; want <= 3; want++ {
		select {
		case v := <-got:
			if v != want {
				t.Fatalf("ran %d, want %d", v, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("function %d did not run", want)
		}
	}
	q.after(time.Hour, func() { t.Error("ran after the queue stopped") })
	if q.pending() != 1 {
		t.Errorf("pending %d, want 1", q.pending())
	}
	cancel()
	<-stopped
	q.after(0, func() { t.Error("ran after the queue stopped") })
	if q.pending() != 0 {
		t.Errorf("pending %d after stop, want 0", q.pending())
	}
}
