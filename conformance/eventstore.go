package conformance

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// TestEventStore tests an [eventstore.Store] implementation against the store
// contract: the rules every store must keep, then, when the store has them,
// the [eventstore.Outbox], [eventstore.ShardOwner] and retention
// ([ClosedPruner]) rules, and with [WithNodes] the election rules between
// two nodes. Capabilities are discovered by type assertion on each fresh
// store; a rule whose capability is absent is reported as a skipped subtest
// saying so.
//
// The rules are the RuleES*, RuleOutbox*, RuleShard* and RuleNodes*
// constants, each run as in [TestKeyspace] on a fresh, empty store: no one
// else may write to it while the rule runs, since the outbox and retention
// rules see every row and workflow.
func TestEventStore(t *testing.T, newStore func(t *testing.T) eventstore.Store, opts ...Option) {
	t.Helper()
	cfg := newConfig(opts)
	eventStoreSuite.test(t, cfg, newStore)
	if cfg.nodes != nil {
		nodesSuite.test(t, cfg, cfg.nodes)
	}
}

// CheckEventStore is the error-returning core of [TestEventStore], as
// [CheckKeyspace] is of [TestKeyspace]. A capability rule whose capability
// the store lacks is not reported here (only TestEventStore reports skips)
// unless [WithRequiredCapabilities] requires the capability, which makes it
// a failure matching [ErrCapabilityMissing].
func CheckEventStore(ctx context.Context, newStore func() (eventstore.Store, func(), error), opts ...Option) error {
	cfg := newConfig(opts)
	err := eventStoreSuite.check(ctx, cfg, newStore)
	if cfg.nodes == nil || (err != nil && cfg.stopAtFirst) {
		return err
	}
	return errors.Join(err, nodesSuite.check(ctx, cfg, func() (Nodes, func(), error) {
		n := cfg.nodes(nil)
		return n, n.Close, nil
	}))
}

var (
	// bigKinds are a history with every payload field, for a batch whose
	// payloads are 1 MiB each.
	bigKinds = []string{kStart, kSignal, kSchedule, kSchedule, kDone, kFail, kContinue, kSignal, kFailWf}
	start    = []string{kStart}
	signals5 = []string{kSignal, kSignal, kSchedule, kSignal, kSchedule}
	stale    = []pos{abs(0), rel(-1), rel(3), plus(1 << 32), plus(1 << 63), abs(math.MaxUint64), abs(1<<32 + 2)}
)

func repeat(kind string, n int) []string { return slices.Repeat([]string{kind}, n) }

