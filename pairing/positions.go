package pairing

// A position is where a fact stands in its workflow's history: the Seq of
// the event it came from, when the observer knows it, and the order the
// tracker received it in, which breaks ties and orders facts whose Seq is
// unknown.
type position struct {
	seq     uint64 // 0: unknown
	arrival uint64
}

func (p position) known() bool { return p.seq != 0 }

// follows reports whether p can settle a dispatch (or close a run) at d:
// whether p comes after d in history. A fact whose position is unknown is
// taken to come after every fact of its run, as a late observation would.
func (p position) follows(d position) bool {
	return !p.known() || !d.known() || p.seq > d.seq
}

// before reports whether p is an earlier settler than q: by Seq, an unknown
// Seq after every known one, then by arrival.
func (p position) before(q position) bool {
	ps, qs := p.seq, q.seq
	if ps == 0 {
		ps = ^uint64(0)
	}
	if qs == 0 {
		qs = ^uint64(0)
	}
	if ps != qs {
		return ps < qs
	}
	return p.arrival < q.arrival
}

// maxRanges bounds the ranges a workflow's seen positions are kept as. A
// writer the tracker does not observe leaves gaps that never close; past
// the bound, the lowest range is forgotten, and a decision that needs it
// waits until the memory bound drops it.
const maxRanges = 16

// maxSettledRanges bounds the ranges a run's settled activities are kept
// as: the gaps are activities still in flight or waiting, so many run in
// parallel fragment them. Past the bound the lowest range is forgotten,
// and a repeat of one of its facts counts as new.
const maxSettledRanges = 64

// seen is a set of positions as sorted, disjoint, non-adjacent ranges: the
// history positions of a workflow the tracker observed (one range is the
// usual case: every append observed, in whatever order they returned), or
// a run's settled activities (positions from 0, stored plus one).
type seen struct {
	ranges []seqRange
}

type seqRange struct{ lo, hi uint64 }

// add records positions lo..hi (1 <= lo <= hi), keeping at most limit
// ranges, and reports whether anything new was recorded.
func (s *seen) add(lo, hi uint64, limit int) bool {
	if n := len(s.ranges); n > 0 && s.ranges[n-1].hi+1 == lo && s.ranges[n-1].hi != ^uint64(0) {
		s.ranges[n-1].hi = hi // the usual case: right after the last range
		return true
	}
	if s.covers(lo, hi) {
		return false
	}
	// i is the first range that ends at or after lo-1 (overlaps or touches
	// [lo, hi] from below); j is past the last that starts at or before
	// hi+1. Positions start at 1, so lo-1 and r.lo-1 cannot wrap.
	i := 0
	for i < len(s.ranges) && s.ranges[i].hi < lo-1 {
		i++
	}
	j := i
	for j < len(s.ranges) && s.ranges[j].lo-1 <= hi {
		lo, hi = min(lo, s.ranges[j].lo), max(hi, s.ranges[j].hi)
		j++
	}
	if j > i {
		s.ranges[i] = seqRange{lo, hi}
		s.ranges = append(s.ranges[:i+1], s.ranges[j:]...)
	} else {
		s.ranges = append(s.ranges, seqRange{})
		copy(s.ranges[i+1:], s.ranges[i:])
		s.ranges[i] = seqRange{lo, hi}
	}
	if len(s.ranges) > limit {
		s.ranges = append(s.ranges[:0], s.ranges[1:]...)
	}
	return true
}

// covers reports whether every position lo..hi has been seen; an empty
// interval (lo > hi) is covered.
func (s *seen) covers(lo, hi uint64) bool {
	if lo > hi {
		return true
	}
	for _, r := range s.ranges {
		if r.lo <= lo && hi <= r.hi {
			return true
		}
	}
	return false
}

// between reports whether every position strictly between a and b was
// seen, so that nothing unobserved can come between the two facts. Facts
// with an unknown position are decided on arrival.
func (s *seen) between(a, b position) bool {
	if !a.known() || !b.known() {
		return true
	}
	lo, hi := min(a.seq, b.seq), max(a.seq, b.seq)
	if hi-lo <= 1 {
		return true
	}
	return s.covers(lo+1, hi-1)
}

func (s *seen) reset() { s.ranges = s.ranges[:0] }
