package boltstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"math"
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

// usageV2Hex is the same usage as format version 2 (before the cache,
// reasoning and call-time fields) stored it, with provider "openai", request
// model "gpt-4o", response model "gpt-4o-2024-08-06" and operation "chat".
// The codec's testdata holds the same bytes.
const usageV2Hex = "02076167656e742d3709617373697374616e74b287c4e30c959aef3a0003555443ac02057573616765ac0205066f70656e6169066770742d346f116770742d346f2d323032342d30382d30360463686174"

var usageKey = keyspace.StreamKey{WorkflowID: eventstore.WorkflowID{15: 1}, RunID: eventstore.RunID{15: 2}, ActivityID: 3, Attempt: 1}

// TestUsageModelsRoundTrip stores a usage with every field set (models and
// provider, cache and reasoning counts, call times), hostile bytes and the
// largest count included, and reads it back unchanged after a
// reopen.
func TestUsageModelsRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "k.db")
	ctx := context.Background()
	want := keyspace.Usage{InputTokens: 1 << 40, OutputTokens: 7, Provider: "aws.bedrock",
		RequestModel: "model\xff\x00", ResponseModel: "anthropic.claude-v2:1", Operation: "text_completion",
		CacheReadInputTokens: 1 << 39, CacheCreationInputTokens: 12, ReasoningOutputTokens: math.MaxUint64,
		StartedAt: time.Unix(3, 999_999_999).UTC(), FirstChunkAt: time.Unix(4, 1).UTC()}
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

// TestOlderUsageRecordsRead puts a record written by each older format
// version into a file and reads it through the store: it decodes, with the
// fields that version lacks zero.
func TestOlderUsageRecordsRead(t *testing.T) {
	testCases := []struct {
		name string
		hex  string
		want keyspace.Usage
	}{
		{"v1", usageV1Hex, keyspace.Usage{InputTokens: 300, OutputTokens: 5}},
		{"v2", usageV2Hex, keyspace.Usage{InputTokens: 300, OutputTokens: 5, Provider: "openai", RequestModel: "gpt-4o",
			ResponseModel: "gpt-4o-2024-08-06", Operation: "chat"}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
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
			old, _ := hex.DecodeString(tc.hex)
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
				t.Fatalf("reading a %s record: %v", tc.name, err)
			}
			if len(recs) != 1 || recs[0].Event.Content != tc.want || recs[0].Event.AgentID != "agent-7" || recs[0].Event.WorkerSeq != 300 {
				t.Fatalf("read back %#v, want one record with %#v", recs, tc.want)
			}
		})
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
