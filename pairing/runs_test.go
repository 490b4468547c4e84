package pairing

import (
	"testing"
	"unsafe"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/internal/catalog"
)

// The workflow index chains the workflows of one ID in several
// namespaces: each is found under its own key, removing one (first,
// middle or last of its chain) leaves the others, and a range over the
// index yields each once, also while it removes the one yielded.
func TestWorkflowIndexChains(t *testing.T) {
	x := wfIndex{m: map[eventstore.WorkflowID]*workflow{}}
	var ws []*workflow
	for _, ns := range []string{"a", "b", "c", "d"} {
		w := &workflow{key: wfKey{namespace: ns, id: wfID(1)}}
		x.put(w)
		ws = append(ws, w)
	}
	other := &workflow{key: wfKey{namespace: "a", id: wfID(2)}}
	x.put(other)
	for _, w := range append(ws, other) {
		if got := x.get(w.key); got != w {
			t.Errorf("get(%v) = %p, want %p", w.key, got, w)
		}
	}
	if got := x.get(wfKey{namespace: "e", id: wfID(1)}); got != nil {
		t.Errorf("get of a namespace never filed = %v, want nil", got.key)
	}
	// ws[3] heads the chain (put prepends), ws[0] ends it.
	for _, i := range []int{1, 3, 0} {
		x.remove(ws[i])
		if ws[i].sameID != nil {
			t.Errorf("removed %v still chained", ws[i].key)
		}
		if got := x.get(ws[i].key); got != nil {
			t.Errorf("removed %v still found", ws[i].key)
		}
	}
	if got := x.get(ws[2].key); got != ws[2] {
		t.Errorf("the one left of the chain is not found: %p", got)
	}
	x.put(ws[1])
	seen := map[*workflow]int{}
	for w := range x.all {
		seen[w]++
		x.remove(w)
	}
	if len(seen) != 3 || seen[ws[1]] != 1 || seen[ws[2]] != 1 || seen[other] != 1 {
		t.Errorf("all yielded %v, want ws[1], ws[2] and other once each", seen)
	}
	if len(x.m) != 0 {
		t.Errorf("%d IDs left after removing every workflow", len(x.m))
	}
}

