// Package demotest is test support for the demo mains of the durable
// keyspace backends, keyspace/boltstore/cmd/demo and keyspace/pgstore/cmd/demo
// (nested modules, which Go's internal rule lets import it). It is imported
// by their _test files only; no program links it.
//
// Both tests run the demo command in-process ([Command], for the exit status
// and both outputs), let it run for a second on their backend and check that
// the keyspace then holds what the demo's summary reports ([RunClean] and
// [Run.CheckStored]), make their backend's Open fail ([CheckOpenFails]), and
// name the other backend, which their build lacks ([CheckUsageError]).
// What only one backend has (the bbolt file's lock, the PostgreSQL table's
// rows) stays in its own test.
//
// It is a package of its own, not part of package keyspacetest, because it
// imports the demo's server package, with its exporters, which the stores'
// tests have no use for.
//
// Every function here reports through the testing.TB it is given, marked
// with t.Helper; their own tests run them on a keyspace.Memory backend and,
// through keyspacetest.ExpectFailure, on broken ones.
package demotest
