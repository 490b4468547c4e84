package eventstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// t0 is the start of every test clock.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// testClock is an injectable clock that moves only when told to.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// newTestMemory returns a store on a test clock that starts at t0.
func newTestMemory(t *testing.T, opts ...MemoryOption) (*Memory, *testClock) {
	t.Helper()
	clock := &testClock{now: t0}
	return NewMemory(append([]MemoryOption{WithClock(clock.Now)}, opts...)...), clock
}

// testID returns a fixed, non-zero workflow ID whose shard among n shards,
// for any n dividing 256, is shard mod n; n tells IDs of one shard apart.
func testID(n, shard byte) WorkflowID {
	var id WorkflowID
	id[0] = n
	id[7] = shard
	id[15] = 1
	return id
}

// testRun returns a fixed, non-zero run ID.
func testRun(n byte) RunID {
	var id RunID
	id[0] = n
	id[15] = 2
	return id
}

var (
	wfA  = testID(1, 0)
	wfB  = testID(2, 1)
	runA = testRun(1)
	runB = testRun(2)
	runC = testRun(3)
)

func env(run RunID) Envelope { return Envelope{RunID: run} }

func started(run RunID, workflowType string) Event {
	return WorkflowStarted{Envelope: env(run), WorkflowType: workflowType, Input: Payload{ContentType: "text/plain", Data: []byte("in")}}
}

func signal(run RunID, name string) Event {
	return SignalReceived{Envelope: env(run), SignalName: name, Input: Payload{Data: []byte(name)}}
}

// mustAppend appends events at the workflow's current head and fails the
// test on any error.
func mustAppend(t *testing.T, m *Memory, wf WorkflowID, events ...Event) {
	t.Helper()
	head := uint64(0)
	heads, err := m.StreamHeads(t.Context())
	if err != nil {
		t.Fatalf("StreamHeads: %v", err)
	}
	for _, h := range heads {
		if h.WorkflowID == wf {
			head = h.Head
		}
	}
	if err := m.Append(t.Context(), RecorderToken(), wf, events, head); err != nil {
		t.Fatalf("Append at head %d: %v", head, err)
	}
}

func mustHistory(t *testing.T, m *Memory, wf WorkflowID) []Event {
	t.Helper()
	h, err := m.ReadHistory(t.Context(), wf)
	if err != nil {
		t.Fatalf("ReadHistory: %v", err)
	}
	return h
}

func seqsOf(events []Event) []uint64 {
	out := make([]uint64, len(events))
	for i, ev := range events {
		out[i] = ev.EventEnvelope().Seq
	}
	return out
}