// The first run of a workflow and the first activity of a run are held in
// a field, the others in a map made for the second: whichever goes first,
// the others are still found, a new one takes the free field, and the
// join's invariants (check) hold at every step.
func TestEntriesBeyondTheFirst(t *testing.T) {
	h := newHarness(t, WithTimelineSpans(false))
	step := func(what string) {
		t.Helper()
		if err := h.tr.join.check(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	for i := range uint64(4) {
		if !h.tr.Dispatched(bg, key("n", 1, 1, i), "charge", ts(0)) {
			t.Fatalf("dispatch %d not new", i)
		}
		step("dispatch")
	}
	if !h.tr.Finished(bg, key("n", 1, 1, 0), OutcomeSucceeded, ts(5)) { // the one in the field
		t.Fatal("terminal of the first activity did not pair")
	}
	step("first settled")
	if !h.tr.Dispatched(bg, key("n", 1, 1, 4), "charge", ts(6)) {
		t.Fatal("a fifth activity not new")
	}
	step("fifth dispatched")
	if h.tr.Dispatched(bg, key("n", 1, 1, 0), "charge", ts(7)) {
		t.Error("the settled first activity dispatched again counted as new")
	}
	for _, i := range []uint64{2, 4, 1, 3} {
		if !h.tr.Finished(bg, key("n", 1, 1, i), OutcomeSucceeded, ts(10)) {
			t.Errorf("terminal of activity %d did not pair", i)
		}
		step("settled")
	}
	if got := h.tr.InFlight(); got != 0 {
		t.Errorf("InFlight = %d, want 0", got)
	}

	// Runs: three open in one workflow, the first closed, a fourth opened.
	for r := byte(1); r <= 3; r++ {
		if !h.tr.RunStarted(bg, "n", wfID(2), runID(r), "order", ts(0)) {
			t.Fatalf("run %d not new", r)
		}
		h.tr.Dispatched(bg, key("n", 2, r, 0), "charge", ts(1))
		step("run started")
	}
	if n := h.tr.RunClosed(bg, "n", wfID(2), runID(1), eventstore.StatusCompleted, ts(20)); n != 1 {
		t.Errorf("closing the first run settled %d activities, want 1", n)
	}
	step("first run closed")
	if !h.tr.RunStarted(bg, "n", wfID(2), runID(4), "order", ts(21)) {
		t.Error("a fourth run not new")
	}
	step("fourth run started")
	if h.tr.RunStarted(bg, "n", wfID(2), runID(2), "order", ts(22)) {
		t.Error("the second run, held in the map, started again counted as new")
	}
	for r := byte(2); r <= 4; r++ {
		h.tr.RunClosed(bg, "n", wfID(2), runID(r), eventstore.StatusCompleted, ts(30))
		step("run closed")
	}
	if got := h.tr.InFlight(); got != 0 {
		t.Errorf("InFlight = %d after every run closed, want 0", got)
	}
	h.assertMetric(wantCompleted(
		point(attrs("n", "charge", OutcomeSucceeded), 5),
		point(attrs("n", "charge", OutcomeAbandoned), 3),
	))
}

// The workflows of one ID in several namespaces are separate entries
// (chained in the join's index): settling, evicting or releasing one
// leaves the others as they were.
func TestSameWorkflowIDAcrossNamespaces(t *testing.T) {
	h := newHarness(t, WithTimelineSpans(false), WithMaxInFlight(3))
	for _, ns := range []string{"a", "b", "c"} {
		if !h.tr.Dispatched(bg, key(ns, 1, 1, 0), "charge", ts(0)) {
			t.Fatalf("%s: dispatch not new", ns)
		}
	}
	if !h.tr.Finished(bg, key("b", 1, 1, 0), OutcomeSucceeded, ts(5)) {
		t.Fatal("b: terminal did not pair")
	}
	if n := h.tr.ReleaseShards(bg, "c", 1, 0); n != 1 {
		t.Errorf("releasing namespace c released %d, want 1", n)
	}
	if err := h.tr.join.check(); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"d", "e", "f"} { // the third evicts a's, the oldest
		h.tr.Dispatched(bg, key(ns, 1, 1, 0), "charge", ts(6))
	}
	if err := h.tr.join.check(); err != nil {
		t.Fatal(err)
	}
	if h.tr.Finished(bg, key("a", 1, 1, 0), OutcomeSucceeded, ts(9)) {
		t.Error("a: evicted, yet its terminal settled it")
	}
	for _, ns := range []string{"d", "e", "f"} {
		if !h.tr.Finished(bg, key(ns, 1, 1, 0), OutcomeFailed, ts(9)) {
			t.Errorf("%s: terminal did not pair", ns)
		}
	}
	if got := h.tr.InFlight(); got != 0 {
		t.Errorf("InFlight = %d, want 0", got)
	}
	if err := h.tr.join.check(); err != nil {
		t.Fatal(err)
	}
}

// An activity's rarer facts (terminal, retries, claims) are reused once
// it is freed: an activity that gets them later starts clean, so its span
// carries none of the earlier one's retries or claims, and no wait is
// recorded for it without a claim of its own.
func TestReusedFactsStartClean(t *testing.T) {
	h := newHarness(t, WithMaxRemembered(1))
	first, second := key("n", 1, 1, 0), key("n", 2, 1, 0)
	h.tr.Dispatched(bg, first, "charge", ts(0))
	h.stage(first)
	h.claim(first, ts(2))
	h.tr.Retried(bg, first, ts(3))
	h.tr.Retried(bg, first, ts(4))
	h.tr.Finished(bg, first, OutcomeSucceeded, ts(10))
	if len(h.tr.join.freeFacts) == 0 {
		t.Fatal("the settled activity's facts were not given back for reuse")
	}
	h.spans.Reset()

	h.tr.Dispatched(bg, second, "charge", ts(20))
	h.tr.Retried(bg, second, ts(21)) // takes the reused facts
	h.tr.Finished(bg, second, OutcomeFailed, ts(30))
	if err := h.tr.join.check(); err != nil {
		t.Fatal(err)
	}
	s, ok := h.ended()["activity charge"]
	if !ok {
		t.Fatal("the second activity's span was not ended")
	}
	if got := len(s.Events()); got != 1 || s.Events()[0].Name != catalog.RetryEvent {
		t.Errorf("second activity's span events = %v, want its one retry", s.Events())
	}
	wantAttr(t, s, catalog.RetryCount.Int64(1))
	h.assertMetric(wantWait(hist(attrs("n", "charge"), 0.002))) // the first's only
}

// The sizes the package doc gives for an entry's parts, on 64-bit
// platforms: what BenchmarkHeapPerEntry's figure is made of. A field
// added to one of them must find room in its size class or move to its
// side struct (activityFacts, runFacts).
func TestEntrySizes(t *testing.T) {
	if unsafe.Sizeof(uintptr(0)) != 8 {
		t.Skip("sizes are given for 64-bit platforms")
	}
	for _, c := range []struct {
		name      string
		size, max uintptr
	}{
		{"activity", unsafe.Sizeof(activity{}), 128},
		{"run", unsafe.Sizeof(run{}), 112},
		{"workflow", unsafe.Sizeof(workflow{}), 128},
	} {
		if c.size > c.max {
			t.Errorf("%s is %d bytes, over the %d the package doc gives", c.name, c.size, c.max)
		}
	}
}
