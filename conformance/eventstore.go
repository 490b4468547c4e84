package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// TestEventStore tests an [eventstore.Store] implementation against the store
// contract: the rules every store must keep, then, when the store has them,
// the [eventstore.Outbox] and [eventstore.ShardOwner] rules. Capabilities are
// discovered by type assertion on each fresh store; a capability rule whose
// capability is absent is reported as a skipped subtest saying so.
//
// Each rule is a subtest named after it, run on a fresh, empty store from
// newStore (called on the subtest's *testing.T), bounded by a watchdog (see
// [WithRuleTimeout]). Failures are reported with t.Error as a *[RuleError].
//
// Typical usage inside a test of the implementation's package:
//
//	func TestConformance(t *testing.T) {
//		conformance.TestEventStore(t, func(t *testing.T) eventstore.Store {
//			return mystore.New(t.TempDir())
//		})
//	}
//
// The rules are the RuleES*, RuleOutbox* and RuleShard* constants; what they
// do not check is in the package documentation. A failure of a seeded rule
// names the seed that replays it (-conformance.seed).
func TestEventStore(t *testing.T, newStore func(t *testing.T) eventstore.Store, opts ...Option) {
	t.Helper()
	cfg := newConfig(opts)
	eventStoreSuite.test(t, cfg, newStore)
	if cfg.nodes != nil {
		nodesSuite.test(t, cfg, cfg.nodes)
	}
}

// CheckEventStore is the error-returning core of [TestEventStore]: it runs
// every event store rule on a fresh store from newStore and returns nil when
// all hold, or the errors.Join of one *[RuleError] per broken rule. newStore
// returns the store and a cleanup (nil for none) that closes it; the cleanup
// runs when the rule is over, also when it timed out. A capability rule whose
// capability the store lacks is not reported here (only TestEventStore
// reports skips) unless [WithRequiredCapabilities] requires the capability,
// which makes it a failure matching [ErrCapabilityMissing]. It never stops
// at the first failure; it stops early only when ctx is done.
func CheckEventStore(ctx context.Context, newStore func() (eventstore.Store, func(), error), opts ...Option) error {
	cfg := newConfig(opts)
	err := eventStoreSuite.check(ctx, cfg, newStore)
	if cfg.nodes == nil {
		return err
	}
	return errors.Join(err, nodesSuite.check(ctx, cfg, func() (Nodes, func(), error) {
		n := cfg.nodes(nil)
		return n, n.Close, nil
	}))
}

var eventStoreSuite = suite[eventstore.Store]{
	name: SuiteEventStore,
	rules: []rule[eventstore.Store]{
		{name: RuleESConflictFound, check: esConflictFound},
		{name: RuleESConflictWritesNone, check: esConflictWritesNothing},
		{name: RuleESSeqStamping, check: esSeqStamping},
		{name: RuleESZeroToken, check: esZeroToken},
		{name: RuleESBadInput, check: esBadInput},
		{name: RuleESEmptyAppend, check: esEmptyAppend},
		{name: RuleESReadHistory, check: esReadHistory},
		{name: RuleESReadHistoryFrom, check: esReadHistoryFrom},
		{name: RuleESRunChain, check: esRunChain},
		{name: RuleESListings, check: esListings},
		{name: RuleESStreamHeads, check: esStreamHeads},
		{name: RuleESQuery, check: esQuery},
		{name: RuleESTimers, check: esTimers},
		{name: RuleESPackages, check: esPackages},
		{name: RuleESContextCancelled, check: esContextCancelled},
		{name: RuleESModel, run: esModelRule},
		{name: RuleESConcurrentAppends, run: esConcurrentAppends},
		{name: RuleESAliasing, check: esAliasing},
		{name: RuleOutboxAtomic, check: withOutbox(outboxAtomic)},
		{name: RuleOutboxClaim, check: withOutbox(outboxClaim)},
		{name: RuleOutboxRearm, check: withOutbox(outboxRearm)},
		{name: RuleOutboxSettle, check: withOutbox(outboxSettle)},
		{name: RuleOutboxTerminalSettles, check: withOutbox(outboxTerminalSettles)},
		{name: RuleOutboxSettleWorkflow, check: withOutbox(outboxSettleWorkflow)},
		{name: RuleShardAcquireOne, check: withShardOwner(shardAcquireOne)},
		{name: RuleShardAcquireMany, check: withShardOwner(shardAcquireMany)},
		{name: RuleShardPublishNotOwner, check: withShardOwner(shardPublishRequiresAcquire)},
		{name: RuleShardNegative, check: withShardOwner(shardNegativeRefused)},
		{name: RuleShardScopeEveryShard, check: withShardOwner(shardNilScope)},
	},
}

// withOutbox adapts an Outbox rule: it is skipped for a store without the
// capability.
func withOutbox(check func(ctx context.Context, s eventstore.Store, o eventstore.Outbox) error) func(context.Context, eventstore.Store) error {
	return func(ctx context.Context, s eventstore.Store) error {
		o, ok := s.(eventstore.Outbox)
		if !ok {
			return skipCap(CapOutbox, fmt.Sprintf("%T does not implement eventstore.Outbox", s))
		}
		return check(ctx, s, o)
	}
}

// withShardOwner adapts a ShardOwner rule: it is skipped for a store without
// the capability.
func withShardOwner(check func(ctx context.Context, s eventstore.Store, so eventstore.ShardOwner) error) func(context.Context, eventstore.Store) error {
	return func(ctx context.Context, s eventstore.Store) error {
		so, ok := s.(eventstore.ShardOwner)
		if !ok {
			return skipCap(CapShardOwner, fmt.Sprintf("%T does not implement eventstore.ShardOwner", s))
		}
		return check(ctx, s, so)
	}
}

var token = eventstore.RecorderToken()

// esRun is one run of a fresh random workflow, with event builders. Payloads
// are never empty and times are whole seconds, so a store that serialises
// them still compares equal.
type esRun struct {
	wf  eventstore.WorkflowID
	run eventstore.RunID
}

func newESRun() esRun { return esRun{eventstore.NewWorkflowID(), eventstore.NewRunID()} }

