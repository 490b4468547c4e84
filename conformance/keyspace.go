package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// TestKeyspace tests a [keyspace.Store] against every keyspace rule (the
// RuleKS* constants), each a subtest on a fresh store from newStore (called
// on the subtest's *testing.T), bounded by a watchdog ([WithRuleTimeout]).
// Each failure is a *[RuleError] given to t.Error, a seeded rule's naming
// the seed that replays it (-conformance.seed). Run it under -race too.
func TestKeyspace(t *testing.T, newStore func(t *testing.T) keyspace.Store, opts ...Option) {
	t.Helper()
	keyspaceSuite.test(t, newConfig(opts), newStore)
}

// CheckKeyspace is the error-returning core of [TestKeyspace]: nil when
// every rule holds, else one *[RuleError] per broken rule, joined (see
// [RuleErrors]). newStore returns a store and a cleanup (nil for none) run
// when the rule is over, also after a timeout. Only a done ctx stops it.
func CheckKeyspace(ctx context.Context, newStore func() (keyspace.Store, func(), error), opts ...Option) error {
	return keyspaceSuite.check(ctx, newConfig(opts), newStore)
}

// RunDeleter is a keyspace's optional retention capability (keyspace.Memory
// has it): DeleteRun removes every stream of one run, as if never written,
// and returns how many held a record; a zero ID removes nothing. The suite
// checks it ([RuleKSRetention], the model) when a store has the method.
type RunDeleter interface {
	DeleteRun(workflowID eventstore.WorkflowID, runID eventstore.RunID) int
}

