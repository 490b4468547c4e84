package keyspace_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

func exampleIDs() (eventstore.WorkflowID, eventstore.RunID) {
	wf, _ := eventstore.ParseWorkflowID("0b5e2a3c-7f1d-4c9a-8e2b-1d3f5a7c9e01")
	run, _ := eventstore.ParseRunID("6a4d8c2e-1b3f-4e5a-9c7d-2f4b6d8e0a13")
	return wf, run
}

// A batch is one commit at the expected seq; a stale expected seq writes
// nothing and reports the real head.
func ExampleMemory() {
	ctx := context.Background()
	wf, run := exampleIDs()
	key := keyspace.NewStreamKey(wf, run, 0, 1)
	say := func(seq uint64, text string) keyspace.ActivityEvent {
		return keyspace.ActivityEvent{
			WorkflowID: wf, RunID: run, ActivityID: 0, Attempt: 1,
			AgentID: "planner", WorkerSeq: seq,
			Content: keyspace.Message{Role: "assistant", Text: text},
		}
	}

	store := keyspace.NewMemory()
	head, err := store.AppendEvents(ctx, 0, []keyspace.ActivityEvent{say(1, "reading the ticket"), say(2, "calling the search tool")})
	fmt.Println("head:", head, err)

	_, err = store.AppendEvents(ctx, 0, []keyspace.ActivityEvent{say(3, "late")})
	var conflict *eventstore.SequenceConflictError
	if errors.As(err, &conflict) {
		fmt.Println("conflict, real head:", conflict.Found)
	}

	records, _ := store.ReadFrom(ctx, key, 1, 10)
	for _, r := range records {
		fmt.Println(r.StoreSeq, r.Event.Content.(keyspace.Message).Text)
	}
	// Output:
	// head: 2 <nil>
	// conflict, real head: 2
	// 1 calling the search tool
}

// ListStreams lists one run's streams by (activity, attempt); the next run of
// the same workflow has streams of its own.
func ExampleMemory_ListStreams() {
	ctx := context.Background()
	wf, run := exampleIDs()
	nextRun, _ := eventstore.ParseRunID("9d1c3e5f-2a4b-4c6d-8e0f-1a3b5c7d9e24")
	store := keyspace.NewMemory()
	for _, at := range []struct {
		run      eventstore.RunID
		activity eventstore.ActivityID
		attempt  uint32
	}{{run, 2, 1}, {run, 0, 2}, {run, 0, 1}, {nextRun, 0, 1}} {
		ev := keyspace.ActivityEvent{WorkflowID: wf, RunID: at.run, ActivityID: at.activity, Attempt: at.attempt}
		if _, err := keyspace.AppendEvent(ctx, store, 0, ev); err != nil {
			fmt.Println(err)
		}
	}
	streams, _ := store.ListStreams(ctx, wf, run)
	for _, s := range streams {
		fmt.Printf("activity %d attempt %d: %d record(s)\n", s.Key.ActivityID, s.Key.Attempt, s.Head)
	}
	// Output:
	// activity 0 attempt 1: 1 record(s)
	// activity 0 attempt 2: 1 record(s)
	// activity 2 attempt 1: 1 record(s)
}

// The Sequencer takes events of several streams in arrival order, returns the
// ephemeral ones for live forwarding, and drops re-deliveries.
func ExampleSequencer_Append() {
	ctx := context.Background()
	wf, run := exampleIDs()
	event := func(activity eventstore.ActivityID, seq uint64, content keyspace.Content, ephemeral bool) keyspace.ActivityEvent {
		return keyspace.ActivityEvent{
			WorkflowID: wf, RunID: run, ActivityID: activity, Attempt: 1,
			AgentID: fmt.Sprintf("agent-%d", activity), WorkerSeq: seq,
			Ephemeral: ephemeral, Content: content,
		}
	}
	seq := keyspace.NewSequencer(keyspace.NewMemory())

	res, err := seq.Append(ctx, []keyspace.ActivityEvent{
		event(0, 1, keyspace.ToolCall{CallID: "c1", Name: "search"}, false),
		event(1, 1, keyspace.Message{Role: "assistant", Text: "hello"}, false),
		event(0, 2, keyspace.Status{State: "waiting for the tool"}, true),
		event(0, 3, keyspace.ToolResult{CallID: "c1", Output: "3 hits"}, false),
	})
	if err != nil {
		fmt.Println(err)
	}
	for _, s := range res.Streams {
		fmt.Printf("activity %d: seqs %d..%d\n", s.Key.ActivityID, s.FirstSeq, s.Head-1)
	}
	fmt.Println("forward live:", res.Ephemeral[0].Content.ContentKind())

	// The worker reconnects and sends its last events again.
	res, _ = seq.Append(ctx, []keyspace.ActivityEvent{
		event(0, 3, keyspace.ToolResult{CallID: "c1", Output: "3 hits"}, false),
		event(0, 4, keyspace.Usage{InputTokens: 812, OutputTokens: 64}, false),
	})
	fmt.Printf("written %d, duplicates %d, head %d\n", res.Streams[0].Written, res.Streams[0].Duplicates, res.Streams[0].Head)
	// Output:
	// activity 0: seqs 0..1
	// activity 1: seqs 0..0
	// forward live: status
	// written 1, duplicates 1, head 3
}

// contendedStore stands for a keyspace another writer keeps moving: every
// append conflicts.
type contendedStore struct{ *keyspace.Memory }

func (s contendedStore) AppendEvents(_ context.Context, expected uint64, _ []keyspace.ActivityEvent) (uint64, error) {
	return 0, &eventstore.SequenceConflictError{Expected: expected, Found: expected + 1}
}

func ExampleRetryExhaustedError() {
	wf, run := exampleIDs()
	seq := keyspace.NewSequencer(contendedStore{keyspace.NewMemory()}, keyspace.WithMaxRetries(2))
	_, err := seq.Append(context.Background(), []keyspace.ActivityEvent{
		{WorkflowID: wf, RunID: run, ActivityID: 4, Attempt: 1, AgentID: "a", WorkerSeq: 1},
	})
	var exhausted *keyspace.RetryExhaustedError
	if errors.As(err, &exhausted) {
		fmt.Printf("activity %d: %d event(s) unwritten after %d attempts\n",
			exhausted.Key.ActivityID, exhausted.Unwritten, exhausted.Attempts)
	}
	fmt.Println("is a sequence conflict:", errors.Is(err, eventstore.ErrSequenceConflict))
	// Output:
	// activity 4: 1 event(s) unwritten after 3 attempts
	// is a sequence conflict: true
}

// AppendEvent is for a caller holding a single event; it returns the event's
// store seq.
func ExampleAppendEvent() {
	wf, run := exampleIDs()
	store := keyspace.NewMemory()
	ev := keyspace.ActivityEvent{WorkflowID: wf, RunID: run, Attempt: 1, Content: keyspace.Status{State: "started"}}
	seq, err := keyspace.AppendEvent(context.Background(), store, 0, ev)
	fmt.Println(seq, err)
	// Output: 0 <nil>
}
