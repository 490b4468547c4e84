package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// passBase is a small, correct pass-through decorator, made faulty one way
// at a time by its faults.
type passBase struct {
	inner eventstore.Store
	f     faults
}

type faults struct {
	drop        string // this method is not forwarded: it returns zero values
	twice       string // this method reaches the inner store twice
	wrapErrors  bool   // errors come back wrapped in a new error
	dropCtx     bool   // the inner store gets context.Background()
	alterSeq    bool   // Append forwards expectedSeq+1
	lieOwner    bool   // IsCurrentOwner answers true whatever the inner says
	badUnwrap   bool   // Unwrap returns nil
	hideOutbox  bool   // the wrapper never implements Outbox
	claimShards bool   // the wrapper always implements ShardOwner

	hideHistories  bool // the wrapper never implements HistoriesReader
	claimHistories bool // the wrapper always implements HistoriesReader (with ReadHistory calls when the inner lacks it)
	shardCount     int  // when not 0, ShardCount answers it; else it answers the inner's
	// histories, when set, is what ReadHistories does with the inner's.
	histories func(hr eventstore.HistoriesReader, ctx context.Context, ids []eventstore.WorkflowID) ([][]eventstore.Event, error)

	withoutCancel bool // the inner store gets context.WithoutCancel(ctx): values kept, cancellation and deadline lost
	cacheHistory  bool // ReadHistory answers a repeated call from a cache
	sortIDs       bool // ListWorkflowIDs sorts what the inner returned, in place
	truncate      bool // ClaimOutboxRows returns at most 2 rows
	panicEmpty    bool // ReadHistoryFrom reads the first event for a span attribute, even of an empty result
	nilAsEmpty    bool // ListActive returns an empty slice for the inner's nil

	// The classes of issue 24.
	capRows            int  // AppendWithOutbox forwards at most this many rows
	capHistory         int  // ReadHistory returns at most this many events
	retryConflict      bool // a conflicting Append is retried at the found seq
	replaceNotOwner    bool // an error matching ErrNotOwner is replaced by a new one that still matches
	deadlineToCanceled bool // context.DeadlineExceeded becomes context.Canceled
	conflictFields     bool // a conflict comes back as a new *SequenceConflictError without Found

	cache  map[eventstore.WorkflowID][]eventstore.Event
	record *sync.Map // when set, the name of every method called is stored
}

// do runs call unless the method is dropped, twice if it is doubled.
func (d *passBase) do(method string, call func()) {
	if d.f.record != nil {
		d.f.record.Store(method, true)
	}
	if d.f.drop == method {
		return
	}
	call()
	if d.f.twice == method {
		call()
	}
}

func (d *passBase) e(err error) error {
	var conflict *eventstore.SequenceConflictError
	switch {
	case err == nil:
	case d.f.wrapErrors:
		return fmt.Errorf("decorated: %w", err)
	case d.f.replaceNotOwner && errors.Is(err, eventstore.ErrNotOwner):
		return fmt.Errorf("decorated: shard lost: %w", eventstore.ErrNotOwner)
	case d.f.deadlineToCanceled && errors.Is(err, context.DeadlineExceeded):
		return context.Canceled
	case d.f.conflictFields && errors.As(err, &conflict):
		return &eventstore.SequenceConflictError{Expected: conflict.Expected}
	}
	return err
}

func (d *passBase) c(ctx context.Context) context.Context {
	if d.f.dropCtx {
		return context.Background()
	}
	if d.f.withoutCancel {
		return context.WithoutCancel(ctx)
	}
	return ctx
}

func (d *passBase) Unwrap() eventstore.Store {
	if d.f.badUnwrap {
		return nil
	}
	return d.inner
}

func (d *passBase) Append(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, seq uint64) (err error) {
	if d.f.alterSeq {
		seq++
	}
	d.do("Append", func() { err = d.inner.Append(d.c(ctx), tok, wf, evs, seq) })
	var conflict *eventstore.SequenceConflictError
	if d.f.retryConflict && errors.As(err, &conflict) {
		err = d.inner.Append(d.c(ctx), tok, wf, evs, conflict.Found)
	}
	return d.e(err)
}