// next returns the next run of the same workflow.
func (r esRun) next() esRun { return esRun{r.wf, eventstore.NewRunID()} }

func (r esRun) env() eventstore.Envelope {
	return eventstore.Envelope{WorkflowID: r.wf, RunID: r.run}
}

func payload(s string) eventstore.Payload {
	return eventstore.Payload{ContentType: "application/json", Data: []byte(`"` + s + `"`)}
}

func (r esRun) started(workflowType string) eventstore.Event {
	return eventstore.WorkflowStarted{Envelope: r.env(), WorkflowType: workflowType, Input: payload("input"), PackageVersion: "conformance-package"}
}

func (r esRun) signal(name string) eventstore.Event {
	return eventstore.SignalReceived{Envelope: r.env(), SignalName: name, Input: payload(name)}
}

func (r esRun) scheduled(id eventstore.ActivityID) eventstore.Event {
	return eventstore.ActivityScheduled{Envelope: r.env(), ActivityID: id, ActivityType: "conformance-activity", Input: payload("activity"), TaskQueue: "default"}
}

func (r esRun) activityDone(id eventstore.ActivityID) eventstore.Event {
	return eventstore.ActivityCompleted{Envelope: r.env(), ActivityID: id, Result: payload("result"), Attempt: 1}
}

func (r esRun) continuedAs(next esRun) eventstore.Event {
	return eventstore.WorkflowContinuedAsNew{Envelope: r.env(), NewRunID: next.run, Input: payload("carry")}
}

func (r esRun) completed() eventstore.Event {
	return eventstore.WorkflowCompleted{Envelope: r.env(), Result: payload("done")}
}

func (r esRun) row(id eventstore.ActivityID) eventstore.OutboxRow {
	return eventstore.OutboxRow{
		DispatchKey:  eventstore.DispatchKey(r.wf, r.run, id),
		WorkflowID:   r.wf,
		RunID:        r.run,
		Ordinal:      id,
		ActivityType: "conformance-activity",
		Input:        payload("activity"),
		CreatedAt:    time.Unix(1_700_000_000, 0).UTC(),
	}
}

func esAppend(ctx context.Context, s eventstore.Store, wf eventstore.WorkflowID, expectedSeq uint64, events ...eventstore.Event) error {
	if err := s.Append(ctx, token, wf, events, expectedSeq); err != nil {
		return fmt.Errorf("Append(%v, %d events, expectedSeq=%d): %w", wf, len(events), expectedSeq, err)
	}
	return nil
}

// copyEvents deep-copies a batch, payloads included.
func copyEvents(events []eventstore.Event) []eventstore.Event {
	out := make([]eventstore.Event, len(events))
	for i, ev := range events {
		if ev != nil {
			ev = eventstore.WithEnvelope(ev, ev.EventEnvelope())
		}
		out[i] = ev
	}
	return out
}

// sameEvent checks that got is want as stored at seq of workflow wf: the
// kind and kind-specific fields unchanged, the envelope stamped.
func sameEvent(got, want eventstore.Event, wf eventstore.WorkflowID, seq uint64) error {
	if reflect.TypeOf(got) != reflect.TypeOf(want) {
		return fmt.Errorf("event %d is a %T, want a %T", seq, got, want)
	}
	g, w := got.EventEnvelope(), want.EventEnvelope()
	switch {
	case g.Seq != seq:
		return fmt.Errorf("event %d has Seq %d", seq, g.Seq)
	case g.WorkflowID != wf:
		return fmt.Errorf("event %d has WorkflowID %v, want %v", seq, g.WorkflowID, wf)
	case g.RunID != w.RunID:
		return fmt.Errorf("event %d has RunID %v, want %v", seq, g.RunID, w.RunID)
	case w.RecordedAt.IsZero() && g.RecordedAt.IsZero():
		return fmt.Errorf("event %d: a zero RecordedAt was not set at commit", seq)
	case !w.RecordedAt.IsZero() && !g.RecordedAt.Equal(w.RecordedAt):
		return fmt.Errorf("event %d has RecordedAt %v, want the caller's %v", seq, g.RecordedAt, w.RecordedAt)
	}
	var zero eventstore.Envelope
	if gb, wb := eventstore.WithEnvelope(got, zero), eventstore.WithEnvelope(want, zero); !reflect.DeepEqual(gb, wb) {
		return fmt.Errorf("event %d is %+v, want %+v", seq, gb, wb)
	}
	return nil
}

