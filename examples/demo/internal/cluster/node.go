package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
	"github.com/aionotel/aionotel/pairing"
)

// Defaults of Config.
const (
	DefaultLease = 10 * time.Second
	DefaultRenew = 2 * time.Second
)

// ErrNodeRunning is returned by Start when another live process keeps the
// heartbeat of the same node name.
var ErrNodeRunning = errors.New("cluster: a node of this name is running")

// The ranges Config.Validate accepts.
const (
	MinLease = 100 * time.Millisecond
	MaxLease = 24 * time.Hour
	MinRenew = 10 * time.Millisecond
)

// ErrInvalidConfig is matched (errors.Is) by every *ConfigError.
var ErrInvalidConfig = errors.New("cluster: invalid configuration")

// ConfigError is what Config.Validate and Open return for a lease or a
// renewal interval the node could not keep.
type ConfigError struct {
	Lease, Renew time.Duration
	Reason       string
}

func (e *ConfigError) Error() string {
	return fmt.Sprintf("lease %s, renew %s: %s", e.Lease, e.Renew, e.Reason)
}

// Is makes every *ConfigError match ErrInvalidConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrInvalidConfig }

// Validate checks the lease and the renewal interval as given (Open puts
// the defaults in place of zeros first): the lease from MinLease to
// MaxLease, the renewal from MinRenew to half the lease, so that a node
// renews at least twice per lease (compared without overflow, whatever the
// values).
func (c Config) Validate() error {
	bad := func(reason string) error { return &ConfigError{Lease: c.Lease, Renew: c.Renew, Reason: reason} }
	switch {
	case c.Lease < MinLease || c.Lease > MaxLease:
		return bad(fmt.Sprintf("want a lease from %s to %s", MinLease, MaxLease))
	case c.Renew < MinRenew:
		return bad(fmt.Sprintf("want a renewal interval of at least %s", MinRenew))
	case c.Renew > c.Lease/2:
		return bad("want renewing at least twice per lease (a renewal interval of at most half the lease)")
	}
	return nil
}

// Config is what a node runs with.
type Config struct {
	// Node names the node: the identity that holds shard leases
	// (pgstore.WithNode), and its connections' application_name
	// ("aionotel-demo NODE", unless the DSN gives one); "": the host name
	// and a random suffix.
	Node string
	// Shards is the number of shards (pgstore.WithShardCount); 0 takes the
	// count the database records (16 for a new one).
	Shards int
	// Lease is how long a lease lasts without renewal; 0: DefaultLease.
	Lease time.Duration
	// Renew is the interval of heartbeats, renewals and balancing; 0:
	// DefaultRenew. It must be at most half the lease.
	Renew time.Duration
	// Grace is how long a shard being handed over keeps serving the
	// workflows it has before it is released (no new one starts there).
	Grace time.Duration
	// Instance is the process's service.instance.id, kept with the
	// heartbeat.
	Instance string
	// Now is the clock of leases and heartbeats (pgstore.WithLeaseClock);
	// nil: the database's.
	Now func() time.Time
	// Log receives a line for every change of the node's shards; nil:
	// nothing.
	Log io.Writer
}

// Node is one node of the cluster. Open makes one, Start joins the
// cluster, Maintain keeps its leases, Close leaves.
type Node struct {
	cfg      Config
	store    *pgstore.Store // the histories, for the server; its lease statements run on pool
	workload *pgxpool.Pool  // store's
	pool     *pgxpool.Pool  // leases and heartbeats
	shards   int

	// pause waits d (a test replaces it).
	pause func(ctx context.Context, d time.Duration) error
	// served is the server's decorated store: the ShardOwner calls go
	// through it. recover takes over the orphans of acquired shards.
	served  eventstore.ShardOwner
	recover func(context.Context, func(eventstore.WorkflowID) bool) (int, int, error)

	// appends[s] is held shared by each append to a workflow of shard s,
	// and exclusively while the node gives s up: the decorator has then
	// observed every append to s that committed before.
	appends []sync.RWMutex
	going   sync.WaitGroup // hand-overs and take-overs in progress

	logMu sync.Mutex

	mu      sync.Mutex
	held    map[int]bool      // live leases of this node, as far as it knows
	leaving map[int]time.Time // held shards being handed over: released at the time
	gone    map[int]bool      // held shards being given up now (handOver)
}

