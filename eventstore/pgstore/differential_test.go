package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/eventstore/pgstore"
)

// op is one call made on two stores; it returns what the call returned.
type op struct {
	name string
	call func(ctx context.Context, s eventstore.Store) (any, error)
}

// sentinels are the error values two stores must agree on.
var sentinels = []error{eventstore.ErrSequenceConflict, eventstore.ErrInvalidToken, eventstore.ErrNotFound,
	eventstore.ErrNotOwner, eventstore.ErrInvalidArgument, eventstore.ErrUnsupported, context.Canceled}

// sameAnswer compares two answers: equal results, and errors matching the
// same sentinels (a sequence conflict with the same fields).
func sameAnswer(gotV any, gotErr error, wantV any, wantErr error) error {
	if (gotErr == nil) != (wantErr == nil) {
		return fmt.Errorf("error %v, Memory's %v", gotErr, wantErr)
	}
	for _, s := range sentinels {
		if errors.Is(gotErr, s) != errors.Is(wantErr, s) {
			return fmt.Errorf("error %v, Memory's %v (errors.Is %v differs)", gotErr, wantErr, s)
		}
	}
	var g, w *eventstore.SequenceConflictError
	if errors.As(wantErr, &w) && (!errors.As(gotErr, &g) || *g != *w) {
		return fmt.Errorf("error %v, Memory's %v", gotErr, wantErr)
	}
	if wantErr == nil && !reflect.DeepEqual(gotV, wantV) {
		return fmt.Errorf("returned\n  %s\nMemory returned\n  %s", short(gotV), short(wantV))
	}
	return nil
}

func short(v any) string {
	s := fmt.Sprintf("%+v", v)
	if len(s) > 2000 {
		s = s[:1000] + " ... " + s[len(s)-1000:]
	}
	return s
}

// TestSameAnswersAsMemory makes the same calls, good and bad, with hostile
// values (NUL bytes, invalid UTF-8, megabytes, keys longer than an index
// entry, times to the nanosecond, extreme integers) on a Store and on
// eventstore.Memory, and compares every answer: results exactly
// (reflect.DeepEqual), errors by the sentinels they match.
func TestSameAnswersAsMemory(t *testing.T) {
	ctx := context.Background()
	clock := func() time.Time { return time.Unix(1_800_000_000, 42).UTC() }
	pg, _, _ := newStore(t, pgstore.WithClock(clock), pgstore.WithNode("me"))
	mem := eventstore.NewMemory(eventstore.WithClock(clock))
	for _, o := range hostileOps() {
		gotV, gotErr := o.call(ctx, pg)
		wantV, wantErr := o.call(ctx, mem)
		if err := sameAnswer(gotV, gotErr, wantV, wantErr); err != nil {
			t.Errorf("%s: %v", o.name, err)
		}
	}
}

// foreign is not an event kind of package eventstore, though it embeds one.
type foreign struct{ eventstore.WorkflowStarted }