// snapshot renders a store's whole observable state, to show that a refused
// call changed nothing.
func snapshot(t *testing.T, m *Memory) string {
	t.Helper()
	ctx := t.Context()
	var b bytes.Buffer
	ids, err := m.ListWorkflowIDs(ctx)
	if err != nil {
		t.Fatalf("ListWorkflowIDs: %v", err)
	}
	for _, id := range ids {
		h, _ := m.ReadHistory(ctx, id)
		c, _ := m.ReadRunChain(ctx, id)
		fmt.Fprintf(&b, "%s history=%+v chain=%+v\n", id, h, c)
	}
	m.mu.RLock()
	for _, e := range m.outbox {
		fmt.Fprintf(&b, "row %+v\n", e.row)
	}
	m.mu.RUnlock()
	timers, _ := m.ExpiredTimers(ctx, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	pkgs, _ := m.ListPackages(ctx)
	routes, _ := m.ListPackageRoutes(ctx)
	fmt.Fprintf(&b, "timers=%+v\npackages=%+v\nroutes=%+v\n", timers, pkgs, routes)
	return b.String()
}

func TestNewMemoryOptions(t *testing.T) {
	fixed := func() time.Time { return t0 }
	testCases := []struct {
		name       string
		opts       []MemoryOption
		shardCount int
		wantClock  bool // RecordedAt is t0
	}{
		{name: "defaults", shardCount: 16},
		{name: "nil option ignored", opts: []MemoryOption{nil}, shardCount: 16},
		{name: "shard count", opts: []MemoryOption{WithShardCount(4)}, shardCount: 4},
		{name: "zero shard count ignored", opts: []MemoryOption{WithShardCount(0)}, shardCount: 16},
		{name: "negative shard count ignored", opts: []MemoryOption{WithShardCount(-3)}, shardCount: 16},
		{name: "clock", opts: []MemoryOption{WithClock(fixed)}, shardCount: 16, wantClock: true},
		{name: "nil clock ignored", opts: []MemoryOption{WithClock(fixed), WithClock(nil)}, shardCount: 16, wantClock: true},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMemory(tc.opts...)
			ctx := t.Context()
			if err := m.AcquireOwnedShard(ctx, tc.shardCount-1); err != nil {
				t.Errorf("AcquireOwnedShard(%d) = %v, want nil", tc.shardCount-1, err)
			}
			if err := m.AcquireOwnedShard(ctx, tc.shardCount); !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("AcquireOwnedShard(%d) = %v, want ErrInvalidArgument", tc.shardCount, err)
			}
			mustAppend(t, m, wfA, started(runA, "t"))
			at := mustHistory(t, m, wfA)[0].EventEnvelope().RecordedAt
			if at.IsZero() {
				t.Fatal("RecordedAt was left zero")
			}
			if got := at.Equal(t0); got != tc.wantClock {
				t.Errorf("RecordedAt = %v; from the injected clock = %v, want %v", at, got, tc.wantClock)
			}
		})
	}
}

func TestMemoryAppend(t *testing.T) {
	ctx := t.Context()
	m, clock := newTestMemory(t)
	given := t0.Add(-time.Hour)
	first := []Event{
		started(runA, "order"),
		SignalReceived{Envelope: Envelope{WorkflowID: wfA, RunID: runA, Seq: 99, RecordedAt: given}, SignalName: "s"},
	}
	if err := m.Append(ctx, RecorderToken(), wfA, first, 0); err != nil {
		t.Fatalf("first Append: %v", err)
	}
	clock.Advance(time.Minute)
	if err := m.Append(ctx, RecorderToken(), wfA, []Event{signal(runA, "x")}, 2); err != nil {
		t.Fatalf("second Append: %v", err)
	}
	h := mustHistory(t, m, wfA)
	wantEnv := []Envelope{
		{WorkflowID: wfA, RunID: runA, Seq: 1, RecordedAt: t0},
		{WorkflowID: wfA, RunID: runA, Seq: 2, RecordedAt: given},
		{WorkflowID: wfA, RunID: runA, Seq: 3, RecordedAt: t0.Add(time.Minute)},
	}
	if len(h) != len(wantEnv) {
		t.Fatalf("history has %d events, want %d", len(h), len(wantEnv))
	}
	for i, ev := range h {
		if got := ev.EventEnvelope(); got != wantEnv[i] {
			t.Errorf("event %d envelope = %+v, want %+v", i, got, wantEnv[i])
		}
	}
	if s, ok := h[1].(SignalReceived); !ok || s.SignalName != "s" {
		t.Errorf("event 2 = %#v, want the SignalReceived named s", h[1])
	}
}

