package conformance

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// newRand returns the generator of one seeded rule: the suite's seed mixed
// with the rule's name, so that two rules never draw the same sequence and
// each replays on its own.
func newRand(seed int64, rule string) *rand.Rand {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(rule); i++ {
		h = (h ^ uint64(rule[i])) * 1099511628211
	}
	return rand.New(rand.NewPCG(uint64(seed), h))
}

// idGen derives workflow and run IDs from the seed. The first eight bytes
// (which decide both the IDs' order and [eventstore.ShardOf]) come from the
// seed, so a rule's verdict never depends on how random IDs happened to
// sort; the last eight are a per-process salt, so that a replay on a shared
// backend does not collide with the data of an earlier run.
type idGen struct {
	rng  *rand.Rand
	salt [8]byte
	used map[uint64]bool
}

func newIDGen(rng *rand.Rand) *idGen {
	g := &idGen{rng: rng, used: map[uint64]bool{}}
	_, _ = crand.Read(g.salt[:])
	g.salt[0] |= 1 // never all zero
	return g
}

// next returns 16 bytes whose first eight are fresh, non-zero and distinct
// from every earlier draw.
func (g *idGen) next() [16]byte {
	var id [16]byte
	for {
		v := g.rng.Uint64()
		if v != 0 && !g.used[v] {
			g.used[v] = true
			binary.BigEndian.PutUint64(id[:8], v)
			break
		}
	}
	copy(id[8:], g.salt[:])
	return id
}

func (g *idGen) workflow() eventstore.WorkflowID { return eventstore.WorkflowID(g.next()) }
func (g *idGen) run() eventstore.RunID           { return eventstore.RunID(g.next()) }

// hostileStrings are the texts the model rules store and read back: NUL,
// non-ASCII, invalid UTF-8, the empty string and separators a store might
// use internally.
var hostileStrings = []string{
	"plain",
	"",
	"nul\x00inside",
	"\x00",
	"ünïcødé ✓ 日本語",
	"bad\xff\xfeutf8",
	"\xc3\x28",
	"slash/and:colon|pipe\ttab\nnewline",
	"'quote\" \\back",
	strings.Repeat("long-", 200),
}

func hostile(rng *rand.Rand) string { return hostileStrings[rng.IntN(len(hostileStrings))] }

// shrinkBudget bounds the replays of the minimiser: each replay runs on a
// fresh store, which for a durable backend can be slow.
const shrinkBudget = 32

// shrink minimises a failing operation sequence: it removes chunks (halves,
// quarters, ... single operations) as long as the remainder still fails on a
// fresh subject, within shrinkBudget replays and while ctx lasts. replay
// returns nil when the sequence passes. It returns the shortest failing
// sequence found and its error.
func shrink[Op any](ctx context.Context, ops []Op, failure error, replay func([]Op) error) ([]Op, error) {
	budget := shrinkBudget
	for chunk := len(ops) / 2; chunk >= 1 && budget > 0; chunk /= 2 {
		for i := 0; i < len(ops) && budget > 0; {
			if ctx.Err() != nil {
				return ops, failure
			}
			end := min(i+chunk, len(ops))
			cand := append(append([]Op(nil), ops[:i]...), ops[end:]...)
			budget--
			err := replay(cand)
			if ctx.Err() != nil {
				return ops, failure // a replay cut short proves nothing
			}
			if err != nil && len(cand) > 0 {
				ops, failure = cand, err
				continue
			}
			i = end
		}
	}
	return ops, failure
}

// opError is a model rule's failure: the operation that went wrong, and the
// shrunk sequence that reproduces it.
type opError struct {
	index int    // of the failing operation in the generated sequence
	total int    // length of the generated sequence
	op    string // what the failing operation did
	err   error
	repro []string // the shrunk sequence, one line per operation
}

func (e *opError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "operation %d of %d (%s): %v", e.index+1, e.total, e.op, e.err)
	switch {
	case len(e.repro) > maxReproLines:
		fmt.Fprintf(&b, "\n(the minimiser got it down to %d operations only; replay the seed to see them)", len(e.repro))
	case len(e.repro) > 0:
		fmt.Fprintf(&b, "\nshrunk to %d operations on a fresh store:", len(e.repro))
		for i, r := range e.repro {
			fmt.Fprintf(&b, "\n  %d. %s", i+1, r)
		}
	}
	return b.String()
}

func (e *opError) Unwrap() error { return e.err }

// maxReproLines bounds the reproduction printed with a failure.
const maxReproLines = 60

// runModel is the driver shared by the model rules: exec runs ops on a
// subject against a fresh model and returns the index of the first
// operation whose result differs (and how); on failure the sequence is
// shrunk on fresh subjects.
func runModel[S any, Op fmt.Stringer](ctx context.Context, env *ruleEnv[S], subject S, ops []Op, exec func(context.Context, S, []Op) (int, error)) error {
	at, err := exec(ctx, subject, ops)
	if err == nil {
		return nil
	}
	oe := &opError{index: at, total: len(ops), op: ops[at].String(), err: err}
	if env.cfg.noShrink || ctx.Err() != nil {
		return oe
	}
	// Shrink in at most half the time the rule has left, so that the
	// watchdog reports the failure, not a timeout.
	sctx := ctx
	if dl, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		sctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(dl)/2))
		defer cancel()
	}
	prefix := ops[:at+1]
	small, _ := shrink(sctx, prefix, err, func(cand []Op) error {
		s, ferr := env.fresh()
		if ferr != nil {
			return nil // cannot replay: keep the longer sequence
		}
		_, e := exec(sctx, s, cand)
		return e
	})
	for _, o := range small {
		oe.repro = append(oe.repro, o.String())
	}
	return oe
}