var eventStoreSuite = suite[eventstore.Store]{name: SuiteEventStore, rules: []rule[eventstore.Store]{
	esScript(RuleESConflictFound, 0, func(b *esb) {
		b.add(0, kStart, kSignal)
		for _, at := range stale {
			b.at(0, at, kSignal)
		}
		b.at(1, rel(3), kStart) // an unwritten workflow
	}),
	esScript(RuleESConflictWritesNone, 0, func(b *esb) {
		b.add(0, kStart, kSignal)
		for _, at := range stale {
			b.at(0, at, kSignal, kSchedule, kSignal)
			b.all(0)
			b.chain(0)
		}
		b.at(1, rel(1), kStart, kSignal)
		b.listings()
	}),
	esScript(RuleESSeqStamping, 0, func(b *esb) {
		b.add(0, append(start, signals5...)...)
		b.add(0, signals5...)
		b.all(0)
	}),
	esScript(RuleESZeroToken, 0, func(b *esb) {
		b.add(0, kStart)
		for _, f := range []esFlaw{esZeroToken, esZeroTokenEmpty} {
			b.flaw(0, f, 0)
			b.flaw(1, f, 0)
		}
		b.all(0)
		b.all(1)
		b.listings()
	}),
	esScript(RuleESBadInput, 0, func(b *esb) {
		b.add(0, kStart)
		for f := esZeroWF; f <= esZeroRunEvent; f++ {
			b.flaw(0, f, 0)
			b.flaw(0, f, -1)
		}
		b.all(0)
		b.listings()
	}),
	esScript(RuleESEmptyAppend, 0, func(b *esb) {
		b.add(0, kStart, kSignal)
		for _, at := range []pos{rel(0), abs(0), abs(math.MaxUint64)} {
			b.at(0, at)
			b.at(1, at)
		}
		b.all(0)
		b.listings()
	}),
	esScript(RuleESReadHistory, 0, func(b *esb) {
		b.add(0, kStart, kSignal)
		b.add(0, kSchedule, kDone)
		b.all(0)
		b.all(1)
	}),
	esScript(RuleESReadHistoryFrom, 0, func(b *esb) {
		b.add(0, append(start, signals5...)...)
		for _, from := range []uint64{0, 1, 2, 5, 6, 7, 100, 1<<32 + 1, 1 << 63, math.MaxUint64} {
			b.read(0, abs(from))
		}
		b.read(1, abs(1))
	}),
	esScript(RuleESRunChain, 0, func(b *esb) {
		b.add(0, kStart, kContinue)
		b.add(0, kContinue, kSignal, kComplete)
		b.chain(0)
		b.add(1, kStart, kContinue, kSignal)
		b.chain(1)
		b.chain(2)
		// A run started again is restarted in place, running or closed; a
		// continue-as-new alone creates no run.
		for _, k := range []string{kStart, kRestart, kCanAlone, kRestart, kCanAlone, kStart} {
			b.add(3, k)
			b.chain(3)
		}
	}),
	esScript(RuleESListings, 0, func(b *esb) {
		// Every lifecycle event in every state: a pause of a paused or
		// closed run, a resume of a running or closed one, a reopen of an
		// open one change nothing; a close of a paused or closed run closes
		// it.
		for _, k := range []string{kStart, kPause, kResume, kComplete, kReopen, kPause, kPause, kComplete, kResume, kPause, kFailWf, kReopen, kResume, kReopen, kPause, kReopen} {
			b.add(0, k)
			b.listings()
		}
		b.chain(0)
		for i, k := range []string{kFailWf, kCancelWf, kTimeoutWf, kContinue} {
			b.add(1+i, kStart, k)
		}
		b.listings()
		// Late events of workflow 4's first run, after its second started:
		// they change that run only, never which run is current.
		for _, k := range []string{kComplete, kPause, kReopen, kPause, kSignal, kFailWf} {
			b.add(4, kLate+k)
			b.listings()
			b.chain(4)
		}
	}),
	esScript(RuleESStreamHeads, 0, func(b *esb) {
		b.add(0, kStart, kPause)
		b.add(1, kStart, kSignal, kPause)
		b.add(2, append(start, append(signals5, kPause)...)...)
		b.listings()
		// Up to 4,097 workflows started paused, all at one instant (ties on
		// the StartedAt Query may sort by), then resumed one by one: each
		// listing at, below and past a page of 512, 1,000 and 1,024, at
		// multiples of each and past 4,096 (in the second phase only the
		// listings that change), Query by status at and past them; then
		// Query with a filter and a limit past a page.
		for _, phase := range []struct {
			kinds       []string
			from, query int // the first workflow; Query of the paused, of the running
		}{{[]string{kStart, kPause}, 3, 7}, {[]string{kResume}, 0, 8}} {
			from := phase.from
			for _, n := range []int{511, 512, 513, 999, 1000, 1001, 1023, 1024, 1025, 4096, 4097} {
				var as []esAppend
				for ; from < n; from++ {
					as = append(as, esAppend{wf: from, n: len(phase.kinds), kinds: phase.kinds, seed: b.rng.Uint64(), tied: true})
				}
				b.many(fmt.Sprintf("workflows %v up to %d", phase.kinds, n), as)
				b.listed(phase.from > 0) // all four in the first phase
				if n%512 < 2 || n%1000 < 2 {
					b.query(phase.query)
				}
			}
		}
		for i, v := range []int{0, 1, 2, 4, 6, 8} {
			b.query(v + queryVariants*(5+i%3)) // limits 1,001, 1,025 and 4,097
		}
	}),
	esScript(RuleESQuery, 0, func(b *esb) {
		for wf, k := range []string{kSignal, kPause, kComplete, kContinue, kFailWf, kSignal, kPause, kTimeoutWf} {
			b.add(wf, kStart, k)
		}
		// Every filter, alone and with each limit, from two pivots.
		for v := range 2 * queryVariants * len(queryLimits) {
			b.query(v)
		}
	}),
	esScript(RuleESTimers, 0, func(b *esb) {
		b.add(0, kStart)
		for range 6 {
			b.timer(0, 0)
		}
		b.timer(0, 1)
		b.timer(1, 2)
		for i := range timerShapes {
			b.timer(1, 6+i)
		}
		for v := range 12 {
			b.expired(v)
			b.retire(v)
		}
		b.expired(3)
	}),
	esScript(RuleESPackages, 0, func(b *esb) {
		long := keyShapes[len(keyShapes)-1]
		for _, p := range [][2]string{{"a/b", "c"}, {"a", "b/c"}, {"A", "b/c"}, {"a", "B/c"}, {"a:b", "c"}, {"a\x00b", "c"}, {"ü", long}, {"u", long[:300] + "2"}} {
			b.pkg(0, p[0], p[1])
		}
		b.pkg(5, "", "")
		b.pkg(3, "x", "c")   // a route to a stored hash
		b.pkg(3, "x", "C")   // to a hash no package has
		b.pkg(4, "A", "c")   // delete what is not stored
		b.pkg(4, "a:b", "c") // delete
		b.pkg(4, "a", "B/c") // delete one version of a type, not the other
		b.pkg(5, "", "")
		b.pkg(1, "a", "b/c")     // replace, with routes
		b.pkg(2, "a/b/c", "c/d") // a bad route stores nothing
		b.pkg(5, "", "")
	}),
	esScript(RuleESContextCancelled, 0, func(b *esb) {
		b.add(0, kStart, kSchedule)
		b.app(esAppend{wf: 0, n: 2, rows: true, kinds: []string{kSchedule, kSchedule}})
		b.timer(0, 0)
		b.pkg(0, "a", "b")
		b.claim(1)
		b.shard(0)
		for _, m := range []ctxMode{ctxCancelled, ctxExpired} {
			b.mode = m
			b.add(0, kSignal)
			b.mode = m
			b.app(esAppend{wf: 0, n: 2, rows: true, kinds: []string{kSchedule, kSchedule}})
			b.done(m)
		}
		for trip := range 8 {
			b.mode, b.trip = ctxTrip, trip
			b.app(esAppend{wf: 0, n: 3, rows: true, kinds: []string{kSchedule, kSignal, kSchedule}})
			b.mode, b.trip = ctxTrip, trip
			b.read(0, abs(1))
		}
		b.all(0)
		b.claim(100)
	}),
	esScript(RuleESRetriedAppend, 0, func(b *esb) {
		b.add(0, kStart)
		b.retry(0)
		b.add(0, kSignal, kSchedule)
		b.retry(0)
		b.retry(1)
		b.app(esAppend{wf: 0, n: 2, rows: true, kinds: []string{kSchedule, kSchedule}})
		b.retry(0)
		b.add(0, kSchedule) // scheduled without a row
		b.app(esAppend{wf: 0, n: 1, rowsOnly: true})
		b.retry(0)
		b.add(1, kStart) // another workflow: the retries of workflow 0 stay stale
		b.retry(1)
		b.retry(3)
		b.all(0)
		b.all(1)
		b.listings()
		b.claim(10)
	}),
	seeded(RuleESConcurrentAppends, esConcurrentAppends),
	esScript(RuleESAliasing, 0, func(b *esb) {
		b.app(esAppend{wf: 0, n: len(bigKinds), big: true, kinds: bigKinds})
		b.app(esAppend{wf: 0, n: 3, rows: true, kinds: repeat(kSchedule, 3)})
		b.all(0)
		b.read(0, abs(2))
		b.chain(0)
		b.pkg(0, "a", "b")
		b.pkg(5, "", "")
		b.claim(10)
		b.rearm(0)
		b.claim(10)
	}),
	esScript(RuleOutboxAtomic, CapOutbox, func(b *esb) {
		b.flaw(0, esZeroToken, 0)
		b.app(esAppend{wf: 0, n: 3, rows: true, kinds: []string{kStart, kSchedule, kSchedule}})
		b.app(esAppend{wf: 0, n: 1, at: abs(0), rows: true, kinds: []string{kSchedule}})
		b.add(0, kSchedule, kSchedule) // scheduled without rows
		for _, at := range stale {
			b.app(esAppend{wf: 0, n: 1, at: at, rowsOnly: true})
		}
		for f := esRowOtherWf; f <= esRowStagedKey; f++ {
			b.app(esAppend{wf: 0, n: 2, rows: true, flaw: f, kinds: []string{kSchedule, kSchedule}})
		}
		b.app(esAppend{wf: 0, n: 1, rowsOnly: true})
		b.claim(10)
		b.all(0)
	}),
	esScript(RuleOutboxClaim, CapOutbox, func(b *esb) {
		b.app(esAppend{wf: 0, n: 4, rows: true, kinds: append(start, repeat(kSchedule, 3)...)})
		for _, limit := range []int{0, -1, math.MinInt} {
			b.claim(limit)
		}
		b.claim(2)
		b.claim(5)
		b.claim(5)
		b.app(esAppend{wf: 1, n: 4101, rows: true, kinds: append(start, repeat(kSchedule, 4100)...)})
		b.claim(1<<32 + 1)
		b.claim(4097)
		b.claim(math.MaxInt)
	}),
	seeded(RuleOutboxConcurrentClaims, outboxConcurrentClaims),
	esScript(RuleOutboxRearm, CapOutbox, func(b *esb) {
		b.app(esAppend{wf: 0, n: 5, rows: true, kinds: append(start, repeat(kSchedule, 4)...)})
		b.claim(10)
		for v := range 4 {
			b.rearm(v)
			b.claim(1)
		}
		b.claim(10)
	}),
	esScript(RuleOutboxSettle, CapOutbox, func(b *esb) {
		b.app(esAppend{wf: 0, n: 5, rows: true, kinds: append(start, repeat(kSchedule, 4)...)})
		b.claim(1)
		for v := range 8 {
			b.cancelRow(v)
			b.claim(1)
		}
		b.claim(10)
	}),
	esScript(RuleOutboxTerminalSettles, CapOutbox, func(b *esb) {
		b.app(esAppend{wf: 0, n: 5, rows: true, kinds: append(start, repeat(kSchedule, 4)...)})
		b.claim(3)
		b.add(0, kDone, kFail, kRetry, kCancelAct)
		b.claim(10)
		// Across continue-as-new: ordinals restart at 0, and a terminal of
		// the new run settles only its own run's rows.
		b.app(esAppend{wf: 1, n: 3, rows: true, kinds: []string{kStart, kSchedule, kSchedule}})
		b.app(esAppend{wf: 1, n: 4, rows: true, kinds: []string{kContinue, kSchedule, kSchedule}})
		b.add(1, kDone, kTimeoutAct)
		b.claim(10)
		b.app(esAppend{wf: 1, n: 4, rowsOnly: true})
		b.claim(10)
	}),
	esScript(RuleOutboxSettleWorkflow, CapOutbox, func(b *esb) {
		// Twelve rows of workflow 0: staging order is not the order of
		// their keys (the conventional key of ordinal 10 sorts before 2's).
		for wf, n := range []int{11, 3} {
			b.app(esAppend{wf: wf, n: 1 + n, rows: true, kinds: append(start, repeat(kSchedule, n)...)})
		}
		b.app(esAppend{wf: 0, n: 3, rows: true, kinds: []string{kContinue, kSchedule}})
		b.claim(1)
		b.cancelRow(0)
		for v := range 3 {
			b.cancelWf(0, v)
		}
		b.cancelWf(0, 0)
		b.claim(10)
	}),
	esScript(RuleShardAcquireOne, CapShardOwner, func(b *esb) { b.shard(2); b.shard(1); b.shard(7); b.shard(2) }),
	esScript(RuleShardAcquireMany, CapShardOwner, func(b *esb) { b.shard(1); b.shard(0); b.shard(1); b.shard(2) }),
	esScript(RuleShardPublishNotOwner, CapShardOwner, func(b *esb) { b.shard(2); b.shard(3) }),
	esScript(RuleShardNegative, CapShardOwner, func(b *esb) {
		for range 6 {
			b.shard(1)
			b.shard(3)
		}
	}),
	esScript(RuleShardScopeEveryShard, CapShardOwner, func(b *esb) {
		for wf := range 3 {
			b.add(wf, kStart, pick(b.rng, kSignal, kPause))
			b.timer(wf, 0)
		}
		b.shard(5)
		b.shard(6)
		b.shard(4)
		b.shard(6)
		b.done(ctxCancelled)
		b.shard(5)
		b.done(ctxExpired)
	}),
	esScript(RuleESRetention, 0, func(b *esb) {
		kinds := []string{kComplete, kFailWf, kCancelWf, kTimeoutWf, kContinue, kSignal, kPause}
		for wf, k := range kinds {
			b.app(esAppend{wf: wf, n: 3, rows: true, kinds: []string{kStart, kSchedule, k}})
			b.timer(wf, 0)
		}
		b.add(0, kReopen)
		b.claim(1)
		for _, v := range []int{3, 0, 1, 0, 2} {
			b.prune(v)
			b.listings()
		}
		b.add(1, kStart)
		b.all(1)
		b.expired(3)
		b.claim(10)
	}),
	// The costly fixed rule, then the model rule, the longest, run last.
	esScript(RuleESSizes, 0, func(b *esb) {
		// A chain of 1,025 runs (continued as new 1,024 times), read at,
		// below and past 100, 512, 1,000 and 1,024 runs; its history of
		// 2,049 events read whole and from where exactly 1,000 (a page)
		// remain, and next to it.
		b.add(0, kStart)
		runs := 1
		for _, n := range []int{100, 101, 512, 513, 1000, 1001, 1024, 1025} {
			b.add(0, repeat(kContinue, n-runs)...)
			runs = n
			b.chain(0)
		}
		b.all(0)
		for _, rest := range []int64{1, 512, 513, 999, 1000, 1001, 1024, 1025, 2000, 2048, 2049} {
			b.read(0, rel(1-rest))
		}
		// Rows staged at one instant (ties on the CreatedAt claims may sort
		// by): exactly 1,000 claimed whole, then of 1,025 more a page of
		// 1,024 and the one left.
		b.app(esAppend{wf: 1, n: 1001, rows: true, tied: true, kinds: append(start, repeat(kSchedule, 1000)...)})
		b.claim(math.MaxInt)
		b.app(esAppend{wf: 1, n: 1025, rows: true, tied: true, kinds: repeat(kSchedule, 1025)})
		b.claim(1024)
		b.claim(math.MaxInt)
		// 4,097 due timers on one workflow, one second apart but for the
		// 3,072nd to the 4,096th, due at one instant (a page of 512, 1,000
		// or 1,024 ends amid them), IDs of every length a column or an
		// index cuts (255, 256, 4,097 and 65,537 bytes among them), read
		// with exactly 512, 1,000, 1,024 and 4,096 due, next to each,
		// 2,000, 2,048, 2,049 and 3,071.
		timerAt := func(i int) time.Time {
			if i >= 3071 && i < 4096 {
				i = 3071
			}
			return time.Unix(1_600_000_000+int64(i), 0).UTC()
		}
		b.push("ScheduleTimer of 4,097 timers", func(m *esModel) error {
			for i := range 4097 {
				id := fmt.Sprintf("%s%05d", m.g.salt, i)
				if n := []int{255, 256, 4097, 65537}[i/500%4]; i%500 == 7 {
					id += strings.Repeat("t", n-len(id))
				}
				e := eventstore.TimerEntry{WorkflowID: m.wf(0).id, TimerID: eventstore.TimerID(id), FireAt: timerAt(i), ArmedSeq: uint64(i)}
				if err := m.s.ScheduleTimer(m.ctx, e.WorkflowID, e.TimerID, e.FireAt, e.ArmedSeq); err != nil {
					return fmt.Errorf("ScheduleTimer(timer %d of %d bytes): %w", i, len(id), err)
				}
				tick(m.ctx)
				m.timers[timerKey{e.WorkflowID, e.TimerID}] = e
			}
			return nil
		})
		for _, due := range []int{511, 512, 513, 999, 1000, 1001, 1023, 1024, 1025, 2000, 2048, 2049, 3071, 4096, 4097} {
			b.push(fmt.Sprintf("ExpiredTimers with %d due", due), func(m *esModel) error { return m.expiredAsOf(timerAt(due - 1)) })
		}
		// Exactly 1,000 and 2,000 workflows, then one more: the listings
		// and Query at a page and past it.
		from := 2 // workflows 0 and 1 are started
		for _, upTo := range []int{1000, 2000, 2001} {
			var starts []esAppend
			for ; from < upTo; from++ {
				starts = append(starts, esAppend{wf: from, n: 1, kinds: start, seed: uint64(from)})
			}
			b.many(fmt.Sprintf("start workflows up to %d", upTo), starts)
			b.listings()
			b.query(0)
			b.histories(upTo)
		}
	}),
	// The model rule, the longest, runs last.
	seeded(RuleESModel, esModelRule),
}}