func TestMemoryAppendRefusalsWriteNothing(t *testing.T) {
	type ptrKind struct{ WorkflowStarted } // embeds a kind: not a kind itself
	foreign := testID(9, 9)
	testCases := []struct {
		name        string
		token       WriteToken
		wf          WorkflowID
		events      []Event
		expectedSeq uint64
		wantErr     error
	}{
		{name: "zero token", wf: wfA, events: []Event{signal(runA, "x")}, expectedSeq: 1, wantErr: ErrInvalidToken},
		{name: "zero token empty batch", wf: wfA, expectedSeq: 1, wantErr: ErrInvalidToken},
		{name: "zero workflow", token: RecorderToken(), events: []Event{signal(runA, "x")}, expectedSeq: 0, wantErr: ErrInvalidArgument},
		{name: "nil event", token: RecorderToken(), wf: wfA, events: []Event{signal(runA, "x"), nil}, expectedSeq: 1, wantErr: ErrInvalidArgument},
		{name: "pointer event", token: RecorderToken(), wf: wfA, events: []Event{&WorkflowCompleted{Envelope: env(runA)}}, expectedSeq: 1, wantErr: ErrInvalidArgument},
		{name: "embedding type", token: RecorderToken(), wf: wfA, events: []Event{ptrKind{WorkflowStarted{Envelope: env(runA)}}}, expectedSeq: 1, wantErr: ErrInvalidArgument},
		{name: "foreign workflow", token: RecorderToken(), wf: wfA, events: []Event{signal(runA, "x"), SignalReceived{Envelope: Envelope{WorkflowID: foreign, RunID: runA}}}, expectedSeq: 1, wantErr: ErrInvalidArgument},
		{name: "zero run", token: RecorderToken(), wf: wfA, events: []Event{SignalReceived{Envelope: Envelope{WorkflowID: wfA}}}, expectedSeq: 1, wantErr: ErrInvalidArgument},
		{name: "stale expected", token: RecorderToken(), wf: wfA, events: []Event{signal(runA, "x")}, expectedSeq: 0, wantErr: ErrSequenceConflict},
		{name: "future expected", token: RecorderToken(), wf: wfA, events: []Event{signal(runA, "x")}, expectedSeq: 5, wantErr: ErrSequenceConflict},
		{name: "new workflow nonzero expected", token: RecorderToken(), wf: wfB, events: []Event{started(runB, "t")}, expectedSeq: 1, wantErr: ErrSequenceConflict},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestMemory(t)
			mustAppend(t, m, wfA, started(runA, "order"))
			before := snapshot(t, m)
			err := m.Append(t.Context(), tc.token, tc.wf, tc.events, tc.expectedSeq)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Append = %v, want %v", err, tc.wantErr)
			}
			if after := snapshot(t, m); after != before {
				t.Errorf("a refused Append changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestMemoryAppendConflictReportsHead(t *testing.T) {
	m, _ := newTestMemory(t)
	mustAppend(t, m, wfA, started(runA, "t"), signal(runA, "a"), signal(runA, "b"))
	err := m.Append(t.Context(), RecorderToken(), wfA, []Event{signal(runA, "late")}, 1)
	var conflict *SequenceConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("Append = %v, want a *SequenceConflictError", err)
	}
	if conflict.Expected != 1 || conflict.Found != 3 {
		t.Errorf("conflict = %+v, want Expected 1, Found 3", conflict)
	}
	if got := seqsOf(mustHistory(t, m, wfA)); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Errorf("history Seqs = %v, want [1 2 3]", got)
	}
	// Retrying from the reported head succeeds.
	if err := m.Append(t.Context(), RecorderToken(), wfA, []Event{signal(runA, "late")}, conflict.Found); err != nil {
		t.Errorf("retry at Found: %v", err)
	}
}

func TestMemoryAppendEmptyBatch(t *testing.T) {
	m, _ := newTestMemory(t)
	for _, events := range [][]Event{nil, {}} {
		if err := m.Append(t.Context(), RecorderToken(), wfA, events, 7); err != nil {
			t.Errorf("Append(%#v, stale seq) = %v, want nil (no-op)", events, err)
		}
	}
	ids, _ := m.ListWorkflowIDs(t.Context())
	if len(ids) != 0 {
		t.Errorf("an empty append created workflows %v", ids)
	}
}

func TestMemoryAppendKeepsCallerMemory(t *testing.T) {
	m, _ := newTestMemory(t)
	data := []byte("payload")
	ev := WorkflowStarted{Envelope: Envelope{RunID: runA, Seq: 42}, WorkflowType: "t", Input: Payload{Data: data}}
	events := []Event{ev}
	if err := m.Append(t.Context(), RecorderToken(), wfA, events, 0); err != nil {
		t.Fatal(err)
	}
	got, ok := events[0].(WorkflowStarted)
	if !ok || got.Seq != 42 || !got.WorkflowID.IsZero() || !got.RecordedAt.IsZero() {
		t.Errorf("the caller's slice was modified: %#v", events[0])
	}
	data[0] = 'X' // the caller reuses its buffer
	stored := mustHistory(t, m, wfA)[0].(WorkflowStarted)
	if string(stored.Input.Data) != "payload" {
		t.Errorf("stored payload = %q, want %q: the store aliases caller memory", stored.Input.Data, "payload")
	}
}