var keyspaceSuite = suite[keyspace.Store]{name: SuiteKeyspace, rules: []rule[keyspace.Store]{
	ksScript(RuleKSContiguousSeqs, func(b *ksb) {
		b.head(0)
		b.add(0, 1)
		b.add(0, 1)
		b.add(0, 3)
		b.head(0)
		b.read(0, abs(0), 0)
	}),
	ksScript(RuleKSHead, func(b *ksb) {
		b.head(0)
		b.add(0, 1)
		b.add(0, 3)
		b.add(0, 2)
		b.head(0)
		b.head(1)
	}),
	ksScript(RuleKSBatch, func(b *ksb) {
		b.add(0, 4)
		b.read(0, abs(0), 0)
		b.add(0, 2)
		b.add(9, 4097)
		b.head(0)
		b.read(0, abs(0), 0)
		b.read(9, abs(4090), 0)
	}),
	ksScript(RuleKSConflictFound, func(b *ksb) {
		b.add(0, 3)
		for _, at := range []pos{rel(-2), abs(0), rel(4), plus(1 << 32), plus(1 << 63), abs(math.MaxUint64), abs(1<<32 + 3)} {
			b.appendAt(0, 1, at)
		}
		b.appendAt(1, 1, rel(2)) // an unwritten stream
	}),
	ksScript(RuleKSConflictWritesNone, func(b *ksb) {
		b.add(0, 2)
		for _, at := range []pos{abs(0), rel(-1), rel(3), plus(1 << 32)} {
			b.appendAt(0, 4, at)
			b.read(0, abs(0), 0)
		}
		b.appendAt(1, 4, rel(1))
		b.read(1, abs(0), 0)
	}),
	ksScript(RuleKSMixedStreams, func(b *ksb) {
		b.add(0, 1)
		for _, other := range []int{1, 4, 7, 8} { // other attempt, activity, run, workflow
			for _, where := range []int{-1, 0, 1} {
				b.bad(0, 3, flawMixed, where, other)
			}
		}
		b.read(0, abs(0), 0)
	}),
	ksScript(RuleKSEphemeral, func(b *ksb) {
		b.add(0, 1)
		b.bad(0, 1, flawEphemeral, 0, 0)
		b.bad(0, 3, flawEphemeral, -1, 0)
		b.read(0, abs(0), 0)
	}),
	ksScript(RuleKSEmptyBatch, func(b *ksb) {
		b.add(0, 2)
		for _, at := range []pos{abs(0), rel(0), abs(9), abs(math.MaxUint64)} {
			b.appendAt(0, 0, at)
		}
		b.appendAt(1, 0, abs(7))
		b.read(0, abs(0), 0)
	}),
	ksScript(RuleKSAttemptsDisjoint, func(b *ksb) {
		for i, s := range []int{0, 1, 2, 3, 4, 5, 6} {
			b.add(s, 7-i)
		}
		for s := range 7 {
			b.head(s)
			b.read(s, abs(0), 0)
		}
	}),
	ksScript(RuleKSRunAxis, func(b *ksb) {
		b.add(0, 1)
		b.add(7, 1)
		b.read(7, abs(0), 0)
		b.read(0, abs(0), 0)
		b.head(0)
		b.head(7)
	}),
	ksScript(RuleKSListOrder, func(b *ksb) {
		for _, s := range []int{9, 10, 13, 11, 12, 6, 5, 4} {
			b.add(s, 1+s%3)
		}
		b.list(9)
	}),
	ksScript(RuleKSListRunScoping, func(b *ksb) {
		b.add(0, 2)
		b.add(1, 1)
		b.add(7, 3)
		b.add(8, 4)
		b.list(0)
		b.list(7)
		b.list(8)
	}),
	ksScript(RuleKSEmptyListings, func(b *ksb) {
		b.add(0, 1)
		b.list(14) // a run of another workflow never written
		b.list(15) // an unwritten run of a written workflow
	}),
	ksScript(RuleKSReadFromResume, func(b *ksb) {
		b.add(0, 5)
		for _, r := range []struct {
			from  pos
			limit int
		}{{abs(0), 0}, {abs(0), -1}, {abs(3), 0}, {abs(1), 2}, {abs(4), 10}, {abs(0), 1}, {abs(5), 0}, {abs(6), 0}, {abs(5), 3},
			{abs(1<<32 + 1), 0}, {abs(1 << 63), 0}, {abs(math.MaxUint64), 0}, {abs(0), math.MinInt}, {abs(0), 1<<32 + 1}, {abs(1), math.MaxInt}} {
			b.read(0, r.from, r.limit)
		}
		b.read(1, abs(0), 0)
	}),
	ksScript(RuleKSRecordsAreCopies, func(b *ksb) {
		b.add(0, 3)
		b.read(0, abs(0), 0)
		b.read(0, abs(1), 1)
		b.list(0)
		b.read(0, abs(0), 0)
	}),
	seeded(RuleKSConcurrentAppends, ksConcurrentAppends),
	seeded(RuleKSConcurrentBatches, func(ctx context.Context, env *ruleEnv[keyspace.Store], s keyspace.Store) error {
		return ksContest(ctx, env, s, 5)
	}),
	seeded(RuleKSConcurrentStreams, ksConcurrentStreams),
	ksScript(RuleKSContextCancelled, func(b *ksb) {
		b.add(0, 1)
		for _, m := range []ctxMode{ctxCancelled, ctxExpired} {
			b.mode = m
			b.add(0, 2)
			b.mode = m
			b.head(0)
			b.mode = m
			b.read(0, abs(0), 0)
			b.mode = m
			b.list(0)
		}
		for trip := range 6 {
			b.mode, b.trip = ctxTrip, trip
			b.add(0, 3)
			b.mode, b.trip = ctxTrip, trip
			b.read(0, abs(0), 0)
		}
		b.read(0, abs(0), 0)
	}),
	ksScript(RuleKSZeroIDs, func(b *ksb) {
		b.add(0, 1)
		for _, f := range []ksFlaw{flawZeroWF, flawZeroRun} {
			b.bad(0, 2, f, -2, 0)
			b.bad(1, 2, f, -2, 0)
			b.zero(0, f)
		}
		b.read(0, abs(0), 0)
	}),
	ksScript(RuleKSAppendEvent, func(b *ksb) {
		b.one(0, rel(0))
		b.one(0, rel(0))
		b.one(0, abs(0))
		b.read(0, abs(0), 0)
	}),
	ksScript(RuleKSValidation, func(b *ksb) {
		for s, f := range []ksFlaw{flawNilContent, flawForeign, flawEphemeral, flawZeroWF, flawZeroRun, flawMixed} {
			b.add(s, 2)
			for _, where := range []int{0, -1} {
				b.bad(s, 3, f, where, 8)
				b.bad(16+s, 3, f, where, 8) // an unwritten stream
			}
			b.read(s, abs(0), 0)
		}
		b.add(0, 3) // pointer and nil contents are valid
		b.read(0, abs(0), 0)
	}),
	ksScript(RuleKSRetention, func(b *ksb) {
		b.add(0, 2)
		b.add(1, 1)
		b.add(7, 3)
		b.add(8, 1)
		b.deleteRun(0)
		for _, s := range []int{0, 1, 7, 8} {
			b.head(s)
			b.read(s, abs(0), 0)
		}
		b.list(0)
		b.list(7)
		b.add(0, 1)
		b.deleteRun(14) // never written
		b.read(0, abs(0), 0)
	}),
	ksScript(RuleKSRetriedBatch, func(b *ksb) {
		b.add(0, 1)
		b.retry(0)
		b.add(0, 3)
		b.retry(0)
		b.retry(1)
		b.appendAt(0, 2, rel(-1)) // refused batches too, stale and ahead
		b.retry(0)
		b.appendAt(0, 2, rel(2))
		b.retry(0)
		b.retry(1)
		b.add(7, 2) // another stream: the retries of stream 0 stay stale
		b.retry(3)
		b.one(1, rel(0))
		b.retry(0)
		b.retry(3)
		b.read(0, abs(0), 0)
		b.read(1, abs(0), 0)
	}),
	fixed(RuleKSSizes, ksSizes),
	// The model rule, the longest, runs last.
	seeded(RuleKSModel, ksModelRule),
}}

// pos is a stream position resolved when a step runs: the head plus rel
// (at least 0), or abs.
type pos struct {
	rel   int64
	abs   uint64 // the position, or with plus what is added to the head
	isAbs bool
	plus  bool
}

