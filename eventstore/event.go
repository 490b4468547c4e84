package eventstore

import "time"

// Envelope is what every event carries besides its kind-specific fields.
//
// A store stamps Seq: whatever the caller put there is replaced by the event's
// 1-based position in the workflow's history. A zero WorkflowID is filled in
// with the workflow the append names; any other workflow is refused. RunID
// must name the run the event belongs to. A zero RecordedAt is set to the
// store's clock at commit.
type Envelope struct {
	WorkflowID WorkflowID
	RunID      RunID
	Seq        uint64
	RecordedAt time.Time
}

// EventEnvelope returns the envelope itself; embedding Envelope gives every
// event kind this method.
func (e Envelope) EventEnvelope() Envelope { return e }

// Event is one entry of a workflow history. The set of kinds is closed: it is
// exactly the struct types of this package (values, not pointers), so a type
// switch over them is exhaustive.
type Event interface {
	// EventEnvelope returns the event's envelope.
	EventEnvelope() Envelope
	// withEnvelope returns a copy of the event with env as its envelope.
	withEnvelope(env Envelope) Event
}

// WithEnvelope returns a copy of ev whose envelope is env. Stores use it to
// stamp Seq (and fill in defaults) without mutating the caller's events.
func WithEnvelope(ev Event, env Envelope) Event { return ev.withEnvelope(env) }

// Payload is opaque user data with its media type. Instrumentation never
// records a payload's content anywhere.
type Payload struct {
	ContentType string
	Data        []byte
}

// clone returns a deep copy, so stored payloads never alias caller memory.
func (p Payload) clone() Payload {
	if p.Data != nil {
		p.Data = append([]byte(nil), p.Data...)
	}
	return p
}

// ActivityErrorKind tells whether an activity failure may be retried.
type ActivityErrorKind uint8

const (
	// Retryable failures leave the activity scheduled: another attempt follows.
	Retryable ActivityErrorKind = iota + 1
	// Terminal failures end the activity.
	Terminal
)

// String returns "retryable", "terminal" or "unknown".
func (k ActivityErrorKind) String() string {
	switch k {
	case Retryable:
		return "retryable"
	case Terminal:
		return "terminal"
	default:
		return "unknown"
	}
}

// ActivityError describes a failed activity attempt.
type ActivityError struct {
	Kind    ActivityErrorKind
	Message string
	Details Payload
}
