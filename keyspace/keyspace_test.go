package keyspace_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// Fixtures shared by the package's tests: one workflow with two generations
// (runs) of a continue-as-new chain.
var (
	testWorkflow = eventstore.WorkflowID{15: 0x01}
	otherFlow    = eventstore.WorkflowID{15: 0x99}
	generation1  = eventstore.RunID{15: 0x11}
	generation2  = eventstore.RunID{15: 0x22}
)

// keyOf returns the key of (activity, attempt) in generation1.
func keyOf(activity eventstore.ActivityID, attempt uint32) keyspace.StreamKey {
	return keyspace.NewStreamKey(testWorkflow, generation1, activity, attempt)
}

// eventIn returns a durable message event of key from agent with workerSeq.
func eventIn(key keyspace.StreamKey, agent string, workerSeq uint64) keyspace.ActivityEvent {
	return keyspace.ActivityEvent{
		WorkflowID: key.WorkflowID,
		RunID:      key.RunID,
		ActivityID: key.ActivityID,
		Attempt:    key.Attempt,
		AgentID:    agent,
		AgentRole:  "orchestrator",
		WorkerSeq:  workerSeq,
		Content:    keyspace.Message{Role: "assistant", Text: fmt.Sprintf("%s#%d", agent, workerSeq)},
	}
}

// eventsIn returns events of key from agent with WorkerSeqs from..to inclusive.
func eventsIn(key keyspace.StreamKey, agent string, from, to uint64) []keyspace.ActivityEvent {
	var out []keyspace.ActivityEvent
	for seq := from; seq <= to; seq++ {
		out = append(out, eventIn(key, agent, seq))
	}
	return out
}

// readAll returns every record of key, failing the test on error.
func readAll(t testing.TB, s keyspace.Store, key keyspace.StreamKey) []keyspace.Record {
	t.Helper()
	recs, err := s.ReadFrom(context.Background(), key, 0, 0)
	if err != nil {
		t.Fatalf("ReadFrom(%s, 0, 0): %v", key, err)
	}
	return recs
}

// headOf returns key's head, failing the test on error.
func headOf(t testing.TB, s keyspace.Store, key keyspace.StreamKey) uint64 {
	t.Helper()
	head, err := s.Head(context.Background(), key)
	if err != nil {
		t.Fatalf("Head(%s): %v", key, err)
	}
	return head
}

// agentSeqs lists the records as "agent#workerSeq", in store order.
func agentSeqs(recs []keyspace.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprintf("%s#%d", r.Event.AgentID, r.Event.WorkerSeq)
	}
	return out
}

// checkContiguous fails unless recs have StoreSeq 0..len-1, each record's event
// stamped to match and marked persisted.
func checkContiguous(t testing.TB, recs []keyspace.Record) {
	t.Helper()
	for i, r := range recs {
		if r.StoreSeq != uint64(i) || r.Event.StoreSeq != uint64(i) || !r.Event.Persisted {
			t.Fatalf("record %d: StoreSeq %d, Event.StoreSeq %d, Persisted %v; want %d, %d, true",
				i, r.StoreSeq, r.Event.StoreSeq, r.Event.Persisted, i, i)
		}
	}
}

func TestNewStreamKeyAndKeyOfAgree(t *testing.T) {
	key := keyspace.NewStreamKey(testWorkflow, generation2, 7, 3)
	want := keyspace.StreamKey{WorkflowID: testWorkflow, RunID: generation2, ActivityID: 7, Attempt: 3}
	if key != want {
		t.Fatalf("NewStreamKey = %+v, want %+v", key, want)
	}
	ev := eventIn(key, "agent", 1)
	if got := keyspace.KeyOf(ev); got != key {
		t.Fatalf("KeyOf = %+v, want %+v", got, key)
	}
	// Fields outside the key do not change it.
	ev.AgentID, ev.WorkerSeq, ev.Ephemeral = "other", 99, true
	if got := keyspace.KeyOf(ev); got != key {
		t.Fatalf("KeyOf after changing non-key fields = %+v, want %+v", got, key)
	}
}