// sameEvents checks a read: want[i] stored at firstSeq+i.
func sameEvents(what string, got []eventstore.Event, wf eventstore.WorkflowID, firstSeq uint64, want []eventstore.Event) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s returned %d events (seqs %v), want %d from seq %d", what, len(got), eventSeqs(got), len(want), firstSeq)
	}
	for i := range got {
		if err := sameEvent(got[i], want[i], wf, firstSeq+uint64(i)); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

func eventSeqs(events []eventstore.Event) []uint64 {
	out := make([]uint64, len(events))
	for i, ev := range events {
		if ev != nil {
			out[i] = ev.EventEnvelope().Seq
		}
	}
	return out
}

func wantHistory(ctx context.Context, s eventstore.Store, wf eventstore.WorkflowID, want ...eventstore.Event) error {
	got, err := s.ReadHistory(ctx, wf)
	if err != nil {
		return fmt.Errorf("ReadHistory(%v): %w", wf, err)
	}
	return sameEvents(fmt.Sprintf("ReadHistory(%v)", wf), got, wf, 1, want)
}

// esSnapshot renders what readers see of the given workflows, to prove that
// a refused call wrote nothing.
func esSnapshot(ctx context.Context, s eventstore.Store, wfs ...eventstore.WorkflowID) (string, error) {
	var b strings.Builder
	heads, err := s.StreamHeads(ctx)
	if err != nil {
		return "", fmt.Errorf("StreamHeads: %w", err)
	}
	ids, err := s.ListWorkflowIDs(ctx)
	if err != nil {
		return "", fmt.Errorf("ListWorkflowIDs: %w", err)
	}
	for _, wf := range wfs {
		hist, err := s.ReadHistory(ctx, wf)
		if err != nil {
			return "", fmt.Errorf("ReadHistory(%v): %w", wf, err)
		}
		fmt.Fprintf(&b, "workflow %v listed %v\n", wf, slices.Contains(ids, wf))
		for _, ev := range hist {
			env := ev.EventEnvelope()
			fmt.Fprintf(&b, "  %d %T run %v\n", env.Seq, ev, env.RunID)
		}
		for _, h := range heads {
			if h.WorkflowID == wf {
				fmt.Fprintf(&b, "  head %d\n", h.Head)
			}
		}
		chain, err := s.ReadRunChain(ctx, wf)
		if err != nil {
			return "", fmt.Errorf("ReadRunChain(%v): %w", wf, err)
		}
		for _, r := range chain {
			fmt.Fprintf(&b, "  run %v %s %d..%d\n", r.RunID, r.Status, r.FirstSeq, r.LastSeq)
		}
	}
	return b.String(), nil
}

func esUnchanged(ctx context.Context, s eventstore.Store, before, what string, wfs ...eventstore.WorkflowID) error {
	after, err := esSnapshot(ctx, s, wfs...)
	if err != nil {
		return err
	}
	if after != before {
		return fmt.Errorf("%s changed the store; before:\n%safter:\n%s", what, before, after)
	}
	return nil
}

func esConflictFound(ctx context.Context, s eventstore.Store) error {
	r := newESRun()
	if err := esAppend(ctx, s, r.wf, 0, r.started("conformance"), r.signal("a")); err != nil {
		return err
	}
	cases := []struct {
		name     string
		wf       eventstore.WorkflowID
		expected uint64
		found    uint64
	}{
		{"new-workflow-again", r.wf, 0, 2},
		{"stale", r.wf, 1, 2},
		{"ahead", r.wf, 5, 2},
		{"unknown-workflow", eventstore.NewWorkflowID(), 3, 0},
	}
	for _, c := range cases {
		err := s.Append(ctx, token, c.wf, []eventstore.Event{esRun{c.wf, r.run}.signal("late")}, c.expected)
		if err := wantConflict(err, c.expected, c.found, fmt.Sprintf("%s: Append(expectedSeq=%d) on history length %d", c.name, c.expected, c.found)); err != nil {
			return err
		}
	}
	return nil
}

func esConflictWritesNothing(ctx context.Context, s eventstore.Store) error {
	r := newESRun()
	fresh := newESRun()
	if err := esAppend(ctx, s, r.wf, 0, r.started("conformance"), r.signal("a")); err != nil {
		return err
	}
	cases := []struct {
		name     string
		run      esRun
		expected uint64
		found    uint64
	}{
		{"stale", r, 0, 2},
		{"behind-by-one", r, 1, 2},
		{"ahead", r, 4, 2},
		{"unknown-workflow", fresh, 1, 0},
	}
	for _, c := range cases {
		before, err := esSnapshot(ctx, s, r.wf, fresh.wf)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("%s: a conflicting 3-event Append(expectedSeq=%d)", c.name, c.expected)
		err = s.Append(ctx, token, c.run.wf, []eventstore.Event{c.run.started("conformance"), c.run.signal("x"), c.run.signal("y")}, c.expected)
		if err := wantConflict(err, c.expected, c.found, what); err != nil {
			return err
		}
		if err := esUnchanged(ctx, s, before, what, r.wf, fresh.wf); err != nil {
			return err
		}
	}
	return nil
}

func esSeqStamping(ctx context.Context, s eventstore.Store) error {
	r := newESRun()
	at := time.Unix(1_700_000_123, 0).UTC()
	first := []eventstore.Event{
		eventstore.WithEnvelope(r.started("conformance"), eventstore.Envelope{WorkflowID: r.wf, RunID: r.run, Seq: 99}),
		// A zero WorkflowID is filled in with the append's workflow.
		eventstore.WithEnvelope(r.signal("a"), eventstore.Envelope{RunID: r.run, Seq: 7, RecordedAt: at}),
		r.signal("b"),
	}
	second := []eventstore.Event{r.scheduled(0), eventstore.WithEnvelope(r.activityDone(0), eventstore.Envelope{WorkflowID: r.wf, RunID: r.run, Seq: 1})}
	firstCopy, secondCopy := copyEvents(first), copyEvents(second)
	if err := esAppend(ctx, s, r.wf, 0, first...); err != nil {
		return err
	}
	if err := esAppend(ctx, s, r.wf, 3, second...); err != nil {
		return err
	}
	if !reflect.DeepEqual(first, firstCopy) || !reflect.DeepEqual(second, secondCopy) {
		return errors.New("Append mutated the caller's events")
	}
	// The expected envelopes: every caller Seq replaced, 1-based, contiguous.
	want := make([]eventstore.Event, 0, 5)
	for _, ev := range append(copyEvents(first), second...) {
		env := ev.EventEnvelope()
		env.Seq = 0
		want = append(want, eventstore.WithEnvelope(ev, env))
	}
	return wantHistory(ctx, s, r.wf, want...)
}

func esZeroToken(ctx context.Context, s eventstore.Store) error {
	r := newESRun()
	fresh := newESRun()
	if err := esAppend(ctx, s, r.wf, 0, r.started("conformance")); err != nil {
		return err
	}
	cases := []struct {
		name     string
		run      esRun
		expected uint64
		events   []eventstore.Event
	}{
		{"existing-workflow", r, 1, []eventstore.Event{r.signal("a")}},
		{"new-workflow", fresh, 0, []eventstore.Event{fresh.started("conformance")}},
		{"empty-batch", r, 1, nil},
	}
	for _, c := range cases {
		before, err := esSnapshot(ctx, s, r.wf, fresh.wf)
		if err != nil {
			return err
		}
		err = s.Append(ctx, eventstore.WriteToken{}, c.run.wf, c.events, c.expected)
		if !errors.Is(err, eventstore.ErrInvalidToken) {
			return fmt.Errorf("%s: Append with the zero WriteToken returned %v, want an error matching eventstore.ErrInvalidToken", c.name, err)
		}
		if err := esUnchanged(ctx, s, before, c.name+": Append with the zero WriteToken", r.wf, fresh.wf); err != nil {
			return err
		}
	}
	return nil
}

// foreignEvent is an Event of a kind outside the eventstore package (it
// borrows the methods of an embedded kind).
type foreignEvent struct{ eventstore.SignalReceived }

func esBadInput(ctx context.Context, s eventstore.Store) error {
	r := newESRun()
	other := newESRun()
	if err := esAppend(ctx, s, r.wf, 0, r.started("conformance")); err != nil {
		return err
	}
	sig := r.signal("ok").(eventstore.SignalReceived)
	zeroRun := sig
	zeroRun.RunID = eventstore.RunID{}
	cases := []struct {
		name   string
		wf     eventstore.WorkflowID
		events []eventstore.Event
	}{
		{"zero-workflow", eventstore.WorkflowID{}, []eventstore.Event{esRun{run: r.run}.signal("x")}},
		{"nil-event", r.wf, []eventstore.Event{sig, nil}},
		{"pointer-event", r.wf, []eventstore.Event{sig, &sig}},
		{"foreign-kind", r.wf, []eventstore.Event{sig, foreignEvent{sig}}},
		{"foreign-workflow-envelope", r.wf, []eventstore.Event{sig, other.signal("stray")}},
		{"zero-run", r.wf, []eventstore.Event{sig, zeroRun}},
	}
	for _, c := range cases {
		before, err := esSnapshot(ctx, s, r.wf, other.wf)
		if err != nil {
			return err
		}
		what := fmt.Sprintf("%s: Append", c.name)
		err = s.Append(ctx, token, c.wf, c.events, 1)
		if !errors.Is(err, eventstore.ErrInvalidArgument) {
			return fmt.Errorf("%s returned %v, want an error matching eventstore.ErrInvalidArgument", what, err)
		}
		if err := esUnchanged(ctx, s, before, what, r.wf, other.wf); err != nil {
			return err
		}
	}
	return nil
}

func esEmptyAppend(ctx context.Context, s eventstore.Store) error {
	r := newESRun()
	fresh := newESRun()
	if err := esAppend(ctx, s, r.wf, 0, r.started("conformance"), r.signal("a")); err != nil {
		return err
	}
	before, err := esSnapshot(ctx, s, r.wf, fresh.wf)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		name     string
		wf       eventstore.WorkflowID
		events   []eventstore.Event
		expected uint64
	}{
		{"nil-at-head", r.wf, nil, 2},
		{"empty-at-stale-seq", r.wf, []eventstore.Event{}, 0},
		{"empty-new-workflow", fresh.wf, []eventstore.Event{}, 0},
	} {
		if err := s.Append(ctx, token, c.wf, c.events, c.expected); err != nil {
			return fmt.Errorf("%s: Append of an empty batch returned %v; an empty batch is a no-op", c.name, err)
		}
	}
	return esUnchanged(ctx, s, before, "an empty Append", r.wf, fresh.wf)
}

