package cluster

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
)

// stuckAcquirer is a served store whose AcquireOwnedShard hangs, once
// stuck is set, until the test ends: an acquisition that never returns.
type stuckAcquirer struct {
	*pgstore.Store
	stuck   atomic.Bool
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *stuckAcquirer) AcquireOwnedShard(ctx context.Context, shard int) error {
	if s.stuck.Load() {
		s.once.Do(func() { close(s.entered) })
		<-s.release
		return ctx.Err()
	}
	return s.Store.AcquireOwnedShard(ctx, shard)
}

// TestRenewalDoesNotWaitForBalancing: while the node's balancing hangs in
// an acquisition for three lease periods, its renewals go on, on their own
// schedule, and it keeps every other lease (on the database's clock).
func TestRenewalDoesNotWaitForBalancing(t *testing.T) {
	dsn := schemaDSN(t)
	const lease, renew = time.Second, 100 * time.Millisecond
	n, err := Open(t.Context(), dsn, Config{Node: "a", Shards: 16, Lease: lease, Renew: renew, Instance: "i"})
	if err != nil {
		t.Fatal(err)
	}
	served := &stuckAcquirer{Store: n.Store(), entered: make(chan struct{}), release: make(chan struct{})}
	ctx, cancel := context.WithCancel(t.Context())
	var maintained sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		close(served.release)
		maintained.Wait()
		_ = n.Close(context.Background())
	})
	if err := n.Start(ctx, served, func(context.Context, func(eventstore.WorkflowID) bool) (int, int, error) { return 0, 0, nil }); err != nil {
		t.Fatal(err)
	}
	if got := len(n.Shards()); got != 16 {
		t.Fatalf("a lone node holds %d shards after Start, want 16", got)
	}
	// Shard 15 is freed behind the node's back: its renewal finds it lost,
	// and its balancing tries to take it back, and hangs there.
	served.stuck.Store(true)
	if err := n.Store().ReleaseShards(ctx, []int{15}); err != nil {
		t.Fatal(err)
	}
	maintained.Go(func() { n.Maintain(ctx, ctx) })
	select {
	case <-served.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the balancing never tried to take shard 15 back")
	}
	hung := time.Now()
	time.Sleep(3 * lease)
	leases, err := n.Store().Leases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	live := 0
	for _, l := range leases {
		if l.Live && l.Owner == "a" {
			live++
		}
	}
	if live != 15 {
		t.Fatalf("%s after the balancing hung, the node holds %d live leases, want its 15: %+v", time.Since(hung).Round(time.Millisecond), live, leases)
	}
}
