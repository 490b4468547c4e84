package pairing

import "github.com/aionotel/aionotel/eventstore"

// A workflow's runs and a run's activities. Most workflows hold one run
// at a time and most runs one activity, or a few, at a time: the worst
// case of the memory bound is one workflow per activity in flight. A Go
// map of one entry costs a header and a group of eight slots (about 250
// bytes for a run's activities, more for a workflow's runs), more than the
// entry itself, so each holds its first entry in a field (run1, act1) and
// makes its map (more, x.acts) for the second held at once. An entry is in
// one of the two places, never both: it is added only after a lookup of
// both missed, and the field is not refilled from the map when it empties
// (a range over the entries may be removing them).

// run returns w's run id, nil if w holds none.
func (w *workflow) run(id eventstore.RunID) *run {
	if r := w.run1; r != nil && r.id == id {
		return r
	}
	if w.more == nil {
		return nil
	}
	return w.more[id]
}

// addRun holds r, which w does not hold.
func (w *workflow) addRun(r *run) {
	if w.run1 == nil {
		w.run1 = r
		return
	}
	if w.more == nil {
		w.more = make(map[eventstore.RunID]*run)
	}
	w.more[r.id] = r
}

// removeRun lets r go.
func (w *workflow) removeRun(r *run) {
	if w.run1 == r {
		w.run1 = nil
		return
	}
	delete(w.more, r.id)
}

// empty reports whether w holds no run.
func (w *workflow) empty() bool { return w.run1 == nil && len(w.more) == 0 }

// numRuns is the number of runs w holds.
func (w *workflow) numRuns() int {
	n := len(w.more)
	if w.run1 != nil {
		n++
	}
	return n
}

// runs yields w's runs (for r := range w.runs). A run may be removed
// while they are yielded; one added may or may not be yielded.
func (w *workflow) runs(yield func(*run) bool) {
	if r := w.run1; r != nil && !yield(r) {
		return
	}
	for _, r := range w.more {
		if !yield(r) {
			return
		}
	}
}

// activity returns r's activity id, nil if r holds none.
func (r *run) activity(id eventstore.ActivityID) *activity {
	if a := r.act1; a != nil && a.id == id {
		return a
	}
	if r.x == nil || r.x.acts == nil {
		return nil
	}
	return r.x.acts[id]
}

// addActivity holds a in r, which does not hold it.
func (j *join) addActivity(r *run, a *activity) {
	if r.act1 == nil {
		r.act1 = a
		return
	}
	x := j.runFacts(r)
	if x.acts == nil {
		x.acts = make(map[eventstore.ActivityID]*activity)
	}
	x.acts[a.id] = a
	x.peak = max(x.peak, len(x.acts))
}

// removeActivity lets a go.
func (r *run) removeActivity(a *activity) {
	if r.act1 == a {
		r.act1 = nil
		return
	}
	if r.x != nil {
		delete(r.x.acts, a.id)
	}
}

// moreActivities returns the map of r's activities other than act1; nil
// if there is none.
func (r *run) moreActivities() map[eventstore.ActivityID]*activity {
	if r.x == nil {
		return nil
	}
	return r.x.acts
}

// numActivities is the number of activities r holds.
func (r *run) numActivities() int {
	n := len(r.moreActivities())
	if r.act1 != nil {
		n++
	}
	return n
}

// activities yields r's activities (for a := range r.activities). An
// activity may be removed while they are yielded; one added may or may not
// be yielded.
func (r *run) activities(yield func(*activity) bool) {
	if a := r.act1; a != nil && !yield(a) {
		return
	}
	for _, a := range r.moreActivities() {
		if !yield(a) {
			return
		}
	}
}

// wfIndex finds a workflow by its key. It maps workflow IDs, not keys: a
// key holds its namespace's string too, and the map's slots would be 40
// bytes instead of 24, the map being about a fifth of an entry's memory.
// The workflows of one ID in several namespaces (rare) are chained
// through sameID.
type wfIndex struct {
	m map[eventstore.WorkflowID]*workflow
}

// get returns the workflow k, nil if none.
func (x *wfIndex) get(k wfKey) *workflow {
	for w := x.m[k.id]; w != nil; w = w.sameID {
		if w.key.namespace == k.namespace {
			return w
		}
	}
	return nil
}

// put files w, whose key no workflow filed has.
func (x *wfIndex) put(w *workflow) {
	w.sameID = x.m[w.key.id]
	x.m[w.key.id] = w
}

// remove unfiles w.
func (x *wfIndex) remove(w *workflow) {
	id := w.key.id
	head := x.m[id]
	switch {
	case head == w && w.sameID == nil:
		delete(x.m, id)
	case head == w:
		x.m[id] = w.sameID
	default:
		for p := head; p != nil; p = p.sameID {
			if p.sameID == w {
				p.sameID = w.sameID
				break
			}
		}
	}
	w.sameID = nil
}

// all yields every workflow filed (for w := range x.all). The one yielded
// may be removed meanwhile; a workflow filed meanwhile may or may not be
// yielded.
func (x *wfIndex) all(yield func(*workflow) bool) {
	for _, w := range x.m {
		for w != nil {
			next := w.sameID
			if !yield(w) {
				return
			}
			w = next
		}
	}
}
