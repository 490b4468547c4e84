package pairing

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// fillStore is a Memory read through ReadHistories, counting each call's
// size and the single reads; its first ReadHistories call waits for gate
// (when set), the failAt-th fails, and a call that asks for bad fails, as
// does a single read of bad.
type fillStore struct {
	m       *eventstore.Memory
	gate    chan struct{}
	failAt  int
	bad     eventstore.WorkflowID
	mu      sync.Mutex
	calls   []int
	singles int
}

var errBad = fmt.Errorf("unreadable: %w", eventstore.ErrNotFound)

func (s *fillStore) ReadHistory(ctx context.Context, id eventstore.WorkflowID) ([]eventstore.Event, error) {
	return s.ReadHistoryFrom(ctx, id, 0)
}

func (s *fillStore) ReadHistoryFrom(ctx context.Context, id eventstore.WorkflowID, from uint64) ([]eventstore.Event, error) {
	s.mu.Lock()
	s.singles++
	s.mu.Unlock()
	if id == s.bad {
		return nil, errBad
	}
	return s.m.ReadHistoryFrom(ctx, id, from)
}

func (s *fillStore) ReadHistories(ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error) {
	s.mu.Lock()
	s.calls = append(s.calls, len(ids))
	call := len(s.calls)
	s.mu.Unlock()
	if call == 1 && s.gate != nil {
		<-s.gate
	}
	if call == s.failAt {
		return nil, errPage
	}
	if slices.Contains(ids, s.bad) {
		return nil, errBad
	}
	return readEach(ctx, s.m, ids)
}

// gapped is n workflows as adopted has one: history up to position 5
// written by a predecessor, and the batch at 6 to 9 this process commits.
func gapped(t *testing.T, n int) (m *eventstore.Memory, ids []eventstore.WorkflowID, after []eventstore.Event) {
	t.Helper()
	_, before, after := adopted(t)
	m = eventstore.NewMemory()
	for i := range n {
		wf := eventstore.WorkflowID{0: 0xcc}
		binary.BigEndian.PutUint64(wf[8:], uint64(i+1))
		appendTo(t, m, wf, before...)
		appendTo(t, m, wf, after...)
		ids = append(ids, wf)
	}
	return m, ids, after
}

// observeGaps commits each workflow's batch at 6 to 9 into h through r,
// and waits for the fills, r's first batch call held until all are queued.
func observeGaps(t *testing.T, h *harness, r HistoryReader, ids []eventstore.WorkflowID, after []eventstore.Event, gate chan struct{}) {
	t.Helper()
	for _, id := range ids {
		h.tr.ObserveFrom(bg, r, "default", id, 6, after)
	}
	if gate != nil {
		close(gate)
	}
	if err := h.tr.WaitFilled(bg); err != nil {
		t.Fatal(err)
	}
}