// fourEvents appends a four-event history in two appends and returns it.
func fourEvents(ctx context.Context, s eventstore.Store, r esRun) ([]eventstore.Event, error) {
	evs := []eventstore.Event{r.started("conformance"), r.signal("a"), r.scheduled(0), r.activityDone(0)}
	if err := esAppend(ctx, s, r.wf, 0, evs[:2]...); err != nil {
		return nil, err
	}
	if err := esAppend(ctx, s, r.wf, 2, evs[2:]...); err != nil {
		return nil, err
	}
	return evs, nil
}

func esReadHistory(ctx context.Context, s eventstore.Store) error {
	r := newESRun()
	evs, err := fourEvents(ctx, s, r)
	if err != nil {
		return err
	}
	if err := wantHistory(ctx, s, r.wf, evs...); err != nil {
		return err
	}
	if err := wantHistory(ctx, s, eventstore.NewWorkflowID()); err != nil {
		return fmt.Errorf("unknown workflow: %w", err)
	}
	return nil
}

func esReadHistoryFrom(ctx context.Context, s eventstore.Store) error {
	r := newESRun()
	evs, err := fourEvents(ctx, s, r)
	if err != nil {
		return err
	}
	for _, from := range []uint64{0, 1, 2, 3, 4, 5, 100} {
		first := max(from, 1)
		want := evs[min(first-1, 4):]
		got, err := s.ReadHistoryFrom(ctx, r.wf, from)
		if err != nil {
			return fmt.Errorf("ReadHistoryFrom(%d): %w", from, err)
		}
		if err := sameEvents(fmt.Sprintf("ReadHistoryFrom(fromSeq=%d)", from), got, r.wf, first, want); err != nil {
			return err
		}
	}
	got, err := s.ReadHistoryFrom(ctx, eventstore.NewWorkflowID(), 1)
	if err != nil {
		return fmt.Errorf("ReadHistoryFrom(unknown workflow): %w", err)
	}
	if len(got) != 0 {
		return fmt.Errorf("ReadHistoryFrom(unknown workflow) returned %d events, want none", len(got))
	}
	return nil
}

type wantRun struct {
	run      eventstore.RunID
	status   eventstore.WorkflowStatus
	first    uint64
	last     uint64
	isClosed bool
}