func rel(d int64) pos   { return pos{rel: d} }
func plus(u uint64) pos { return pos{abs: u, plus: true} }
func abs(v uint64) pos  { return pos{abs: v, isAbs: true} }

func (p pos) at(head uint64) uint64 {
	switch {
	case p.isAbs:
		return p.abs
	case p.plus:
		return head + p.abs
	case p.rel < 0 && uint64(-p.rel) > head:
		return 0
	}
	return head + uint64(p.rel)
}

func (p pos) String() string {
	switch {
	case p.isAbs:
		return fmt.Sprint(p.abs)
	case p.plus:
		return fmt.Sprintf("head+%d", p.abs)
	case p.rel == 0:
		return "head"
	}
	return fmt.Sprintf("head%+d", p.rel)
}

// ksFlaw is what makes a generated batch one every store refuses.
type ksFlaw int

const (
	flawNone ksFlaw = iota
	flawMixed
	flawEphemeral
	flawZeroWF
	flawZeroRun
	flawNilContent
	flawForeign
)

var flawNames = []string{"", "mixed", "ephemeral", "zero workflow ID", "zero run ID", "nil content pointer", "foreign content kind"}

// foreignContent is a Content kind that is not one of the five.
type foreignContent struct{ Text string }

func (foreignContent) ContentKind() string { return "message" }

// contentKinds are the content kinds a generated event carries, each
// filled field by field.
var contentKinds = []reflect.Type{
	reflect.TypeFor[keyspace.Message](), reflect.TypeFor[keyspace.ToolCall](), reflect.TypeFor[keyspace.ToolResult](),
	reflect.TypeFor[keyspace.Status](), reflect.TypeFor[keyspace.Usage](),
}

// ksModel is the reference model of a keyspace, written from the contract
// of keyspace.Store: a stream is the list of the events appended to it,
// its head their number; a run lists its non-empty streams by (activity,
// attempt) as unsigned numbers.
type ksModel struct {
	ctx  context.Context
	s    keyspace.Store
	g    *gen
	keys []keyspace.StreamKey
	recs map[keyspace.StreamKey][]keyspace.Record
	done []ksDone // the last batches accepted or conflicting, oldest first, for retries
}

// ksDone is an accepted or conflicting batch, as the caller gave it.
type ksDone struct {
	key      keyspace.StreamKey
	expected uint64
	batch    []keyspace.ActivityEvent
}

// retriesKept is how many batches a model keeps to retry.
const retriesKept = 4

// ksKeys is the stream table of a model run: fixed streams the scripts
// name, then n more, most in run A1. Streams 0-6 share a run and differ
// only in attempt (0, 1<<16, the largest) or activity (past 2^32, 2^63,
// the largest), 7 is another run of the workflow, 8 the same run ID in
// another workflow; 9-13 order differently as numbers and as text; 14 and
// 15 are runs no script writes; 16-21 are more streams of run A1.
func ksKeys(g *gen, n int) []keyspace.StreamKey {
	a, b := g.workflow(), g.workflow()
	a1, a2 := g.run(), g.run()
	k := func(wf eventstore.WorkflowID, run eventstore.RunID, act uint64, att uint32) keyspace.StreamKey {
		return keyspace.NewStreamKey(wf, run, eventstore.ActivityID(act), att)
	}
	keys := []keyspace.StreamKey{
		k(a, a1, 3, 1), k(a, a1, 3, 0), k(a, a1, 3, 1<<16), k(a, a1, 3, math.MaxUint32),
		k(a, a1, 3+1<<32, 1), k(a, a1, 3+1<<63, 1), k(a, a1, math.MaxUint64, math.MaxUint32),
		k(a, a2, 3, 1), k(b, a1, 3, 1),
		k(a, a1, 10, 0), k(a, a1, 2, 1), k(a, a1, 2, 10), k(a, a1, 2, 9), k(a, a1, 2, 0),
		k(b, g.run(), 0, 0), k(a, g.run(), 0, 0),
	}
	for i := range 6 {
		keys = append(keys, k(a, a1, uint64(20+i), 2))
	}
	seen := map[keyspace.StreamKey]bool{}
	for _, key := range keys {
		seen[key] = true
	}
	for len(keys) < n {
		act := pick(g, g.Uint64N(uint64(4*n)), pick(g, boundaryU64...))
		key := k(a, a1, act, pick[uint32](g, 0, 1, 2, 9, 10, 1<<16, math.MaxUint32))
		switch g.IntN(10) {
		case 0:
			key.RunID = a2
		case 1:
			key.WorkflowID = b
		}
		if !seen[key] {
			seen[key] = true
			keys = append(keys, key)
		}
	}
	return keys
}

// newKSModel returns the start function of a model run: the stream table
// is drawn from idSeed, the same in every replay, with a fresh salt.
func newKSModel(ctx context.Context, idSeed uint64, n int) func(keyspace.Store) (*ksModel, error) {
	return func(s keyspace.Store) (*ksModel, error) {
		g := newGen(rand.New(rand.NewPCG(idSeed, 3)))
		*g.bigLeft, g.nanos = 48, true
		return &ksModel{ctx: ctx, s: s, g: g, keys: ksKeys(g, n), recs: map[keyspace.StreamKey][]keyspace.Record{}}, nil
	}
}