// Open connects the node: the store of its histories (Store), and a pool
// of two connections for its leases and heartbeats. The DSN is never
// quoted in errors: it may hold a password.
func Open(ctx context.Context, dsn string, cfg Config) (*Node, error) {
	if cfg.Lease <= 0 {
		cfg.Lease = DefaultLease
	}
	if cfg.Renew <= 0 {
		cfg.Renew = DefaultRenew
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	if cfg.Node == "" {
		cfg.Node = defaultNode()
	}
	n := &Node{cfg: cfg, pause: sleep, leaving: map[int]time.Time{}, held: map[int]bool{}, gone: map[int]bool{}}
	var err error
	n.workload, err = newPool(ctx, dsn, cfg.Node, 0)
	if err == nil {
		n.pool, err = newPool(ctx, dsn, cfg.Node, 2)
	}
	if err == nil {
		// One Store, so one life of the node name: its leases are renewed
		// on the node's own pool, and it claims only its shards' rows.
		n.store, err = pgstore.New(ctx, n.workload, pgstore.WithNode(cfg.Node), pgstore.WithShardCount(cfg.Shards),
			pgstore.WithLeaseDuration(cfg.Lease), pgstore.WithLeaseClock(cfg.Now),
			pgstore.WithLeasePool(n.pool), pgstore.WithOwnedShardClaims())
	}
	if err == nil {
		n.cfg.Node = n.store.Node()
		n.shards = n.store.ShardCount()
		n.appends = make([]sync.RWMutex, n.shards)
	}
	if err == nil {
		err = createNodesTable(ctx, n.pool)
	}
	if err != nil {
		n.closeConns()
		return nil, fmt.Errorf("cluster: %w", connError(err))
	}
	return n, nil
}

// defaultNode is a node name for a process given none: the host name and
// a random suffix, as pgstore names its nodes.
func defaultNode() string {
	host, err := os.Hostname()
	if err != nil || host == "" || len(host) > 100 {
		host = "node"
	}
	return fmt.Sprintf("%s-%08x", host, rand.Uint32())
}

// newPool connects a pool to dsn of at most conns connections (0: pgx's
// default), named after the node (application_name, as pg_stat_activity
// shows it) unless the DSN names it.
func newPool(ctx context.Context, dsn, node string, conns int32) (*pgxpool.Pool, error) {
	pc, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	if conns > 0 {
		pc.MaxConns = conns
	}
	if _, ok := pc.ConnConfig.RuntimeParams["application_name"]; !ok {
		pc.ConnConfig.RuntimeParams["application_name"] = "aionotel-demo " + node
	}
	return pgxpool.NewWithConfig(ctx, pc)
}

// connError keeps what pgstore and pgx say of a failure, without the DSN
// they may quote.
func connError(err error) error {
	if errors.Is(err, eventstore.ErrInvalidArgument) {
		return err
	}
	return errors.New("cannot connect or set up the tables (check the DSN and that the server is up)")
}

// Store returns the store of the histories: the server decorates it.
func (n *Node) Store() *pgstore.Store { return n.store }

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.Node }

// ShardCount returns the number of shards.
func (n *Node) ShardCount() int { return n.shards }

// Start joins the cluster: it refuses a node name another live process
// uses, writes the heartbeat, scopes served (the server's decorated store)
// to no shard, then balances once: the node takes back the leases its name
// still holds (a restart within the lease) and acquires its share. recover
// is called with the workflows of every shard acquired from then on.
func (n *Node) Start(ctx context.Context, served eventstore.Store, recover func(context.Context, func(eventstore.WorkflowID) bool) (int, int, error)) error {
	so, ok := served.(eventstore.ShardOwner)
	if !ok {
		return errors.New("cluster: the served store has no ShardOwner capability")
	}
	n.served, n.recover = so, recover
	if err := n.checkName(ctx); err != nil {
		return err
	}
	so.SetOwnedShards(ctx, []int{})
	return n.Tick(ctx, true)
}

