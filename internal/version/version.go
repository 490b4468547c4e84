// Package version holds the aionotel module version, reported as the
// instrumentation scope version of every meter and tracer the library creates.
package version

// Version is the module version, without a leading "v": the version of the
// module set in versions.yaml, which .ci/modules.sh checks. RELEASING.md bumps
// both in the commit that is tagged.
const Version = "0.1.0"
