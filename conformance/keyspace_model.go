package conformance

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// The sizes of the keyspace model rule at scale 1. They cross the boundaries
// an implementation plausibly has: pages and chunks of 256, 1000 or 1024
// records, listings capped at 100 or 256 streams, a text of 1 MiB.
const (
	ksModelLongStream = 3000 // records in the long stream
	ksModelStreams    = 400  // streams, most of them in one run
	ksModelRandomOps  = 400  // random operations after the bulk load
	ksModelBigText    = 1 << 20
)

// ksOpKind is what one generated keyspace operation does.
type ksOpKind uint8

const (
	ksOpAppend    ksOpKind = iota // n events at the model's head
	ksOpStale                     // n events at head+delta (delta != 0)
	ksOpMixed                     // n events, the last of another stream
	ksOpEphemeral                 // n events, one ephemeral
	ksOpZeroWF                    // n events with a zero workflow ID
	ksOpZeroRun                   // n events with a zero run ID
	ksOpEmpty                     // an empty batch at head+delta
	ksOpRead                      // ReadFrom(from, limit)
	ksOpReadEvery                 // ReadFrom(i, 1) for every i, and (i, 0) at boundaries
	ksOpHead                      // Head
	ksOpList                      // ListStreams of the stream's run
)

// ksOp is one generated operation; it is resolved against the model when it
// runs (an append "at the head" uses the model's head then), so any
// subsequence of a generated sequence is itself a valid sequence, which is
// what the minimiser needs.
type ksOp struct {
	kind   ksOpKind
	stream int // index into ksModel.keys
	other  int // the odd stream of a mixed batch
	n      int
	delta  int64
	from   uint64
	limit  int
	at     int    // index of the ephemeral event
	seed   uint64 // content of the generated events
	big    bool   // events carry a 1 MiB message text, tool output and tool arguments
}

func (o ksOp) String() string {
	switch o.kind {
	case ksOpAppend:
		return fmt.Sprintf("AppendEvents(stream %d, %d events at the head, big=%v)", o.stream, o.n, o.big)
	case ksOpStale:
		return fmt.Sprintf("AppendEvents(stream %d, %d events at head%+d)", o.stream, o.n, o.delta)
	case ksOpMixed:
		return fmt.Sprintf("AppendEvents(stream %d, %d events, the last of stream %d)", o.stream, o.n, o.other)
	case ksOpEphemeral:
		return fmt.Sprintf("AppendEvents(stream %d, %d events, event %d ephemeral)", o.stream, o.n, o.at)
	case ksOpZeroWF:
		return fmt.Sprintf("AppendEvents(stream %d, %d events with a zero workflow ID)", o.stream, o.n)
	case ksOpZeroRun:
		return fmt.Sprintf("AppendEvents(stream %d, %d events with a zero run ID)", o.stream, o.n)
	case ksOpEmpty:
		return fmt.Sprintf("AppendEvents(empty, expectedSeq head%+d of stream %d)", o.delta, o.stream)
	case ksOpRead:
		return fmt.Sprintf("ReadFrom(stream %d, fromSeq %d, limit %d)", o.stream, o.from, o.limit)
	case ksOpReadEvery:
		return fmt.Sprintf("ReadFrom(stream %d) at every offset", o.stream)
	case ksOpHead:
		return fmt.Sprintf("Head(stream %d)", o.stream)
	case ksOpList:
		return fmt.Sprintf("ListStreams(run of stream %d)", o.stream)
	}
	return "unknown operation"
}

// ksModel is the reference model, written from the contract of
// keyspace.Store: a stream is the list of the events appended to it, in
// order; its head is their number; a run lists its non-empty streams by
// (activity, attempt).
type ksModel struct {
	keys    []keyspace.StreamKey
	streams map[keyspace.StreamKey][]keyspace.ActivityEvent
}

