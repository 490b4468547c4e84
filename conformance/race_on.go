//go:build race

package conformance

// raceDetector reports whether the race detector is on: the seeded rules
// then run shorter.
const raceDetector = true
