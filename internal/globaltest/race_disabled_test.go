//go:build !race

package globaltest_test

// raceEnabled reports whether the tests run under the race detector, which
// makes sync.Pool drop items at random: allocation counts mean nothing then.
const raceEnabled = false