func (m *ksModel) head(k keyspace.StreamKey) uint64 { return uint64(len(m.recs[k])) }

// ksAppend is one generated append.
type ksAppend struct {
	stream, n int
	at        pos
	flaw      ksFlaw
	where     int // the flawed event: where mod n
	other     int // the stream of the odd event of a mixed batch
	seed      uint64
	big       bool // three events carry 1 MiB texts
	one       bool // through keyspace.AppendEvent
	mode      ctxMode
	trip      int
}

func (a ksAppend) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "AppendEvents(stream %d, %d events at %v", a.stream, a.n, a.at)
	if a.one {
		fmt.Fprintf(&b, " through keyspace.AppendEvent")
	}
	if a.flaw != flawNone {
		fmt.Fprintf(&b, ", %s at %d", flawNames[a.flaw], a.where)
	}
	if a.flaw == flawMixed {
		fmt.Fprintf(&b, " of stream %d", a.other)
	}
	if a.big {
		b.WriteString(", 1 MiB texts")
	}
	return b.String() + ")"
}

// batch makes the events of an append.
func (m *ksModel) batch(a ksAppend) []keyspace.ActivityEvent {
	g := m.g.sub(a.seed)
	key := m.keys[a.stream]
	if a.flaw == flawMixed && a.n == 1 {
		a.n = 2 // one event alone is in no other stream
	}
	out := make([]keyspace.ActivityEvent, a.n)
	for i := range out {
		ev := filled[keyspace.ActivityEvent](g)
		ev.WorkflowID, ev.RunID, ev.ActivityID, ev.Attempt, ev.Ephemeral = key.WorkflowID, key.RunID, key.ActivityID, key.Attempt, false
		if g.IntN(12) != 0 {
			c := reflect.New(pick(g, contentKinds...))
			g.fill(c.Elem())
			if g.IntN(4) == 0 {
				ev.Content = c.Interface().(keyspace.Content) // a pointer: stored as its value
			} else {
				ev.Content = c.Elem().Interface().(keyspace.Content)
			}
		}
		out[i] = ev
	}
	if a.big && a.n > 0 {
		big := strings.Repeat("\x00ü\xff", bigText/4)
		for j, c := range []keyspace.Content{keyspace.Message{Role: "assistant", Text: big}, keyspace.ToolResult{CallID: "big", Output: big}, keyspace.ToolCall{Name: "big", Arguments: big}} {
			out[(a.n/2+j)%a.n].Content = c
		}
	}
	if a.flaw == flawNone || a.n == 0 {
		return out
	}
	ev := &out[(a.where%a.n+a.n)%a.n]
	switch a.flaw {
	case flawMixed:
		k := m.keys[a.other]
		ev.WorkflowID, ev.RunID, ev.ActivityID, ev.Attempt = k.WorkflowID, k.RunID, k.ActivityID, k.Attempt
	case flawEphemeral:
		ev.Ephemeral = true
	case flawZeroWF, flawZeroRun:
		for i := range out {
			if a.flaw == flawZeroWF {
				out[i].WorkflowID = eventstore.WorkflowID{}
			} else {
				out[i].RunID = eventstore.RunID{}
			}
		}
	case flawNilContent:
		ev.Content = reflect.Zero(reflect.PointerTo(pick(g, contentKinds...))).Interface().(keyspace.Content)
	case flawForeign:
		ev.Content = foreignContent{"x"}
	}
	return out
}

// stored is what a store keeps of an accepted event at seq.
func stored(ev keyspace.ActivityEvent, seq uint64) keyspace.Record {
	if v := reflect.ValueOf(ev.Content); v.Kind() == reflect.Pointer {
		ev.Content = v.Elem().Interface().(keyspace.Content)
	}
	ev.StoreSeq, ev.Persisted = seq, true
	return keyspace.Record{StoreSeq: seq, Event: ev}
}

// errClass is the sentinel a refusal of want's kind must match.
func errClass(want error) error {
	for _, e := range []error{keyspace.ErrMixedStreams, keyspace.ErrEphemeral, context.Canceled, context.DeadlineExceeded} {
		if errors.Is(want, e) {
			return e
		}
	}
	return eventstore.ErrInvalidArgument
}