func wantChain(ctx context.Context, s eventstore.Store, wf eventstore.WorkflowID, workflowType string, want []wantRun) error {
	chain, err := s.ReadRunChain(ctx, wf)
	if err != nil {
		return fmt.Errorf("ReadRunChain(%v): %w", wf, err)
	}
	if len(chain) != len(want) {
		return fmt.Errorf("ReadRunChain(%v) returned %d runs %+v, want %d", wf, len(chain), chain, len(want))
	}
	for i, w := range want {
		g := chain[i]
		switch {
		case g.RunID != w.run:
			return fmt.Errorf("ReadRunChain: run %d is %v, want %v (oldest first)", i, g.RunID, w.run)
		case g.WorkflowType != workflowType:
			return fmt.Errorf("ReadRunChain: run %d has WorkflowType %q, want %q", i, g.WorkflowType, workflowType)
		case g.Status != w.status:
			return fmt.Errorf("ReadRunChain: run %d has Status %q, want %q", i, g.Status, w.status)
		case g.FirstSeq != w.first || g.LastSeq != w.last:
			return fmt.Errorf("ReadRunChain: run %d spans seqs %d..%d, want %d..%d", i, g.FirstSeq, g.LastSeq, w.first, w.last)
		case g.StartedAt.IsZero():
			return fmt.Errorf("ReadRunChain: run %d has a zero StartedAt", i)
		case w.isClosed && g.ClosedAt.IsZero():
			return fmt.Errorf("ReadRunChain: closed run %d has a zero ClosedAt", i)
		case !w.isClosed && !g.ClosedAt.IsZero():
			return fmt.Errorf("ReadRunChain: open run %d has ClosedAt %v, want zero", i, g.ClosedAt)
		}
	}
	return nil
}

func esRunChain(ctx context.Context, s eventstore.Store) error {
	r1 := newESRun()
	r2, r3 := r1.next(), r1.next()
	const typ = "conformance-chain"
	if err := esAppend(ctx, s, r1.wf, 0, r1.started(typ), r1.continuedAs(r2)); err != nil {
		return err
	}
	if err := esAppend(ctx, s, r1.wf, 2, r2.started(typ), r2.continuedAs(r3), r3.started(typ)); err != nil {
		return err
	}
	if err := esAppend(ctx, s, r1.wf, 5, r3.completed()); err != nil {
		return err
	}
	can := eventstore.StatusContinuedAsNew
	if err := wantChain(ctx, s, r1.wf, typ, []wantRun{
		{r1.run, can, 1, 2, true},
		{r2.run, can, 3, 4, true},
		{r3.run, eventstore.StatusCompleted, 5, 6, true},
	}); err != nil {
		return err
	}
	// A chain whose latest run is still open.
	o1 := newESRun()
	o2 := o1.next()
	if err := esAppend(ctx, s, o1.wf, 0, o1.started(typ), o1.continuedAs(o2), o2.started(typ), o2.signal("s")); err != nil {
		return err
	}
	if err := wantChain(ctx, s, o1.wf, typ, []wantRun{
		{o1.run, can, 1, 2, true},
		{o2.run, eventstore.StatusRunning, 3, 4, false},
	}); err != nil {
		return err
	}
	chain, err := s.ReadRunChain(ctx, eventstore.NewWorkflowID())
	if err != nil {
		return fmt.Errorf("ReadRunChain(unknown workflow): %w", err)
	}
	if len(chain) != 0 {
		return fmt.Errorf("ReadRunChain(unknown workflow) returned %d runs, want none", len(chain))
	}
	return nil
}

// wantListed checks where wf appears in ListWorkflowIDs, ListActive and
// ListPaused.
func wantListed(ctx context.Context, s eventstore.Store, wf eventstore.WorkflowID, name string, active, paused bool) error {
	for _, l := range []struct {
		method string
		list   func(context.Context) ([]eventstore.WorkflowID, error)
		want   bool
	}{
		{"ListWorkflowIDs", s.ListWorkflowIDs, true},
		{"ListActive", s.ListActive, active},
		{"ListPaused", s.ListPaused, paused},
	} {
		ids, err := l.list(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", l.method, err)
		}
		if n := count(ids, wf); n != boolInt(l.want) {
			return fmt.Errorf("%s: %s lists it %d times, want %d", name, l.method, n, boolInt(l.want))
		}
	}
	return nil
}

