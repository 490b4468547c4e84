package pairing

import (
	"testing"

	"github.com/aionotel/aionotel/eventstore"
)

// Equal keys hash equally; a key's run hash is its run's; keys differing in
// any one field (namespace, any byte of either UUID, the activity position)
// get different hashes. Fixed, patterned IDs are the hard case for a cheap
// mixer, so the test uses them rather than random ones.
func TestHasher(t *testing.T) {
	h := newHasher()
	base := key("tenant-a", 1, 1, 0)
	rh, kh := h.hashes(base)
	if rh2, kh2 := h.hashes(base); rh2 != rh || kh2 != kh {
		t.Fatal("hashes are not deterministic")
	}
	if h.run(base.run()) != rh {
		t.Error("a key's run hash differs from its run's hash")
	}
	if rhA, _ := h.hashes(key("tenant-a", 1, 1, 42)); rhA != rh {
		t.Error("activities of one run have different run hashes")
	}

	seen := map[uint64]Key{kh: base}
	add := func(k Key) {
		t.Helper()
		_, kh := h.hashes(k)
		if prev, dup := seen[kh]; dup {
			t.Errorf("%+v and %+v share a key hash", prev, k)
		}
		seen[kh] = k
	}
	add(key("tenant-b", 1, 1, 0))
	add(key("", 1, 1, 0)) // unnormalised "" differs from "default" too
	add(key("default", 1, 1, 0))
	for b := range 16 {
		for _, v := range []byte{1, 2, 0x80} {
			k := base
			k.WorkflowID[b] ^= v
			add(k)
			k = base
			k.RunID[b] ^= v
			add(k)
		}
	}
	for a := range 10_000 {
		add(Key{Namespace: "tenant-a", WorkflowID: base.WorkflowID, RunID: base.RunID, ActivityID: eventstore.ActivityID(a + 1)})
	}
	// Swapping the workflow and run IDs must not collide.
	swapped := base
	swapped.WorkflowID, swapped.RunID = eventstore.WorkflowID(base.RunID), eventstore.RunID(base.WorkflowID)
	add(swapped)

	// Two trackers' seeds differ, so hashes are not predictable across them.
	if _, kh2 := newHasher().hashes(base); kh2 == kh {
		t.Error("two hashers with fresh seeds agree")
	}
}
