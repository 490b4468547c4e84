package pairing

import (
	"container/heap"
	"context"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/livetracer"
)

// The wait for a worker. Two facts come from the outbox rather than from
// history: a row staged for an activity (the append that committed it,
// through Outbox.AppendWithOutbox), and a row claimed by a worker
// (Outbox.ClaimOutboxRows), at the time of the claim. Each joins its
// activity like the facts of history: remembered until its dispatch
// arrives, once however often it repeats, bounded by WithMaxRemembered.
//
//   - An activity waits while it is in flight, a row was staged for it and
//     no claim of it is known; the oldest waiting of each type is the
//     aion.activity.oldest_waiting_age gauge. An activity dispatched with
//     no row (a plain Append, a store without an outbox) never waits.
//   - Its wait, from the dispatch to the earliest claim known when the two
//     meet, is recorded once in aion.activity.wait.duration, whether or not
//     the activity has settled since, and only if its dispatch was seen
//     committing here: a dispatch read back (a resume) may have been
//     claimed before the restart, so a claim now could be a re-claim.
//   - Every claim becomes an aion.activity.claim event on the activity
//     span, at its time, numbered by aion.activity.claim_count.
//
// Claims have no history position: a claim that arrives after its
// activity's completion was recorded (and the activity kept only as a
// range of its run) changes nothing, as a repeat does.

// maxClaims bounds the claims an activity remembers (a row re-armed and
// claimed again and again); past it the latest are not kept.
const maxClaims = 8

// Staged records that outbox rows dispatching activities of workflowID in
// namespace were staged, as Outbox.AppendWithOutbox does in the commit that
// schedules them: from then on, while in flight and until a claim of its
// row is known, each activity waits for a worker (see [Tracker.Claimed]).
// A row's WorkflowID, if not zero, must be workflowID (a row naming another
// workflow is ignored, as the store refuses it); its RunID and Ordinal name
// the activity. A row staged before its dispatch is observed is remembered
// until it is; a row staged again changes nothing. Staged returns the
// number of activities it put to waiting.
func (t *Tracker) Staged(ctx context.Context, namespace string, workflowID eventstore.WorkflowID, rows []eventstore.OutboxRow) int {
	return t.staged(ctx, livetracer.Lookup{}, namespace, workflowID, rows)
}

// staged is Staged in a call whose look at the global provider is lk.
func (t *Tracker) staged(ctx context.Context, lk livetracer.Lookup, namespace string, workflowID eventstore.WorkflowID, rows []eventstore.OutboxRow) int {
	if t == nil || t.join == nil || len(rows) == 0 {
		return 0
	}
	fx := getEffectsAt(orBackground(ctx), lk)
	defer putEffects(fx)
	n := t.join.outbox(namespaceOf(namespace), workflowID, rows, 0, false, fx)
	t.apply(fx)
	return n
}

// Claimed records that rows, as Outbox.ClaimOutboxRows returned them, were
// claimed by a worker at at (a zero time is now): each activity named by a
// row's WorkflowID, RunID and Ordinal in namespace stops waiting, and, the
// first time a claim of it meets its dispatch, at minus the dispatch's
// time is recorded in aion.activity.wait.duration under the namespace and
// the dispatch's activity type (0 if at is before the dispatch). A row
// claimed again (re-armed after its worker was lost) records no second
// wait; every claim, the first and the later ones, becomes an
// aion.activity.claim event on the activity span. A claim that arrives
// before its dispatch is remembered until the dispatch is observed; a
// dispatch the tracker read back rather than saw committing (a resume)
// records no wait, since its row may have been claimed before. Claimed
// returns the number of waits it recorded.
//
// ctx is passed to the histogram: its span (the claim call's) is the
// exemplar.
func (t *Tracker) Claimed(ctx context.Context, namespace string, rows []eventstore.OutboxRow, at time.Time) int {
	return t.claimed(ctx, livetracer.Lookup{}, namespace, rows, at)
}

// claimed is Claimed in a call whose look at the global provider is lk.
func (t *Tracker) claimed(ctx context.Context, lk livetracer.Lookup, namespace string, rows []eventstore.OutboxRow, at time.Time) int {
	if t == nil || t.join == nil || len(rows) == 0 {
		return 0
	}
	fx := getEffectsAt(orBackground(ctx), lk)
	defer putEffects(fx)
	t.join.outbox(namespaceOf(namespace), eventstore.WorkflowID{}, rows, nanos(at), true, fx)
	n := 0
	for _, e := range fx.list {
		if e.op == opWait {
			n++
		}
	}
	t.apply(fx)
	return n
}

