// Package cluster makes the demo one node of a cluster whose nodes share
// one PostgreSQL database (eventstore/pgstore): each node holds the leases
// of a share of the shards, serves their workflows, renews its leases,
// adopts the shards of a node whose leases expired and hands shards over
// when a node joins.
//
// # How
//
// Every renewal interval a node writes its heartbeat in the table
// aionotel_demo_nodes (node, instance, seen; the only table of its own,
// beside pgstore's), renews its leases (pgstore's RenewOwnedShards) and
// balances: the live nodes (a heartbeat younger than the lease duration)
// sorted by name share the shards evenly, the first ones taking one more
// when the count does not divide. A node under its share acquires free
// shards (never acquired, released, or expired: their holder stopped
// renewing) one at a time; a node over it stops starting workflows in the
// extra shards and releases them after a grace period. Acquisitions and the
// enumeration scope go through the otelstore decorator of the server
// (Node.Start takes it), so the decorator resumes each shard acquired and
// releases each shard lost; the server then takes over the shard's orphaned
// workflows (sim.Server.Recover). A lease that a renewal did not extend (the
// node paused past it) is lost at once. Close releases every lease, so the
// others adopt at once instead of after the lease.
//
// Leases and heartbeats go through a small pool of their own, so that a
// node whose workload fills its store's pool (a slow or locked database)
// still renews in time.
//
// # Decisions
//
//   - The node name holds leases, in lives: a process restarted under the
//     same name within the lease takes its leases over at once in new
//     epochs (pgstore fences the earlier process, which never takes them
//     back) and resumes them through the decorator; Start refuses a name
//     whose heartbeat another live process keeps fresh.
//   - Renewal (with the heartbeat) and balancing run on tickers of their
//     own, so that a slow acquisition or recovery never delays a renewal;
//     the node's one Store runs its lease statements on the node's own
//     pool (pgstore.WithLeasePool) and claims only its shards' outbox rows
//     (pgstore.WithOwnedShardClaims).
//   - Config.Validate refuses a lease outside [MinLease, MaxLease] and a
//     renewal interval under MinRenew or over half the lease, with a
//     *ConfigError (errors.Is ErrInvalidConfig); the demo's -lease and
//     -renew flags go through it.
//   - Membership is a heartbeat table rather than the leases alone, because
//     a node that holds nothing has no lease through which the others could
//     see it and hand it a share.
//   - Time is the database's clock (clock_timestamp()), as for pgstore's
//     leases, so the nodes' own clocks may disagree; tests give a clock.
//
// # Concurrency and limits
//
// A Node is safe for concurrent use; NewWorkflowID and Serves are called
// by the server's goroutines. A shard changes hands within about one
// renewal interval once it is free; a dead node's shards are free one
// lease duration after its last renewal.
package cluster
