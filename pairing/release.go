package pairing

import (
	"context"

	"github.com/aionotel/aionotel/eventstore"
)

// ReleaseShards forgets every workflow of namespace whose shard among
// shardCount (as [eventstore.ShardOf] computes it) is listed: a node that
// lost shards (its scope narrowed, a write was refused with ErrNotOwner,
// another node took them over) no longer counts their activities as in
// flight. Each activity in flight gives its gauge slot back; no completion,
// duration or span is recorded for it or for an open run, whose spans are
// dropped unended (the node that adopted the shards exports them); what is
// remembered of those workflows goes too. The activities in flight and the
// open runs released are counted on aion.pairing.released, and their
// number returned. A shardCount <= 0 releases nothing. The cost grows with
// the workflows the tracker holds.
func (t *Tracker) ReleaseShards(ctx context.Context, namespace string, shardCount int, shards ...int) int {
	if t == nil || t.join == nil || shardCount <= 0 || len(shards) == 0 {
		return 0
	}
	release := make(map[int]bool, len(shards))
	for _, s := range shards {
		release[s] = true
	}
	fx := getEffects(orBackground(ctx))
	defer putEffects(fx)
	ns := namespaceOf(namespace)
	na := t.attrs.namespaces.Get(ns)
	n := t.join.release(ns, func(id eventstore.WorkflowID) bool { return release[eventstore.ShardOf(id, shardCount)] }, na, fx)
	t.apply(fx)
	return n
}

// release forgets the workflows of namespace ns that match: under the
// lock, so match must be the join's own code, never user code.
func (j *join) release(ns string, match func(eventstore.WorkflowID) bool, na *nsAttrs, fx *effects) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := 0
	for w := range j.workflows.all {
		k := w.key
		if k.namespace != ns || !match(k.id) {
			continue
		}
		w.clearWaiting()
		for r := range w.runs {
			for a := range r.activities {
				if a.state == actLive {
					j.leaveFlight(a)
					fx.cancel(&a.opening)
					fx.add(effect{op: opReleased, ta: a.ta, ns: na})
					n++
				}
				remove(&a.slot)
				j.unlinkActivity(a)
			}
			if r.state == runOpen {
				fx.add(effect{op: opReleased, ns: na})
				n++
			}
			fx.cancel(&r.opening)
			remove(&r.slot)
			r.state, r.started = runNone, false
			r.forget()
			j.freeRunIfEmpty(r)
		}
		if j.workflows.get(k) == w { // a workflow of positions only
			remove(&w.slot)
			j.freeWorkflow(w)
		}
	}
	fx.sealOpenings()
	return n
}