func count[T comparable](list []T, v T) int {
	n := 0
	for _, x := range list {
		if x == v {
			n++
		}
	}
	return n
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func esListings(ctx context.Context, s eventstore.Store) error {
	// One workflow walked through its lifecycle, checked at every step.
	r := newESRun()
	steps := []struct {
		name           string
		event          eventstore.Event
		active, paused bool
	}{
		{"started", r.started("conformance"), true, false},
		{"paused", eventstore.WorkflowPaused{Envelope: r.env(), Reason: "hold"}, false, true},
		{"resumed", eventstore.WorkflowResumed{Envelope: r.env()}, true, false},
		{"completed", r.completed(), false, false},
		{"reopened", eventstore.WorkflowReopened{Envelope: r.env(), Reason: "again"}, true, false},
		{"paused-again", eventstore.WorkflowPaused{Envelope: r.env(), Reason: "hold"}, false, true},
	}
	for i, st := range steps {
		if err := esAppend(ctx, s, r.wf, uint64(i), st.event); err != nil {
			return err
		}
		if err := wantListed(ctx, s, r.wf, "after "+st.name, st.active, st.paused); err != nil {
			return err
		}
	}
	// Every closing kind leaves the workflow neither active nor paused.
	closers := []struct {
		name  string
		close func(esRun) eventstore.Event
	}{
		{"failed", func(r esRun) eventstore.Event {
			return eventstore.WorkflowFailed{Envelope: r.env(), Message: "boom", Details: payload("d")}
		}},
		{"cancelled", func(r esRun) eventstore.Event { return eventstore.WorkflowCancelled{Envelope: r.env(), Reason: "stop"} }},
		{"timed-out", func(r esRun) eventstore.Event { return eventstore.WorkflowTimedOut{Envelope: r.env()} }},
	}
	for _, c := range closers {
		w := newESRun()
		if err := esAppend(ctx, s, w.wf, 0, w.started("conformance"), c.close(w)); err != nil {
			return err
		}
		if err := wantListed(ctx, s, w.wf, c.name, false, false); err != nil {
			return err
		}
	}
	return nil
}

func esStreamHeads(ctx context.Context, s eventstore.Store) error {
	want := map[eventstore.WorkflowID]uint64{}
	for _, n := range []int{1, 2, 4} {
		r := newESRun()
		evs := []eventstore.Event{r.started("conformance")}
		for i := 1; i < n; i++ {
			evs = append(evs, r.signal(fmt.Sprint(i)))
		}
		if err := esAppend(ctx, s, r.wf, 0, evs...); err != nil {
			return err
		}
		want[r.wf] = uint64(n)
	}
	heads, err := s.StreamHeads(ctx)
	if err != nil {
		return fmt.Errorf("StreamHeads: %w", err)
	}
	got := map[eventstore.WorkflowID]uint64{}
	for _, h := range heads {
		if _, mine := want[h.WorkflowID]; !mine {
			continue
		}
		if _, dup := got[h.WorkflowID]; dup {
			return fmt.Errorf("StreamHeads lists %v twice", h.WorkflowID)
		}
		got[h.WorkflowID] = h.Head
	}
	if !reflect.DeepEqual(got, want) {
		return fmt.Errorf("StreamHeads = %v, want %v (history lengths)", got, want)
	}
	return nil
}

func esQuery(ctx context.Context, s eventstore.Store) error {
	typeA := "conformance-a-" + eventstore.NewRunID().String()
	typeB := "conformance-b-" + eventstore.NewRunID().String()
	a1, a2, b1 := newESRun(), newESRun(), newESRun()
	if err := esAppend(ctx, s, a1.wf, 0, a1.started(typeA), a1.signal("x")); err != nil {
		return err
	}
	if err := esAppend(ctx, s, a2.wf, 0, a2.started(typeA), eventstore.WorkflowPaused{Envelope: a2.env()}); err != nil {
		return err
	}
	if err := esAppend(ctx, s, b1.wf, 0, b1.started(typeB), b1.scheduled(0), b1.completed()); err != nil {
		return err
	}
	type sum struct {
		run    eventstore.RunID
		typ    string
		status eventstore.WorkflowStatus
		head   uint64
		closed bool
	}
	summaries := map[eventstore.WorkflowID]sum{
		a1.wf: {a1.run, typeA, eventstore.StatusRunning, 2, false},
		a2.wf: {a2.run, typeA, eventstore.StatusPaused, 2, false},
		b1.wf: {b1.run, typeB, eventstore.StatusCompleted, 3, true},
	}
	// The time bounds at a workflow's own StartedAt, the boundary where an
	// inclusive StartedBefore or an exclusive StartedAfter shows; the wanted
	// sets come from the StartedAt each run reports.
	startedAt := map[eventstore.WorkflowID]time.Time{}
	for _, r := range []esRun{a1, a2, b1} {
		chain, err := s.ReadRunChain(ctx, r.wf)
		if err != nil {
			return fmt.Errorf("ReadRunChain(%v): %w", r.wf, err)
		}
		if len(chain) != 1 || chain[0].StartedAt.IsZero() {
			return fmt.Errorf("ReadRunChain(%v) = %+v, want one run with a StartedAt", r.wf, chain)
		}
		startedAt[r.wf] = chain[0].StartedAt
	}
	pivot := startedAt[a1.wf]
	typeAWhere := func(keep func(time.Time) bool) []eventstore.WorkflowID {
		var out []eventstore.WorkflowID
		for _, wf := range []eventstore.WorkflowID{a1.wf, a2.wf} {
			if keep(startedAt[wf]) {
				out = append(out, wf)
			}
		}
		return out
	}
	cases := []struct {
		name   string
		filter eventstore.WorkflowFilter
		want   []eventstore.WorkflowID // exactly these among ours
		limit  int                     // when > 0: this many of want
	}{
		{"started-after-inclusive", eventstore.WorkflowFilter{WorkflowType: typeA, StartedAfter: pivot}, typeAWhere(func(t time.Time) bool { return !t.Before(pivot) }), 0},
		{"started-before-exclusive", eventstore.WorkflowFilter{WorkflowType: typeA, StartedBefore: pivot}, typeAWhere(func(t time.Time) bool { return t.Before(pivot) }), 0},
		{"started-window-of-one-instant", eventstore.WorkflowFilter{WorkflowType: typeA, StartedAfter: pivot, StartedBefore: pivot.Add(time.Nanosecond)}, typeAWhere(func(t time.Time) bool { return t.Equal(pivot) }), 0},
		{"type", eventstore.WorkflowFilter{WorkflowType: typeA}, []eventstore.WorkflowID{a1.wf, a2.wf}, 0},
		{"type-and-status", eventstore.WorkflowFilter{WorkflowType: typeA, Status: eventstore.StatusPaused}, []eventstore.WorkflowID{a2.wf}, 0},
		{"closed-status", eventstore.WorkflowFilter{WorkflowType: typeB, Status: eventstore.StatusCompleted}, []eventstore.WorkflowID{b1.wf}, 0},
		{"status-only", eventstore.WorkflowFilter{Status: eventstore.StatusRunning}, []eventstore.WorkflowID{a1.wf}, 0},
		{"no-match", eventstore.WorkflowFilter{WorkflowType: typeB, Status: eventstore.StatusRunning}, nil, 0},
		{"zero-filter", eventstore.WorkflowFilter{}, []eventstore.WorkflowID{a1.wf, a2.wf, b1.wf}, 0},
		{"limit", eventstore.WorkflowFilter{WorkflowType: typeA, Limit: 1}, []eventstore.WorkflowID{a1.wf, a2.wf}, 1},
	}
	for _, c := range cases {
		got, err := s.Query(ctx, c.filter)
		if err != nil {
			return fmt.Errorf("%s: Query(%+v): %w", c.name, c.filter, err)
		}
		var mine []eventstore.WorkflowID
		for _, g := range got {
			w, ok := summaries[g.WorkflowID]
			if !ok {
				continue
			}
			if (sum{g.RunID, g.WorkflowType, g.Status, g.Head, !g.ClosedAt.IsZero()}) != w || g.StartedAt.IsZero() {
				return fmt.Errorf("%s: Query summary %+v, want run %v type %q status %q head %d closed %v and a StartedAt", c.name, g, w.run, w.typ, w.status, w.head, w.closed)
			}
			mine = append(mine, g.WorkflowID)
		}
		if c.limit > 0 {
			if len(got) != c.limit || len(mine) != c.limit || !slices.Contains(c.want, mine[0]) {
				return fmt.Errorf("%s: Query(%+v) returned %d summaries %v, want %d of %v", c.name, c.filter, len(got), mine, c.limit, c.want)
			}
			continue
		}
		if !sameSet(mine, c.want) {
			return fmt.Errorf("%s: Query(%+v) matched %v of this rule's workflows, want %v", c.name, c.filter, mine, c.want)
		}
	}
	return nil
}

func sameSet[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if count(a, x) != count(b, x) {
			return false
		}
	}
	return true
}

