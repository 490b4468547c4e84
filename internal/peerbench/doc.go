// Package peerbench compares the otelstore decorator with its peer,
// otelsql (github.com/XSAM/otelsql), in one benchmark binary: each
// instruments a store call with one client span and one duration point,
// on the same SDK providers, and each is measured next to its bare call, so
// that the instrumentation's own cost of each is the difference (issue 27:
// the decorator's at most 0.85 times otelsql's with a sampled span).
//
// It is a module of its own, test-only, so that the library's module does
// not require otelsql.
package peerbench