func TestMemoryReadsReturnCopies(t *testing.T) {
	m, _ := newTestMemory(t)
	mustAppend(t, m, wfA, started(runA, "t"), signal(runA, "s"))
	first := mustHistory(t, m, wfA)
	first[0].(WorkflowStarted).Input.Data[0] = 'X'
	first[1] = signal(runB, "replaced")
	chain, _ := m.ReadRunChain(t.Context(), wfA)
	chain[0].Status = StatusFailed

	again := mustHistory(t, m, wfA)
	if d := again[0].(WorkflowStarted).Input.Data; string(d) != "in" {
		t.Errorf("payload after mutating a returned copy = %q, want %q", d, "in")
	}
	if s := again[1].(SignalReceived); s.SignalName != "s" {
		t.Errorf("event 2 after replacing it in a returned slice = %#v", s)
	}
	if c, _ := m.ReadRunChain(t.Context(), wfA); c[0].Status != StatusRunning {
		t.Errorf("run status after mutating a returned summary = %s, want running", c[0].Status)
	}
}

// allCalls calls every method of Memory once with valid-looking arguments and
// returns each one's error (the infallible ShardOwner methods report nil).
func allCalls(ctx context.Context, m *Memory) map[string]error {
	tok := RecorderToken()
	errs := map[string]error{}
	errs["Append"] = m.Append(ctx, tok, wfA, []Event{started(runA, "t")}, 0)
	_, errs["ReadHistory"] = m.ReadHistory(ctx, wfA)
	_, errs["ReadHistoryFrom"] = m.ReadHistoryFrom(ctx, wfA, 1)
	_, errs["ReadRunChain"] = m.ReadRunChain(ctx, wfA)
	_, errs["ListWorkflowIDs"] = m.ListWorkflowIDs(ctx)
	_, errs["ListActive"] = m.ListActive(ctx)
	_, errs["ListPaused"] = m.ListPaused(ctx)
	_, errs["StreamHeads"] = m.StreamHeads(ctx)
	_, errs["Query"] = m.Query(ctx, WorkflowFilter{})
	errs["ScheduleTimer"] = m.ScheduleTimer(ctx, wfA, "t", t0, 1)
	_, errs["ExpiredTimers"] = m.ExpiredTimers(ctx, t0)
	_, errs["RetireTimer"] = m.RetireTimer(ctx, wfA, "t", t0, 1)
	errs["PutPackage"] = m.PutPackage(ctx, PackageRecord{WorkflowType: "t", ContentHash: "h"})
	errs["PutPackageWithRoutes"] = m.PutPackageWithRoutes(ctx, PackageRecord{WorkflowType: "t", ContentHash: "h2"}, []string{"t"})
	_, errs["ListPackages"] = m.ListPackages(ctx)
	errs["PutPackageRoute"] = m.PutPackageRoute(ctx, "t", "h")
	_, errs["ListPackageRoutes"] = m.ListPackageRoutes(ctx)
	errs["DeletePackage"] = m.DeletePackage(ctx, "t", "h2")
	errs["AppendWithOutbox"] = m.AppendWithOutbox(ctx, tok, wfB, []Event{started(runB, "t")}, 0, []OutboxRow{{RunID: runB}})
	_, errs["ClaimOutboxRows"] = m.ClaimOutboxRows(ctx, 1)
	errs["RearmOutboxPending"] = m.RearmOutboxPending(ctx, []OutboxRow{{DispatchKey: DispatchKey(wfB, runB, 0)}})
	_, errs["CountClaimedOutboxRows"] = m.CountClaimedOutboxRows(ctx)
	errs["SettleOutboxRowCancelled"] = m.SettleOutboxRowCancelled(ctx, DispatchKey(wfB, runB, 0))
	_, errs["SettleWorkflowOutboxRowsCancelled"] = m.SettleWorkflowOutboxRowsCancelled(ctx, wfB)
	m.SetOwnedShards(ctx, []int{0})
	m.ExtendOwnedShards(ctx, []int{1})
	errs["AcquireOwnedShards"] = m.AcquireOwnedShards(ctx, []int{0})
	errs["AcquireOwnedShard"] = m.AcquireOwnedShard(ctx, 1)
	errs["PublishShardOwner"] = m.PublishShardOwner(ctx, 0)
	if m.IsCurrentOwner(ctx, 0) {
		errs["IsCurrentOwner"] = errors.New("reported ownership")
	}
	return errs
}

