package keyspacetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// NewKey returns the key of a stream with the given activity and attempt in
// a fresh random workflow and run, so that tests sharing a store (or a
// database) never see each other's streams.
func NewKey(activity eventstore.ActivityID, attempt uint32) keyspace.StreamKey {
	return keyspace.NewStreamKey(eventstore.NewWorkflowID(), eventstore.NewRunID(), activity, attempt)
}

// Event returns a durable event of key with the given worker seq and
// content, from agent "agent" in role "assistant", emitted at a fixed UTC
// instant whose nanoseconds are workerSeq (so that events differ in time as
// in order).
func Event(key keyspace.StreamKey, workerSeq uint64, content keyspace.Content) keyspace.ActivityEvent {
	return keyspace.ActivityEvent{
		WorkflowID: key.WorkflowID, RunID: key.RunID, ActivityID: key.ActivityID, Attempt: key.Attempt,
		AgentID: "agent", AgentRole: "assistant",
		EmittedAt: time.Date(2025, 1, 2, 3, 4, 5, int(workerSeq), time.UTC),
		WorkerSeq: workerSeq,
		Content:   content,
	}
}

// Messages returns n events of key with worker seqs first, first+1, ...,
// each an assistant message "message SEQ".
func Messages(key keyspace.StreamKey, first uint64, n int) []keyspace.ActivityEvent {
	out := make([]keyspace.ActivityEvent, n)
	for i := range out {
		seq := first + uint64(i)
		out[i] = Event(key, seq, keyspace.Message{Role: "assistant", Text: fmt.Sprintf("message %d", seq)})
	}
	return out
}

// Persisted returns ev as a store returns it at store seq seq: the record,
// and the event with StoreSeq set and Persisted true.
func Persisted(ev keyspace.ActivityEvent, seq uint64) keyspace.Record {
	ev.StoreSeq, ev.Persisted = seq, true
	return keyspace.Record{StoreSeq: seq, Event: ev}
}

// MustAppend appends evs to s at expected and stops the test unless the
// append succeeds with head expected+len(evs).
func MustAppend(t testing.TB, s keyspace.Store, expected uint64, evs []keyspace.ActivityEvent) {
	t.Helper()
	head, err := s.AppendEvents(context.Background(), expected, evs)
	if err != nil || head != expected+uint64(len(evs)) {
		t.Fatalf("AppendEvents(%d, %d events) = %d, %v", expected, len(evs), head, err)
	}
}