// checkName refuses to start while another process keeps this node's
// heartbeat fresh: it waits two renewal intervals when the heartbeat of
// another instance is recent, and fails if it moved meanwhile.
func (n *Node) checkName(ctx context.Context) error {
	window := 2 * n.cfg.Renew
	first, err := readHeartbeat(ctx, n.pool, n.cfg.Node, window, n.now())
	if err != nil || !first.found || first.instance == n.cfg.Instance || !first.recent {
		return err
	}
	n.logf("node %s: instance %s of this node beat less than %s ago: waiting %s to see whether it still runs\n",
		n.cfg.Node, first.instance, window, window)
	if err := n.pause(ctx, window); err != nil {
		return err
	}
	second, err := readHeartbeat(ctx, n.pool, n.cfg.Node, window, n.now())
	if err != nil {
		return err
	}
	if second.found && second.instance == first.instance && !second.seen.Equal(first.seen) {
		return fmt.Errorf("%w: node %q (instance %s) still beats; give this one another -node", ErrNodeRunning, n.cfg.Node, second.instance)
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Maintain keeps the node's leases until renew ends, and balances while
// balance has not ended: after balance ends (the server drains) the node
// only keeps its leases. Renewal (with the heartbeat) and balancing run on
// schedules of their own, every renewal interval each, so that a slow
// acquisition or orphan recovery never delays a renewal.
func (n *Node) Maintain(balance, renew context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() {
		n.every(renew, func() error { return n.renew(renew) })
	})
	wg.Go(func() {
		n.every(balance, func() error { return n.balance(balance) })
	})
	wg.Wait()
}

// every runs step every renewal interval until ctx ends.
func (n *Node) every(ctx context.Context, step func() error) {
	t := time.NewTicker(n.cfg.Renew)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := step(); err != nil && ctx.Err() == nil {
			n.logf("node %s: %v\n", n.cfg.Node, err)
		}
	}
}

// Tick writes the heartbeat, renews the leases and, with balance, takes or
// hands over shards toward the node's share: one step of Maintain's two
// schedules, in order.
func (n *Node) Tick(ctx context.Context, balance bool) error {
	if err := n.renew(ctx); err != nil {
		return err
	}
	if !balance {
		return nil
	}
	return n.balance(ctx)
}

// renew writes the heartbeat and renews the leases; a held shard the
// renewal did not return is lost, and given up.
func (n *Node) renew(ctx context.Context) error {
	if err := heartbeat(ctx, n.pool, n.cfg.Node, n.cfg.Instance, n.now()); err != nil {
		return fmt.Errorf("heartbeat: %w", err)
	}
	renewed, err := n.store.RenewOwnedShards(ctx)
	if err != nil {
		return fmt.Errorf("renewing the leases: %w", err)
	}
	n.mu.Lock()
	var lost []int
	for s := range n.held {
		if !slices.Contains(renewed, s) && !n.gone[s] {
			lost = append(lost, s)
			n.gone[s] = true
		}
	}
	n.mu.Unlock()
	if len(lost) > 0 {
		n.handOver(ctx, lost, false, "lost (the lease expired before its renewal, or a later life of this node name took it)")
	}
	return nil
}

// balance takes or hands over shards toward the node's share.
func (n *Node) balance(ctx context.Context) error {
	now := n.now()
	members, err := liveNodes(ctx, n.pool, n.cfg.Lease, now)
	if err != nil {
		return fmt.Errorf("listing the nodes: %w", err)
	}
	leases, err := n.store.Leases(ctx)
	if err != nil {
		return fmt.Errorf("reading the leases: %w", err)
	}
	n.mu.Lock()
	p := plan(n.cfg.Node, members, leases, n.shards, n.held, n.leaving)
	for _, s := range p.stay {
		if !n.gone[s] {
			delete(n.leaving, s)
		}
	}
	local := n.clock()
	for _, s := range p.leave {
		n.leaving[s] = local.Add(n.cfg.Grace)
	}
	var release []int
	for s, at := range n.leaving {
		if !local.Before(at) && !n.gone[s] {
			release = append(release, s)
			n.gone[s] = true
		}
	}
	n.mu.Unlock()
	if len(p.leave) > 0 {
		slices.Sort(p.leave)
		n.logf("node %s: handing over shards %v (%d nodes live: share %d)\n", n.cfg.Node, p.leave, len(members), p.target)
	}
	if len(release) > 0 {
		n.handOver(ctx, release, true, "released")
	}
	return n.acquire(ctx, p)
}

