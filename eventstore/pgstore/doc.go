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
// random suffix). Workflows fall into [Store.ShardCount] shards
// ([eventstore.ShardOf]); the database records the count, so every node
// agrees. A node owns a shard by holding its lease ([Store.AcquireOwnedShards]):
// one holder at a time, in epochs; a lease lasts [WithLeaseDuration] unless
// renewed ([Store.RenewOwnedShards]) and can be handed over at once
// ([Store.ReleaseShards]); [Store.Leases] lists them. Leases are timed
// on the database's clock, or on [WithLeaseClock] in tests. Writes to a
// shard's workflows are fenced: see [Store.AcquireOwnedShards]. The
// enumeration scope ([Store.SetOwnedShards]) is per Store value.
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