func (d *passBase) ReadHistory(ctx context.Context, wf eventstore.WorkflowID) (out []eventstore.Event, err error) {
	if cached, ok := d.f.cache[wf]; ok && d.f.cacheHistory {
		return cached, nil
	}
	d.do("ReadHistory", func() { out, err = d.inner.ReadHistory(d.c(ctx), wf) })
	if d.f.capHistory > 0 && len(out) > d.f.capHistory {
		out = out[:d.f.capHistory]
	}
	if d.f.cacheHistory && err == nil {
		d.f.cache[wf] = out
	}
	return out, d.e(err)
}

func (d *passBase) ReadHistoryFrom(ctx context.Context, wf eventstore.WorkflowID, from uint64) (out []eventstore.Event, err error) {
	d.do("ReadHistoryFrom", func() { out, err = d.inner.ReadHistoryFrom(d.c(ctx), wf, from) })
	if d.f.panicEmpty && err == nil {
		_ = out[0].EventEnvelope().Seq
	}
	return out, d.e(err)
}

func (d *passBase) ReadRunChain(ctx context.Context, wf eventstore.WorkflowID) (out []eventstore.RunSummary, err error) {
	d.do("ReadRunChain", func() { out, err = d.inner.ReadRunChain(d.c(ctx), wf) })
	return out, d.e(err)
}

func (d *passBase) ListWorkflowIDs(ctx context.Context) (out []eventstore.WorkflowID, err error) {
	d.do("ListWorkflowIDs", func() { out, err = d.inner.ListWorkflowIDs(d.c(ctx)) })
	if d.f.sortIDs {
		slices.SortFunc(out, func(a, b eventstore.WorkflowID) int { return strings.Compare(a.String(), b.String()) })
	}
	return out, d.e(err)
}

func (d *passBase) ListActive(ctx context.Context) (out []eventstore.WorkflowID, err error) {
	d.do("ListActive", func() { out, err = d.inner.ListActive(d.c(ctx)) })
	if d.f.nilAsEmpty && out == nil {
		out = []eventstore.WorkflowID{}
	}
	return out, d.e(err)
}

func (d *passBase) ListPaused(ctx context.Context) (out []eventstore.WorkflowID, err error) {
	d.do("ListPaused", func() { out, err = d.inner.ListPaused(d.c(ctx)) })
	return out, d.e(err)
}

func (d *passBase) StreamHeads(ctx context.Context) (out []eventstore.StreamHead, err error) {
	d.do("StreamHeads", func() { out, err = d.inner.StreamHeads(d.c(ctx)) })
	return out, d.e(err)
}

func (d *passBase) Query(ctx context.Context, f eventstore.WorkflowFilter) (out []eventstore.WorkflowSummary, err error) {
	d.do("Query", func() { out, err = d.inner.Query(d.c(ctx), f) })
	return out, d.e(err)
}

func (d *passBase) ScheduleTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) (err error) {
	d.do("ScheduleTimer", func() { err = d.inner.ScheduleTimer(d.c(ctx), wf, id, at, seq) })
	return d.e(err)
}

func (d *passBase) ExpiredTimers(ctx context.Context, asOf time.Time) (out []eventstore.TimerEntry, err error) {
	d.do("ExpiredTimers", func() { out, err = d.inner.ExpiredTimers(d.c(ctx), asOf) })
	return out, d.e(err)
}

func (d *passBase) RetireTimer(ctx context.Context, wf eventstore.WorkflowID, id eventstore.TimerID, at time.Time, seq uint64) (out eventstore.TimerRetirement, err error) {
	d.do("RetireTimer", func() { out, err = d.inner.RetireTimer(d.c(ctx), wf, id, at, seq) })
	return out, d.e(err)
}

func (d *passBase) PutPackage(ctx context.Context, r eventstore.PackageRecord) (err error) {
	d.do("PutPackage", func() { err = d.inner.PutPackage(d.c(ctx), r) })
	return d.e(err)
}

func (d *passBase) PutPackageWithRoutes(ctx context.Context, r eventstore.PackageRecord, types []string) (err error) {
	d.do("PutPackageWithRoutes", func() { err = d.inner.PutPackageWithRoutes(d.c(ctx), r, types) })
	return d.e(err)
}

