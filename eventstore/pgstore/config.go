package pgstore

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/eventstore"
)

// Option configures [New] and [Open].
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// config holds what the options set. newConfig sets the defaults first.
type config struct {
	schema     string
	node       string
	shardCount int // 0: the count the database records, else 16
	lease      time.Duration
	leaseClock func() time.Time // nil: the database's clock
	now        func() time.Time
	leasePool  *pgxpool.Pool // nil: the store's pool
	idle       time.Duration // 0: half the lease
	ownClaims  bool
}

// DefaultLeaseDuration is how long an acquired or renewed shard lease lasts
// without [WithLeaseDuration].
const DefaultLeaseDuration = 30 * time.Second

// DefaultShardCount is the number of shards of a database created without
// [WithShardCount]; it is [eventstore.Memory]'s default too.
const DefaultShardCount = 16

// maxNodeLen bounds a node name, so it stays readable in errors and logs.
const maxNodeLen = 200

func newConfig(opts []Option) config {
	c := config{lease: DefaultLeaseDuration, now: time.Now}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	if c.node == "" {
		c.node = defaultNode()
	}
	return c
}

func (c config) validate() error {
	if c.shardCount > maxShardCount {
		return fmt.Errorf("%w: pgstore: WithShardCount(%d): at most %d shards", eventstore.ErrInvalidArgument, c.shardCount, maxShardCount)
	}
	if c.schema != "" {
		if err := checkName("schema", c.schema, 63); err != nil {
			return err
		}
	}
	return checkName("node", c.node, maxNodeLen)
}

// checkName refuses a name that PostgreSQL could not store as text (NUL,
// invalid UTF-8) or that is too long.
func checkName(what, name string, maxLen int) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: pgstore: empty %s name", eventstore.ErrInvalidArgument, what)
	case len(name) > maxLen:
		return fmt.Errorf("%w: pgstore: %s name %q is longer than %d bytes", eventstore.ErrInvalidArgument, what, name, maxLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: pgstore: %s name %q is not valid UTF-8", eventstore.ErrInvalidArgument, what, name)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return fmt.Errorf("%w: pgstore: %s name %q holds a NUL byte", eventstore.ErrInvalidArgument, what, name)
		}
	}
	return nil
}

// defaultNode is the node name without WithNode: the host name and a random
// suffix, so that two processes on one host never share a name.
func defaultNode() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	host, err := os.Hostname()
	if err != nil || host == "" || checkName("node", host, maxNodeLen-9) != nil {
		host = "node"
	}
	return host + "-" + hex.EncodeToString(b[:])
}

// WithSchema puts the tables in the named PostgreSQL schema, which [New]
// creates if it does not exist. The name is quoted, so any valid UTF-8 up
// to 63 bytes without NUL is valid, case kept; any other name makes New
// fail with an error wrapping [eventstore.ErrInvalidArgument]. Without this
// option (or with "") the tables are unqualified and land in the first
// schema of the connection's search_path (normally "public"). Every node of a deployment names the same schema;
// tests use a schema each to stay apart.
func WithSchema(name string) Option {
	return optionFunc(func(c *config) { c.schema = name })
}

// WithNode names this store's node: the name that holds shard leases (see
// [Store.AcquireOwnedShards]). A name may be reused: each [New] under a
// name opens a new life of it, numbered in the database, and the Store of
// a later life takes over, in a new epoch, the live leases of an earlier
// one (a process restarted by its supervisor under the same name, while
// the old one is paused or dead), which is then fenced; an earlier life
// never takes them back. Two processes running at once under one name
// therefore do not share its shards: give every process its own name. Without
// this option (or with "") the name is the host name followed by a dash and
// eight random hex digits, different for every [New]. A name must be valid
// UTF-8 without NUL, at most 200 bytes, else New fails with an error
// wrapping [eventstore.ErrInvalidArgument].
func WithNode(name string) Option {
	return optionFunc(func(c *config) { c.node = name })
}

// maxShardCount is the largest shard count: every shard has a lease row,
// and a shard number fits the int columns with room to spare.
const maxShardCount = 1 << 16

