package pgstore_test

import (
	"context"
	"encoding/hex"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/keyspace/pgstore"
)

// usageV1Hex is a usage payload as format version 1 (before the model and
// provider fields) stored it: agent "agent-7", worker seq 300, 300 input and
// 5 output tokens. The codec's testdata holds the same bytes.
const usageV1Hex = "01076167656e742d3709617373697374616e74b287c4e30c959aef3a0003555443ac02057573616765ac0205"

// usageV2Hex is the same usage as format version 2 (before the cache,
// reasoning and call-time fields) stored it, with provider "openai", request
// model "gpt-4o", response model "gpt-4o-2024-08-06" and operation "chat".
// The codec's testdata holds the same bytes.
const usageV2Hex = "02076167656e742d3709617373697374616e74b287c4e30c959aef3a0003555443ac02057573616765ac0205066f70656e6169066770742d346f116770742d346f2d323032342d30382d30360463686174"

var usageKey = keyspace.StreamKey{WorkflowID: eventstore.WorkflowID{15: 1}, RunID: eventstore.RunID{15: 2}, ActivityID: 3, Attempt: 1}

// TestUsageModelsRoundTrip stores a usage with every field set (models and
// provider, cache and reasoning counts, call times), hostile bytes and the
// largest count included, and reads it back unchanged.
func TestUsageModelsRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _, _ := newStore(t)
	want := keyspace.Usage{InputTokens: 1 << 40, OutputTokens: 7, Provider: "aws.bedrock",
		RequestModel: "model\xff\x00", ResponseModel: "anthropic.claude-v2:1", Operation: "text_completion",
		CacheReadInputTokens: 1 << 39, CacheCreationInputTokens: 12, ReasoningOutputTokens: math.MaxUint64,
		StartedAt: time.Unix(3, 999_999_999).UTC(), FirstChunkAt: time.Unix(4, 1).UTC()}
	ev := keyspace.ActivityEvent{WorkflowID: usageKey.WorkflowID, RunID: usageKey.RunID, ActivityID: usageKey.ActivityID,
		Attempt: usageKey.Attempt, AgentID: "a", EmittedAt: time.Unix(5, 0).UTC(), Content: &want}
	if _, err := s.AppendEvents(ctx, 0, []keyspace.ActivityEvent{ev}); err != nil {
		t.Fatal(err)
	}
	recs, err := s.ReadFrom(ctx, usageKey, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].Event.Content != want {
		t.Fatalf("read back %#v, want one record with %#v", recs, want)
	}
}

// TestOlderUsageRecordsRead replaces a stored payload by one written by
// each older format version and reads it through the store: it decodes,
// with the fields that version lacks zero.
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
			ctx := context.Background()
			s, pool, schema := newStore(t)
			ev := keyspace.ActivityEvent{WorkflowID: usageKey.WorkflowID, RunID: usageKey.RunID, ActivityID: usageKey.ActivityID,
				Attempt: usageKey.Attempt, Content: keyspace.Usage{InputTokens: 1, Provider: "p"}}
			if _, err := s.AppendEvents(ctx, 0, []keyspace.ActivityEvent{ev}); err != nil {
				t.Fatal(err)
			}
			old, _ := hex.DecodeString(tc.hex)
			table := pgx.Identifier{schema, pgstore.DefaultTable}.Sanitize()
			tag, err := pool.Exec(ctx, `UPDATE `+table+` SET payload = $1 WHERE store_seq = 0 AND substring(payload from 1 for 1) = $2`,
				old, []byte{pgstore.FormatVersion})
			if err != nil {
				t.Fatal(err)
			}
			if tag.RowsAffected() != 1 {
				t.Fatalf("updated %d rows, want the one record, stored at version %d", tag.RowsAffected(), pgstore.FormatVersion)
			}
			recs, err := s.ReadFrom(ctx, usageKey, 0, 0)
			if err != nil {
				t.Fatalf("reading a %s record: %v", tc.name, err)
			}
			if len(recs) != 1 || recs[0].Event.Content != tc.want || recs[0].Event.AgentID != "agent-7" || recs[0].Event.WorkerSeq != 300 {
				t.Fatalf("read back %#v, want one record with %#v", recs, tc.want)
			}
		})
	}
}
