// Package version holds the aionotel module version, reported as the
// instrumentation scope version of every meter and tracer the library creates.
package version

// Version is the module version, without a leading "v". Release tooling bumps
// it together with the module tag.
const Version = "0.1.0"