func (m *ksModel) append(a ksAppend) error {
	tick(m.ctx)
	key := m.keys[a.stream]
	head := m.head(key)
	expected := a.at.at(head)
	batch := m.batch(a)
	given := deepCopy(batch)
	ctx, cancel := ctxFor(m.ctx, a.mode, a.trip)
	defer cancel()
	var got uint64
	var err error
	if a.one && len(batch) > 0 {
		got, err = keyspace.AppendEvent(ctx, m.s, expected, batch[0])
	} else {
		got, err = m.s.AppendEvents(ctx, expected, batch)
	}
	if d := diff(ends(batch), ends(given)); d != "" {
		return fmt.Errorf("the call changed the caller's events: %s", d)
	}
	scribble(batch) // the caller may reuse its memory now
	var want error
	switch {
	case a.mode == ctxCancelled:
		want = context.Canceled
	case a.mode == ctxExpired:
		want = context.DeadlineExceeded
	case len(given) == 0:
		if err != nil || got != expected {
			return fmt.Errorf("returned (%d, %v), want (%d, nil): an empty batch is a no-op", got, err, expected)
		}
		return m.unchanged(key)
	case a.flaw != flawNone:
		want = keyspace.ValidateBatch(given)
	case expected != head:
		if err := wantConflict(err, expected, head, "the append"); err != nil {
			return err
		}
		m.keep(key, expected, given)
		return m.unchanged(key)
	}
	if want != nil {
		if err == nil || !errors.Is(err, errClass(want)) {
			return fmt.Errorf("returned %v, want an error matching %v", err, errClass(want))
		}
		if got != 0 {
			return fmt.Errorf("returned head %d with its error, want 0", got)
		}
		return m.unchanged(key, m.keys[a.other])
	}
	wantHead := head + uint64(len(given))
	if a.one {
		wantHead = head
	}
	if err == nil && got != wantHead {
		return fmt.Errorf("returned %d, want %d", got, wantHead)
	}
	if err := settleCancelled(err, a.mode, head, uint64(len(given)), func() (uint64, error) {
		h, err := m.s.Head(m.ctx, key)
		return h - head, err
	}, func() error {
		_, err := m.s.AppendEvents(m.ctx, expected, deepCopy(given))
		return err
	}); err != nil {
		return err
	}
	for i, ev := range given {
		m.recs[key] = append(m.recs[key], stored(ev, head+uint64(i)))
	}
	if !a.big {
		m.keep(key, expected, given)
	}
	if a.big {
		return m.read(ksRead{stream: a.stream, from: abs(head)})
	}
	return nil
}

// settleCancelled judges a write at head of n records that returned err
// under mode: only a context cancelled during the call may fail it, and
// then all of it landed, or none, or it may still land (a durable store
// cannot always know). read says how many records lie past head; the same
// write again settles it: it lands now, or conflicts at the head after the
// first.
func settleCancelled(err error, mode ctxMode, head, n uint64, read func() (uint64, error), again func() error) error {
	if err == nil {
		return nil
	}
	if mode != ctxTrip || !errors.Is(err, context.Canceled) {
		return fmt.Errorf("at the head %d: %w", head, err)
	}
	landed, rerr := read()
	if rerr != nil || (landed != 0 && landed != n) {
		return fmt.Errorf("cancelled during the call (%v), it left %d of its %d records (%v): all or nothing", err, landed, n, rerr)
	}
	if landed > 0 {
		return nil
	}
	if err := again(); err != nil && wantConflict(err, head, head+n, "") != nil {
		return fmt.Errorf("the write cancelled during the call, made again: %w", err)
	}
	return nil
}

// keep keeps a short batch accepted or refused with a conflict at
// expected, for retries.
func (m *ksModel) keep(key keyspace.StreamKey, expected uint64, batch []keyspace.ActivityEvent) {
	if len(batch) <= 64 {
		m.done = append(m.done[max(0, len(m.done)-retriesKept+1):], ksDone{key, expected, batch})
	}
}

// retry makes a kept batch (back before the last) again, identical, at
// its expectedSeq: the stream is not there, so it is a conflict whose Found
// is the head, and writes nothing. Neither an accepted batch (deduplicated
// by content) nor a refused one sent twice is taken.
func (m *ksModel) retry(back int) error {
	if back >= len(m.done) {
		return nil
	}
	d := m.done[len(m.done)-1-back]
	if m.head(d.key) == d.expected {
		return nil // the stream reached that seq since: not stale any more
	}
	_, err := m.s.AppendEvents(m.ctx, d.expected, deepCopy(d.batch))
	if err := wantConflict(err, d.expected, m.head(d.key), fmt.Sprintf("the identical retry of a batch of %d", len(d.batch))); err != nil {
		return err
	}
	return m.unchanged(d.key)
}

// unchanged checks that the streams' heads, and the listings of their
// runs when short, are what the model holds.
func (m *ksModel) unchanged(keys ...keyspace.StreamKey) error {
	for _, k := range keys {
		if err := m.headOf(k, ctxLive, 0); err != nil {
			return fmt.Errorf("after the refusal: %w", err)
		}
		if len(m.streamsOf(k)) > 64 {
			continue
		}
		if err := m.list(ksRead{key: &k, once: true}); err != nil {
			return fmt.Errorf("after the refusal: %w", err)
		}
	}
	return nil
}

// ends returns the first and last 256 elements of a long slice, all of a
// short one: where the caller's arguments are compared after a call.
func ends[T any](s []T) []T {
	if len(s) <= 512 {
		return s
	}
	return append(s[:256:256], s[len(s)-256:]...)
}

func (m *ksModel) headOf(k keyspace.StreamKey, mode ctxMode, trip int) error {
	ctx, cancel := ctxFor(m.ctx, mode, trip)
	defer cancel()
	got, err := m.s.Head(ctx, k)
	return checkAnswer(mode, err, func() string {
		if got != m.head(k) {
			return fmt.Sprintf("Head(%v) = %d, want %d", k, got, m.head(k))
		}
		return ""
	})
}