func hostileOps() []op {
	var (
		texts = []string{"", "nul\x00inside", "\x00", "bad\xff\xfeutf8", "\xc3\x28", "ünïcødé ✓ 日本語",
			"'quote\" \\back; DROP TABLE x;--", strings.Repeat("long-", 4000)}
		huge   = strings.Repeat("\x00\xffpayload", 400_000) // 4 MB
		wfs    = make([]eventstore.WorkflowID, 8)
		runs   = make([]eventstore.RunID, 8)
		nanoAt = time.Unix(1_700_000_000, 123_456_789).UTC()
		local  = time.Unix(1_700_000_001, 987_654_321)
	)
	for i := range wfs {
		wfs[i], runs[i] = eventstore.NewWorkflowID(), eventstore.NewRunID()
	}
	env := func(i int, at time.Time) eventstore.Envelope {
		return eventstore.Envelope{RunID: runs[i], RecordedAt: at}
	}
	pl := func(s string) eventstore.Payload { return eventstore.Payload{ContentType: s, Data: []byte(s)} }
	appendOp := func(name string, wf eventstore.WorkflowID, seq uint64, evs ...eventstore.Event) op {
		return op{name, func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.Append(ctx, token, wf, evs, seq)
		}}
	}
	outboxOp := func(name string, wf eventstore.WorkflowID, seq uint64, evs []eventstore.Event, rows ...eventstore.OutboxRow) op {
		return op{name, func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.(eventstore.Outbox).AppendWithOutbox(ctx, token, wf, evs, seq, rows)
		}}
	}
	read := func(name string, f func(context.Context, eventstore.Store) (any, error)) op { return op{name, f} }
	ob := func(s eventstore.Store) eventstore.Outbox { return s.(eventstore.Outbox) }
	so := func(s eventstore.Store) eventstore.ShardOwner { return s.(eventstore.ShardOwner) }

	var ops []op
	// Every kind, each string field hostile in turn, payloads up to 4 MB.
	for i, txt := range texts {
		e := env(0, nanoAt.Add(time.Duration(i)))
		if i%2 == 1 {
			e = env(0, local.Add(time.Duration(i)))
		}
		if i == 3 {
			e.RecordedAt = time.Time{} // set by the clock
		}
		batch := []eventstore.Event{
			eventstore.WorkflowStarted{Envelope: e, WorkflowType: txt, Input: pl(txt), ParentWorkflowID: wfs[7], ParentRunID: runs[7], PackageVersion: txt},
			eventstore.SignalReceived{Envelope: e, SignalName: txt, Input: pl(txt)},
			eventstore.ScheduleTriggered{Envelope: e, ScheduleID: txt},
			eventstore.TimerScheduled{Envelope: e, TimerID: eventstore.TimerID(txt), FireAt: local.Add(time.Duration(i))},
			eventstore.TimerFired{Envelope: e, TimerID: eventstore.TimerID(txt)},
			eventstore.ActivityScheduled{Envelope: e, ActivityID: math.MaxUint64 - eventstore.ActivityID(i), ActivityType: txt, Input: pl(txt), TaskQueue: txt, Node: txt},
			eventstore.ActivityFailed{Envelope: e, ActivityID: 3, Error: eventstore.ActivityError{Kind: eventstore.ActivityErrorKind(i * 40), Message: txt, Details: pl(txt)}, Attempt: math.MaxUint32},
			eventstore.ActivityCompleted{Envelope: e, ActivityID: 4, Result: pl(txt), Attempt: uint32(i)},
			eventstore.ActivityCancelled{Envelope: e, ActivityID: 5},
			eventstore.ActivityTimedOut{Envelope: e, ActivityID: 6, Attempt: 1},
			eventstore.WorkflowPaused{Envelope: e, Reason: txt},
			eventstore.WorkflowResumed{Envelope: e},
			eventstore.WorkflowFailed{Envelope: e, Message: txt, Details: pl(txt)},
			eventstore.WorkflowReopened{Envelope: e, Reason: txt},
			eventstore.WorkflowCancelled{Envelope: e, Reason: txt},
		}
		ops = append(ops, appendOp(fmt.Sprintf("append every kind, text %d", i), wfs[0], uint64(i*len(batch)), batch...))
	}
	head0 := uint64(len(texts) * 15)
	ops = append(ops,
		appendOp("4 MB payloads", wfs[1], 0,
			eventstore.WorkflowStarted{Envelope: env(1, nanoAt), WorkflowType: "big", Input: pl(huge)},
			eventstore.WorkflowCompleted{Envelope: env(1, nanoAt.Add(time.Second)), Result: eventstore.Payload{Data: []byte{}}},
		),
		appendOp("continue as new, then a late event of the old run", wfs[1], 2,
			eventstore.WorkflowContinuedAsNew{Envelope: env(1, nanoAt.Add(2*time.Second)), NewRunID: runs[2], Input: pl("carry")},
			eventstore.WorkflowStarted{Envelope: env(2, nanoAt.Add(3*time.Second)), WorkflowType: "big"},
			eventstore.WorkflowTimedOut{Envelope: env(1, nanoAt.Add(4*time.Second))},
			eventstore.WorkflowPaused{Envelope: env(2, nanoAt.Add(5*time.Second))},
		),
		appendOp("a history starting with a signal", wfs[2], 0, eventstore.SignalReceived{Envelope: env(3, time.Time{}), SignalName: "first"}),
		// Refusals.
		op{"zero token", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.Append(ctx, eventstore.WriteToken{}, wfs[3], nil, 0)
		}},
		appendOp("zero workflow", eventstore.WorkflowID{}, 0, eventstore.WorkflowStarted{Envelope: env(3, nanoAt)}),
		appendOp("nil event", wfs[3], 0, eventstore.WorkflowStarted{Envelope: env(3, nanoAt)}, nil),
		appendOp("pointer event", wfs[3], 0, &eventstore.WorkflowStarted{Envelope: env(3, nanoAt)}),
		appendOp("foreign event", wfs[3], 0, foreign{}),
		appendOp("another workflow's envelope", wfs[3], 0, eventstore.SignalReceived{Envelope: eventstore.Envelope{WorkflowID: wfs[4], RunID: runs[3]}}),
		appendOp("zero run", wfs[3], 0, eventstore.SignalReceived{}),
		appendOp("stale seq", wfs[0], 1, eventstore.SignalReceived{Envelope: env(0, nanoAt)}),
		appendOp("seq ahead", wfs[0], head0+1, eventstore.SignalReceived{Envelope: env(0, nanoAt)}),
		appendOp("seq at 2^64-1", wfs[0], math.MaxUint64, eventstore.SignalReceived{Envelope: env(0, nanoAt)}),
		appendOp("seq past 2^63 on a new workflow", wfs[3], 1<<63, eventstore.SignalReceived{Envelope: env(3, nanoAt)}),
		appendOp("empty append at a wrong seq", wfs[0], 99),
		// Outbox.
		outboxOp("rows with hostile and huge keys", wfs[4], 0,
			[]eventstore.Event{eventstore.WorkflowStarted{Envelope: env(4, nanoAt), WorkflowType: "ob"}},
			eventstore.OutboxRow{RunID: runs[4], Ordinal: 0, ActivityType: "a\x00b", Input: pl(huge[:100_000])},
			eventstore.OutboxRow{DispatchKey: "nul\x00key", RunID: runs[4], Ordinal: 1, CreatedAt: local},
			eventstore.OutboxRow{DispatchKey: strings.Repeat("k", 50_000), WorkflowID: wfs[4], RunID: runs[4], Ordinal: math.MaxUint64, State: eventstore.OutboxSettled},
			eventstore.OutboxRow{DispatchKey: "bad\xffutf8", RunID: runs[4], Ordinal: 3},
		),
		outboxOp("stale seq with bad rows is a conflict", wfs[4], 0, nil, eventstore.OutboxRow{}),
		outboxOp("row of another workflow", wfs[4], 1, nil, eventstore.OutboxRow{WorkflowID: wfs[5], RunID: runs[4]}),
		outboxOp("row with a zero run", wfs[4], 1, nil, eventstore.OutboxRow{}),
		outboxOp("dispatch key twice in a batch", wfs[4], 1, nil, eventstore.OutboxRow{DispatchKey: "x", RunID: runs[4]}, eventstore.OutboxRow{DispatchKey: "x", RunID: runs[4]}),
		outboxOp("dispatch key already staged", wfs[4], 1, nil, eventstore.OutboxRow{DispatchKey: "ok", RunID: runs[4]}, eventstore.OutboxRow{DispatchKey: "nul\x00key", RunID: runs[4]}),
		outboxOp("already staged before a bad row", wfs[4], 1, nil, eventstore.OutboxRow{DispatchKey: "nul\x00key", RunID: runs[4]}, eventstore.OutboxRow{}),
		outboxOp("rows only", wfs[4], 1, nil, eventstore.OutboxRow{DispatchKey: "rows-only", RunID: runs[4], Ordinal: 7}),
		outboxOp("rows only on an unwritten workflow", wfs[5], 0, nil, eventstore.OutboxRow{RunID: runs[5], Ordinal: 7}),
		outboxOp("a terminal settles the row staged with it", wfs[6], 0,
			[]eventstore.Event{eventstore.ActivityScheduled{Envelope: env(6, nanoAt), ActivityID: 2}, eventstore.ActivityCompleted{Envelope: env(6, nanoAt), ActivityID: 2}},
			eventstore.OutboxRow{RunID: runs[6], Ordinal: 2}),
		read("claim 0", func(ctx context.Context, s eventstore.Store) (any, error) { return ob(s).ClaimOutboxRows(ctx, 0) }),
		read("claim -1", func(ctx context.Context, s eventstore.Store) (any, error) { return ob(s).ClaimOutboxRows(ctx, -1) }),
		read("claim 2", func(ctx context.Context, s eventstore.Store) (any, error) { return ob(s).ClaimOutboxRows(ctx, 2) }),
		read("count claimed", func(ctx context.Context, s eventstore.Store) (any, error) { return ob(s).CountClaimedOutboxRows(ctx) }),
		read("rearm an empty key", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, ob(s).RearmOutboxPending(ctx, []eventstore.OutboxRow{{DispatchKey: "nul\x00key"}, {}})
		}),
		read("rearm an unknown key", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, ob(s).RearmOutboxPending(ctx, []eventstore.OutboxRow{{DispatchKey: "nul\x00key"}, {DispatchKey: "nul\x00"}})
		}),
		read("rearm", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, ob(s).RearmOutboxPending(ctx, []eventstore.OutboxRow{{DispatchKey: "nul\x00key"}, {DispatchKey: "rows-only"}})
		}),
		read("claim 10", func(ctx context.Context, s eventstore.Store) (any, error) { return ob(s).ClaimOutboxRows(ctx, 10) }),
		read("settle an empty key", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, ob(s).SettleOutboxRowCancelled(ctx, "")
		}),
		read("settle an unknown key", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, ob(s).SettleOutboxRowCancelled(ctx, "nul\x00keyX")
		}),
		read("settle a huge key", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, ob(s).SettleOutboxRowCancelled(ctx, strings.Repeat("k", 50_000))
		}),
		read("settle it again", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, ob(s).SettleOutboxRowCancelled(ctx, strings.Repeat("k", 50_000))
		}),
		read("settle a zero workflow", func(ctx context.Context, s eventstore.Store) (any, error) {
			return ob(s).SettleWorkflowOutboxRowsCancelled(ctx, eventstore.WorkflowID{})
		}),
		read("settle a workflow", func(ctx context.Context, s eventstore.Store) (any, error) {
			return ob(s).SettleWorkflowOutboxRowsCancelled(ctx, wfs[4])
		}),
		read("count claimed after settling", func(ctx context.Context, s eventstore.Store) (any, error) { return ob(s).CountClaimedOutboxRows(ctx) }),
		read("claim the rest", func(ctx context.Context, s eventstore.Store) (any, error) { return ob(s).ClaimOutboxRows(ctx, 10) }),
	)
	// Timers.
	for i, txt := range texts {
		ops = append(ops, read(fmt.Sprintf("schedule timer %d", i), func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.ScheduleTimer(ctx, wfs[i%3], eventstore.TimerID(txt+"t"), nanoAt.Add(time.Duration(i%3)), uint64(i)<<60)
		}))
	}
	ops = append(ops,
		read("schedule an empty timer ID", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.ScheduleTimer(ctx, wfs[0], "", nanoAt, 0)
		}),
		read("schedule on a zero workflow", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.ScheduleTimer(ctx, eventstore.WorkflowID{}, "t", nanoAt, 0)
		}),
		read("re-arm a timer", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.ScheduleTimer(ctx, wfs[0], "t", local, 5)
		}),
		read("expired as of the zero time", func(ctx context.Context, s eventstore.Store) (any, error) { return s.ExpiredTimers(ctx, time.Time{}) }),
		read("expired one nanosecond early", func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.ExpiredTimers(ctx, nanoAt.Add(-1))
		}),
		read("expired exactly at", func(ctx context.Context, s eventstore.Store) (any, error) { return s.ExpiredTimers(ctx, nanoAt.Add(1)) }),
		read("expired all", func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.ExpiredTimers(ctx, local.Add(time.Hour))
		}),
		read("retire: fireAt one nanosecond off", func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.RetireTimer(ctx, wfs[0], "t", local.Add(1), 5)
		}),
		read("retire: another armed seq", func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.RetireTimer(ctx, wfs[0], "t", local, 4)
		}),
		read("retire: the same instant in another zone", func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.RetireTimer(ctx, wfs[0], "t", local.In(time.FixedZone("Z", 3*3600)), 5)
		}),
		read("retire again", func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.RetireTimer(ctx, wfs[0], "t", local, 5)
		}),
		read("retire an empty ID", func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.RetireTimer(ctx, wfs[0], "", local, 5)
		}),
		read("retire the huge one", func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.RetireTimer(ctx, wfs[7%3], eventstore.TimerID(texts[7]+"t"), nanoAt.Add(1), 7<<60)
		}),
	)
	// Packages and routes.
	ops = append(ops,
		read("package with empty type", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.PutPackage(ctx, eventstore.PackageRecord{ContentHash: "h"})
		}),
		read("package with empty hash", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.PutPackage(ctx, eventstore.PackageRecord{WorkflowType: "t"})
		}),
		read("package with an empty route", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.PutPackageWithRoutes(ctx, eventstore.PackageRecord{WorkflowType: "t", ContentHash: "h"}, []string{"a", ""})
		}),
	)
	for i, txt := range texts[1:] {
		ops = append(ops, read(fmt.Sprintf("package %d with routes", i), func(ctx context.Context, s eventstore.Store) (any, error) {
			rec := eventstore.PackageRecord{WorkflowType: txt, ContentHash: "h" + txt, Data: []byte(txt), CreatedAt: local.Add(time.Duration(i))}
			if i%2 == 0 {
				rec.CreatedAt = time.Time{}
			}
			return nil, s.PutPackageWithRoutes(ctx, rec, []string{txt, txt, "shared"})
		}))
	}
	ops = append(ops,
		read("replace a package", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.PutPackage(ctx, eventstore.PackageRecord{WorkflowType: texts[1], ContentHash: "h" + texts[1], Data: []byte{}})
		}),
		read("list packages", func(ctx context.Context, s eventstore.Store) (any, error) { return s.ListPackages(ctx) }),
		read("list routes", func(ctx context.Context, s eventstore.Store) (any, error) { return s.ListPackageRoutes(ctx) }),
		read("route to an unknown hash", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.PutPackageRoute(ctx, "x", "nohash")
		}),
		read("route with empty names", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.PutPackageRoute(ctx, "", "h")
		}),
		read("re-route", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.PutPackageRoute(ctx, "shared", "h"+texts[1])
		}),
		read("delete a routed package", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.DeletePackage(ctx, texts[7], "h"+texts[7])
		}),
		read("delete an unknown package", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.DeletePackage(ctx, "nope", "h")
		}),
		read("delete with an empty name", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.DeletePackage(ctx, "", "h")
		}),
		read("put a second package of a routed hash", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.PutPackage(ctx, eventstore.PackageRecord{WorkflowType: "other", ContentHash: "h" + texts[7], CreatedAt: local})
		}),
		read("delete one of two packages of a routed hash", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.DeletePackage(ctx, texts[7], "h"+texts[7])
		}),
		read("list packages at the end", func(ctx context.Context, s eventstore.Store) (any, error) { return s.ListPackages(ctx) }),
		read("list routes at the end", func(ctx context.Context, s eventstore.Store) (any, error) { return s.ListPackageRoutes(ctx) }),
	)
	// Shards.
	ops = append(ops,
		read("acquire -1", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, so(s).AcquireOwnedShard(ctx, -1)
		}),
		read("acquire 16 of 16", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, so(s).AcquireOwnedShard(ctx, 16)
		}),
		read("acquire [0 -1]", func(ctx context.Context, s eventstore.Store) (any, error) {
			return so(s).IsCurrentOwner(ctx, 0), so(s).AcquireOwnedShards(ctx, []int{0, -1})
		}),
		read("owner of 0 after a refused election", func(ctx context.Context, s eventstore.Store) (any, error) {
			return so(s).IsCurrentOwner(ctx, 0), nil
		}),
		read("publish before acquiring", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, so(s).PublishShardOwner(ctx, 1)
		}),
		read("publish out of range", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, so(s).PublishShardOwner(ctx, 99)
		}),
		read("acquire every shard, twice over", func(ctx context.Context, s eventstore.Store) (any, error) {
			all := []int{}
			for i := range 16 {
				all = append(all, i, 15-i)
			}
			return nil, so(s).AcquireOwnedShards(ctx, all)
		}),
		read("publish after acquiring", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, so(s).PublishShardOwner(ctx, 1)
		}),
		read("acquire nothing", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, so(s).AcquireOwnedShards(ctx, nil)
		}),
		read("append as the owner", func(ctx context.Context, s eventstore.Store) (any, error) {
			return nil, s.Append(ctx, token, wfs[2], []eventstore.Event{eventstore.WorkflowStarted{Envelope: env(3, nanoAt), WorkflowType: "late"}}, 1)
		}),
	)
	// Reads of everything, in and out of an enumeration scope.
	reads := func(tag string) []op {
		return []op{
			read(tag+"list IDs", func(ctx context.Context, s eventstore.Store) (any, error) { return s.ListWorkflowIDs(ctx) }),
			read(tag+"list active", func(ctx context.Context, s eventstore.Store) (any, error) { return s.ListActive(ctx) }),
			read(tag+"list paused", func(ctx context.Context, s eventstore.Store) (any, error) { return s.ListPaused(ctx) }),
			read(tag+"stream heads", func(ctx context.Context, s eventstore.Store) (any, error) { return s.StreamHeads(ctx) }),
			read(tag+"expired timers", func(ctx context.Context, s eventstore.Store) (any, error) {
				return s.ExpiredTimers(ctx, local.Add(time.Hour))
			}),
		}
	}
	ops = append(ops, reads("")...)
	for i := range 8 {
		ops = append(ops,
			read(fmt.Sprintf("history %d", i), func(ctx context.Context, s eventstore.Store) (any, error) { return s.ReadHistory(ctx, wfs[i]) }),
			read(fmt.Sprintf("run chain %d", i), func(ctx context.Context, s eventstore.Store) (any, error) { return s.ReadRunChain(ctx, wfs[i]) }),
		)
	}
	for _, from := range []uint64{0, 1, 2, 60, head0, head0 + 1, 1 << 63, math.MaxUint64} {
		ops = append(ops, read(fmt.Sprintf("history from %d", from), func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.ReadHistoryFrom(ctx, wfs[0], from)
		}))
	}
	for i, f := range []eventstore.WorkflowFilter{
		{}, {Limit: 2}, {Limit: -1}, {WorkflowType: "big"}, {WorkflowType: texts[7]}, {WorkflowType: "nope"},
		{Status: eventstore.StatusPaused}, {Status: eventstore.StatusCancelled, WorkflowType: texts[7]}, {Status: "bogus\x00"},
		{StartedAfter: nanoAt.Add(3 * time.Second)}, {StartedBefore: nanoAt.Add(3 * time.Second)},
		{StartedAfter: nanoAt.Add(3*time.Second + 1)}, {StartedBefore: nanoAt.Add(3*time.Second + 1), StartedAfter: nanoAt},
		{StartedAfter: local.In(time.FixedZone("Q", -3600))},
	} {
		ops = append(ops, read(fmt.Sprintf("query %d %+v", i, f), func(ctx context.Context, s eventstore.Store) (any, error) { return s.Query(ctx, f) }))
	}
	ops = append(ops, read("scope to two shards", func(ctx context.Context, s eventstore.Store) (any, error) {
		so(s).SetOwnedShards(ctx, []int{eventstore.ShardOf(wfs[0], 16), eventstore.ShardOf(wfs[4], 16), -1, 99, 1 << 40})
		return nil, nil
	}))
	ops = append(ops, reads("scoped: ")...)
	ops = append(ops, read("scope to nothing", func(ctx context.Context, s eventstore.Store) (any, error) {
		so(s).SetOwnedShards(ctx, []int{})
		return nil, nil
	}))
	ops = append(ops, reads("empty scope: ")...)
	ops = append(ops, read("widen the scope", func(ctx context.Context, s eventstore.Store) (any, error) {
		so(s).ExtendOwnedShards(ctx, []int{eventstore.ShardOf(wfs[1], 16)})
		return nil, nil
	}))
	ops = append(ops, reads("widened: ")...)
	ops = append(ops, read("cancelled context", func(_ context.Context, s eventstore.Store) (any, error) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := s.ReadHistory(ctx, wfs[0])
		return nil, errors.Join(err, s.Append(ctx, token, wfs[0], []eventstore.Event{eventstore.SignalReceived{Envelope: env(0, nanoAt)}}, head0))
	}))
	return ops
}