// ksKeys makes the stream table of a run of the model rule: stream 0 is the
// long one; most streams are in one run of workflow A, a few in a second
// run of A (same activities: the run axis) and in workflow B with the same
// run ID as A's first (the workflow axis). Activity and attempt numbers
// include 2, 9, 10, 100, 1000 and 1<<40 (attempts 1<<16 and the largest),
// so ordering them as text or in insertion order, or keeping them in a
// narrower column, is visible.
func ksKeys(ids *idGen, rng *rand.Rand, n int) []keyspace.StreamKey {
	wfA, wfB := ids.workflow(), ids.workflow()
	run1, run2 := ids.run(), ids.run()
	activities := []eventstore.ActivityID{0, 1, 2, 9, 10, 11, 99, 100, 101, 1000, 1 << 40}
	attempts := []uint32{0, 1, 2, 9, 10, 1 << 16, 1<<16 + 1, math.MaxUint32}
	seen := map[keyspace.StreamKey]bool{}
	var keys []keyspace.StreamKey
	add := func(k keyspace.StreamKey) {
		if !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	add(keyspace.NewStreamKey(wfA, run1, 3, 1)) // the long stream
	for i := 0; len(keys) < n; i++ {
		var act eventstore.ActivityID
		if i%2 == 0 {
			act = activities[rng.IntN(len(activities))]
		} else {
			act = eventstore.ActivityID(rng.IntN(4 * n))
		}
		att := attempts[rng.IntN(len(attempts))]
		switch rng.IntN(10) {
		case 0:
			add(keyspace.NewStreamKey(wfA, run2, act, att))
		case 1:
			add(keyspace.NewStreamKey(wfB, run1, act, att))
		default:
			add(keyspace.NewStreamKey(wfA, run1, act, att))
		}
	}
	// Another run of A and of B that is never written: listed as empty.
	keys = append(keys, keyspace.NewStreamKey(wfA, ids.run(), 0, 0), keyspace.NewStreamKey(wfB, ids.run(), 0, 0))
	return keys
}

// genKSOps generates the operation sequence of one keyspace model run.
func genKSOps(rng *rand.Rand, scale, nKeys int) []ksOp {
	var ops []ksOp
	n := func(max int) int { return 1 + rng.IntN(max) }
	// The long stream, in batches of varied size, one carrying 1 MiB.
	bigAt := rng.IntN(8)
	for total, i := 0, 0; total < ksModelLongStream*scale; i++ {
		size := min(n(300), ksModelLongStream*scale-total)
		ops = append(ops, ksOp{kind: ksOpAppend, stream: 0, n: size, seed: rng.Uint64(), big: i == bigAt})
		total += size
	}
	// Every other stream gets a record or three, in random order.
	for _, k := range rng.Perm(nKeys - 3) {
		ops = append(ops, ksOp{kind: ksOpAppend, stream: k + 1, n: n(3), seed: rng.Uint64()})
	}
	pick := func() int {
		if rng.IntN(4) == 0 {
			return 0
		}
		return rng.IntN(nKeys)
	}
	for range ksModelRandomOps * scale {
		o := ksOp{stream: pick(), n: n(6), seed: rng.Uint64()}
		switch r := rng.IntN(20); {
		case r < 5:
			o.kind = ksOpAppend
		case r < 7:
			o.kind = ksOpStale
			o.delta = []int64{-1, 1, -2, 5, -1000, 1 << 20}[rng.IntN(6)]
		case r < 8:
			o.kind, o.other, o.n = ksOpMixed, rng.IntN(nKeys), max(o.n, 2)
			if o.other == o.stream {
				o.other = (o.other + 1) % nKeys
			}
		case r < 9:
			o.kind, o.at = ksOpEphemeral, rng.IntN(o.n)
		case r < 10:
			o.kind = []ksOpKind{ksOpZeroWF, ksOpZeroRun}[rng.IntN(2)]
		case r < 11:
			o.kind, o.delta = ksOpEmpty, int64(rng.IntN(5))-2
		case r < 16:
			o.kind = ksOpRead
			o.from = uint64(rng.IntN(ksModelLongStream*scale + 4))
			if o.stream != 0 {
				o.from = uint64(rng.IntN(6))
			}
			o.limit = []int{-7, -1, 0, 0, 1, 2, 3, 255, 256, 1000, 1024, 1025, rng.IntN(4000)}[rng.IntN(13)]
		case r < 18:
			o.kind = ksOpHead
		default:
			o.kind = ksOpList
		}
		ops = append(ops, o)
	}
	// The final sweep: every stream's head and whole content, every run's
	// listing, the long stream at every offset.
	for k := range nKeys {
		ops = append(ops, ksOp{kind: ksOpHead, stream: k}, ksOp{kind: ksOpRead, stream: k})
	}
	for k := range nKeys {
		ops = append(ops, ksOp{kind: ksOpList, stream: k})
	}
	return append(ops, ksOp{kind: ksOpReadEvery, stream: 0})
}

// ksGenEvent makes the i-th event of a generated batch: every content kind,
// hostile strings, zero and non-zero times.
func ksGenEvent(key keyspace.StreamKey, rng *rand.Rand, i int) keyspace.ActivityEvent {
	ev := keyspace.ActivityEvent{
		WorkflowID: key.WorkflowID, RunID: key.RunID, ActivityID: key.ActivityID, Attempt: key.Attempt,
		AgentID:   hostile(rng),
		AgentRole: []string{"assistant", "user", "tool", hostile(rng)}[rng.IntN(4)],
		WorkerSeq: rng.Uint64(),
	}
	if rng.IntN(8) != 0 {
		ev.EmittedAt = time.Unix(1_700_000_000+rng.Int64N(1<<30), 0).UTC()
	}
	switch rng.IntN(6) {
	case 0:
		ev.Content = keyspace.Message{Role: hostile(rng), Text: hostile(rng)}
	case 1:
		ev.Content = keyspace.ToolCall{CallID: hostile(rng), Name: hostile(rng), Arguments: `{"q":"` + hostile(rng) + `"}`}
	case 2:
		ev.Content = keyspace.ToolResult{CallID: hostile(rng), Output: hostile(rng), IsError: rng.IntN(2) == 0}
	case 3:
		ev.Content = keyspace.Status{State: hostile(rng), Detail: hostile(rng)}
	case 4:
		ev.Content = keyspace.Usage{InputTokens: rng.Uint64(), OutputTokens: uint64(rng.IntN(1000))}
	default:
		ev.Content = keyspace.Message{Role: "assistant", Text: fmt.Sprintf("event %d", i)}
	}
	return ev
}

// batch makes the op's events for key.
func (o ksOp) batch(key keyspace.StreamKey) []keyspace.ActivityEvent {
	rng := rand.New(rand.NewPCG(o.seed, uint64(o.n)))
	out := make([]keyspace.ActivityEvent, o.n)
	for i := range out {
		out[i] = ksGenEvent(key, rng, i)
	}
	if o.big && len(out) > 0 {
		// Each large text field gets the big text, so a size limit on any
		// one of them (a tool's output above all) shows.
		big := strings.Repeat("\x00ü\xff", ksModelBigText/4)
		for j, c := range []keyspace.Content{
			keyspace.Message{Role: "assistant", Text: big},
			keyspace.ToolResult{CallID: "big", Output: big},
			keyspace.ToolCall{CallID: "big", Name: "big", Arguments: big},
		} {
			out[(len(out)/2+j)%len(out)].Content = c
		}
	}
	return out
}

func (m *ksModel) head(k keyspace.StreamKey) uint64 { return uint64(len(m.streams[k])) }

func addDelta(head uint64, d int64) uint64 {
	if d < 0 && uint64(-d) > head {
		return head + uint64(-d) // stays stale, never wraps to the head
	}
	return uint64(int64(head) + d)
}

// execKS runs ops on s against a fresh model and returns the index of the
// first operation whose result the model contradicts.
func execKS(keys []keyspace.StreamKey) func(ctx context.Context, s keyspace.Store, ops []ksOp) (int, error) {
	return func(ctx context.Context, s keyspace.Store, ops []ksOp) (int, error) {
		m := &ksModel{keys: keys, streams: map[keyspace.StreamKey][]keyspace.ActivityEvent{}}
		for i, o := range ops {
			if err := ctx.Err(); err != nil {
				return i, err
			}
			if err := m.step(ctx, s, o); err != nil {
				return i, err
			}
		}
		return 0, nil
	}
}

// refused checks a refused append: the error matches want and nothing of
// the batch landed (the heads of every stream it named are unchanged).
func (m *ksModel) refused(ctx context.Context, s keyspace.Store, err error, want error, keys ...keyspace.StreamKey) error {
	if err == nil {
		return fmt.Errorf("succeeded, want an error matching %v", want)
	}
	if !errors.Is(err, want) {
		return fmt.Errorf("error %v does not match %v", err, want)
	}
	for _, k := range keys {
		if k.Validate() != nil {
			continue
		}
		if err := wantHead(ctx, s, k, m.head(k)); err != nil {
			return fmt.Errorf("after the refusal: %w", err)
		}
	}
	return nil
}

func (m *ksModel) step(ctx context.Context, s keyspace.Store, o ksOp) error {
	key := m.keys[o.stream]
	head := m.head(key)
	switch o.kind {
	case ksOpAppend:
		evs := o.batch(key)
		want := append([]keyspace.ActivityEvent(nil), evs...)
		got, err := s.AppendEvents(ctx, head, evs)
		if err != nil {
			return fmt.Errorf("at the head %d: %w", head, err)
		}
		if got != head+uint64(len(evs)) {
			return fmt.Errorf("returned head %d, want %d", got, head+uint64(len(evs)))
		}
		m.streams[key] = append(m.streams[key], want...)
		// The caller owns its slice again: scribbling on it must not
		// reach the store.
		for i := range evs {
			evs[i].AgentID, evs[i].Content = "scribbled", keyspace.Message{Text: "scribbled"}
		}
		if o.big {
			// Read the big texts straight back: the random reads may
			// never reach them.
			return m.read(ctx, s, key, head, 0)
		}
	case ksOpStale:
		expected := addDelta(head, o.delta)
		_, err := s.AppendEvents(ctx, expected, o.batch(key))
		if err := wantConflict(err, expected, head, fmt.Sprintf("AppendEvents(expectedSeq=%d) on head %d", expected, head)); err != nil {
			return err
		}
		return wantHead(ctx, s, key, head)
	case ksOpMixed:
		evs := o.batch(key)
		other := m.keys[o.other]
		last := &evs[len(evs)-1]
		last.WorkflowID, last.RunID, last.ActivityID, last.Attempt = other.WorkflowID, other.RunID, other.ActivityID, other.Attempt
		_, err := s.AppendEvents(ctx, head, evs)
		return m.refused(ctx, s, err, keyspace.ErrMixedStreams, key, other)
	case ksOpEphemeral:
		evs := o.batch(key)
		evs[o.at].Ephemeral = true
		_, err := s.AppendEvents(ctx, head, evs)
		return m.refused(ctx, s, err, keyspace.ErrEphemeral, key)
	case ksOpZeroWF, ksOpZeroRun:
		evs := o.batch(key)
		for i := range evs {
			if o.kind == ksOpZeroWF {
				evs[i].WorkflowID = eventstore.WorkflowID{}
			} else {
				evs[i].RunID = eventstore.RunID{}
			}
		}
		_, err := s.AppendEvents(ctx, head, evs)
		return m.refused(ctx, s, err, eventstore.ErrInvalidArgument, key)
	case ksOpEmpty:
		expected := addDelta(head, o.delta)
		var batch []keyspace.ActivityEvent
		if o.delta%2 == 0 {
			batch = []keyspace.ActivityEvent{}
		}
		got, err := s.AppendEvents(ctx, expected, batch)
		if err != nil || got != expected {
			return fmt.Errorf("returned (%d, %v), want (%d, nil): an empty batch is a no-op", got, err, expected)
		}
		return wantHead(ctx, s, key, head)
	case ksOpRead:
		return m.read(ctx, s, key, o.from, o.limit)
	case ksOpReadEvery:
		for from := uint64(0); from <= head+1; from++ {
			if err := m.read(ctx, s, key, from, 1); err != nil {
				return err
			}
		}
		for _, b := range []uint64{1, 99, 100, 101, 255, 256, 257, 511, 512, 513, 999, 1000, 1001, 1023, 1024, 1025, 2047, 2048, 2049, head - 1, head} {
			if b <= head {
				if err := m.read(ctx, s, key, b, 0); err != nil {
					return err
				}
			}
		}
	case ksOpHead:
		return wantHead(ctx, s, key, head)
	case ksOpList:
		return m.list(ctx, s, key.WorkflowID, key.RunID)
	}
	return nil
}

func (m *ksModel) read(ctx context.Context, s keyspace.Store, key keyspace.StreamKey, from uint64, limit int) error {
	all := m.streams[key]
	var want []keyspace.ActivityEvent
	if from < uint64(len(all)) {
		want = all[from:]
		if limit > 0 && limit < len(want) {
			want = want[:limit]
		}
	}
	if err := readExpect(ctx, s, key, from, limit, from, want); err != nil {
		return err
	}
	// What a read returned is the caller's: scribbling on it must not
	// reach the store (the next read of these records checks).
	n := limit
	if n <= 0 || n > 4 {
		n = 4
	}
	recs, err := s.ReadFrom(ctx, key, from, n)
	if err != nil {
		return fmt.Errorf("ReadFrom(%v, %d): %w", key, from, err)
	}
	for i := range recs {
		recs[i].Event.AgentID, recs[i].Event.Content, recs[i].StoreSeq = "scribbled", keyspace.Message{Text: "scribbled"}, 1<<60
	}
	return nil
}

func (m *ksModel) list(ctx context.Context, s keyspace.Store, wf eventstore.WorkflowID, run eventstore.RunID) error {
	var want []listed
	for k, evs := range m.streams {
		if k.WorkflowID == wf && k.RunID == run && len(evs) > 0 {
			want = append(want, listed{k.ActivityID, k.Attempt, uint64(len(evs))})
		}
	}
	slices.SortFunc(want, func(a, b listed) int {
		return cmp.Or(cmp.Compare(a.activity, b.activity), cmp.Compare(a.attempt, b.attempt))
	})
	return wantListing(ctx, s, wf, run, want)
}

// ksModelRule is the keyspace model rule: a seeded sequence of appends good
// and bad, reads at every offset and listings, each result compared with
// the model.
func ksModelRule(ctx context.Context, env *ruleEnv[keyspace.Store], s keyspace.Store) error {
	rng := newRand(env.cfg.seed, RuleKSModel)
	keys := ksKeys(newIDGen(rng), rng, ksModelStreams*env.cfg.scale)
	ops := genKSOps(rng, env.cfg.scale, len(keys))
	return runModel(ctx, env, s, ops, execKS(keys))
}
