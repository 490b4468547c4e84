// Package keyspace is the append-only transcript keyspace: the stored record
// of what agents said and did while running inside workflow activities. It
// holds the [Store] contract, [Memory], its in-memory reference
// implementation, and [Sequencer], the single writer that assigns store seqs.
//
// # Observability, not replay authority
//
// A transcript is an observability record. It is durable and can be read back
// by store seq, but a workflow's state is decided by its event history alone
// (package eventstore); nothing in this keyspace is ever read to replay a
// workflow, and losing or truncating a transcript changes no workflow's
// outcome. The two keyspaces are deliberately separate: different types,
// different sequence numbering (transcript store seqs start at 0, history
// seqs at 1), different stores.
//
// # Streams and their key
//
// Each [ActivityEvent] belongs to one stream, named by a [StreamKey]: workflow,
// run, activity and attempt. [KeyOf] computes it from an event's own fields.
// Inside a stream every record has a store seq: the first is 0, the next
// 1, and so on without gaps; a stream's head is the next store seq, equal to
// the number of records it holds.
//
// The run is a required axis. A continue-as-new chain keeps its workflow ID
// while every new run numbers its activities from 0 again, so a key without
// the run would make the first activity of the second run write onto the
// stream of the first run's first activity, fusing two unrelated transcripts.
// Attempts are an axis for a similar reason: a retry is a new attempt and gets
// a fresh stream, while a worker taking over an attempt mid-way (failover)
// keeps writing the same stream, which is what lets its re-deliveries be
// recognised. [Store.ListStreams] is scoped to one run for the same reason:
// it never returns another run's streams, even of the same workflow.
// Zero workflow or run IDs are refused everywhere with an error wrapping
// [eventstore.ErrInvalidArgument].
//
// # The batch contract
//
// [Store.AppendEvents] commits a slice of events of one stream as one
// all-or-nothing commit at an expected seq: the i-th event gets store seq
// expectedSeq+i and the new head is returned. If the expected seq is not the
// head, the call returns a [*eventstore.SequenceConflictError] carrying the
// actual head and writes nothing. An empty slice is a no-op returning the
// expected seq. A slice mixing streams is refused with [ErrMixedStreams] rather
// than split (splitting would turn one commit into several and number events
// from the wrong head); a slice holding an ephemeral event is refused with
// [ErrEphemeral]. Both match [eventstore.ErrInvalidArgument] too. Nothing is
// written on any refusal.
//
// The slice form exists because a durable backend pays per commit: writing N
// events one call at a time costs N commits where one would do. [AppendEvent]
// is a one-line convenience over AppendEvents for a caller that really holds a
// single event; it is not a second implementation.
//
// # The single writer
//
// The store does not allocate store seqs; the caller names the seq it expects
// and the store checks it. A server therefore has one writer per keyspace, the
// [Sequencer], which runs the loop: know the head, append there, and on a
// conflict learn the real head and try again. [Sequencer.Append] accepts
// events of any streams in arrival order, returns the ephemeral ones for live
// forwarding ([AppendResult].Ephemeral), groups the rest by stream keeping
// their order, and commits each stream's events with one AppendEvents call.
// On a conflict it reads what landed since its cached head, drops what is now
// a duplicate and retries, at most [WithMaxRetries] times (8 by default);
// past that it returns a [*RetryExhaustedError] naming the stream, which
// unwraps to the last conflict.
//
// Each stream is its own commit: there is no atomicity across the streams of
// one Append. When a stream fails, Append returns the error with the results
// of the streams committed before it and does not attempt the later ones.
//
// # Re-delivery and its assumption
//
// A worker that loses its connection, or a worker that adopts a dying
// worker's attempt, may send events the store already holds. The Sequencer
// recognises them by (AgentID, WorkerSeq) and never stores one twice; it
// reports how many it dropped in [StreamResult].Duplicates. To keep that
// cheap, it does not remember every pair: it keeps, per stream and per agent,
// the highest WorkerSeq persisted, and treats any event whose WorkerSeq is at
// or below it as a re-delivery. This relies on an assumption about the
// senders: an agent's WorkerSeq grows with every new event it emits, and
// reaches the Sequencer in that order (re-deliveries aside). An event arriving
// late, after a higher WorkerSeq of the same agent was stored, is dropped as
// a duplicate. Two events of one agent with the same WorkerSeq in one batch
// collapse into the first. Events with an empty AgentID are never
// deduplicated: each is stored.
//
// The Sequencer learns a stream's state the first time it touches it, by
// reading the whole stream, so deduplication also holds across a restart of
// the server and against other writers, whose records it reads on a conflict.
// Retrying a failed Append with the same batch is therefore safe for events
// that carry an AgentID.
//
// # Concurrency
//
// [Memory] and [Sequencer] are safe for concurrent use and must not be copied
// after first use. The zero Memory is an empty store ready to use; the zero
// Sequencer is not ready ([NewSequencer] makes one). Memory locks per stream:
// a store-wide lock is held only to find or create a stream, so appends to
// different streams run in parallel. A Sequencer serialises appends to one
// stream (not to different streams), so goroutines sharing it never conflict
// with each other; conflicts come only from other writers of the same store,
// such as a second server process.
//
// # Costs
//
// In [Memory], AppendEvents costs O(batch); Head O(1); ReadFrom O(returned
// records), since the store seq indexes the stream directly; ListStreams
// O(the run's streams), from a per-run index kept sorted by (activity,
// attempt) as streams are created. A stream's first record costs O(the run's
// streams) to insert into that index. Records are held in fixed-size chunks
// (1,024 records; a short stream's only chunk grows as needed), so an append
// never copies the records already stored, however long the stream: the time
// an append holds its stream's lock does not grow with the stream.
//
// A [Sequencer] costs one AppendEvents call per stream per Append when no
// other writer interferes. Its first touch of a stream reads the whole stream
// once (in pages); each conflict reads the records added since its cached
// head. It caches at most [WithMaxCachedStreams] streams (65,536 by default),
// evicting the least recently used idle one; an evicted stream is reloaded
// from the store when touched again.
//
// # Limits
//
// Memory keeps every record for its whole life: it is a reference and test
// implementation, not a bounded buffer. Returned records are copies: the
// content kinds ([Message], [ToolCall], [ToolResult], [Status], [Usage]) are
// value types without slices or pointers, so copying a record copies all of
// it. A caller that puts a pointer (such as *Message) in Content shares what
// it points to with the store; use the value kinds. A Memory does not persist
// anything across a process restart.
package keyspace