// esb builds the steps of an event store rule; mode and trip apply to the
// next append or read only.
type esb struct{ builder[*esModel] }

// do pushes a step with a seed of its own, the same in every replay; one
// of an Outbox or ShardOwner method (caps) is a no-op for a store without
// the capability (the rules needing it skip before).
func (b *esb) do(caps Capabilities, what string, f func(m *esModel, seed uint64) error) {
	seed := b.rng.Uint64()
	b.push(what, func(m *esModel) error {
		if caps&CapOutbox != 0 && m.ob == nil || caps&CapShardOwner != 0 && m.so == nil {
			return nil
		}
		return f(m, seed)
	})
}

// op pushes a step of a model operation by variant; call is its name and
// first arguments, up to the variant's.
func (b *esb) op(caps Capabilities, call string, f func(m *esModel, variant int, seed uint64) error, variant int) {
	b.do(caps, fmt.Sprintf("%svariant %d)", call, variant), func(m *esModel, seed uint64) error { return f(m, variant, seed) })
}

func (b *esb) app(a esAppend) {
	a.seed, a.mode, a.trip = b.rng.Uint64(), b.mode, b.trip
	b.push(a.String(), func(m *esModel) error { return m.append(a) })
}

func (b *esb) add(wf int, kinds ...string) { b.app(esAppend{wf: wf, n: len(kinds), kinds: kinds}) }
func (b *esb) at(wf int, at pos, kinds ...string) {
	b.app(esAppend{wf: wf, n: len(kinds), kinds: kinds, at: at})
}
func (b *esb) flaw(wf int, f esFlaw, where int) {
	b.app(esAppend{wf: wf, n: 3, flaw: f, where: where, kinds: []string{kSignal, kSchedule, kSignal}})
}