// checkAnswer judges a read's answer under mode: a done context must give
// its error; a live one an answer that same reports no difference in; a
// context cancelled during the call either.
func checkAnswer(mode ctxMode, err error, same func() string) error {
	switch {
	case mode == ctxCancelled || mode == ctxExpired:
		if want := doneErr(mode); !errors.Is(err, want) {
			return fmt.Errorf("returned %v with a done context, want an error matching %v", err, want)
		}
		return nil
	case err != nil && mode == ctxTrip && errors.Is(err, context.Canceled):
		return nil
	case err != nil:
		return err
	}
	if d := same(); d != "" {
		return errors.New(d)
	}
	return nil
}

// ksRead is one generated read: ReadFrom, Head or ListStreams of a stream
// (or its run).
type ksRead struct {
	stream int
	key    *keyspace.StreamKey // overrides stream
	from   pos
	limit  int
	mode   ctxMode
	trip   int
	once   bool // no second read after scribbling
}

func (m *ksModel) read(r ksRead) error {
	key := m.keys[r.stream]
	all := m.recs[key]
	from := r.from.at(uint64(len(all)))
	var want []keyspace.Record
	if from < uint64(len(all)) {
		want = all[from:]
		if r.limit > 0 && r.limit < len(want) {
			want = want[:r.limit]
		}
	}
	return twice(m.ctx, r.mode, r.trip, r.once, func(ctx context.Context) ([]keyspace.Record, error) {
		return m.s.ReadFrom(ctx, key, from, r.limit)
	}, func(got []keyspace.Record) string {
		if d := diff(got, want); d != "" {
			return fmt.Sprintf("ReadFrom(stream of head %d, fromSeq %d, limit %d): %s", len(all), from, r.limit, d)
		}
		return ""
	})
}

// streamsOf returns the model's listing of key's run: its written
// streams, by (activity, attempt), with their heads.
func (m *ksModel) streamsOf(key keyspace.StreamKey) []keyspace.StreamSummary {
	var out []keyspace.StreamSummary
	for k, recs := range m.recs {
		if k.WorkflowID == key.WorkflowID && k.RunID == key.RunID && len(recs) > 0 {
			out = append(out, keyspace.StreamSummary{Key: k, Head: uint64(len(recs))})
		}
	}
	slices.SortFunc(out, func(a, b keyspace.StreamSummary) int { return cmpKey(a.Key, b.Key) })
	return out
}

func (m *ksModel) list(r ksRead) error {
	key := m.keys[r.stream]
	if r.key != nil {
		key = *r.key
	}
	want := m.streamsOf(key)
	return twice(m.ctx, r.mode, r.trip, r.once, func(ctx context.Context) ([]keyspace.StreamSummary, error) {
		return m.s.ListStreams(ctx, key.WorkflowID, key.RunID)
	}, func(got []keyspace.StreamSummary) string {
		if d := diff(got, want); d != "" {
			return fmt.Sprintf("ListStreams of a run with %d streams: %s", len(want), d)
		}
		return ""
	})
}

// zero calls Head, ReadFrom and ListStreams with the stream's key with a
// zero workflow or run ID: each must refuse it with ErrInvalidArgument.
func (m *ksModel) zero(stream int, f ksFlaw) error {
	k := m.keys[stream]
	if f == flawZeroWF {
		k.WorkflowID = eventstore.WorkflowID{}
	} else {
		k.RunID = eventstore.RunID{}
	}
	_, e1 := m.s.Head(m.ctx, k)
	_, e2 := m.s.ReadFrom(m.ctx, k, 0, 0)
	_, e3 := m.s.ListStreams(m.ctx, k.WorkflowID, k.RunID)
	for i, err := range []error{e1, e2, e3} {
		if !errors.Is(err, eventstore.ErrInvalidArgument) {
			return fmt.Errorf("%s with a %s returned %v, want an error matching eventstore.ErrInvalidArgument", []string{"Head", "ReadFrom", "ListStreams"}[i], flawNames[f], err)
		}
	}
	return nil
}

func (m *ksModel) deleteRun(stream int) error {
	d, ok := m.s.(RunDeleter)
	if !ok {
		return skipf(0, "%T has no DeleteRun method (retention is optional)", m.s)
	}
	key := m.keys[stream]
	var gone []keyspace.StreamKey
	for _, sum := range m.streamsOf(key) {
		gone = append(gone, sum.Key)
	}
	if n := d.DeleteRun(key.WorkflowID, key.RunID); n != len(gone) {
		return fmt.Errorf("DeleteRun returned %d, want the run's %d streams", n, len(gone))
	}
	if n := d.DeleteRun(eventstore.WorkflowID{}, key.RunID) + d.DeleteRun(key.WorkflowID, eventstore.RunID{}); n != 0 {
		return fmt.Errorf("DeleteRun with a zero ID returned %d, want 0", n)
	}
	for _, k := range gone {
		delete(m.recs, k)
	}
	return m.unchanged(append(gone, key)...)
}

