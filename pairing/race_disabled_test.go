//go:build !race

package pairing

// raceEnabled reports whether the tests run under the race detector, which
// makes sync.Pool drop items at random: allocation counts mean nothing then.
const raceEnabled = false
