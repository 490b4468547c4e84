package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/eventstore"
)

// Store is an [eventstore.Store], [eventstore.Outbox] and
// [eventstore.ShardOwner] in PostgreSQL tables, shared by every process
// (node) that opens the same database and schema. Where the contract
// leaves a choice open, Store makes the one [eventstore.Memory] makes, and
// refuses the same inputs with the same errors.
//
// A Store is safe for concurrent use; its calls run on the pool's
// connections. The zero value is not usable ([New] or [Open] makes a
// Store; the methods of a zero or nil Store return an error wrapping
// [eventstore.ErrInvalidArgument], never panic), and a Store must not be
// copied. After
// [Store.Close] every method returns [ErrClosed].
type Store struct {
	pool    *pgxpool.Pool
	ownPool bool
	n       names
	cfg     config
	shards  int // the shard count the database records
	q       queries
	lpool   *pgxpool.Pool // the lease statements' pool (WithLeasePool, else pool)
	life    int64         // this Store's life of its node name
	setIdle string        // SET LOCAL idle_in_transaction_session_timeout

	// leaseMu serialises this Store's lease writes (acquire, renew,
	// release), so that they never meet each other's row locks and every
	// lock they skip or refuse is another process's.
	leaseMu sync.Mutex

	mu     sync.Mutex
	scope  []int32         // enumeration scope; nil means every shard
	epochs map[int32]int64 // the epochs this Store was granted, by shard

	closed    atomic.Bool
	closeOnce sync.Once

	hooks *testHooks // nil outside the package's tests
}

// testHooks let the package's tests stop a call at a chosen point.
type testHooks struct {
	// beforeTx runs after an append's arguments are checked and encoded,
	// before its transaction starts.
	beforeTx func()
	// afterLock runs once an append's transaction holds its locks (the
	// shard's lease row FOR KEY SHARE, the workflow's row exclusive) and has read
	// what it needs, before it writes; pid is its backend.
	afterLock func(pid uint32)
}

// The promises Store makes.
var (
	_ eventstore.Store      = (*Store)(nil)
	_ eventstore.Outbox     = (*Store)(nil)
	_ eventstore.ShardOwner = (*Store)(nil)
)

// New returns a Store on pool, which it borrows: [Store.Close] does not close
// it. It first migrates the tables (creating what is missing; see
// [SchemaVersion]) and fails with [ErrSchemaVersion] on tables of a newer
// layout, and with [ErrCorruptRecord] on a meta table whose schema version
// or shard count no New records, then opens a new life of its node name
// (see [WithNode]). A nil pool, an invalid [WithSchema] or [WithNode] name,
// or a [WithShardCount] out of range or other than the count the database
// records returns an error wrapping [eventstore.ErrInvalidArgument].
func New(ctx context.Context, pool *pgxpool.Pool, opts ...Option) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgstore: nil pool", eventstore.ErrInvalidArgument)
	}
	cfg := newConfig(opts)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := newNames(cfg.schema)
	shards, err := migrate(ctx, pool, n, cfg.shardCount)
	if err != nil {
		return nil, fmt.Errorf("pgstore: migrating: %w", err)
	}
	if cfg.shardCount != 0 && cfg.shardCount != shards {
		return nil, fmt.Errorf("%w: pgstore: WithShardCount(%d), but the database was created with %d shards", eventstore.ErrInvalidArgument, cfg.shardCount, shards)
	}
	s := &Store{pool: pool, lpool: pool, n: n, cfg: cfg, shards: shards, q: newQueries(n), epochs: map[int32]int64{},
		setIdle: fmt.Sprintf("SET LOCAL idle_in_transaction_session_timeout = %d", cfg.idleMillis())}
	if cfg.leasePool != nil {
		s.lpool = cfg.leasePool
	}
	if err := pool.QueryRow(ctx, s.q.newLife, cfg.node).Scan(&s.life); err != nil {
		return nil, fmt.Errorf("pgstore: registering node %q: %w", cfg.node, err)
	}
	return s, nil
}

// Open connects a new pool to dsn (a PostgreSQL URL or key=value string, as
// pgxpool.ParseConfig reads it) and returns a Store that owns it:
// [Store.Close] closes the pool. Its sessions get the
// idle_in_transaction_session_timeout of [WithIdleInTransactionTimeout]
// unless the DSN sets one. Otherwise it is [New].
func Open(ctx context.Context, dsn string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("%w: pgstore: %w", eventstore.ErrInvalidArgument, err)
	}
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = fmt.Sprint(newConfig(opts).idleMillis())
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgstore: connecting: %w", err)
	}
	s, err := New(ctx, pool, opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	s.ownPool = true
	return s, nil
}

