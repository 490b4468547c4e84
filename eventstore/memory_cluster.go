package eventstore

import "time"

// MemoryCluster is one in-memory history shared by named nodes, for
// elections between the nodes of one backend: each node, a [*Memory] from
// [MemoryCluster.Node], sees the same histories, run chains, timers,
// packages, routes and outbox rows, and has its own owner identity,
// ownership and enumeration scope (see the Shards section of [Memory]).
// [NewMemory] is a cluster of one node.
//
// A MemoryCluster is safe for concurrent use. Its zero value is not ready:
// create one with [NewMemoryCluster]. It must not be copied after first use.
type MemoryCluster struct {
	s *memShared
}

// NewMemoryCluster returns a cluster with an empty history and no nodes yet,
// configured by opts (nil options are ignored); every node shares its clock
// and shard count.
func NewMemoryCluster(opts ...MemoryOption) *MemoryCluster {
	cfg := memoryConfig{now: time.Now, shardCount: defaultShardCount}
	for _, o := range opts {
		if o != nil {
			o.applyMemory(&cfg)
		}
	}
	return &MemoryCluster{s: &memShared{
		cfg:         cfg,
		workflows:   make(map[WorkflowID]*memWorkflow),
		timers:      make(map[timerKey]TimerEntry),
		packages:    make(map[packageKey]PackageRecord),
		routes:      make(map[string]string),
		outboxByKey: make(map[string]*outboxEntry),
		outboxByWf:  make(map[WorkflowID][]*outboxEntry),
		shards:      make(map[int]*shardState),
		directory:   make(map[int]ownerRecord),
		nodes:       make(map[string]*Memory),
	}}
}

// Node returns the node with this name, creating it on first use: the same
// name always returns the same *Memory, also after [MemoryCluster.Kill]
// (a killed node stays dead). A new node holds no shard and has no
// enumeration scope (every shard). On a zero MemoryCluster it returns a
// Memory whose methods all fail, as a zero Memory's do.
func (c *MemoryCluster) Node(name string) *Memory {
	if c == nil || c.s == nil {
		return &Memory{}
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if m := c.s.nodes[name]; m != nil {
		return m
	}
	m := &Memory{memShared: c.s, name: name}
	c.s.nodes[name] = m
	return m
}

// Kill declares the named node dead, as when its process is gone: the shards
// it holds are released at once (each stays fenced until a new holder
// acquires it), and every later call of the node fails (the error-returning
// methods with an error wrapping [ErrNotOwner], IsCurrentOwner with false,
// the scope setters and PruneClosed doing nothing). It is a test hook; a
// store with leases gets the same effect when a node stops renewing them.
// An unknown name, or a node already dead, changes nothing.
func (c *MemoryCluster) Kill(name string) {
	if c == nil || c.s == nil {
		return
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	m := c.s.nodes[name]
	if m == nil {
		return
	}
	m.dead.Store(true)
	for _, st := range c.s.shards {
		if st.holder == m {
			st.holder = nil
		}
	}
}

// Name returns the node's name: the one given to [MemoryCluster.Node], or
// "memory" for a store from [NewMemory].
func (m *Memory) Name() string {
	if m == nil {
		return ""
	}
	return m.name
}