// many pushes one step of the appends as.
func (b *esb) many(what string, as []esAppend) {
	b.push(what, func(m *esModel) error {
		for _, a := range as {
			if err := m.append(a); err != nil {
				return fmt.Errorf("%v: %w", a, err)
			}
		}
		return nil
	})
}

func (b *esb) read(wf int, from pos) {
	mode, trip := b.mode, b.trip
	b.push(fmt.Sprintf("ReadHistoryFrom(workflow %d, %v)", wf, from), func(m *esModel) error { return m.readFrom(m.wf(wf), from, mode, trip) })
}

func (b *esb) all(wf int) {
	b.push(fmt.Sprintf("ReadHistory(workflow %d)", wf), func(m *esModel) error { return m.readAll(m.wf(wf)) })
}

func (b *esb) chain(wf int) {
	b.push(fmt.Sprintf("ReadRunChain(workflow %d)", wf), func(m *esModel) error { return m.chain(m.wf(wf)) })
}

// histories reads n histories in one ReadHistories call (a store without
// the capability skips it).
func (b *esb) histories(n int) {
	b.push(fmt.Sprintf("ReadHistories(workflows 0 to %d, an unknown one amid them, workflow 0 again)", n-3), func(m *esModel) error { return m.histories(n) })
}

func (b *esb) listings() { b.listed(true) }

