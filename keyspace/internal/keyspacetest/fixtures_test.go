package keyspacetest_test

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/internal/keyspacetest"
)

func TestNewKeyIsInAFreshRun(t *testing.T) {
	a, b := keyspacetest.NewKey(3, 7), keyspacetest.NewKey(3, 7)
	if a.ActivityID != 3 || a.Attempt != 7 {
		t.Errorf("NewKey(3, 7) = %v, want activity 3 attempt 7", a)
	}
	if err := a.Validate(); err != nil {
		t.Errorf("NewKey(3, 7) = %v: %v", a, err)
	}
	if a.WorkflowID == b.WorkflowID || a.RunID == b.RunID {
		t.Errorf("two NewKeys share a workflow or run: %v, %v", a, b)
	}
}

func TestEventAndMessages(t *testing.T) {
	key := keyspacetest.NewKey(1, 2)
	ev := keyspacetest.Event(key, 9, keyspace.Status{State: "s"})
	if keyspace.KeyOf(ev) != key || ev.WorkerSeq != 9 || ev.Content != (keyspace.Status{State: "s"}) || ev.Ephemeral || ev.Persisted {
		t.Errorf("Event(key, 9, status) = %+v", ev)
	}
	if want := time.Date(2025, 1, 2, 3, 4, 5, 9, time.UTC); ev.EmittedAt != want {
		t.Errorf("EmittedAt = %v, want %v", ev.EmittedAt, want)
	}
	msgs := keyspacetest.Messages(key, 4, 3)
	if len(msgs) != 3 {
		t.Fatalf("Messages(key, 4, 3) returned %d events", len(msgs))
	}
	for i, m := range msgs {
		seq := uint64(4 + i)
		want := keyspacetest.Event(key, seq, keyspace.Message{Role: "assistant", Text: fmt.Sprintf("message %d", seq)})
		if !reflect.DeepEqual(m, want) {
			t.Errorf("Messages(key, 4, 3)[%d] = %+v, want %+v", i, m, want)
		}
	}
}

func TestPersistedIsWhatAStoreReturns(t *testing.T) {
	key := keyspacetest.NewKey(0, 0)
	evs := keyspacetest.Messages(key, 10, 2)
	m := keyspace.NewMemory()
	keyspacetest.MustAppend(t, m, 0, evs)
	recs, err := m.ReadFrom(context.Background(), key, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []keyspace.Record{keyspacetest.Persisted(evs[0], 0), keyspacetest.Persisted(evs[1], 1)}
	if !reflect.DeepEqual(recs, want) {
		t.Errorf("Memory read back %+v, want %+v", recs, want)
	}
	if evs[0].Persisted || evs[0].StoreSeq != 0 {
		t.Errorf("Persisted changed its argument: %+v", evs[0])
	}
}

func TestMustAppendStopsOnAFailedAppend(t *testing.T) {
	key := keyspacetest.NewKey(0, 0)
	m := keyspace.NewMemory()
	keyspacetest.MustAppend(t, m, 0, keyspacetest.Messages(key, 0, 2))
	failures := keyspacetest.ExpectFailure(t, func(t testing.TB) {
		keyspacetest.MustAppend(t, m, 1, keyspacetest.Messages(key, 2, 1))
		t.Error("MustAppend returned after a failed append")
	})
	if len(failures) != 1 || !strings.HasPrefix(failures[0], "AppendEvents(1, 1 events) = 0, ") {
		t.Errorf("failures %q, want the one of a stale append", failures)
	}
}