// sameTelemetry checks that got recorded what want did: every metric
// point (timestamps and exemplars aside) and the spans' names and times.
func sameTelemetry(t *testing.T, got, want *harness) {
	t.Helper()
	metricdatatest.AssertEqual(t, want.scope(), got.scope(), metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
	spans := func(h *harness) []string {
		var out []string
		for _, s := range h.spans.Ended() {
			out = append(out, fmt.Sprintf("%s %v..%v", s.Name(), s.StartTime().Sub(t0), s.EndTime().Sub(t0)))
		}
		slices.Sort(out)
		return out
	}
	if g, w := spans(got), spans(want); !slices.Equal(g, w) {
		t.Errorf("%d spans, want %d as the single fills made", len(g), len(w))
	}
}

// Gaps queued for a reader that has ReadHistories are read together: one
// call per eventstore.HistoriesPage of them (the first call takes what
// was queued when the filler started), no single read; and each gap is
// filled exactly as a fill of its own: the same counts, completions,
// durations and spans as single reads give.
func TestGapFillsReadInBatches(t *testing.T) {
	const n = 2*eventstore.HistoriesPage + 500
	m, ids, after := gapped(t, n)

	single := newHarness(t, WithFillConcurrency(1))
	observeGaps(t, single, m, ids, after, nil) // a Memory has no ReadHistories

	store := &fillStore{m: m, gate: make(chan struct{})}
	h := newHarness(t, WithFillConcurrency(1))
	observeGaps(t, h, store, ids, after, store.gate)

	if len(store.calls) == 0 {
		t.Fatalf("no ReadHistories call; %d single reads", store.singles)
	}
	first := store.calls[0]
	var want []int
	for left := n - first; left > 0; left -= eventstore.HistoriesPage {
		want = append(want, min(left, eventstore.HistoriesPage))
	}
	if !slices.Equal(store.calls[1:], want) || store.singles != 0 {
		t.Errorf("ReadHistories calls of %v and %d single reads; want %d then %v, and none", store.calls, store.singles, first, want)
	}
	wantFills := FillReport{Gaps: n, Read: n, Events: 9 * n}
	if got := single.tr.Fills(); got != wantFills {
		t.Fatalf("single fills: %+v, want %+v", got, wantFills)
	}
	if got := h.tr.Fills(); got != wantFills {
		t.Errorf("Fills() = %+v, want %+v", got, wantFills)
	}
	sameTelemetry(t, h, single)
	if got := h.sums(catalog.ActivitiesCompleted)[attrs("default", "ship", OutcomeSucceeded)]; got != n {
		t.Errorf("ship completed %d times, want %d", got, n)
	}
}

// A batch call that fails loses no gap: its gaps are read one at a time,
// as without ReadHistories, so a failed call alone changes nothing, and a
// workflow whose history cannot be read fails its own gap only (counted
// on Fills().Failed and aion.pairing.resumed with its error.type).
func TestGapFillBatchFailure(t *testing.T) {
	const n = 2*eventstore.HistoriesPage + 500
	m, ids, after := gapped(t, n)
	for _, tc := range []struct {
		name   string
		failAt int
		bad    bool
	}{{"call fails", 2, false}, {"one history unreadable", 0, true}} {
		t.Run(tc.name, func(t *testing.T) {
			store := &fillStore{m: m, gate: make(chan struct{}), failAt: tc.failAt}
			if tc.bad {
				store.bad = ids[n-1] // in the last call
			}
			h := newHarness(t, WithFillConcurrency(1))
			observeGaps(t, h, store, ids, after, store.gate)

			if len(store.calls) < 2 {
				t.Fatalf("ReadHistories calls %v, want the gaps read in pages", store.calls)
			}
			want := FillReport{Gaps: n, Read: n, Events: 9 * n}
			wantSingles := eventstore.HistoriesPage // the second call's gaps
			if tc.bad {
				want = FillReport{Gaps: n, Read: n - 1, Failed: 1, Events: 9 * (n - 1)}
				wantSingles = store.calls[len(store.calls)-1]
			}
			if got := h.tr.Fills(); got != want {
				t.Errorf("Fills() = %+v, want %+v", got, want)
			}
			if store.singles != wantSingles {
				t.Errorf("%d single reads after the failed call, want %d (calls %v)", store.singles, wantSingles, store.calls)
			}
			resumed := h.sums(catalog.PairingResumed)
			failed := attribute.NewSet(catalog.Namespace.String("default"), catalog.ErrorType.String("not_found"))
			if ok := resumed[attribute.NewSet(catalog.Namespace.String("default"))]; ok != want.Read || resumed[failed] != want.Failed {
				t.Errorf("aion.pairing.resumed = %v, want %d read and %d not_found", resumed, want.Read, want.Failed)
			}
			if got, wantN := h.sums(catalog.ActivitiesCompleted)[attrs("default", "ship", OutcomeSucceeded)], want.Read; got != wantN {
				t.Errorf("ship completed %d times, want %d: no completion guessed, none lost", got, wantN)
			}
		})
	}
}

// A gap of a workflow whose first positions this tracker saw is read in a
// batch as a whole history, and joined from the first position it had not
// seen: what a fill of its own reads from there (ReadHistoryFrom), with
// the same telemetry and the same Fills().
func TestGapFillBatchSkipsSeenPrefix(t *testing.T) {
	_, before, after := adopted(t)
	m, ids, _ := gapped(t, 3)
	run := func(r HistoryReader, gate chan struct{}) *harness {
		h := newHarness(t, WithFillConcurrency(1))
		h.tr.Observe(bg, "default", ids[1], 1, before[:2]) // positions 1 and 2 seen
		observeGaps(t, h, r, ids, after, gate)
		return h
	}
	single := run(m, nil)
	store := &fillStore{m: m, gate: make(chan struct{})}
	h := run(store, store.gate)
	if store.singles != 0 || len(store.calls) > 2 {
		t.Errorf("ReadHistories calls %v, %d single reads; want one or two calls, no single read", store.calls, store.singles)
	}
	want := FillReport{Gaps: 3, Read: 3, Events: 9 + 7 + 9} // the second from position 3
	if got := single.tr.Fills(); got != want {
		t.Fatalf("single fills: %+v, want %+v", got, want)
	}
	if got := h.tr.Fills(); got != want {
		t.Errorf("Fills() = %+v, want %+v", got, want)
	}
	sameTelemetry(t, h, single)
}

// A lone gap past a prefix already seen is read from its first unseen
// position (ReadHistoryFrom), not as a whole history: one round trip
// either way, and only what is missing.
func TestGapFillLonePrefixReadsFrom(t *testing.T) {
	_, before, after := adopted(t)
	m, ids, _ := gapped(t, 1)
	store := &fillStore{m: m}
	h := newHarness(t)
	h.tr.Observe(bg, "default", ids[0], 1, before[:2])
	h.tr.ObserveFrom(bg, store, "default", ids[0], 6, after)
	if err := h.tr.WaitFilled(bg); err != nil {
		t.Fatal(err)
	}
	if len(store.calls) != 0 || store.singles != 1 {
		t.Errorf("ReadHistories calls %v, %d single reads; want none and one", store.calls, store.singles)
	}
	if got, want := h.tr.Fills(), (FillReport{Gaps: 1, Read: 1, Events: 7}); got != want {
		t.Errorf("Fills() = %+v, want %+v", got, want)
	}
}

// Readers that cannot be compared are never taken for the same one.
func TestSameReaderUncomparable(t *testing.T) {
	type sliced struct {
		HistoryReader
		_ []int
	}
	m := eventstore.NewMemory()
	var a, b HistoryReader = sliced{HistoryReader: m}, sliced{HistoryReader: m}
	if sameReader(a, b) || !sameReader(m, m) || sameReader(m, a) {
		t.Error("sameReader: want false for readers that cannot be compared, true for the same pointer")
	}
}

// BenchmarkFillRoundTrips: how gap filling scales with a 1 ms round trip
// per read call, at 1,000 and 10,000 workflows each with a gap (history
// up to 5 written before, the batch at 6 to 9 observed here): one read per
// gap (DefaultFillConcurrency at a time) against the gaps queued for a
// reader with ReadHistories read together. ns/op is from the first
// Observe to WaitFilled.
func BenchmarkFillRoundTrips(b *testing.B) {
	run := runID(1)
	at := func(ms int) eventstore.Envelope { return eventstore.Envelope{RunID: run, RecordedAt: ts(ms)} }
	before := []eventstore.Event{
		eventstore.WorkflowStarted{Envelope: at(0), WorkflowType: "flow"},
		eventstore.ActivityScheduled{Envelope: at(1000), ActivityID: 0, ActivityType: "charge"},
		eventstore.ActivityScheduled{Envelope: at(2000), ActivityID: 1, ActivityType: "ship"},
		eventstore.ActivityCompleted{Envelope: at(3000), ActivityID: 0},
		eventstore.ActivityFailed{Envelope: at(4000), ActivityID: 1, Error: eventstore.ActivityError{Kind: eventstore.Retryable}},
	}
	after := []eventstore.Event{
		eventstore.ActivityFailed{Envelope: at(5000), ActivityID: 1, Error: eventstore.ActivityError{Kind: eventstore.Retryable}},
		eventstore.ActivityCompleted{Envelope: at(7000), ActivityID: 1},
		eventstore.ActivityScheduled{Envelope: at(8000), ActivityID: 2, ActivityType: "llm"},
		eventstore.WorkflowCompleted{Envelope: at(10000)},
	}
	for _, n := range []int{1_000, 10_000} {
		m := eventstore.NewMemory()
		ids := make([]eventstore.WorkflowID, n)
		for i := range ids {
			ids[i] = eventstore.WorkflowID{0: 0xcc}
			binary.BigEndian.PutUint64(ids[i][8:], uint64(i+1))
			if err := m.Append(bg, eventstore.RecorderToken(), ids[i], slices.Concat(before, after), 0); err != nil {
				b.Fatal(err)
			}
		}
		base := rttStore{m, time.Millisecond}
		for _, tc := range []struct {
			reads  string
			reader HistoryReader
		}{{"single", base}, {"pages", rttPages{base}}} {
			b.Run(fmt.Sprintf("gaps=%d/reads=%s", n, tc.reads), func(b *testing.B) {
				for b.Loop() {
					tr, err := New(WithHistory(tc.reader))
					if err != nil {
						b.Fatal(err)
					}
					for _, id := range ids {
						tr.Observe(bg, "n", id, 6, after)
					}
					if err := tr.WaitFilled(bg); err != nil {
						b.Fatal(err)
					}
					if f := tr.Fills(); f.Read != int64(n) {
						b.Fatalf("Fills() = %+v, want %d read", f, n)
					}
				}
			})
		}
	}
}
