package boltstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// usageV1Hex is a usage record as format version 1 (before the model and
// provider fields) stored it: agent "agent-7", role "assistant", emitted at
// 2024-05-06T07:08:09.123456789Z, worker seq 300, 300 input and 5 output
// tokens. The codec's testdata holds the same bytes.
const usageV1Hex = "01076167656e742d3709617373697374616e74b287c4e30c959aef3a0003555443ac02057573616765ac0205"

var usageKey = keyspace.StreamKey{WorkflowID: eventstore.WorkflowID{15: 1}, RunID: eventstore.RunID{15: 2}, ActivityID: 3, Attempt: 1}

// TestUsageModelsRoundTrip stores a usage with every model and provider
// field set, hostile bytes included, and reads it back unchanged after a
// reopen.
func TestUsageModelsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	ctx := context.Background()
	want := keyspace.Usage{InputTokens: 1 << 40, OutputTokens: 7, Provider: "aws.bedrock",
		RequestModel: "model\xff\x00", ResponseModel: "anthropic.claude-v2:1", Operation: "text_completion"}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ev := keyspace.ActivityEvent{WorkflowID: usageKey.WorkflowID, RunID: usageKey.RunID, ActivityID: usageKey.ActivityID,
		Attempt: usageKey.Attempt, AgentID: "a", EmittedAt: time.Unix(5, 0).UTC(), Content: &want}
	if _, err := s.AppendEvents(ctx, 0, []keyspace.ActivityEvent{ev}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	recs, err := reopenAndRead(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Event.Content != want {
		t.Fatalf("read back %#v, want one record with %#v", recs, want)
	}
}

// TestVersion1UsageRecordReads puts a record written by format version 1
// into a file and reads it through the store: it decodes, with the fields
// version 2 added empty.
func TestVersion1UsageRecordReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	ctx := context.Background()
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ev := keyspace.ActivityEvent{WorkflowID: usageKey.WorkflowID, RunID: usageKey.RunID, ActivityID: usageKey.ActivityID,
		Attempt: usageKey.Attempt, Content: keyspace.Usage{InputTokens: 1, Provider: "p"}}
	if _, err := s.AppendEvents(ctx, 0, []keyspace.ActivityEvent{ev}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	old, _ := hex.DecodeString(usageV1Hex)
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		key := appendRecordKey(nil, streamPrefix(usageKey), 0)
		b := tx.Bucket(dataBucket)
		if v := b.Get(key); v == nil || v[0] != FormatVersion {
			t.Errorf("stored record %x, want one of version %d", v, FormatVersion)
		}
		return b.Put(key, bytes.Clone(old))
	})
	_ = db.Close()
	if err != nil {
		t.Fatal(err)
	}
	recs, err := reopenAndRead(path)
	if err != nil {
		t.Fatalf("reading a version 1 record: %v", err)
	}
	want := keyspace.Usage{InputTokens: 300, OutputTokens: 5}
	if len(recs) != 1 || recs[0].Event.Content != want || recs[0].Event.AgentID != "agent-7" || recs[0].Event.WorkerSeq != 300 {
		t.Fatalf("read back %#v, want one record with %#v", recs, want)
	}
}

// reopenAndRead opens the file at path again and reads usageKey's stream.
func reopenAndRead(path string) ([]keyspace.Record, error) {
	s, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	return s.ReadFrom(context.Background(), usageKey, 0, 0)
}