// handOver gives shards up in the background, once the appends to them in
// progress have returned (and the decorator has observed what they
// committed), new ones waiting: with release, it ends their leases first
// (pgstore's ReleaseShards, so that no later append can commit), then it
// tells the decorator through the served store that the node no longer
// holds them (IsCurrentOwner: their entries are released and what is
// still observed of them ignored) and narrows the scope (their timers and
// listings stop). The waiting appends then fail with ErrNotOwner.
func (n *Node) handOver(ctx context.Context, shards []int, release bool, why string) {
	slices.Sort(shards)
	n.going.Go(func() {
		for _, s := range shards {
			n.appends[s].Lock()
		}
		defer func() {
			for _, s := range shards {
				n.appends[s].Unlock()
			}
		}()
		if release {
			if err := n.store.ReleaseShards(ctx, shards); err != nil {
				// Not released: they expire, and a renewal finds them lost.
				n.logf("node %s: releasing shards %v: %v\n", n.cfg.Node, shards, err)
			}
		}
		n.mu.Lock()
		for _, s := range shards {
			delete(n.held, s)
			delete(n.leaving, s)
			delete(n.gone, s)
		}
		n.mu.Unlock()
		for _, s := range shards {
			n.served.IsCurrentOwner(ctx, s)
		}
		n.served.SetOwnedShards(ctx, n.Shards())
		n.logf("node %s: shards %v %s, now serving %v\n", n.cfg.Node, shards, why, n.Shards())
	})
}

// Append runs an append to a workflow of one of the node's shards; the
// shard is not given up while it runs (handOver).
func (n *Node) Append(wf eventstore.WorkflowID, append func() error) error {
	l := &n.appends[eventstore.ShardOf(wf, n.shards)]
	l.RLock()
	defer l.RUnlock()
	return append()
}

// acquire takes the plan's shards, one election each, through the served
// store, and then extends the scope to those it got: the decorator resumes
// them, and the server takes over their orphans.
func (n *Node) acquire(ctx context.Context, p balancePlan) error {
	var got []int
	take := func(s int) error {
		err := n.served.AcquireOwnedShard(ctx, s)
		switch {
		case err == nil:
			got = append(got, s)
		case errors.Is(err, eventstore.ErrNotOwner): // another node was quicker
		default:
			return fmt.Errorf("acquiring shard %d: %w", s, err)
		}
		return nil
	}
	var err error
	for _, s := range p.reclaim {
		if err = take(s); err != nil {
			break
		}
	}
	for _, s := range p.free[:min(max(p.target-p.holding, 0), len(p.free))] {
		if err != nil {
			break
		}
		err = take(s)
	}
	if len(got) == 0 {
		return err
	}
	slices.Sort(got)
	n.mu.Lock()
	for _, s := range got {
		n.held[s] = true
	}
	n.mu.Unlock()
	n.served.ExtendOwnedShards(ctx, got)
	n.logf("node %s: acquired shards %v, now serving %v\n", n.cfg.Node, got, n.Shards())
	// In the background, so that many orphans never hold up the renewals.
	n.going.Go(func() {
		orphans, rows, err := n.recover(ctx, shardSet(n.shards, got))
		if err != nil && ctx.Err() == nil {
			n.logf("node %s: taking over the orphans of shards %v: %v\n", n.cfg.Node, got, err)
		}
		n.logf("node %s: shards %v: %d orphaned workflows taken over, %d activity rows re-armed\n", n.cfg.Node, got, orphans, rows)
	})
	return err
}

// Close leaves the cluster: it releases every lease of the node, so that
// the others adopt its shards at once, removes its heartbeat and closes
// the connections. Call it after the server has stopped.
func (n *Node) Close(ctx context.Context) error {
	n.going.Wait()
	all := make([]int, n.shards)
	for i := range all {
		all[i] = i
	}
	err := errors.Join(n.store.ReleaseShards(ctx, all), leave(ctx, n.pool, n.cfg.Node, n.cfg.Instance))
	n.mu.Lock()
	clear(n.held)
	clear(n.leaving)
	n.mu.Unlock()
	n.closeConns()
	return err
}

func (n *Node) closeConns() {
	if n.store != nil {
		n.store.Close()
	}
	for _, p := range []*pgxpool.Pool{n.pool, n.workload} {
		if p != nil {
			p.Close()
		}
	}
}

