//go:build race

package pairing

// raceEnabled reports whether the tests run under the race detector, which
// makes sync.Pool drop what it is given at random: allocation counts are
// then meaningless.
const raceEnabled = true