func (d *passBase) ListPackages(ctx context.Context) (out []eventstore.PackageRecord, err error) {
	d.do("ListPackages", func() { out, err = d.inner.ListPackages(d.c(ctx)) })
	return out, d.e(err)
}

func (d *passBase) DeletePackage(ctx context.Context, wt, hash string) (err error) {
	d.do("DeletePackage", func() { err = d.inner.DeletePackage(d.c(ctx), wt, hash) })
	return d.e(err)
}

func (d *passBase) PutPackageRoute(ctx context.Context, wt, hash string) (err error) {
	d.do("PutPackageRoute", func() { err = d.inner.PutPackageRoute(d.c(ctx), wt, hash) })
	return d.e(err)
}

func (d *passBase) ListPackageRoutes(ctx context.Context) (out []eventstore.PackageRoute, err error) {
	d.do("ListPackageRoutes", func() { out, err = d.inner.ListPackageRoutes(d.c(ctx)) })
	return out, d.e(err)
}

// passOutbox forwards the Outbox methods.
type passOutbox struct{ *passBase }

func (d passOutbox) o() eventstore.Outbox { return d.inner.(eventstore.Outbox) }

func (d passOutbox) AppendWithOutbox(ctx context.Context, tok eventstore.WriteToken, wf eventstore.WorkflowID, evs []eventstore.Event, seq uint64, rows []eventstore.OutboxRow) (err error) {
	if d.f.capRows > 0 && len(rows) > d.f.capRows {
		rows = rows[:d.f.capRows]
	}
	d.do("AppendWithOutbox", func() { err = d.o().AppendWithOutbox(d.c(ctx), tok, wf, evs, seq, rows) })
	return d.e(err)
}

func (d passOutbox) RearmOutboxPending(ctx context.Context, rows []eventstore.OutboxRow) (err error) {
	d.do("RearmOutboxPending", func() { err = d.o().RearmOutboxPending(d.c(ctx), rows) })
	return d.e(err)
}

func (d passOutbox) ClaimOutboxRows(ctx context.Context, limit int) (out []eventstore.OutboxRow, err error) {
	d.do("ClaimOutboxRows", func() { out, err = d.o().ClaimOutboxRows(d.c(ctx), limit) })
	if d.f.truncate && len(out) > 2 {
		out = out[:2]
	}
	return out, d.e(err)
}

func (d passOutbox) CountClaimedOutboxRows(ctx context.Context) (n int, err error) {
	d.do("CountClaimedOutboxRows", func() { n, err = d.o().CountClaimedOutboxRows(d.c(ctx)) })
	return n, d.e(err)
}

func (d passOutbox) SettleOutboxRowCancelled(ctx context.Context, key string) (err error) {
	d.do("SettleOutboxRowCancelled", func() { err = d.o().SettleOutboxRowCancelled(d.c(ctx), key) })
	return d.e(err)
}

func (d passOutbox) SettleWorkflowOutboxRowsCancelled(ctx context.Context, wf eventstore.WorkflowID) (out []string, err error) {
	d.do("SettleWorkflowOutboxRowsCancelled", func() { out, err = d.o().SettleWorkflowOutboxRowsCancelled(d.c(ctx), wf) })
	return out, d.e(err)
}

// passShards forwards the ShardOwner methods; when the inner store lacks
// them (a faulty wrapper claiming the capability) it answers unsupported.
type passShards struct{ *passBase }

func (d passShards) so() (eventstore.ShardOwner, bool) {
	so, ok := d.inner.(eventstore.ShardOwner)
	return so, ok
}

func (d passShards) SetOwnedShards(ctx context.Context, shards []int) {
	if so, ok := d.so(); ok {
		d.do("SetOwnedShards", func() { so.SetOwnedShards(d.c(ctx), shards) })
	}
}

func (d passShards) AcquireOwnedShards(ctx context.Context, shards []int) (err error) {
	so, ok := d.so()
	if !ok {
		return eventstore.ErrUnsupported
	}
	d.do("AcquireOwnedShards", func() { err = so.AcquireOwnedShards(d.c(ctx), shards) })
	return d.e(err)
}

