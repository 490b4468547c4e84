package keyspace_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// fuzzKeys are the streams the fuzzer picks from: six valid keys over two
// workflows and two runs, and two invalid ones.
var fuzzKeys = []keyspace.StreamKey{
	keyspace.NewStreamKey(testWorkflow, generation1, 0, 0),
	keyspace.NewStreamKey(testWorkflow, generation1, 0, 1),
	keyspace.NewStreamKey(testWorkflow, generation1, 1, 0),
	keyspace.NewStreamKey(testWorkflow, generation2, 0, 0),
	keyspace.NewStreamKey(otherFlow, generation1, 0, 0),
	keyspace.NewStreamKey(otherFlow, generation1, 2, 1),
	keyspace.NewStreamKey(testWorkflow, eventstore.RunID{}, 0, 0),
	keyspace.NewStreamKey(eventstore.WorkflowID{}, generation1, 0, 0),
}

// fuzzRuns are the (workflow, run) pairs whose listings are checked.
var fuzzRuns = []struct {
	wf  eventstore.WorkflowID
	run eventstore.RunID
}{{testWorkflow, generation1}, {testWorkflow, generation2}, {otherFlow, generation1}, {otherFlow, generation2}}

// FuzzMemoryAppendEvents feeds Memory random batches and checks, after every
// call, that either the whole batch landed contiguously at the expected seq
// and nothing else changed, or nothing changed at all, and that the outcome
// is the one the contract prescribes.
//
// Input: groups of three bytes, one call each.
//
//	b0: bits 0-2 batch size (0-7), bits 3-7 key index
//	b1: bits 0-2 expected seq = head+value-2 (clamped at 0), bits 3-5 index of
//	    the event given another key, bit 6 enables that, bit 7 enables an
//	    ephemeral event
//	b2: bits 0-2 index of the ephemeral event, bits 3-7 the other key's index
func FuzzMemoryAppendEvents(f *testing.F) {
	f.Add([]byte{0x03, 0x02, 0x00, 0x03, 0x02, 0x00})             // two good batches on one stream
	f.Add([]byte{0x02, 0x02, 0x00, 0x02, 0x01, 0x00})             // a good batch, then a stale one
	f.Add([]byte{0x04, 0x4a, 0x08, 0x04, 0x02, 0x00})             // a mixed batch, then a good one
	f.Add([]byte{0x05, 0x82, 0x03, 0x0d, 0x03, 0x00})             // an ephemeral batch, an ahead-of-head one
	f.Add([]byte{0x32, 0x02, 0x00, 0x3a, 0x42, 0x00})             // invalid keys, alone and mixed
	f.Add([]byte{0x00, 0x07, 0x00, 0x11, 0x02, 0x00, 0x21, 0x02}) // empty batch, other streams, trailing bytes
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		m := keyspace.NewMemory()
		model := map[keyspace.StreamKey][]keyspace.Record{}
		emitted := time.Unix(1_700_000_000, 0).UTC()
		var workerSeq uint64

		for call := 0; len(data) >= 3 && call < 100; call++ {
			b0, b1, b2 := data[0], data[1], data[2]
			data = data[3:]

			n := int(b0 & 0x07)
			key := fuzzKeys[int(b0>>3)%len(fuzzKeys)]
			head := uint64(len(model[key]))
			expected := head + uint64(b1&0x07)
			expected = max(expected, 2) - 2
			batch := make([]keyspace.ActivityEvent, n)
			for i := range batch {
				workerSeq++
				batch[i] = eventIn(key, "agent", workerSeq)
				batch[i].EmittedAt = emitted.Add(time.Duration(workerSeq) * time.Millisecond)
			}
			if b1&0x40 != 0 {
				if at := int(b1>>3) & 0x07; at < n {
					other := fuzzKeys[int(b2>>3)%len(fuzzKeys)]
					batch[at].WorkflowID, batch[at].RunID = other.WorkflowID, other.RunID
					batch[at].ActivityID, batch[at].Attempt = other.ActivityID, other.Attempt
				}
			}
			if b1&0x80 != 0 {
				if at := int(b2 & 0x07); at < n {
					batch[at].Ephemeral = true
				}
			}
			sent := slices.Clone(batch)

			got, err := m.AppendEvents(ctx, expected, batch)

			if !slices.Equal(batch, sent) {
				t.Fatalf("call %d: AppendEvents modified the caller's batch", call)
			}
			if want := predict(model, expected, batch); want != nil {
				checkRefusal(t, call, err, want)
			} else {
				if err != nil {
					t.Fatalf("call %d: AppendEvents(%d, %d events) = %v, want success", call, expected, n, err)
				}
				if got != expected+uint64(n) {
					t.Fatalf("call %d: new head %d, want %d", call, got, expected+uint64(n))
				}
				if n > 0 {
					k := keyspace.KeyOf(batch[0])
					for i, ev := range batch {
						ev.StoreSeq, ev.Persisted = expected+uint64(i), true
						model[k] = append(model[k], keyspace.Record{StoreSeq: ev.StoreSeq, Event: ev})
					}
				}
			}
			checkSnapshot(t, call, m, model)
		}
	})
}