func TestMemoryEveryMethodSucceedsOnValidInput(t *testing.T) {
	m, _ := newTestMemory(t)
	for name, err := range allCalls(t.Context(), m) {
		if name == "IsCurrentOwner" {
			continue // it did acquire shard 0 above
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !m.IsCurrentOwner(t.Context(), 0) {
		t.Error("IsCurrentOwner(0) = false after AcquireOwnedShards([0])")
	}
}

func TestMemoryContextDone(t *testing.T) {
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Unix(1, 0))
	defer cancel2()
	testCases := []struct {
		name string
		ctx  context.Context
		want error
	}{
		{name: "cancelled", ctx: cancelled, want: context.Canceled},
		{name: "deadline", ctx: expired, want: context.DeadlineExceeded},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			m, _ := newTestMemory(t)
			mustAppend(t, m, testID(7, 3), started(runC, "keep"))
			before := snapshot(t, m)
			for name, err := range allCalls(tc.ctx, m) {
				if name == "IsCurrentOwner" {
					if err != nil {
						t.Errorf("IsCurrentOwner with a done context: %v", err)
					}
					continue
				}
				if !errors.Is(err, tc.want) {
					t.Errorf("%s = %v, want %v", name, err, tc.want)
				}
			}
			if after := snapshot(t, m); after != before {
				t.Errorf("calls with a done context changed the store:\nbefore:\n%s\nafter:\n%s", before, after)
			}
			if m.IsCurrentOwner(t.Context(), 0) {
				t.Error("AcquireOwnedShards with a done context acquired a shard")
			}
			if ids, _ := m.ListWorkflowIDs(t.Context()); len(ids) != 1 {
				t.Errorf("SetOwnedShards with a done context changed the scope: %v", ids)
			}
		})
	}
	t.Run("token checked before context", func(t *testing.T) {
		m, _ := newTestMemory(t)
		if err := m.Append(cancelled, WriteToken{}, wfA, nil, 0); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("Append = %v, want ErrInvalidToken", err)
		}
		if err := m.AppendWithOutbox(cancelled, WriteToken{}, wfA, nil, 0, nil); !errors.Is(err, ErrInvalidToken) {
			t.Errorf("AppendWithOutbox = %v, want ErrInvalidToken", err)
		}
	})
}

func TestMemoryZeroValue(t *testing.T) {
	testCases := []struct {
		name string
		m    *Memory
	}{
		{name: "zero value", m: new(Memory)},
		{name: "nil pointer", m: nil},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			for name, err := range allCalls(t.Context(), tc.m) {
				if name == "IsCurrentOwner" {
					if err != nil {
						t.Errorf("IsCurrentOwner: %v", err)
					}
					continue
				}
				if !errors.Is(err, ErrInvalidArgument) {
					t.Errorf("%s = %v, want ErrInvalidArgument", name, err)
				}
			}
		})
	}
}

