package pairing

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"

	"github.com/aionotel/aionotel/eventstore"
)

// hasher computes the 64-bit hashes the live table is indexed by. Hashing a
// Key once per call, outside the lock, and indexing by the hash is several
// times cheaper than letting Go maps hash the 56-byte Key (a string plus 40
// bytes) on every map operation: the run hash's high bits pick the shard, and
// the low bits of the run and key hashes pick the buckets of the shard's
// tables, so a call hashes nothing more.
//
// The namespace goes through hash/maphash with a random per-tracker seed; the
// UUIDs and the activity position are folded in with a multiply-fold mixer
// (the wyhash construction). The hashes are not an identity: every index
// keeps collision chains and compares full keys, so a collision costs time,
// never correctness. The seed keeps hashes unpredictable across processes.
type hasher struct {
	seed maphash.Seed
}

func newHasher() hasher { return hasher{seed: maphash.MakeSeed()} }

// Mixing constants (the wyhash primes).
const (
	mixP0 = 0xa0761d6478bd642f
	mixP1 = 0xe7037ed1a0b428db
	mixP2 = 0x8ebc6af09c88c6e3
	mixP3 = 0x589965cc75374cc3
)

// mix folds a and b into 64 bits: the high and low halves of their 128-bit
// product, after keying both with constants.
func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a^mixP0, b^mixP1)
	return hi ^ lo
}

// namespace returns the hash of a namespace, the first input of every run
// and key hash. The attribute cache keeps it per namespace, so a dispatch
// need not hash the string again.
func (h hasher) namespace(ns string) uint64 { return maphash.String(h.seed, ns) }

// hashes returns the hash of the run k belongs to and the hash of k itself.
// k must be normalised.
func (h hasher) hashes(k Key) (run, key uint64) {
	return h.hashesFrom(h.namespace(k.Namespace), &k)
}

// hashesFrom is hashes given the hash of k's namespace. k is a pointer so
// that the IDs are read in place: a Key passed by value travels on the stack,
// and reading its arrays back in 8-byte words right after they were copied
// there in other widths stalls on store forwarding.
func (h hasher) hashesFrom(nsHash uint64, k *Key) (run, key uint64) {
	run = runHashFrom(nsHash, &k.WorkflowID, &k.RunID)
	return run, mix(run^mixP2, uint64(k.ActivityID)^mixP3)
}

// run returns the hash of rk.
func (h hasher) run(rk runKey) uint64 {
	return runHashFrom(h.namespace(rk.namespace), &rk.workflowID, &rk.runID)
}

func runHashFrom(nsHash uint64, wf *eventstore.WorkflowID, run *eventstore.RunID) uint64 {
	le := binary.LittleEndian
	x := mix(nsHash^le.Uint64(wf[0:8]), le.Uint64(wf[8:16]))
	return mix(x^le.Uint64(run[0:8]), le.Uint64(run[8:16]))
}