// ksb builds the steps of a keyspace rule; mode and trip apply to the next
// step only.
type ksb struct {
	builder[*ksModel]
	once bool // reads are made once: the final sweep of the model rule
}

func (b *ksb) appendOp(a ksAppend) {
	a.seed, a.mode, a.trip = b.rng.Uint64(), b.mode, b.trip
	b.push(a.String(), func(m *ksModel) error { return m.append(a) })
}

func (b *ksb) add(stream, n int)              { b.appendOp(ksAppend{stream: stream, n: n}) }
func (b *ksb) appendAt(stream, n int, at pos) { b.appendOp(ksAppend{stream: stream, n: n, at: at}) }
func (b *ksb) one(stream int, at pos)         { b.appendOp(ksAppend{stream: stream, n: 1, at: at, one: true}) }
func (b *ksb) bad(stream, n int, f ksFlaw, where, other int) {
	b.appendOp(ksAppend{stream: stream, n: n, flaw: f, where: where, other: other})
}

func (b *ksb) read(stream int, from pos, limit int) {
	r := ksRead{stream: stream, from: from, limit: limit, mode: b.mode, trip: b.trip, once: b.once}
	b.push(fmt.Sprintf("ReadFrom(stream %d, from %v, limit %d)", stream, from, limit), func(m *ksModel) error { return m.read(r) })
}

func (b *ksb) head(stream int) {
	mode, trip := b.mode, b.trip
	b.push(fmt.Sprintf("Head(stream %d)", stream), func(m *ksModel) error { return m.headOf(m.keys[stream], mode, trip) })
}

func (b *ksb) list(stream int) {
	r := ksRead{stream: stream, mode: b.mode, trip: b.trip}
	b.push(fmt.Sprintf("ListStreams(run of stream %d)", stream), func(m *ksModel) error { return m.list(r) })
}

func (b *ksb) zero(stream int, f ksFlaw) {
	b.push(fmt.Sprintf("Head, ReadFrom, ListStreams(stream %d with a %s)", stream, flawNames[f]), func(m *ksModel) error { return m.zero(stream, f) })
}

func (b *ksb) retry(back int) {
	b.push(fmt.Sprintf("AppendEvents(the batch made %d before the last, again at its expectedSeq)", back), func(m *ksModel) error { return m.retry(back) })
}

func (b *ksb) deleteRun(stream int) {
	b.push(fmt.Sprintf("DeleteRun(run of stream %d)", stream), func(m *ksModel) error { return m.deleteRun(stream) })
}

// ksSizes: a stream of exactly 2,000 records read whole, in pages of
// exactly 1,000 and from where exactly 256, 512, 1,000 and 1,024 remain,
// and next to each; a run listed at exactly 512, 1,000, 1,024, 2,048 and
// 4,096 streams and one more.
func ksSizes(ctx context.Context, s keyspace.Store) error {
	b := &ksb{builder: builder[*ksModel]{rng: newRand(1, RuleKSSizes)}}
	b.add(0, 1000)
	b.add(0, 1000)
	for _, r := range []struct {
		from  uint64
		limit int
	}{{0, 0}, {0, 1000}, {1000, 1000}, {1000, 0}, {999, 0}, {1001, 0}, {0, 2000}, {0, 1999}, {0, 2001}, {1024, 0}, {976, 1024}, {1999, 0}, {2000, 0}, {1488, 0}, {1744, 0}} {
		b.read(0, abs(r.from), r.limit)
	}
	b.push("streams of one run, up to 4,097", func(m *ksModel) error {
		run := m.keys[0]
		n := len(m.streamsOf(run))
		for i, k := range m.keys {
			if k.WorkflowID != run.WorkflowID || k.RunID != run.RunID || len(m.recs[k]) > 0 {
				continue
			}
			if err := m.append(ksAppend{stream: i, n: 1, seed: uint64(i)}); err != nil {
				return err
			}
			if n++; slices.Contains([]int{512, 513, 1000, 1001, 1024, 1025, 2048, 2049, 4096, 4097}, n) {
				if err := m.list(ksRead{stream: 0}); err != nil {
					return fmt.Errorf("at %d streams: %w", n, err)
				}
			}
			if n == 4097 {
				return nil
			}
		}
		return fmt.Errorf("the stream table has %d streams of one run, want 4,097", n)
	})
	_, err := runSteps(ctx, s, newKSModel(ctx, 1, 5400), b.steps)
	return err
}

// ksScript makes a fixed rule of a script: the same steps whatever the
// seed, run against the model.
func ksScript(name string, script func(b *ksb)) rule[keyspace.Store] {
	b := &ksb{builder: builder[*ksModel]{rng: newRand(1, name)}}
	script(b)
	return scripted(name, b.steps, func(ctx context.Context) func(keyspace.Store) (*ksModel, error) { return newKSModel(ctx, 1, 24) })
}

