package codec

import (
	"errors"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// contentCases are the Content values a caller can pass: nil, every kind as
// a value and as a non-nil pointer, every kind as a nil pointer, and types
// outside the set (one claiming to be a message).
var contentCases = []keyspace.Content{
	nil,
	keyspace.Message{Role: "r", Text: "t\xff"}, &keyspace.Message{Text: "p"}, (*keyspace.Message)(nil),
	keyspace.ToolCall{Name: "n"}, &keyspace.ToolCall{CallID: "c"}, (*keyspace.ToolCall)(nil),
	keyspace.ToolResult{IsError: true}, &keyspace.ToolResult{Output: "o"}, (*keyspace.ToolResult)(nil),
	keyspace.Status{State: "s"}, &keyspace.Status{Detail: "d"}, (*keyspace.Status)(nil),
	keyspace.Usage{InputTokens: 1}, &keyspace.Usage{OutputTokens: 2}, (*keyspace.Usage)(nil),
	foreignContent{}, &foreignContent{}, impostor{}, (*impostor)(nil),
}

// eventCase returns an event built from the three axes the checks look at:
// content, ephemeral flag and key (0 valid, 1 another valid stream, 2 zero
// run, 3 zero workflow).
func eventCase(content, ephemeral, key int) keyspace.ActivityEvent {
	wf, run := eventstore.WorkflowID{15: 1}, eventstore.RunID{15: 2}
	ev := keyspace.ActivityEvent{
		WorkflowID: wf, RunID: run, AgentID: "a", WorkerSeq: uint64(content),
		EmittedAt: time.Unix(1_700_000_000, int64(content)).UTC(),
		Content:   contentCases[content], Ephemeral: ephemeral == 1,
	}
	switch key {
	case 1:
		ev.ActivityID = 1
	case 2:
		ev.RunID = eventstore.RunID{}
	case 3:
		ev.WorkflowID = eventstore.WorkflowID{}
	}
	return ev
}

// checkValidatedEncodes fails unless ValidateBatch(batch) == nil implies that
// every event encodes and decodes to what the backends read back, and that a
// refusal matches eventstore.ErrInvalidArgument.
func checkValidatedEncodes(t *testing.T, batch []keyspace.ActivityEvent) {
	t.Helper()
	if err := keyspace.ValidateBatch(batch); err != nil {
		if !errors.Is(err, eventstore.ErrInvalidArgument) {
			t.Fatalf("ValidateBatch(%#v) = %v, not matching ErrInvalidArgument", batch, err)
		}
		return
	}
	for i := range batch {
		b, err := AppendEvent(nil, &batch[i])
		if err != nil {
			t.Fatalf("ValidateBatch accepted %#v, but event %d does not encode: %v", batch, i, err)
		}
		got, err := DecodeEvent(b)
		if err != nil {
			t.Fatalf("event %d of a validated batch: decoding its encoding: %v", i, err)
		}
		want := stored(batch[i])
		if !sameEvent(got, want) {
			t.Fatalf("event %d decoded as %#v, want %#v", i, got, want)
		}
	}
}

// TestValidateBatchImpliesEncode enumerates every batch of one and two events
// over the content, ephemeral and key axes: whatever ValidateBatch accepts,
// the codec encodes, so the codec's own refusal is unreachable behind it.
// It also checks the converse for single durable events of a valid key: the
// codec refuses only what ValidateBatch refuses.
func TestValidateBatchImpliesEncode(t *testing.T) {
	const ephemerals, keys = 2, 4
	var singles []keyspace.ActivityEvent
	for c := range contentCases {
		for e := range ephemerals {
			for k := range keys {
				singles = append(singles, eventCase(c, e, k))
			}
		}
	}
	for _, ev := range singles {
		checkValidatedEncodes(t, []keyspace.ActivityEvent{ev})
		if !ev.Ephemeral && keyspace.KeyOf(ev).Validate() == nil {
			_, encErr := AppendEvent(nil, &ev)
			valErr := keyspace.ValidateBatch([]keyspace.ActivityEvent{ev})
			if (encErr == nil) != (valErr == nil) {
				t.Fatalf("content %#v: AppendEvent = %v, ValidateBatch = %v; want both to accept or both to refuse", ev.Content, encErr, valErr)
			}
		}
	}
	for _, a := range singles {
		for _, b := range singles {
			checkValidatedEncodes(t, []keyspace.ActivityEvent{a, b})
		}
	}
}

// FuzzValidateBatchImpliesEncode builds batches of up to eight events from
// the fuzzer's bytes (one byte per event: content, ephemeral flag, key) with
// its strings in every text field, and checks that a batch ValidateBatch
// accepts encodes and decodes.
func FuzzValidateBatchImpliesEncode(f *testing.F) {
	f.Add([]byte{0x00, 0x01, 0x02}, "agent", "text")
	f.Add([]byte{0x03}, "", "")
	f.Add([]byte{0x10, 0x91, 0x2f}, "\xff\x00", "\xfe")
	f.Fuzz(func(t *testing.T, shape []byte, agent, text string) {
		if len(shape) > 8 {
			shape = shape[:8]
		}
		batch := make([]keyspace.ActivityEvent, len(shape))
		for i, b := range shape {
			ev := eventCase(int(b&0x1f)%len(contentCases), int(b>>7), int(b>>5)&0x03)
			ev.AgentID, ev.AgentRole = agent, text
			switch c := ev.Content.(type) {
			case keyspace.Message:
				c.Text = text
				ev.Content = c
			case *keyspace.ToolCall:
				if c != nil {
					ev.Content = &keyspace.ToolCall{CallID: agent, Name: text, Arguments: text}
				}
			}
			batch[i] = ev
		}
		checkValidatedEncodes(t, batch)
	})
}