// WithShardCount sets the number of shards workflows are partitioned into
// ([eventstore.ShardOf]). The database records the count when [New] first
// creates the tables, and every node must agree with it: New fails with an
// error wrapping [eventstore.ErrInvalidArgument] when n differs from the
// recorded count. Without this option (or with n <= 0) the store uses the
// recorded count, and a database created without it records
// [DefaultShardCount]. Every shard has a lease row, so n is at most 65,536;
// a larger n makes New fail with an error wrapping
// [eventstore.ErrInvalidArgument].
func WithShardCount(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.shardCount = n
		}
	})
}

// WithLeaseDuration sets how long a shard lease lasts after this node
// acquires or renews it: a node that stops renewing for d loses its shards
// to any node that acquires them. Without this option (or with d <= 0) it is
// [DefaultLeaseDuration]. Renew well within d ([Store.RenewOwnedShards]);
// a shorter d makes failover faster and a pause of the holder (GC, a slow
// database) more likely to cost it its shards.
func WithLeaseDuration(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.lease = d
		}
	})
}

// WithLeaseClock sets the clock that lease expiry is measured on: when a
// lease is acquired or renewed it expires at now()+duration, and it is live
// while now() is before that. Every node of a deployment must read the same
// clock, so this is for tests, which advance a shared fake clock instead of
// sleeping. Without this option (or with nil) leases are measured on the
// database's clock (clock_timestamp()), which every node shares whatever the
// skew of their own clocks.
func WithLeaseClock(now func() time.Time) Option {
	return optionFunc(func(c *config) {
		if now != nil {
			c.leaseClock = now
		}
	})
}

// WithClock sets the clock the store reads to fill in a zero
// Envelope.RecordedAt, PackageRecord.CreatedAt or OutboxRow.CreatedAt, as
// [eventstore.WithClock] does for [eventstore.Memory]. Without it (or with
// nil) the store uses time.Now of the process that writes.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) {
		if now != nil {
			c.now = now
		}
	})
}

// WithLeasePool runs the lease statements ([Store.AcquireOwnedShards],
// [Store.RenewOwnedShards], [Store.ReleaseShards], [Store.IsCurrentOwner],
// [Store.PublishShardOwner], [Store.Leases]) on pool instead of the
// store's, which the Store borrows (Close leaves it open): a workload that
// fills the store's pool (slow appends, a locked workflow) then never
// delays a renewal. Without this option (or with nil) they share the
// store's pool.
func WithLeasePool(pool *pgxpool.Pool) Option {
	return optionFunc(func(c *config) { c.leasePool = pool })
}

// WithIdleInTransactionTimeout sets how long a transaction of this Store
// may sit idle (its client sends nothing: the process is paused, stuck or
// cut off) before the server ends its session
// (PostgreSQL's idle_in_transaction_session_timeout, set on every
// transaction the Store opens and, for a pool [Open] makes, on every
// session). An append holds its shard's lease row locked until it commits,
// and no takeover of the shard can happen meanwhile: the timeout bounds how
// long a paused writer holds its shard. Without this option (or with d <=
// 0) it is half the lease duration ([WithLeaseDuration]). It is at least one
// millisecond, and at most PostgreSQL's largest, 2^31-1 ms (about 24.8
// days), which a longer d, or half of a lease longer than about 49.7
// days, is taken as.
func WithIdleInTransactionTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d > 0 {
			c.idle = d
		}
	})
}

// WithOwnedShardClaims makes [Store.ClaimOutboxRows] claim only rows of
// workflows in shards this Store holds now (a live lease in its epoch), so
// that a node's dispatcher never claims, and bounces, rows of shards
// another node owns. A Store holding no shard then claims nothing. Without
// this option claims are for every shard, as [eventstore.Memory] makes
// them: what a single node, or a dispatcher serving the whole cluster,
// wants.
func WithOwnedShardClaims() Option {
	return optionFunc(func(c *config) { c.ownClaims = true })
}

// idleMillis is the idle_in_transaction_session_timeout of the Store's
// transactions, in milliseconds, within what PostgreSQL accepts (a larger
// value fails every statement that sets it).
func (c config) idleMillis() int64 {
	d := c.idle
	if d <= 0 {
		d = c.lease / 2
	}
	return min(max(d.Milliseconds(), 1), math.MaxInt32)
}