func (d passShards) AcquireOwnedShard(ctx context.Context, shard int) (err error) {
	so, ok := d.so()
	if !ok {
		return eventstore.ErrUnsupported
	}
	d.do("AcquireOwnedShard", func() { err = so.AcquireOwnedShard(d.c(ctx), shard) })
	return d.e(err)
}

func (d passShards) ExtendOwnedShards(ctx context.Context, shards []int) {
	if so, ok := d.so(); ok {
		d.do("ExtendOwnedShards", func() { so.ExtendOwnedShards(d.c(ctx), shards) })
	}
}

func (d passShards) IsCurrentOwner(ctx context.Context, shard int) (owner bool) {
	if so, ok := d.so(); ok {
		d.do("IsCurrentOwner", func() { owner = so.IsCurrentOwner(d.c(ctx), shard) })
	}
	return owner || d.f.lieOwner
}

func (d passShards) PublishShardOwner(ctx context.Context, shard int) (err error) {
	so, ok := d.so()
	if !ok {
		return eventstore.ErrUnsupported
	}
	d.do("PublishShardOwner", func() { err = so.PublishShardOwner(d.c(ctx), shard) })
	return d.e(err)
}

// ShardCount is the inner's, or the fault's.
func (d passShards) ShardCount() int {
	if sc, ok := d.inner.(interface{ ShardCount() int }); ok && d.f.shardCount == 0 {
		return sc.ShardCount()
	}
	return d.f.shardCount
}

// passHistories forwards ReadHistories; when the inner store lacks it (a
// faulty wrapper claiming the capability) it reads one history at a time.
type passHistories struct{ *passBase }

func (d passHistories) ReadHistories(ctx context.Context, ids []eventstore.WorkflowID) (out [][]eventstore.Event, err error) {
	hr, ok := d.inner.(eventstore.HistoriesReader)
	switch {
	case !ok:
		d.do("ReadHistories", func() {
			for i := 0; i < len(ids) && err == nil; i++ {
				out = append(out, nil)
				out[i], err = d.inner.ReadHistory(d.c(ctx), ids[i])
			}
		})
		if err != nil {
			out = nil
		}
	case d.f.histories != nil:
		return d.f.histories(hr, d.c(ctx), ids)
	default:
		d.do("ReadHistories", func() { out, err = hr.ReadHistories(d.c(ctx), ids) })
	}
	return out, d.e(err)
}

// One concrete type per capability combination.
type (
	passPlain struct{ *passBase }
	passO     struct {
		*passBase
		passOutbox
	}
	passS struct {
		*passBase
		passShards
	}
	passOS struct {
		*passBase
		passOutbox
		passShards
	}
)

var (
	_ eventstore.Outbox     = passO{}
	_ eventstore.ShardOwner = passS{}
	_ eventstore.Outbox     = passOS{}
	_ eventstore.ShardOwner = passOS{}
)

// unwrapper is a decorator withHistories extends.
type unwrapper interface {
	eventstore.Store
	Unwrap() eventstore.Store
}

// The shapes of withHistories, by the capabilities of what it extends.
type (
	hrPlain struct {
		unwrapper
		eventstore.HistoriesReader
	}
	hrO struct {
		unwrapper
		eventstore.Outbox
		eventstore.HistoriesReader
	}
	hrS struct {
		unwrapper
		eventstore.ShardOwner
		eventstore.HistoriesReader
	}
	hrOS struct {
		unwrapper
		eventstore.Outbox
		eventstore.ShardOwner
		eventstore.HistoriesReader
	}
)

// withHistories returns d with hr's ReadHistories on top of d's methods
// and capabilities (d unchanged when hr is nil): the HistoriesReader of a
// test decorator written for the other capabilities.
func withHistories(d unwrapper, hr eventstore.HistoriesReader) eventstore.Store {
	o, ob := d.(eventstore.Outbox)
	so, sh := d.(eventstore.ShardOwner)
	switch {
	case hr == nil:
		return d
	case ob && sh:
		return hrOS{d, o, so, hr}
	case ob:
		return hrO{d, o, hr}
	case sh:
		return hrS{d, so, hr}
	}
	return hrPlain{d, hr}
}

