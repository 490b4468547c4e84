// Package keyspacetest is test support for the durable keyspace backends,
// package boltstore and package pgstore (nested modules under keyspace/,
// which Go's internal rule lets import it), and for package keyspace's own
// benchmarks. It is imported by _test files only; no program links it.
//
// It holds what those tests share:
//
//   - fixtures: [NewKey], [Event], [Messages], [Persisted] and [MustAppend];
//   - checks of what the durable backends promise beyond the keyspace
//     contract, each run by both on a store of their own: what they store
//     is what they read back, across a reopen ([CheckRecordsSurviveReopen]),
//     refused appends return head 0 and write nothing, also for contents the
//     shared record encoding refuses ([CheckAppendRefusalsWriteNothing]),
//     activity IDs list in unsigned order past 2^63
//     ([CheckListOrderIsUnsigned]), reads at every bound, up to the largest
//     store seq ([CheckReadFromBounds]), zero IDs refused by the read methods
//     ([CheckReadMethodsRefuseZeroIDs]), Close ending every method
//     ([CheckCloseEndsEveryMethod]) and appends, reads and listings at once
//     ([CheckConcurrentSafe]);
//   - benchmark bodies: [MeasureAppendEvents], [MeasureReadFromTail],
//     [MeasureListStreams], and [Fill] to build long streams;
//   - [ExpectFailure], which runs a check against a broken store and returns
//     what it reported, so that this package's tests show each check can
//     fail.
//
// # Not the contract
//
// The rules of the [keyspace.Store] contract are checked by
// conformance.TestKeyspace, which both backends run too; a rule belongs
// there, not here. The checks here cover what the contract leaves to the
// implementation and the two backends share: the record encoding of package
// keyspace/internal/codec (a pointer content reads back as its value, a
// foreign content is refused), ErrClosed, the range of store seqs.
// keyspace.Memory stores contents as the backends read them back and runs
// the checks that need no Close and no reopening, so that the three stores
// are held to the same refusals.
//
// # Failing
//
// Every function here reports through the testing.TB it is given, marked
// with t.Helper. A check's table cases are subtests when t is a *testing.T,
// named as the cases of the backend tests they came from; under another
// testing.TB ([ExpectFailure]'s) each case runs on a goroutine of its own,
// so that a Fatal ends that case only, as it ends a subtest.
package keyspacetest
