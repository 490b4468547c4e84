package server

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// lockedRand is the server's one source of randomness: a seeded PCG behind a
// mutex, shared by every goroutine. The seed fixes the sequence of draws, not
// the run: which goroutine draws next depends on the scheduler.
type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func newLockedRand(seed uint64) *lockedRand {
	return &lockedRand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// intN returns a number in [0, n).
func (l *lockedRand) intN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

// chance reports true with probability p.
func (l *lockedRand) chance(p float64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64() < p
}

// between returns a duration drawn uniformly from [r[0], r[1]].
func (l *lockedRand) between(r [2]time.Duration) time.Duration {
	if r[1] <= r[0] {
		return r[0]
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return r[0] + time.Duration(l.r.Int64N(int64(r[1]-r[0])+1))
}

// pick returns an index into weights, drawn in proportion to the weights.
func (l *lockedRand) pick(weights []int) int {
	total := 0
	for _, w := range weights {
		total += w
	}
	if total <= 0 {
		return 0
	}
	n := l.intN(total)
	for i, w := range weights {
		if n < w {
			return i
		}
		n -= w
	}
	return len(weights) - 1
}

// uuid returns 16 random bytes shaped as a version 4 UUID, so that IDs too
// follow the seed.
func (l *lockedRand) uuid() [16]byte {
	var b [16]byte
	l.mu.Lock()
	hi, lo := l.r.Uint64(), l.r.Uint64()
	l.mu.Unlock()
	for i := range 8 {
		b[i] = byte(hi >> (56 - 8*i))
		b[8+i] = byte(lo >> (56 - 8*i))
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return b
}

func (l *lockedRand) workflowID() eventstore.WorkflowID { return eventstore.WorkflowID(l.uuid()) }

func (l *lockedRand) runID() eventstore.RunID { return eventstore.RunID(l.uuid()) }
