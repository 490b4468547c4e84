//go:build race

package conformance

// raceDetector reports whether the race detector is on: the seeded rules
// then run shorter (see the package documentation, Limits), so that they
// stay well inside their timeout while every memory access is checked.
const raceDetector = true