// TestMemoryConcurrentSafe runs writers and claimers against one store under
// the race detector.
func TestMemoryConcurrentSafe(t *testing.T) {
	const (
		writers   = 8
		perWriter = 200
	)
	t.Run("one winner per seq", func(t *testing.T) {
		m, _ := newTestMemory(t)
		ctx := t.Context()
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for g := range writers {
			wg.Go(func() {
				for i := range perWriter {
					ev := signal(runA, fmt.Sprintf("%d/%d", g, i))
					for {
						heads, err := m.StreamHeads(ctx)
						if err != nil {
							errs <- err
							return
						}
						var head uint64
						if len(heads) == 1 {
							head = heads[0].Head
						}
						err = m.Append(ctx, RecorderToken(), wfA, []Event{ev}, head)
						if err == nil {
							break
						}
						if !errors.Is(err, ErrSequenceConflict) {
							errs <- err
							return
						}
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("writer: %v", err)
		}
		h := mustHistory(t, m, wfA)
		if len(h) != writers*perWriter {
			t.Fatalf("history has %d events, want %d", len(h), writers*perWriter)
		}
		next := make([]int, writers) // the next event index expected per writer
		for i, ev := range h {
			if seq := ev.EventEnvelope().Seq; seq != uint64(i+1) {
				t.Fatalf("event %d has Seq %d", i, seq)
			}
			var g, n int
			if _, err := fmt.Sscanf(ev.(SignalReceived).SignalName, "%d/%d", &g, &n); err != nil {
				t.Fatal(err)
			}
			if n != next[g] {
				t.Fatalf("Seq %d: writer %d's event %d, want its event %d (lost or duplicated)", i+1, g, n, next[g])
			}
			next[g]++
		}
	})
	t.Run("each row claimed once", func(t *testing.T) {
		m, _ := newTestMemory(t)
		ctx := t.Context()
		const rows = 400
		batch := make([]OutboxRow, rows)
		for i := range batch {
			batch[i] = OutboxRow{RunID: runA, Ordinal: ActivityID(i)}
		}
		if err := m.AppendWithOutbox(ctx, RecorderToken(), wfA, []Event{started(runA, "t")}, 0, batch); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		claimed := make(chan string, rows)
		for range writers {
			wg.Go(func() {
				for {
					got, err := m.ClaimOutboxRows(ctx, 3)
					if err != nil || len(got) == 0 {
						return
					}
					for _, r := range got {
						claimed <- r.DispatchKey
					}
					_, _ = m.ListActive(ctx)
				}
			})
		}
		wg.Wait()
		close(claimed)
		seen := map[string]bool{}
		for k := range claimed {
			if seen[k] {
				t.Fatalf("row %s claimed twice", k)
			}
			seen[k] = true
		}
		if len(seen) != rows {
			t.Errorf("%d rows claimed, want %d", len(seen), rows)
		}
		if n, _ := m.CountClaimedOutboxRows(ctx); n != rows {
			t.Errorf("CountClaimedOutboxRows = %d, want %d", n, rows)
		}
	})
}

func BenchmarkMemoryAppend(b *testing.B) {
	m := NewMemory()
	ctx := b.Context()
	ev := []Event{signal(runA, "s")}
	var head uint64
	for b.Loop() {
		if err := m.Append(ctx, RecorderToken(), wfA, ev, head); err != nil {
			b.Fatal(err)
		}
		head++
	}
}

// BenchmarkMemoryAppendParallel appends to distinct workflows from every
// goroutine: it measures what the single store-wide lock costs.
func BenchmarkMemoryAppendParallel(b *testing.B) {
	m := NewMemory()
	ctx := b.Context()
	ev := []Event{signal(runA, "s")}
	var mu sync.Mutex
	var n byte
	b.RunParallel(func(pb *testing.PB) {
		mu.Lock()
		n++
		wf := testID(n, n)
		mu.Unlock()
		var head uint64
		for pb.Next() {
			if err := m.Append(ctx, RecorderToken(), wf, ev, head); err != nil {
				b.Error(err)
				return
			}
			head++
		}
	})
}

func BenchmarkMemoryReadHistory(b *testing.B) {
	m := NewMemory()
	ctx := b.Context()
	events := make([]Event, 100)
	for i := range events {
		events[i] = signal(runA, "s")
	}
	if err := m.Append(ctx, RecorderToken(), wfA, events, 0); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := m.ReadHistory(ctx, wfA); err != nil {
			b.Fatal(err)
		}
	}
}