// TestPruneClosedAsMemory: the same workflows pruned from a Store and from
// Memory leave the same store behind, and a pruned ID starts again at 0.
func TestPruneClosedAsMemory(t *testing.T) {
	ctx := context.Background()
	clock := func() time.Time { return time.Unix(1_800_000_000, 0).UTC() }
	pg, _, _ := newStore(t, pgstore.WithClock(clock))
	mem := eventstore.NewMemory(eventstore.WithClock(clock))
	at := func(s int) time.Time { return time.Unix(1_700_000_000+int64(s), 5).UTC() }
	type wfCase struct {
		id     eventstore.WorkflowID
		events []eventstore.Event
	}
	var cases []wfCase
	for i, end := range []func(eventstore.Envelope) eventstore.Event{
		func(e eventstore.Envelope) eventstore.Event { return eventstore.WorkflowCompleted{Envelope: e} },
		func(e eventstore.Envelope) eventstore.Event { return eventstore.WorkflowFailed{Envelope: e} },
		func(e eventstore.Envelope) eventstore.Event { return eventstore.WorkflowCancelled{Envelope: e} },
		func(e eventstore.Envelope) eventstore.Event { return eventstore.WorkflowTimedOut{Envelope: e} },
		func(e eventstore.Envelope) eventstore.Event {
			return eventstore.WorkflowContinuedAsNew{Envelope: e, NewRunID: eventstore.NewRunID()}
		},
		func(e eventstore.Envelope) eventstore.Event { return eventstore.WorkflowPaused{Envelope: e} },
		func(e eventstore.Envelope) eventstore.Event { return eventstore.SignalReceived{Envelope: e} },
	} {
		for _, closeAt := range []int{10, 20} {
			wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
			env := func(s int) eventstore.Envelope { return eventstore.Envelope{RunID: run, RecordedAt: at(s)} }
			evs := []eventstore.Event{eventstore.WorkflowStarted{Envelope: env(0), WorkflowType: fmt.Sprint(i)},
				eventstore.ActivityScheduled{Envelope: env(1), ActivityID: 1}, end(env(closeAt)),
				eventstore.ActivityCompleted{Envelope: env(30), ActivityID: 1}}
			cases = append(cases, wfCase{wf, evs})
		}
	}
	for _, s := range []eventstore.Store{pg, mem} {
		for _, c := range cases {
			if err := s.(eventstore.Outbox).AppendWithOutbox(ctx, token, c.id, c.events[:2], 0,
				[]eventstore.OutboxRow{{RunID: c.events[0].EventEnvelope().RunID, Ordinal: 9}}); err != nil {
				t.Fatal(err)
			}
			if err := s.Append(ctx, token, c.id, c.events[2:], 2); err != nil {
				t.Fatal(err)
			}
			if err := s.ScheduleTimer(ctx, c.id, "t", at(0), 1); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := s.(eventstore.Outbox).ClaimOutboxRows(ctx, 3); err != nil {
			t.Fatal(err)
		}
	}
	got, err := pg.PruneClosed(ctx, at(20))
	if err != nil {
		t.Fatal(err)
	}
	if want := mem.PruneClosed(at(20)); got != want || got != 4 {
		t.Fatalf("PruneClosed removed %d, Memory %d; want 4 (the four closing statuses, closed at 10 < 20)", got, want)
	}
	for _, o := range append(hostileReads(cases[0].id), op{"reappend a pruned ID", func(ctx context.Context, s eventstore.Store) (any, error) {
		return nil, s.Append(ctx, token, cases[0].id, cases[0].events[:1], 0)
	}}) {
		gotV, gotErr := o.call(ctx, pg)
		wantV, wantErr := o.call(ctx, mem)
		if err := sameAnswer(gotV, gotErr, wantV, wantErr); err != nil {
			t.Errorf("after pruning, %s: %v", o.name, err)
		}
	}
}

func hostileReads(wf eventstore.WorkflowID) []op {
	return []op{
		{"list IDs", func(ctx context.Context, s eventstore.Store) (any, error) { return s.ListWorkflowIDs(ctx) }},
		{"stream heads", func(ctx context.Context, s eventstore.Store) (any, error) { return s.StreamHeads(ctx) }},
		{"query", func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.Query(ctx, eventstore.WorkflowFilter{})
		}},
		{"history", func(ctx context.Context, s eventstore.Store) (any, error) { return s.ReadHistory(ctx, wf) }},
		{"run chain", func(ctx context.Context, s eventstore.Store) (any, error) { return s.ReadRunChain(ctx, wf) }},
		{"timers", func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.ExpiredTimers(ctx, time.Unix(1<<40, 0))
		}},
		{"claimed", func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.(eventstore.Outbox).CountClaimedOutboxRows(ctx)
		}},
		{"claim", func(ctx context.Context, s eventstore.Store) (any, error) {
			return s.(eventstore.Outbox).ClaimOutboxRows(ctx, 100)
		}},
	}
}
