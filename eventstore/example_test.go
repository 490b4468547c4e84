package eventstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// ExampleMemory appends a workflow's first events, loses a race against
// another writer, retries from the head the conflict reports, and reads the
// history back.
func ExampleMemory() {
	ctx := context.Background()
	clock := func() time.Time { return time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC) }
	store := eventstore.NewMemory(eventstore.WithClock(clock))
	token := eventstore.RecorderToken()

	wf, _ := eventstore.ParseWorkflowID("6f1c2a8e-0d4b-4c3a-9e57-2b1d0c9a7e11")
	run, _ := eventstore.ParseRunID("0b7e6d5c-4a3f-4e21-8d9c-7f6e5d4c3b2a")
	in := eventstore.Envelope{RunID: run}

	err := store.Append(ctx, token, wf, []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: in, WorkflowType: "order"},
		eventstore.ActivityScheduled{Envelope: in, ActivityID: 0, ActivityType: "charge"},
	}, 0)
	if err != nil {
		fmt.Println("append:", err)
		return
	}

	// A writer that still believes the history is empty is refused, and
	// nothing of its batch is written.
	next := []eventstore.Event{eventstore.ActivityCompleted{Envelope: in, ActivityID: 0, Attempt: 1}}
	err = store.Append(ctx, token, wf, next, 0)
	var conflict *eventstore.SequenceConflictError
	if errors.As(err, &conflict) {
		fmt.Printf("conflict: expected %d, found %d\n", conflict.Expected, conflict.Found)
		err = store.Append(ctx, token, wf, next, conflict.Found)
	}
	if err != nil {
		fmt.Println("retry:", err)
		return
	}

	history, _ := store.ReadHistory(ctx, wf)
	for _, ev := range history {
		e := ev.EventEnvelope()
		fmt.Printf("%d %T at %s\n", e.Seq, ev, e.RecordedAt.Format(time.Kitchen))
	}
	active, _ := store.ListActive(ctx)
	fmt.Println("active:", len(active))
	// Output:
	// conflict: expected 0, found 2
	// 1 eventstore.WorkflowStarted at 12:00PM
	// 2 eventstore.ActivityScheduled at 12:00PM
	// 3 eventstore.ActivityCompleted at 12:00PM
	// active: 1
}