// outbox applies the staging (claim false) or the claim at at of each of
// rows, of namespace ns, and returns how many activities the staging put
// to waiting. wf, when not zero, is the workflow every row must name.
func (j *join) outbox(ns string, wf eventstore.WorkflowID, rows []eventstore.OutboxRow, at int64, claim bool, fx *effects) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for i := range rows {
		row := &rows[i]
		id := row.WorkflowID
		switch {
		case wf.IsZero():
		case id.IsZero():
			id = wf
		case id != wf:
			continue
		}
		w := j.workflowOf(wfKey{namespace: ns, id: id})
		a := j.activityOf(j.runOf(w, row.RunID), row.Ordinal)
		switch {
		case a == nil: // settled and recorded: too late to matter
		case claim:
			j.claim(a, at, fx)
		case j.stage(a):
			n++
		}
		j.settle(w)
	}
	j.trim(fx)
	fx.sealOpenings()
	return n
}

// stage applies a staging fact to a and reports whether it put a to
// waiting.
func (j *join) stage(a *activity) bool {
	if a.staged {
		return false
	}
	a.staged = true
	if !a.dispatched {
		j.place(a, &j.remembered)
		return false
	}
	j.waitsOf(a.ta)
	return j.startWaiting(a)
}

// claim applies a claim at at to a. A claim at the time of one known is
// the same claim.
func (j *join) claim(a *activity, at int64, fx *effects) {
	x := j.facts(a)
	i := len(x.claims)
	for k, c := range x.claims {
		if c == at {
			return // a repeat
		}
		if at < c {
			i = k
			break
		}
	}
	if i == maxClaims {
		return
	}
	if len(x.claims) == maxClaims {
		x.claims = x.claims[:maxClaims-1]
	}
	x.claims = append(x.claims, 0)
	copy(x.claims[i+1:], x.claims[i:])
	x.claims[i] = at
	j.stopWaiting(a)
	if !a.dispatched {
		j.place(a, &j.remembered)
		return
	}
	j.recordWait(a, fx)
}

// joinOutbox applies to a, just dispatched, the outbox facts that arrived
// before its dispatch.
func (j *join) joinOutbox(a *activity, fx *effects) {
	if a.staged {
		j.waitsOf(a.ta) // its type has a waiting point from now on
	}
	j.recordWait(a, fx)
}

// recordWait records a's wait, once: when its dispatch, seen committing
// here, and a claim of it are both known.
func (j *join) recordWait(a *activity, fx *effects) {
	if a.waited || !a.dispatched || !a.counted || len(a.claims()) == 0 {
		return
	}
	a.waited = true
	fx.add(effect{op: opWait, ta: a.ta, from: a.dat, to: a.x.claims[0]})
}

// waitsOf returns the waiting heap of type ta, making it if missing: every
// type that had a dispatch with a staged row has a waiting point (0 while
// none waits), whatever order the two arrived in.
func (j *join) waitsOf(ta *typeAttrs) *byDispatch {
	h := j.waits[ta]
	if h == nil {
		h = &byDispatch{slot: slotWaiting}
		j.waits[ta] = h
	}
	return h
}

// startWaiting puts a in its type's waiting heap if it waits: in flight,
// staged, unclaimed. It reports whether it did.
func (j *join) startWaiting(a *activity) bool {
	if a.waiting || a.state != actLive || !a.staged || len(a.claims()) > 0 {
		return false
	}
	a.waiting = true
	heap.Push(j.waitsOf(a.ta), a)
	return true
}

// stopWaiting takes a out of its type's waiting heap, if it is there.
func (j *join) stopWaiting(a *activity) {
	if a.waiting {
		j.waits[a.ta].remove(a)
		a.waiting = false
	}
}

// waitsForPartner reports whether a, not in flight, holds facts of history
// that wait for their partner or for positions: dropping it loses them.
// Outbox facts alone do not count: a claim of a row whose dispatch this
// process never sees (another node's workflow) is routine.
func (a *activity) waitsForPartner() bool {
	return a.state != actDone && (a.dispatched || a.hasTerm || len(a.retries()) > 0 || a.extraRetries() > 0)
}
