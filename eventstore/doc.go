// Package eventstore is the domain model of a durable workflow engine's event
// store and the contract that aionotel decorates: workflow and run IDs, the
// history events, the [Store] interface with its optional [Outbox] and
// [ShardOwner] capabilities, the typed errors, and [Memory], a complete
// in-memory reference store.
package eventstore