// The sizes of the keyspace model rule at scale 1: a stream past 65,536
// records written in batches up to 5,000 (one past 4,096), 400 streams
// (more than 256 in one run), a text of 1 MiB.
const (
	ksLongStream = 66_000
	ksStreams    = 400
	ksRandomOps  = 1000
	bigText      = 1 << 20
)

// ksModelRule: a seeded sequence of appends good and bad, reads at every
// boundary and listings, each result compared with the model.
func ksModelRule(ctx context.Context, env *ruleEnv[keyspace.Store], s keyspace.Store) error {
	rng := newRand(env.cfg.seed, RuleKSModel)
	scale := env.cfg.scale
	b := &ksb{builder: builder[*ksModel]{rng: rng}}
	n := ksStreams * scale
	_, deletes := s.(RunDeleter)
	long, ops := ksLongStream*scale, ksRandomOps*scale
	if raceDetector {
		long, ops = 4300*scale, ops/2
	}
	// The long stream, in batches of varied size, one past 4,096 and one
	// carrying 1 MiB texts.
	for total, i := 0, 0; total < long; i++ {
		size := min(1+rng.IntN(5000), long-total)
		if i == 2 {
			size = 4097
		}
		b.appendOp(ksAppend{stream: 0, n: size, big: i == 5})
		total += size
	}
	for _, k := range rng.Perm(n) {
		b.add(k, 1+rng.IntN(3))
	}
	for range ops {
		stream := rng.IntN(n)
		if rng.IntN(6) == 0 {
			stream = 0
		}
		switch r := rng.IntN(40); {
		case r < 3:
			b.mode, b.trip = pick(rng, ctxCancelled, ctxExpired, ctxTrip), rng.IntN(5)
			b.add(stream, 1+rng.IntN(5))
		case r < 12:
			b.add(stream, 1+rng.IntN(8))
		case r < 15 && rng.IntN(3) == 0:
			b.retry(rng.IntN(retriesKept))
		case r < 15:
			b.appendAt(stream, 1+rng.IntN(3), pick(rng, rel(-1), rel(1), rel(-1000), plus(1<<32), plus(1<<63), abs(math.MaxUint64), abs(1<<32+1)))
		case r < 19:
			b.bad(stream, 1+rng.IntN(4), ksFlaw(1+rng.IntN(6)), rng.IntN(5)-2, rng.IntN(n))
		case r < 20:
			b.appendAt(stream, 0, rel(int64(rng.IntN(5)-2)))
		case r < 31:
			if rng.IntN(8) == 0 {
				b.mode, b.trip = ctxTrip, rng.IntN(4)
			}
			from := pick(rng, rel(-1), rel(0), rel(1), rel(-int64(rng.IntN(300))), abs(uint64(rng.IntN(6))), abs(1<<32+uint64(rng.IntN(3))), abs(1<<63), abs(math.MaxUint64))
			limit := pick(rng, boundaryInt...)
			if stream == 0 {
				limit = pick(rng, 1, 2, 255, 256, 4097) // the long stream is read whole once, at the end
			}
			b.read(stream, from, limit)
		case r < 34:
			b.head(stream)
		case r < 38:
			b.list(stream)
		default:
			// Retention of a run other than the long stream's.
			if deletes && rng.IntN(4) == 0 {
				b.deleteRun(pick(rng, 7, 8))
			} else {
				b.one(stream, rel(0))
			}
		}
	}
	// The final sweep: every head, every stream whole, every run's listing,
	// the long stream around its boundaries.
	b.once = true
	for k := range n {
		b.head(k)
		if k > 0 {
			b.read(k, abs(0), 0)
		}
	}
	for _, k := range []int{0, 7, 8, 14, 15} {
		b.list(k)
	}
	b.read(0, abs(0), 0)
	for _, limit := range []int{1<<32 + 1, 1<<31 + 1, math.MaxInt, -1} {
		b.read(0, rel(-3), limit)
	}
	for _, from := range []uint64{255, 256, 4095, 4096, 4097, 65535, 65536, 65537} {
		if from < uint64(long) {
			b.read(0, abs(from), 2)
			b.read(0, abs(from-2), 1)
		}
	}
	return runModel(ctx, env, s, newKSModel(ctx, rng.Uint64(), n), b.steps)
}

// wantConflict checks that err is a *eventstore.SequenceConflictError
// naming expected and found.
func wantConflict(err error, expected, found uint64, what string) error {
	var conflict *eventstore.SequenceConflictError
	switch {
	case err == nil:
		return fmt.Errorf("%s at expectedSeq %d succeeded, want a *eventstore.SequenceConflictError (found %d)", what, expected, found)
	case !errors.As(err, &conflict) || !errors.Is(err, eventstore.ErrSequenceConflict):
		return fmt.Errorf("%s at expectedSeq %d: error is not a *eventstore.SequenceConflictError matching ErrSequenceConflict: %w", what, expected, err)
	case conflict.Expected != expected || conflict.Found != found:
		return fmt.Errorf("%s: conflict {Expected: %d, Found: %d}, want {Expected: %d, Found: %d} (Found must be the actual head)", what, conflict.Expected, conflict.Found, expected, found)
	}
	return nil
}
