package catalog

import "go.opentelemetry.io/otel/attribute"

// The wait for a worker: from an activity's dispatch (its ActivityScheduled)
// to the claim that hands its outbox row to a worker (ClaimOutboxRows).
// "Waiting" is that stretch only; "in flight" is the whole of dispatched and
// not finished, waiting or running.

// Instrument names of the wait.
const (
	// ActivityWaitDuration is the time from an activity's dispatch to the
	// first claim of its outbox row, by namespace and activity type.
	ActivityWaitDuration = "aion.activity.wait.duration"
	// ActivityOldestWaitingAge is the age, in seconds, of the oldest
	// activity of a type whose outbox row is staged and not yet claimed
	// (an observable gauge).
	ActivityOldestWaitingAge = "aion.activity.oldest_waiting_age"
)

// ClaimEvent is the span event of each claim of an activity's outbox row on
// its activity span, at the time of the claim.
const ClaimEvent = "aion.activity.claim"

// ClaimCount is the attribute of a claim event: 1 for the first claim of
// the activity's row, 2 for the claim after a re-arm, and so on.
const ClaimCount attribute.Key = "aion.activity.claim_count"
