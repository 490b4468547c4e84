package eventstore

import "context"

// HistoriesReader is the optional capability of reading the histories of
// many workflows in one call, for a reader that needs many at once: a
// tracker resuming after a restart or an adoption reads every open
// workflow's history, and a tracker filling the gaps of many workflows
// at once after an adoption reads each of theirs (pairing.Tracker.Resume
// and the tracker's gap filling use it when the store has it). Without it such a reader makes one ReadHistory call per workflow;
// on a database each is a round trip, and a round trip per workflow is
// what makes a resume of 100,000 workflows slow.
//
// pgstore has it (one statement per page). [Memory] does not: a read from
// memory costs no round trip, so a loop of ReadHistory is what it would
// do, and a test store that embeds *Memory to delay or fail ReadHistory
// keeps seeing every read a resume makes.
type HistoriesReader interface {
	// ReadHistories returns the histories of workflowIDs: the i-th is what
	// ReadHistory returns for the i-th ID (its events in order, an empty
	// slice for an unknown workflow), so an ID given twice gets its
	// history twice. It is all or nothing: an error returns no history.
	// Each history is consistent, as ReadHistory's; the call is not one
	// snapshot of them all. A caller bounds the memory it holds by asking
	// for at most [HistoriesPage] workflows at a time; a store answers any
	// number, in as many round trips of that size as it needs.
	ReadHistories(ctx context.Context, workflowIDs []WorkflowID) ([][]Event, error)
}

// HistoriesPage is the number of workflows a reader asks
// [HistoriesReader.ReadHistories] for at once, and the number a store
// reads in one round trip: 1,000 histories of a few dozen events each is
// a few MiB.
const HistoriesPage = 1000