// listed judges ListActive and ListPaused, with every ListWorkflowIDs and
// StreamHeads too.
func (b *esb) listed(every bool) {
	what := "ListActive, ListPaused"
	if every {
		what = "ListWorkflowIDs, " + what + ", StreamHeads"
	}
	b.push(what, func(m *esModel) error { return m.listed(every) })
}

// done calls every method but the appends with a done context.
func (b *esb) done(mode ctxMode) {
	b.push(fmt.Sprintf("every method with a done context%s", modeString(mode, 0)), func(m *esModel) error { return m.doneCalls(mode) })
}

func (b *esb) query(v int)     { b.op(0, "Query(", (*esModel).query, v) }
func (b *esb) rearm(v int)     { b.op(CapOutbox, "RearmOutboxPending(", (*esModel).rearm, v) }
func (b *esb) cancelRow(v int) { b.op(CapOutbox, "SettleOutboxRowCancelled(", (*esModel).cancelRow, v) }
func (b *esb) retire(v int)    { b.op(0, "RetireTimer(", (*esModel).retire, v) }
func (b *esb) expired(v int)   { b.op(0, "ExpiredTimers(", (*esModel).expired, v) }
func (b *esb) shard(v int)     { b.op(CapShardOwner, "shards(", (*esModel).shard, v) }
func (b *esb) prune(v int)     { b.op(0, "PruneClosed(", (*esModel).prune, v) }

