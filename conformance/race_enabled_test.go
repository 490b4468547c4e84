//go:build race

package conformance

// raceEnabled reports whether the tests run under the race detector.
const raceEnabled = true
