// Package eventstore is the domain model of a durable workflow engine's event
// store and the contract that aionotel decorates: workflow and run IDs, the
// history events, the [Store] interface with its optional [Outbox] and
// [ShardOwner] capabilities, the typed errors, and [Memory], a complete
// in-memory reference store.
//
// The engine records everything that happens to a workflow as an append-only
// history of events; a store keeps those histories and a few side tables
// (timers, workflow packages, the dispatch outbox). The otelstore package
// wraps any [Store] to observe it.
//
// # Use
//
// A writer appends with optimistic concurrency: it names the history length
// it believes current, and a stale one is refused with a
// [*SequenceConflictError] whose Found is the real length, to retry from:
//
//	store := eventstore.NewMemory()
//	wf, run := eventstore.NewWorkflowID(), eventstore.Envelope{RunID: eventstore.NewRunID()}
//	err := store.Append(ctx, eventstore.RecorderToken(), wf, []eventstore.Event{
//		eventstore.WorkflowStarted{Envelope: run, WorkflowType: "order"},
//	}, 0)
//
// Writes need the [WriteToken] of [RecorderToken]; the zero token is refused
// with [ErrInvalidToken]. Every event kind is a value struct embedding an
// [Envelope]; the store stamps Seq. Optional capabilities are discovered by
// type assertion, as io.WriterTo is:
//
//	if ob, ok := store.(eventstore.Outbox); ok { ... }
//
// # Contract
//
// The methods of [Store], [Outbox] and [ShardOwner] state the contract; each
// names the conformance rules (package conformance) that check it. Every
// refusal is one of the sentinels ([ErrSequenceConflict], [ErrInvalidToken],
// [ErrNotFound], [ErrNotOwner], [ErrInvalidArgument], [ErrUnsupported]) or
// wraps one, so callers test with errors.Is, and a refused call writes
// nothing. A call that fails for a reason outside the contract is not a
// refusal and wraps none of them: the caller's context ended (its error),
// the backend was closed (the backend's own error, pgstore.ErrClosed) or
// could not be reached (the driver's). Reads of an unknown workflow return
// an empty result, not an error.
// Where the contract leaves a choice open, [Memory] and its methods say what
// it does.
//
// # Concurrency
//
// [Memory] is safe for concurrent use; every call is atomic with respect to
// every other. Its zero value is not ready: create it with [NewMemory], or
// the nodes of one shared history with [NewMemoryCluster] (elections and
// fencing between nodes, as [ShardOwner] states them). IDs
// and tokens are comparable values; stores copy the events and payload bytes
// they are given and return copies, so a caller may reuse its own.
//
// # Limits
//
// [Memory] is a reference store, not a fast one: one lock guards all the
// state of its cluster, its nodes live in one process (a node's death is a
// test hook, [MemoryCluster.Kill]; there are no leases), and it keeps
// everything in memory until [Memory.PruneClosed] removes closed workflows;
// a long-running process calls PruneClosed periodically so that its memory
// levels off.
//
// # Other stores
//
// A third-party [Store] should refuse the same inputs as [Memory]:
// [ValidateAppend] runs the same batch checks, and the conformance package's
// TestEventStore checks the rest of the contract.
package eventstore