func TestStreamKeyValidate(t *testing.T) {
	testCases := []struct {
		name    string
		key     keyspace.StreamKey
		wantErr bool
	}{
		{name: "valid", key: keyOf(0, 0)},
		{name: "valid with activity and attempt", key: keyOf(12, 4)},
		{name: "zero workflow", key: keyspace.NewStreamKey(eventstore.WorkflowID{}, generation1, 0, 0), wantErr: true},
		{name: "zero run", key: keyspace.NewStreamKey(testWorkflow, eventstore.RunID{}, 0, 0), wantErr: true},
		{name: "zero key", key: keyspace.StreamKey{}, wantErr: true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.key.Validate()
			if !tc.wantErr {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, eventstore.ErrInvalidArgument) {
				t.Fatalf("Validate() = %v, want an error matching ErrInvalidArgument", err)
			}
		})
	}
}

func TestStreamKeyString(t *testing.T) {
	key := keyspace.NewStreamKey(testWorkflow, generation1, 5, 2)
	want := testWorkflow.String() + "/" + generation1.String() + "/5/2"
	if got := key.String(); got != want {
		t.Fatalf("String() = %q, want %q", got, want)
	}
}

func TestContentKinds(t *testing.T) {
	testCases := []struct {
		content keyspace.Content
		want    string
	}{
		{keyspace.Message{}, "message"},
		{keyspace.ToolCall{}, "tool_call"},
		{keyspace.ToolResult{}, "tool_result"},
		{keyspace.Status{}, "status"},
		{keyspace.Usage{}, "usage"},
	}
	seen := map[string]bool{}
	for _, tc := range testCases {
		t.Run(tc.want, func(t *testing.T) {
			if got := tc.content.ContentKind(); got != tc.want {
				t.Fatalf("%T.ContentKind() = %q, want %q", tc.content, got, tc.want)
			}
		})
		seen[tc.content.ContentKind()] = true
	}
	if len(seen) != len(testCases) {
		t.Fatalf("content kinds are not distinct: %v", seen)
	}
}

func TestSentinelsMatchInvalidArgument(t *testing.T) {
	for _, err := range []error{keyspace.ErrMixedStreams, keyspace.ErrEphemeral} {
		if !errors.Is(err, eventstore.ErrInvalidArgument) {
			t.Errorf("%v does not match ErrInvalidArgument", err)
		}
	}
	if errors.Is(keyspace.ErrMixedStreams, keyspace.ErrEphemeral) || errors.Is(keyspace.ErrEphemeral, keyspace.ErrMixedStreams) {
		t.Error("ErrMixedStreams and ErrEphemeral match each other")
	}
}

// recordingStore records the AppendEvents calls it gets and answers them with
// head and err.
type recordingStore struct {
	keyspace.Store
	calls []recordedAppend
	head  uint64
	err   error
}

type recordedAppend struct {
	expectedSeq uint64
	events      []keyspace.ActivityEvent
}

func (s *recordingStore) AppendEvents(_ context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) (uint64, error) {
	s.calls = append(s.calls, recordedAppend{expectedSeq: expectedSeq, events: events})
	return s.head, s.err
}

func TestAppendEventIsOneBatchOfOne(t *testing.T) {
	ev := eventIn(keyOf(0, 0), "agent", 1)
	s := &recordingStore{head: 8}
	seq, err := keyspace.AppendEvent(context.Background(), s, 7, ev)
	if err != nil || seq != 7 {
		t.Fatalf("AppendEvent = %d, %v; want 7, nil", seq, err)
	}
	if len(s.calls) != 1 || s.calls[0].expectedSeq != 7 || len(s.calls[0].events) != 1 || s.calls[0].events[0] != ev {
		t.Fatalf("AppendEvents calls = %+v, want one call at 7 with the event", s.calls)
	}

	conflict := &eventstore.SequenceConflictError{Expected: 7, Found: 9}
	s = &recordingStore{err: conflict}
	if _, err := keyspace.AppendEvent(context.Background(), s, 7, ev); err != conflict {
		t.Fatalf("AppendEvent error = %v, want the store's error unchanged", err)
	}
}

func TestAppendEventOnMemory(t *testing.T) {
	m := keyspace.NewMemory()
	key := keyOf(0, 0)
	for want := uint64(0); want < 3; want++ {
		got, err := keyspace.AppendEvent(context.Background(), m, want, eventIn(key, "agent", want))
		if err != nil || got != want {
			t.Fatalf("AppendEvent at %d = %d, %v", want, got, err)
		}
	}
	if _, err := keyspace.AppendEvent(context.Background(), m, 1, eventIn(key, "agent", 9)); !errors.Is(err, eventstore.ErrSequenceConflict) {
		t.Fatalf("AppendEvent at a stale seq = %v, want a sequence conflict", err)
	}
	if head := headOf(t, m, key); head != 3 {
		t.Fatalf("head = %d, want 3", head)
	}
}