// passWrap returns the wrap function of a pass-through decorator with the
// given faults (none: a correct decorator).
func passWrap(f faults) func(eventstore.Store) eventstore.Store {
	return func(inner eventstore.Store) eventstore.Store {
		b := &passBase{inner: inner, f: f}
		b.f.cache = map[eventstore.WorkflowID][]eventstore.Event{}
		_, outbox := inner.(eventstore.Outbox)
		_, shards := inner.(eventstore.ShardOwner)
		_, histories := inner.(eventstore.HistoriesReader)
		outbox = outbox && !f.hideOutbox
		shards = shards || f.claimShards
		var hr eventstore.HistoriesReader
		if histories && !f.hideHistories || f.claimHistories {
			hr = passHistories{b}
		}
		switch {
		case outbox && shards:
			return withHistories(passOS{b, passOutbox{b}, passShards{b}}, hr)
		case outbox:
			return withHistories(passO{b, passOutbox{b}}, hr)
		case shards:
			return withHistories(passS{b, passShards{b}}, hr)
		}
		return withHistories(passPlain{b}, hr)
	}
}

func TestCheckDecoratorCorrectPassThroughPasses(t *testing.T) {
	if err := CheckDecorator(t.Context(), passWrap(faults{})); err != nil {
		t.Fatalf("CheckDecorator(correct pass-through) = %v, want nil", err)
	}
}

func TestCheckDecoratorCatchesBrokenDecorators(t *testing.T) {
	testCases := []struct {
		name  string
		wrap  func(eventstore.Store) eventstore.Store
		rules []string
		is    error // when set, the failures match it
	}{
		{"drops SettleOutboxRowCancelled", passWrap(faults{drop: "SettleOutboxRowCancelled"}),
			[]string{"outbox/forward/SettleOutboxRowCancelled", "outbox+shardowner/forward/SettleOutboxRowCancelled", "outbox/error/SettleOutboxRowCancelled"}, nil},
		{"drops SetOwnedShards (no result to give it away)", passWrap(faults{drop: "SetOwnedShards"}),
			[]string{"shardowner/forward/SetOwnedShards", "outbox+shardowner/forward/SetOwnedShards"}, nil},
		{"drops ReadHistory", passWrap(faults{drop: "ReadHistory"}),
			[]string{"store/forward/ReadHistory", "store/error/ReadHistory"}, nil},
		{"hides Outbox", passWrap(faults{hideOutbox: true}),
			[]string{"outbox/capabilities", "outbox+shardowner/capabilities", "outbox/forward/AppendWithOutbox"}, nil},
		{"claims ShardOwner", passWrap(faults{claimShards: true}),
			[]string{"store/capabilities", "outbox/capabilities"}, nil},
		{"wraps errors", passWrap(faults{wrapErrors: true}),
			[]string{"store/error/Append", "outbox/error/ClaimOutboxRows", "shardowner/error/PublishShardOwner", "shardowner/forward/AcquireOwnedShard"}, nil},
		{"calls the inner twice", passWrap(faults{twice: "Append"}),
			[]string{"store/forward/Append", "store/error/Append"}, nil},
		{"drops the caller's context", passWrap(faults{dropCtx: true}),
			[]string{"store/forward/ReadHistory", "outbox/forward/ClaimOutboxRows", "shardowner/forward/IsCurrentOwner"}, nil},
		{"alters an argument", passWrap(faults{alterSeq: true}),
			[]string{"store/forward/Append"}, nil},
		{"invents IsCurrentOwner", passWrap(faults{lieOwner: true}),
			[]string{"shardowner/forward/IsCurrentOwner"}, nil},
		{"Unwrap returns nil", passWrap(faults{badUnwrap: true}),
			[]string{"store/unwrap", "outbox+shardowner/unwrap"}, nil},
		{"no Unwrap at all", func(inner eventstore.Store) eventstore.Store { return storeOnly{inner} },
			[]string{"store/unwrap"}, nil},
		{"wrap panics", func(eventstore.Store) eventstore.Store { panic("boom") },
			[]string{"store/capabilities", "store/forward/Append"}, ErrRulePanicked},
		{"wrap returns nil", func(eventstore.Store) eventstore.Store { return nil },
			[]string{"store/capabilities", "outbox/forward/ClaimOutboxRows"}, nil},
		{"nil wrap function", nil,
			[]string{"store/capabilities"}, nil},
		{"context.WithoutCancel for the inner", passWrap(faults{withoutCancel: true}),
			[]string{"store/differential", "outbox/differential", "shardowner/differential", "outbox+shardowner/differential"}, nil},
		{"caches ReadHistory", passWrap(faults{cacheHistory: true}),
			[]string{"store/differential", "outbox+shardowner/differential"}, nil},
		{"sorts listed IDs in place", passWrap(faults{sortIDs: true}),
			[]string{"store/differential", "outbox+shardowner/differential"}, nil},
		{"truncates claims", passWrap(faults{truncate: true}),
			[]string{"outbox/differential", "outbox+shardowner/differential"}, nil},
		{"panics on an empty read", passWrap(faults{panicEmpty: true}),
			[]string{"store/differential", "outbox+shardowner/differential"}, nil},
		{"nil listing becomes empty", passWrap(faults{nilAsEmpty: true}),
			[]string{"store/differential", "shardowner/differential"}, nil},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckDecorator(t.Context(), tc.wrap, onlyRules(tc.rules...))
			if err == nil {
				t.Fatal("CheckDecorator passed a broken decorator")
			}
			failed := failedRules(t, err, SuiteDecorator)
			for _, r := range tc.rules {
				re := failed[r]
				if re == nil {
					t.Errorf("rule %q did not fail; %d rules failed", r, len(failed))
					continue
				}
				if tc.is != nil && !errors.Is(re, tc.is) {
					t.Errorf("rule %q failed with %v, want an error matching %v", r, re, tc.is)
				}
			}
		})
	}
}

