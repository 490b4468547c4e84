package boltstore_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/boltstore"
)

// A transcript written through a Sequencer survives closing (or killing) the
// process: reopening the file finds it.
func Example() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "keyspace.db")
	ctx := context.Background()

	wf := eventstore.NewWorkflowID()
	run := eventstore.NewRunID()
	ev := func(workerSeq uint64, text string) keyspace.ActivityEvent {
		return keyspace.ActivityEvent{
			WorkflowID: wf, RunID: run, ActivityID: 0, Attempt: 1,
			AgentID: "agent-1", WorkerSeq: workerSeq,
			Content: keyspace.Message{Role: "assistant", Text: text},
		}
	}

	s, err := boltstore.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	seq := keyspace.NewSequencer(s)
	if _, err := seq.Append(ctx, []keyspace.ActivityEvent{ev(1, "looking"), ev(2, "found it")}); err != nil {
		log.Fatal(err)
	}
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}

	s, err = boltstore.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	recs, err := s.ReadFrom(ctx, keyspace.NewStreamKey(wf, run, 0, 1), 0, 0)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range recs {
		fmt.Println(r.StoreSeq, r.Event.Content.(keyspace.Message).Text)
	}
	// Output:
	// 0 looking
	// 1 found it
}

// A stale expected seq is refused with the actual head, and nothing is
// written.
func ExampleStore_AppendEvents_conflict() {
	dir, err := os.MkdirTemp("", "boltstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	s, err := boltstore.Open(filepath.Join(dir, "keyspace.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	key := keyspace.NewStreamKey(eventstore.NewWorkflowID(), eventstore.NewRunID(), 3, 1)
	ev := keyspace.ActivityEvent{WorkflowID: key.WorkflowID, RunID: key.RunID, ActivityID: key.ActivityID, Attempt: key.Attempt, Content: keyspace.Status{State: "working"}}

	if _, err := s.AppendEvents(ctx, 0, []keyspace.ActivityEvent{ev, ev}); err != nil {
		log.Fatal(err)
	}
	_, err = s.AppendEvents(ctx, 1, []keyspace.ActivityEvent{ev})
	var conflict *eventstore.SequenceConflictError
	if errors.As(err, &conflict) {
		fmt.Println("expected", conflict.Expected, "found", conflict.Found)
	}
	// Output:
	// expected 1 found 2
}