func (b *esb) claim(limit int) {
	b.do(CapOutbox, fmt.Sprintf("ClaimOutboxRows(%d)", limit), func(m *esModel, _ uint64) error { return m.claim(limit) })
}

func (b *esb) cancelWf(wf, v int) {
	b.op(CapOutbox, fmt.Sprintf("SettleWorkflowOutboxRowsCancelled(workflow %d, ", wf), func(m *esModel, v int, _ uint64) error {
		return m.cancelWf(m.wf(wf), v)
	}, v)
}

func (b *esb) timer(wf, v int) {
	b.op(0, fmt.Sprintf("ScheduleTimer(workflow %d, ", wf), func(m *esModel, v int, seed uint64) error { return m.schedule(m.wf(wf), v, seed) }, v)
}

func (b *esb) pkg(v int, typ, hash string) {
	b.op(0, fmt.Sprintf("packages(%q, %q, ", short(typ), short(hash)), func(m *esModel, v int, seed uint64) error { return m.pkg(v, seed, typ, hash) }, v)
}

func (b *esb) retry(back int) {
	b.push(fmt.Sprintf("the append accepted %d before the last, again at its expectedSeq", back), func(m *esModel) error { return m.retry(back) })
}

// esScript makes a fixed rule of a script: the same steps whatever the
// seed, run against the model; caps are the capabilities it needs.
func esScript(name string, caps Capabilities, script func(b *esb)) rule[eventstore.Store] {
	b := &esb{builder[*esModel]{rng: newRand(1, name)}}
	script(b)
	return fixed(name, func(ctx context.Context, s eventstore.Store) error {
		if err := lacks(s, caps); err != nil {
			return err
		}
		_, err := runSteps(ctx, s, newESModel(ctx, 1, 8, 1), b.steps)
		return err
	})
}

