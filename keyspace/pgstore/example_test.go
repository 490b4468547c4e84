package pgstore_test

import (
	"context"
	"log"
	"os"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/pgstore"
)

// Open owns its pool: Close closes it. Each server process runs its own
// Sequencer on its own Store; the table's primary key keeps them from ever
// giving one store seq twice. (Not run by go test: it needs a database.)
func ExampleOpen() {
	ctx := context.Background()
	s, err := pgstore.Open(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	seq := keyspace.NewSequencer(s)
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	_, err = seq.Append(ctx, []keyspace.ActivityEvent{{
		WorkflowID: wf, RunID: run, ActivityID: 0, Attempt: 1,
		AgentID: "agent-1", WorkerSeq: 1,
		Content: keyspace.Message{Role: "assistant", Text: "hello"},
	}})
	if err != nil {
		log.Fatal(err)
	}
}

// New borrows an application's pool, here with the tables in their own
// schema. Close leaves the pool open. (Not run by go test: it needs a
// database.)
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	s, err := pgstore.New(ctx, pool, pgstore.WithSchema("observability"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	streams, err := s.ListStreams(ctx, eventstore.NewWorkflowID(), eventstore.NewRunID())
	if err != nil {
		log.Fatal(err)
	}
	log.Printf("%d streams", len(streams))
}