func esTimers(ctx context.Context, s eventstore.Store) error {
	r := newESRun()
	if err := esAppend(ctx, s, r.wf, 0, r.started("conformance")); err != nil {
		return err
	}
	const timer = eventstore.TimerID("conformance-timer")
	const early = eventstore.TimerID("conformance-early")
	t0 := time.Unix(1_800_000_000, 0).UTC()
	mine := func(asOf time.Time) ([]eventstore.TimerEntry, error) {
		all, err := s.ExpiredTimers(ctx, asOf)
		if err != nil {
			return nil, fmt.Errorf("ExpiredTimers(%v): %w", asOf, err)
		}
		for i := 1; i < len(all); i++ {
			if all[i].FireAt.Before(all[i-1].FireAt) {
				return nil, fmt.Errorf("ExpiredTimers(%v) is not earliest first: %v before %v", asOf, all[i-1].FireAt, all[i].FireAt)
			}
		}
		var out []eventstore.TimerEntry
		for _, e := range all {
			if e.WorkflowID == r.wf {
				if e.FireAt.After(asOf) {
					return nil, fmt.Errorf("ExpiredTimers(%v) returned a timer firing at %v", asOf, e.FireAt)
				}
				out = append(out, e)
			}
		}
		return out, nil
	}
	wantTimers := func(asOf time.Time, want ...eventstore.TimerEntry) error {
		got, err := mine(asOf)
		if err != nil {
			return err
		}
		ok := len(got) == len(want)
		for i := 0; ok && i < len(got); i++ {
			ok = got[i].TimerID == want[i].TimerID && got[i].FireAt.Equal(want[i].FireAt) && got[i].ArmedSeq == want[i].ArmedSeq
		}
		if !ok {
			return fmt.Errorf("ExpiredTimers(%v) for this workflow = %+v, want %+v", asOf, got, want)
		}
		return nil
	}
	retire := func(id eventstore.TimerID, at time.Time, seq uint64, want eventstore.TimerRetirement) error {
		got, err := s.RetireTimer(ctx, r.wf, id, at, seq)
		if err != nil {
			return fmt.Errorf("RetireTimer(%s, %v, %d): %w", id, at, seq, err)
		}
		if got != want {
			return fmt.Errorf("RetireTimer(%s, %v, armedSeq=%d) = %v, want %v", id, at, seq, got, want)
		}
		return nil
	}
	entry := func(id eventstore.TimerID, at time.Time, seq uint64) eventstore.TimerEntry {
		return eventstore.TimerEntry{WorkflowID: r.wf, TimerID: id, FireAt: at, ArmedSeq: seq}
	}
	if err := s.ScheduleTimer(ctx, eventstore.WorkflowID{}, timer, t0, 1); !errors.Is(err, eventstore.ErrInvalidArgument) {
		return fmt.Errorf("ScheduleTimer of the zero workflow returned %v, want an error matching eventstore.ErrInvalidArgument", err)
	}
	if err := s.ScheduleTimer(ctx, r.wf, timer, t0, 1); err != nil {
		return fmt.Errorf("ScheduleTimer: %w", err)
	}
	if err := wantTimers(t0.Add(-time.Second)); err != nil {
		return fmt.Errorf("before it is due: %w", err)
	}
	// The zero time is a time like any other, the earliest: not "no bound".
	if err := wantTimers(time.Time{}); err != nil {
		return fmt.Errorf("as of the zero time: %w", err)
	}
	if err := wantTimers(t0, entry(timer, t0, 1)); err != nil {
		return fmt.Errorf("due exactly now (FireAt <= asOf): %w", err)
	}
	// Re-arming replaces: one entry, with the new fire time and armed seq.
	t1 := t0.Add(10 * time.Second)
	if err := s.ScheduleTimer(ctx, r.wf, timer, t1, 2); err != nil {
		return fmt.Errorf("ScheduleTimer (re-arm): %w", err)
	}
	if err := s.ScheduleTimer(ctx, r.wf, early, t0.Add(-5*time.Second), 1); err != nil {
		return fmt.Errorf("ScheduleTimer: %w", err)
	}
	later := t0.Add(time.Hour)
	if err := wantTimers(later, entry(early, t0.Add(-5*time.Second), 1), entry(timer, t1, 2)); err != nil {
		return fmt.Errorf("after a re-arm: %w", err)
	}
	// The fence: a retirement naming the old arming removes nothing.
	if err := retire(timer, t0, 1, eventstore.TimerSuperseded); err != nil {
		return err
	}
	if err := retire(timer, t1, 1, eventstore.TimerSuperseded); err != nil {
		return err
	}
	if err := wantTimers(later, entry(early, t0.Add(-5*time.Second), 1), entry(timer, t1, 2)); err != nil {
		return fmt.Errorf("after a superseded retirement: %w", err)
	}
	if err := retire(timer, t1, 2, eventstore.TimerRetired); err != nil {
		return err
	}
	if err := wantTimers(later, entry(early, t0.Add(-5*time.Second), 1)); err != nil {
		return fmt.Errorf("after retiring: %w", err)
	}
	if err := retire(timer, t1, 2, eventstore.TimerAbsent); err != nil {
		return err
	}
	return retire("conformance-never-armed", t1, 2, eventstore.TimerAbsent)
}

