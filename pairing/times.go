package pairing

import (
	"math"
	"time"
)

// Times are kept as Unix nanoseconds. OTLP carries a time as unsigned
// nanoseconds since the Unix epoch, and Go computes those in an int64, so a
// time history can carry lies between 1970-01-01 and 2262-04-11. A time
// outside that range (hostile, or a clock gone wrong) is clamped to its
// nearest end: no span can then end before it starts at the exporter, and
// the age gauge never reports an age no history can have. Clamping, rather
// than replacing the time by the observer's clock, keeps the result the
// same whatever order the facts arrive in.
var (
	minTime = time.Unix(0, 0)
	maxTime = time.Unix(0, math.MaxInt64)
)

// nanos returns t as clamped Unix nanoseconds; a zero t is now.
func nanos(t time.Time) int64 {
	switch {
	case t.IsZero():
		return time.Now().UnixNano()
	case t.Before(minTime):
		return 0
	case t.After(maxTime):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// timeOf turns clamped nanoseconds back into a time.
func timeOf(n int64) time.Time { return time.Unix(0, n) }

// secondsBetween returns to - from in seconds, never negative.
func secondsBetween(from, to int64) float64 {
	if to <= from {
		return 0
	}
	return float64(to-from) / 1e9
}