// The sizes of the event store model rule at scale 1: one history past
// 4,096 events, 300 workflows (the stream-heads rule lists more than
// 4,096), a batch of 4,100 events and rows, payloads past 64 KiB and of
// 1 MiB.
const (
	esLongHistory = 4_400
	esWorkflows   = 300
	esRandomOps   = 1_500
)

// esModelRule: a seeded sequence of appends good and bad through both
// paths, reads at boundary offsets, run chains, listings and Query through
// the whole lifecycle, and, with the capabilities, the outbox, fenced
// timers, packages, elections and retention, each result compared with
// the model.
func esModelRule(ctx context.Context, env *ruleEnv[eventstore.Store], s eventstore.Store) error {
	// Rows go with appends when the store has the Outbox, and outbox steps
	// are no-ops without it.
	rng, scale := newRand(env.cfg.seed, RuleESModel), env.cfg.scale
	n := esWorkflows * scale
	_, prunes := s.(ClosedPruner)
	b := &esb{builder[*esModel]{rng: rng}}
	// The long history, in batches of varied size, one big.
	for total, i := 0, 0; total < esLongHistory*scale; i++ {
		size := 1 + rng.IntN(400)
		b.app(esAppend{wf: 0, n: size, rows: true, partial: true, big: i == 3})
		total += size
	}
	// One batch with a 1 MiB payload in every payload field, one of 4,101
	// events and rows; then every other workflow starts, in random order,
	// some going further at once.
	b.app(esAppend{wf: n, n: len(bigKinds), big: true, kinds: bigKinds})
	b.app(esAppend{wf: n - 1, n: 4101, rows: true, kinds: append(start, repeat(kSchedule, 4100)...)})
	var starts []esAppend
	for _, w := range rng.Perm(n - 2) {
		starts = append(starts, esAppend{wf: w + 1, n: 1 + rng.IntN(3)*rng.IntN(2), rows: true, partial: true, seed: rng.Uint64()})
	}
	b.many(fmt.Sprintf("the first appends of %d workflows", len(starts)), starts)
	wf := func() int {
		if rng.IntN(5) == 0 {
			return 0
		}
		return rng.IntN(n - 1)
	}
	ops := esRandomOps * scale
	if raceDetector {
		ops /= 4
	}
	for range ops {
		w := wf()
		switch r := rng.IntN(60); {
		case r < 3:
			b.mode, b.trip = pick(rng, ctxCancelled, ctxExpired, ctxTrip, ctxTrip), rng.IntN(5)
			b.app(esAppend{wf: w, n: 1 + rng.IntN(4), rows: true, partial: true})
		case r < 18:
			b.app(esAppend{wf: w, n: 1 + rng.IntN(5), rows: rng.IntN(4) != 0, partial: true, rowsOnly: rng.IntN(10) == 0})
		case r < 20 && rng.IntN(3) == 0:
			b.retry(rng.IntN(retriesKept))
		case r < 20:
			b.app(esAppend{wf: w, n: rng.IntN(3), at: pick(rng, stale...), rowsOnly: rng.IntN(2) == 0})
		case r < 23:
			b.app(esAppend{wf: w, n: 1 + rng.IntN(3), flaw: esFlaw(1 + rng.IntN(int(esRowStagedKey))), where: rng.IntN(5) - 2, rows: true})
		case r < 28:
			if rng.IntN(6) == 0 {
				b.mode, b.trip = ctxTrip, rng.IntN(3)
			}
			from := pick(rng, rel(0), rel(-1), rel(-int64(rng.IntN(50))), rel(1), abs(0), abs(1), abs(1<<32+1), abs(1<<63), abs(math.MaxUint64))
			if w == 0 && from.isAbs && from.abs < 2 {
				from = rel(-100) // the long history is read whole in the final sweep
			}
			b.read(w, from)
		case r < 30:
			b.chain(w)
		case r < 31:
			b.listings()
		case r < 33:
			b.query(rng.IntN(queryVariants * len(queryLimits)))
		case r < 40:
			switch rng.IntN(5) {
			case 0:
				b.rearm(rng.IntN(4))
			case 1:
				b.cancelRow(rng.IntN(4))
			case 2:
				b.cancelWf(w, rng.IntN(5))
			default:
				b.claim(pick(rng, append(boundaryInt, 1, 2, 3, 4)...))
			}
		case r < 46:
			switch rng.IntN(3) {
			case 0:
				b.timer(w, rng.IntN(6))
			case 1:
				b.retire(rng.IntN(6))
			default:
				b.expired(rng.IntN(4))
			}
		case r < 52:
			b.pkg(rng.IntN(6), "", "")
		case r < 55:
			b.shard(pick(rng, 0, 1, 2, 3, 7, 0, 1, 2, 3, 7, 4, 5, 6))
		case r < 56 && prunes:
			b.prune(rng.IntN(4))
		}
	}
	// The final sweep.
	for w := range n + 1 {
		b.all(w)
		b.chain(w)
	}
	for _, from := range []uint64{255, 256, 4095, 4096, 4097} {
		b.read(0, abs(from))
	}
	b.listings()
	for v := range queryVariants {
		b.query(v)
	}
	b.shard(5)
	b.listings()
	b.claim(math.MaxInt)
	for i := range timerShapes {
		b.timer(0, 6+i)
	}
	b.expired(3)
	b.pkg(5, "", "")
	return runModel(ctx, env, s, newESModel(ctx, rng.Uint64(), n, scale), b.steps)
}