func esPackages(ctx context.Context, s eventstore.Store) error {
	typ := "conformance-type-" + eventstore.NewRunID().String()
	other := "conformance-other-" + eventstore.NewRunID().String()
	rec := func(wt, hash, data string) eventstore.PackageRecord {
		return eventstore.PackageRecord{WorkflowType: wt, ContentHash: hash, Data: []byte(data), CreatedAt: time.Unix(1_700_000_000, 0).UTC()}
	}
	wantPackages := func(step string, want ...eventstore.PackageRecord) error {
		all, err := s.ListPackages(ctx)
		if err != nil {
			return fmt.Errorf("%s: ListPackages: %w", step, err)
		}
		var got []string
		for _, p := range all {
			if p.WorkflowType == typ || p.WorkflowType == other {
				got = append(got, p.WorkflowType+"/"+p.ContentHash+"="+string(p.Data))
			}
		}
		var w []string
		for _, p := range want {
			w = append(w, p.WorkflowType+"/"+p.ContentHash+"="+string(p.Data))
		}
		if !sameSet(got, w) {
			return fmt.Errorf("%s: ListPackages has %v, want %v", step, got, w)
		}
		return nil
	}
	wantRoutes := func(step string, want ...eventstore.PackageRoute) error {
		all, err := s.ListPackageRoutes(ctx)
		if err != nil {
			return fmt.Errorf("%s: ListPackageRoutes: %w", step, err)
		}
		var got []eventstore.PackageRoute
		for _, r := range all {
			if r.WorkflowType == typ || r.WorkflowType == other {
				got = append(got, r)
			}
		}
		if !sameSet(got, want) {
			return fmt.Errorf("%s: ListPackageRoutes has %v, want %v", step, got, want)
		}
		return nil
	}
	one := rec(typ, "hash-1", "one")
	if err := s.PutPackage(ctx, one); err != nil {
		return fmt.Errorf("PutPackage: %w", err)
	}
	if err := wantPackages("after PutPackage", one); err != nil {
		return err
	}
	uno := rec(typ, "hash-1", "uno")
	if err := s.PutPackage(ctx, uno); err != nil {
		return fmt.Errorf("PutPackage (replace): %w", err)
	}
	if err := wantPackages("after replacing a package", uno); err != nil {
		return err
	}
	two := rec(typ, "hash-2", "two")
	if err := s.PutPackageWithRoutes(ctx, two, []string{typ}); err != nil {
		return fmt.Errorf("PutPackageWithRoutes: %w", err)
	}
	if err := wantPackages("after PutPackageWithRoutes", uno, two); err != nil {
		return err
	}
	if err := wantRoutes("after PutPackageWithRoutes", eventstore.PackageRoute{WorkflowType: typ, ContentHash: "hash-2"}); err != nil {
		return err
	}
	if err := s.PutPackageRoute(ctx, typ, "hash-1"); err != nil {
		return fmt.Errorf("PutPackageRoute: %w", err)
	}
	if err := wantRoutes("after re-routing", eventstore.PackageRoute{WorkflowType: typ, ContentHash: "hash-1"}); err != nil {
		return err
	}
	if err := s.PutPackageRoute(ctx, other, "hash-missing"); !errors.Is(err, eventstore.ErrNotFound) {
		return fmt.Errorf("PutPackageRoute to a package the store does not hold returned %v, want an error matching eventstore.ErrNotFound", err)
	}
	if err := s.DeletePackage(ctx, typ, "hash-missing"); !errors.Is(err, eventstore.ErrNotFound) {
		return fmt.Errorf("DeletePackage of a package the store does not hold returned %v, want an error matching eventstore.ErrNotFound", err)
	}
	if err := s.PutPackage(ctx, rec("", "hash-3", "nameless")); !errors.Is(err, eventstore.ErrInvalidArgument) {
		return fmt.Errorf("PutPackage with an empty WorkflowType returned %v, want an error matching eventstore.ErrInvalidArgument", err)
	}
	if err := wantPackages("after the refused calls", uno, two); err != nil {
		return err
	}
	if err := wantRoutes("after the refused calls", eventstore.PackageRoute{WorkflowType: typ, ContentHash: "hash-1"}); err != nil {
		return err
	}
	three := rec(other, "hash-3", "three")
	if err := s.PutPackage(ctx, three); err != nil {
		return fmt.Errorf("PutPackage: %w", err)
	}
	if err := s.DeletePackage(ctx, other, "hash-3"); err != nil {
		return fmt.Errorf("DeletePackage: %w", err)
	}
	return wantPackages("after DeletePackage", uno, two)
}

// esContextCancelled calls every error-returning method of the store and of
// its capabilities, found by reflection, with a cancelled context and valid
// arguments: each must answer with an error matching context.Canceled and
// write nothing.
func esContextCancelled(ctx context.Context, s eventstore.Store) error {
	gen := newArgGen(true)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	var errs []error
	for _, iface := range storeInterfaces {
		if !reflect.TypeOf(s).Implements(iface.typ) {
			continue
		}
		for m := range iface.typ.Methods() {
			if !returnsError(m.Type) {
				continue
			}
			args, err := gen.args(m, cancelled)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out, err := callMethod(s, m.Name, args)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			got, _ := out[len(out)-1].Interface().(error)
			if !errors.Is(got, context.Canceled) {
				errs = append(errs, fmt.Errorf("%s with a cancelled context returned %v, want an error matching context.Canceled", m.Name, got))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	hist, err := s.ReadHistory(ctx, gen.wf)
	if err != nil {
		return fmt.Errorf("ReadHistory: %w", err)
	}
	if len(hist) != 0 {
		return fmt.Errorf("a write with a cancelled context committed %d events", len(hist))
	}
	pkgs, err := s.ListPackages(ctx)
	if err != nil {
		return fmt.Errorf("ListPackages: %w", err)
	}
	for _, p := range pkgs {
		if p.WorkflowType == gen.packageType() {
			return errors.New("a PutPackage with a cancelled context stored the package")
		}
	}
	timers, err := s.ExpiredTimers(ctx, gen.time(1).Add(time.Hour))
	if err != nil {
		return fmt.Errorf("ExpiredTimers: %w", err)
	}
	for _, tm := range timers {
		if tm.WorkflowID == gen.wf {
			return errors.New("a ScheduleTimer with a cancelled context armed the timer")
		}
	}
	return nil
}