// Shards returns the shards the node holds, in order.
func (n *Node) Shards() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]int, 0, len(n.held))
	for s := range n.held {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// NewWorkflowID returns a random workflow ID in a shard the node holds and
// neither hands over nor gives up, or false when there is none.
func (n *Node) NewWorkflowID() (eventstore.WorkflowID, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var starting []int
	for s := range n.held {
		if n.leaving[s].IsZero() && !n.gone[s] {
			starting = append(starting, s)
		}
	}
	if len(starting) == 0 {
		return eventstore.WorkflowID{}, false
	}
	for {
		id := eventstore.NewWorkflowID()
		if slices.Contains(starting, eventstore.ShardOf(id, n.shards)) {
			return id, true
		}
	}
}

// Serves reports whether the node holds the workflow's shard.
func (n *Node) Serves(wf eventstore.WorkflowID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.held[eventstore.ShardOf(wf, n.shards)]
}

// Resumed logs what a resume of acquired shards did (for
// otelstore.WithResumeReports).
func (n *Node) Resumed(r pairing.ResumeReport, err error) {
	if err != nil {
		n.logf("node %s: resume: %v\n", n.cfg.Node, err)
	}
	n.logf("node %s: telemetry resumed from %d open workflows: %d activities in flight, %d runs open\n",
		n.cfg.Node, r.Workflows, r.Activities, r.Runs)
}

// logf writes a line to the log, one writer at a time.
func (n *Node) logf(format string, args ...any) {
	n.logMu.Lock()
	defer n.logMu.Unlock()
	fmt.Fprintf(n.cfg.Log, format, args...)
}

// clock is the node's own clock, which times hand-overs.
func (n *Node) clock() time.Time {
	if n.cfg.Now == nil {
		return time.Now()
	}
	return n.cfg.Now()
}

// now is the time of leases and heartbeats: nil for the database's clock.
func (n *Node) now() *time.Time {
	if n.cfg.Now == nil {
		return nil
	}
	t := n.cfg.Now()
	return &t
}

// shardSet returns a predicate for the workflows of the listed shards.
func shardSet(count int, shards []int) func(eventstore.WorkflowID) bool {
	return func(wf eventstore.WorkflowID) bool { return slices.Contains(shards, eventstore.ShardOf(wf, count)) }
}

// balancePlan is what one balancing step does.
type balancePlan struct {
	target  int   // the node's share
	holding int   // shards held and not handed over
	reclaim []int // live leases of this node it did not know of (a previous life's)
	free    []int // shards to acquire from, in the order to try
	leave   []int // shards to start handing over
	stay    []int // shards being handed over that the node keeps after all
}

// plan decides a balancing step for node me: its share of shards among the
// live members (sorted by name, the first shards%len(members) taking one
// more), the free shards to acquire while under it (in random order, so
// that nodes acquiring together rarely collide), the shards to hand over
// while over it (the highest first), and the hand-overs to cancel when the
// share grew back.
func plan(me string, members []string, leases []pgstore.Lease, shards int, held map[int]bool, leaving map[int]time.Time) balancePlan {
	if !slices.Contains(members, me) {
		members = append(slices.Clone(members), me)
	}
	slices.Sort(members)
	i := slices.Index(members, me)
	p := balancePlan{target: shards / len(members)}
	if i < shards%len(members) {
		p.target++
	}
	taken := map[int]bool{}
	for _, l := range leases {
		if !l.Live {
			continue
		}
		taken[l.Shard] = true
		if l.Owner == me && !held[l.Shard] {
			p.reclaim = append(p.reclaim, l.Shard)
		}
	}
	for s := range shards {
		if !taken[s] {
			p.free = append(p.free, s)
		}
	}
	rand.Shuffle(len(p.free), func(a, b int) { p.free[a], p.free[b] = p.free[b], p.free[a] })
	var keep []int // held, not leaving, highest last
	for s := range shards {
		switch {
		case held[s] && leaving[s].IsZero():
			keep = append(keep, s)
		case held[s]:
			p.stay = append(p.stay, s) // candidates: kept below if the share allows
		}
	}
	p.holding = len(keep) + len(p.reclaim)
	switch {
	case p.holding > p.target:
		over := p.holding - p.target
		p.leave = slices.Clone(keep[max(len(keep)-over, 0):])
		p.stay = nil
	default:
		// Hand-overs in progress are cancelled while the share allows.
		room := p.target - p.holding
		p.stay = p.stay[:min(room, len(p.stay))]
		p.holding += len(p.stay)
	}
	return p
}