// Only the methods a fault touches fail: the suite pins the failure on the
// right method instead of failing everything.
func TestCheckDecoratorPinsTheMethod(t *testing.T) {
	err := CheckDecorator(t.Context(), passWrap(faults{drop: "PublishShardOwner"}))
	var got []string
	for _, re := range RuleErrors(err) {
		got = append(got, re.Rule)
	}
	var want []string
	for _, caps := range []string{"shardowner", "outbox+shardowner", "shardowner+historiesreader", "outbox+shardowner+historiesreader"} {
		want = append(want, caps+"/differential", caps+"/forward/PublishShardOwner", caps+"/error/PublishShardOwner")
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("failed rules = %v, want exactly %v", got, want)
	}
}

// Every method of every interface has a forward rule in every capability
// combination that includes it, and an error rule when it returns an error:
// the table is derived from the interfaces, not written by hand.
func TestDecoratorRulesCoverEveryMethod(t *testing.T) {
	names := map[string]bool{}
	for _, r := range decoratorSuite.rules {
		if names[r.name] {
			t.Errorf("duplicate rule %q", r.name)
		}
		names[r.name] = true
	}
	want := 0
	for caps := range capAll + 1 {
		want += 3
		for _, name := range []string{caps.String() + "/capabilities", caps.String() + "/unwrap", caps.String() + "/differential"} {
			if !names[name] {
				t.Errorf("missing rule %q", name)
			}
		}
		for _, iface := range storeInterfaces {
			has := iface.caps == 0 || caps&iface.caps != 0
			for m := range iface.typ.Methods() {
				fwd := fmt.Sprintf("%s/forward/%s", caps, m.Name)
				if names[fwd] != has {
					t.Errorf("rule %q present = %v, want %v", fwd, names[fwd], has)
				}
				if has {
					want++
				}
				errRule := fmt.Sprintf("%s/error/%s", caps, m.Name)
				if names[errRule] != (has && returnsError(m.Type)) {
					t.Errorf("rule %q present = %v, want %v", errRule, names[errRule], has && returnsError(m.Type))
				}
				if has && returnsError(m.Type) {
					want++
				}
			}
		}
	}
	if len(names) != want {
		t.Errorf("%d decorator rules, want %d", len(names), want)
	}
}