// predict returns the error the contract requires for batch at expected, or
// nil when the batch must land. The checks follow Memory's documented order.
func predict(model map[keyspace.StreamKey][]keyspace.Record, expected uint64, batch []keyspace.ActivityEvent) error {
	if len(batch) == 0 {
		return nil
	}
	first := keyspace.KeyOf(batch[0])
	if first.Validate() != nil {
		return eventstore.ErrInvalidArgument
	}
	for _, ev := range batch {
		if keyspace.KeyOf(ev) != first {
			return keyspace.ErrMixedStreams
		}
	}
	for _, ev := range batch {
		if ev.Ephemeral {
			return keyspace.ErrEphemeral
		}
	}
	if head := uint64(len(model[first])); head != expected {
		return &eventstore.SequenceConflictError{Expected: expected, Found: head}
	}
	return nil
}

func checkRefusal(t *testing.T, call int, err, want error) {
	t.Helper()
	var wantConflict *eventstore.SequenceConflictError
	if errors.As(want, &wantConflict) {
		var conflict *eventstore.SequenceConflictError
		if !errors.As(err, &conflict) || *conflict != *wantConflict {
			t.Fatalf("call %d: error %v, want %v", call, err, want)
		}
		return
	}
	if !errors.Is(err, want) {
		t.Fatalf("call %d: error %v, want %v", call, err, want)
	}
	// The first failing check decides: a zero key is not reported as mixing.
	for _, other := range []error{keyspace.ErrMixedStreams, keyspace.ErrEphemeral} {
		if other != want && errors.Is(err, other) {
			t.Fatalf("call %d: error %v, want %v and not %v", call, err, want, other)
		}
	}
}

// checkSnapshot compares every stream and every listing with the model.
func checkSnapshot(t *testing.T, call int, m *keyspace.Memory, model map[keyspace.StreamKey][]keyspace.Record) {
	t.Helper()
	ctx := context.Background()
	for _, key := range fuzzKeys {
		if key.Validate() != nil {
			continue
		}
		recs, err := m.ReadFrom(ctx, key, 0, 0)
		if err != nil {
			t.Fatalf("call %d: ReadFrom(%s): %v", call, key, err)
		}
		if !slices.Equal(recs, model[key]) {
			t.Fatalf("call %d: stream %s holds %s\nwant %s", call, key, describe(recs), describe(model[key]))
		}
		if head, err := m.Head(ctx, key); err != nil || head != uint64(len(model[key])) {
			t.Fatalf("call %d: Head(%s) = %d, %v; want %d", call, key, head, err, len(model[key]))
		}
	}
	for _, r := range fuzzRuns {
		var want []keyspace.StreamSummary
		for _, key := range fuzzKeys {
			if key.WorkflowID == r.wf && key.RunID == r.run && len(model[key]) > 0 {
				want = append(want, keyspace.StreamSummary{Key: key, Head: uint64(len(model[key]))})
			}
		}
		slices.SortFunc(want, func(a, b keyspace.StreamSummary) int {
			if a.Key.ActivityID != b.Key.ActivityID {
				return int(a.Key.ActivityID) - int(b.Key.ActivityID)
			}
			return int(a.Key.Attempt) - int(b.Key.Attempt)
		})
		got, err := m.ListStreams(ctx, r.wf, r.run)
		if err != nil || !slices.Equal(got, want) {
			t.Fatalf("call %d: ListStreams(%s, %s) = %+v, %v\nwant %+v", call, r.wf, r.run, got, err, want)
		}
	}
}

func describe(recs []keyspace.Record) string {
	return fmt.Sprint(agentSeqs(recs))
}
