// Package pgstore is an [eventstore.Store] in PostgreSQL, with the
// [eventstore.Outbox] and [eventstore.ShardOwner] capabilities: the event
// store of a deployment whose nodes (processes) share one database.
//
// It lives in its own Go module (github.com/aionotel/aionotel/eventstore/pgstore),
// so github.com/jackc/pgx/v5 enters a build only when this package is
// imported.
//
//	s, err := pgstore.Open(ctx, os.Getenv("DATABASE_URL"), pgstore.WithNode("node-a"))
//	if err != nil {
//		return err
//	}
//	defer s.Close()
//	store, err := otelstore.New(s) // the decorator keeps Outbox and ShardOwner
//
// [Open] makes and owns a pool; [New] borrows one the application already
// has. Both migrate the tables from empty (or from an older layout) before
// they return, and running them again changes nothing; the layout is on
// [SchemaVersion].
//
// # Contract
//
// A Store keeps the contract of [eventstore.Store] as [eventstore.Memory]
// does: the same checks in the same order, the same error values, the same
// run chain, listing order (by workflow ID), Query order (by start time,
// then ID) and outbox semantics, and every value comes back as it went in
// (NUL bytes, invalid UTF-8, megabytes, times to the nanosecond with
// their zone offset, UTC and Local as such; another zone's name is not
// kept; an empty payload comes back nil, as Memory returns it). The
// conformance package's TestEventStore checks it. What is particular to
// this store is on its methods: transactions and locks on
// [Store.AppendWithOutbox], claims on [Store.ClaimOutboxRows].
//
// # Nodes and shards
//
// Each Store is a node, named by [WithNode] (by default the host name and a
// random suffix), in a life of that name: [New] numbers the lives of each
// name in the database. Workflows fall into [Store.ShardCount] shards
// ([eventstore.ShardOf]); the database records the count, so every node
// agrees. A Store owns a shard by holding its lease
// ([Store.AcquireOwnedShards]): one holder at a time, each grant in a new
// epoch; a lease lasts [WithLeaseDuration] unless renewed
// ([Store.RenewOwnedShards]) and can be handed over at once
// ([Store.ReleaseShards]); [Store.Leases] lists them. Leases are timed on
// the database's clock, or on [WithLeaseClock] in tests. The enumeration
// scope ([Store.SetOwnedShards]) is per Store value.
//
// # Fencing
//
// Writes to a shard's workflows are fenced by epoch, not by name: a write
// proves, inside its own transaction and with the lease row locked FOR KEY
// SHARE until it commits, that the shard's current epoch is the one this
// Store was granted; a Store with an older epoch, whatever its name, gets
// [eventstore.ErrNotOwner] and writes nothing. A node name may be reused:
// the Store of a later life takes the live leases of an earlier one at
// once, in a new epoch, and the earlier one never takes them back (see
// [WithNode]). [WithOwnedShardClaims] keeps a node's outbox claims within
// the shards it holds.
//
// # Leases that cannot be held hostage
//
// No lease statement waits on another process's transaction: a takeover
// locks the lease row FOR UPDATE NOWAIT and, while a write of the previous
// holder is in progress, is refused at once ([ErrLeaseBusy]); a renewal
// changes only the expiry, a lock that writers do not block, and skips a
// row a takeover holds. Every transaction the Store opens sets
// idle_in_transaction_session_timeout ([WithIdleInTransactionTimeout], half
// the lease by default), so a process paused inside a write loses its
// session, and its lock, within that time. A paused or dead holder
// therefore loses its shards one lease duration after its last renewal at
// the latest; a survivor that tries to acquire every interval R has them
// within one lease plus R (plus a round trip) of the pause, and never
// loses its own while it renews. [WithLeasePool] runs the lease statements
// on a pool of their own, so that a full workload pool never delays a
// renewal. Limit: the server's idle timer runs only between the client's
// messages; a client stopped halfway through sending one message (a
// pipelined batch larger than the socket buffer) holds its locks until the
// connection breaks.
//
// # Concurrency
//
// A Store is safe for concurrent use, by any number of goroutines and
// nodes. Appends to one workflow run one at a time (a row lock), appends to
// different workflows in parallel; claims never hand one row out twice. An
// error from a lost connection, a cancelled context or a server restart
// leaves nothing half written: every write is one transaction, and a call
// that returned nil is committed. The zero Store is not usable and a Store
// must not be copied. [Store.Close] is idempotent; after it every method
// returns [ErrClosed].
//
// # Limits
//
// An append costs two round trips (a Memory append costs none), a read one.
// A value is bounded by PostgreSQL's largest bytea (1 GB), a call by what
// one protocol message carries. Closed workflows stay until
// [Store.PruneClosed] removes them.
package pgstore