// Close ends the Store. A Store from [Open] closes its pool, waiting for the
// calls in progress to give their connections back; one from [New] leaves
// the caller's pool open. Close does not release the shard leases this node
// holds (they expire; [Store.ReleaseShards] hands them over at once).
// Close is idempotent and returns nil.
func (s *Store) Close() error {
	if s == nil || s.pool == nil {
		return nil
	}
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.ownPool {
			s.pool.Close()
		}
	})
	return nil
}

// Node returns the name this store holds shard leases under ([WithNode]).
// A nil Store has none.
func (s *Store) Node() string {
	if s == nil {
		return ""
	}
	return s.cfg.node
}

// ShardCount returns the number of shards workflows are partitioned into.
// A Store not made by New or Open has none.
func (s *Store) ShardCount() int {
	if s == nil {
		return 0
	}
	return s.shards
}

// errNotReady is what every method of a Store not made by New returns.
var errNotReady = fmt.Errorf("%w: pgstore.Store used without New or Open", eventstore.ErrInvalidArgument)

// enter is the first check of every method after the token: the context,
// then the store being made by New and open.
func (s *Store) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s == nil || s.pool == nil {
		return errNotReady
	}
	if s.closed.Load() {
		return ErrClosed
	}
	return nil
}

// dbErr wraps a driver error, mapping a call that met a pool closed by Close
// to ErrClosed. A context that ended while the call ran stays visible to
// errors.Is through the driver's error.
func (s *Store) dbErr(op string, err error) error {
	if s.closed.Load() {
		return fmt.Errorf("pgstore: %s: %w (%w)", op, ErrClosed, err)
	}
	return fmt.Errorf("pgstore: %s: %w", op, err)
}

// leaseNow is the lease clock argument: NULL (the database's
// clock_timestamp()) unless WithLeaseClock set one.
func (s *Store) leaseNow() any {
	if s.cfg.leaseClock == nil {
		return nil
	}
	return s.cfg.leaseClock()
}

// scopeArg returns the enumeration scope as a query argument: NULL for
// every shard.
func (s *Store) scopeArg() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scope == nil {
		return nil
	}
	return append([]int32{}, s.scope...)
}

func (s *Store) shardOf(id eventstore.WorkflowID) int32 {
	return int32(eventstore.ShardOf(id, s.shards))
}

func uuidArg(b [16]byte) pgtype.UUID { return pgtype.UUID{Bytes: b, Valid: true} }

// bs returns a string as a never-nil byte slice, for a bytea NOT NULL
// column (a nil slice is NULL).
func bs(v string) []byte {
	if v == "" {
		return []byte{}
	}
	return []byte(v)
}

// nullBytes returns nil (NULL) for empty bytes: an empty payload reads back
// as nil, as eventstore.Memory returns it.
func nullBytes(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}

// nullTime returns a time's bytes, NULL for the zero time.
func nullTime(t time.Time) []byte {
	if t.IsZero() {
		return nil
	}
	return timeBytes(t)
}

// readTime decodes a time column; NULL is the zero time.
func readTime(b []byte) (time.Time, error) {
	if b == nil {
		return time.Time{}, nil
	}
	t, err := timeFromBytes(b)
	if err != nil {
		return time.Time{}, fmt.Errorf("%w: time column: %w", ErrCorruptRecord, err)
	}
	return t, nil
}

// pipeline runs a transaction as pipelined batches on one connection: the
// first batch starts with BEGIN, the last ends with COMMIT, so a read, a
// decision in Go and a write cost two round trips.
type pipeline struct {
	s    *Store
	conn *pgxpool.Conn
}

func (s *Store) acquire(ctx context.Context) (*pipeline, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, s.dbErr("acquiring a connection", err)
	}
	return &pipeline{s: s, conn: conn}, nil
}

// send runs a batch and hands its results to read, which must consume one
// result per queued statement; the results are closed afterwards.
func (p *pipeline) send(ctx context.Context, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	br := p.conn.SendBatch(ctx, b)
	err := read(br)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return err
}

// end rolls back whatever is open and gives the connection back. A
// connection whose rollback failed (it broke, say) is still in a
// transaction, and the pool destroys it instead of reusing it.
func (p *pipeline) end() {
	if p.conn.Conn().PgConn().TxStatus() != 'I' && !p.conn.Conn().IsClosed() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, _ = p.conn.Exec(ctx, "ROLLBACK")
		cancel()
	}
	p.conn.Release()
}

// isNoRows reports whether err is pgx.ErrNoRows.
func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }
