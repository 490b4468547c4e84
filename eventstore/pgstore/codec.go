package pgstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// FormatVersion is the version of the event encoding this package writes,
// the first byte of every row's body column. The body holds what the
// columns do not (workflow_id, seq and run_id are columns): the event kind,
// RecordedAt and the kind's fields, strings and payloads as length-prefixed
// bytes, integers as varints, times as time.Time.MarshalBinary does. It is
// bytea rather than jsonb so that every value comes back exactly: jsonb
// refuses NUL characters and JSON text cannot carry invalid UTF-8, and a
// timestamptz column would cut times to microseconds. Reading another
// version fails with [ErrCorruptRecord].
const FormatVersion = 1

// The kind bytes of the encoding. They are part of the stored format: never
// renumber one.
const (
	kindWorkflowStarted byte = iota + 1
	kindWorkflowCompleted
	kindWorkflowFailed
	kindWorkflowCancelled
	kindWorkflowTimedOut
	kindWorkflowContinuedAsNew
	kindWorkflowReopened
	kindWorkflowPaused
	kindWorkflowResumed
	kindSignalReceived
	kindScheduleTriggered
	kindTimerScheduled
	kindTimerFired
	kindActivityScheduled
	kindActivityCompleted
	kindActivityFailed
	kindActivityCancelled
	kindActivityTimedOut
)

// kindNames are the values of the kind column, for operators reading the
// table; the body's kind byte is what decoding uses.
var kindNames = [...]string{
	kindWorkflowStarted:        "workflow_started",
	kindWorkflowCompleted:      "workflow_completed",
	kindWorkflowFailed:         "workflow_failed",
	kindWorkflowCancelled:      "workflow_cancelled",
	kindWorkflowTimedOut:       "workflow_timed_out",
	kindWorkflowContinuedAsNew: "workflow_continued_as_new",
	kindWorkflowReopened:       "workflow_reopened",
	kindWorkflowPaused:         "workflow_paused",
	kindWorkflowResumed:        "workflow_resumed",
	kindSignalReceived:         "signal_received",
	kindScheduleTriggered:      "schedule_triggered",
	kindTimerScheduled:         "timer_scheduled",
	kindTimerFired:             "timer_fired",
	kindActivityScheduled:      "activity_scheduled",
	kindActivityCompleted:      "activity_completed",
	kindActivityFailed:         "activity_failed",
	kindActivityCancelled:      "activity_cancelled",
	kindActivityTimedOut:       "activity_timed_out",
}

// enc appends the encoding's primitives to a byte slice.
type enc struct{ b []byte }

func (e *enc) byte1(v byte)     { e.b = append(e.b, v) }
func (e *enc) uvarint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *enc) bytes(v []byte)   { e.uvarint(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) str(v string)     { e.uvarint(uint64(len(v))); e.b = append(e.b, v...) }
func (e *enc) id(v [16]byte)    { e.b = append(e.b, v[:]...) }
func (e *enc) time(t time.Time) { e.bytes(timeBytes(t)) }
func (e *enc) payload(p eventstore.Payload) {
	e.str(p.ContentType)
	e.bytes(p.Data)
}

// encodeEvent returns the body of a validated event (one of the package's
// kinds, held by value) whose RecordedAt is set.
func encodeEvent(ev eventstore.Event) []byte {
	e := enc{b: make([]byte, 0, 64)}
	e.byte1(FormatVersion)
	kindAt := len(e.b)
	e.byte1(0)
	e.time(ev.EventEnvelope().RecordedAt)
	var kind byte
	switch v := ev.(type) {
	case eventstore.WorkflowStarted:
		kind = kindWorkflowStarted
		e.str(v.WorkflowType)
		e.payload(v.Input)
		e.id(v.ParentWorkflowID)
		e.id(v.ParentRunID)
		e.str(v.PackageVersion)
	case eventstore.WorkflowCompleted:
		kind = kindWorkflowCompleted
		e.payload(v.Result)
	case eventstore.WorkflowFailed:
		kind = kindWorkflowFailed
		e.str(v.Message)
		e.payload(v.Details)
	case eventstore.WorkflowCancelled:
		kind = kindWorkflowCancelled
		e.str(v.Reason)
	case eventstore.WorkflowTimedOut:
		kind = kindWorkflowTimedOut
	case eventstore.WorkflowContinuedAsNew:
		kind = kindWorkflowContinuedAsNew
		e.id(v.NewRunID)
		e.payload(v.Input)
	case eventstore.WorkflowReopened:
		kind = kindWorkflowReopened
		e.str(v.Reason)
	case eventstore.WorkflowPaused:
		kind = kindWorkflowPaused
		e.str(v.Reason)
	case eventstore.WorkflowResumed:
		kind = kindWorkflowResumed
	case eventstore.SignalReceived:
		kind = kindSignalReceived
		e.str(v.SignalName)
		e.payload(v.Input)
	case eventstore.ScheduleTriggered:
		kind = kindScheduleTriggered
		e.str(v.ScheduleID)
	case eventstore.TimerScheduled:
		kind = kindTimerScheduled
		e.str(string(v.TimerID))
		e.time(v.FireAt)
	case eventstore.TimerFired:
		kind = kindTimerFired
		e.str(string(v.TimerID))
	case eventstore.ActivityScheduled:
		kind = kindActivityScheduled
		e.uvarint(uint64(v.ActivityID))
		e.str(v.ActivityType)
		e.payload(v.Input)
		e.str(v.TaskQueue)
		e.str(v.Node)
	case eventstore.ActivityCompleted:
		kind = kindActivityCompleted
		e.uvarint(uint64(v.ActivityID))
		e.payload(v.Result)
		e.uvarint(uint64(v.Attempt))
	case eventstore.ActivityFailed:
		kind = kindActivityFailed
		e.uvarint(uint64(v.ActivityID))
		e.byte1(byte(v.Error.Kind))
		e.str(v.Error.Message)
		e.payload(v.Error.Details)
		e.uvarint(uint64(v.Attempt))
	case eventstore.ActivityCancelled:
		kind = kindActivityCancelled
		e.uvarint(uint64(v.ActivityID))
		e.uvarint(uint64(v.Attempt))
	case eventstore.ActivityTimedOut:
		kind = kindActivityTimedOut
		e.uvarint(uint64(v.ActivityID))
		e.uvarint(uint64(v.Attempt))
	default:
		// ValidateAppend refused anything else before this point.
		panic(fmt.Sprintf("pgstore: encoding unvalidated event %T", ev))
	}
	e.b[kindAt] = kind
	return e.b
}

// errShort is what a decoder reports when the body ends early.
var errShort = errors.New("body ends early")

// dec reads the encoding's primitives; the first error sticks.
type dec struct {
	b   []byte
	err error
}

func (d *dec) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *dec) byte1() byte {
	if d.err != nil || len(d.b) < 1 {
		d.fail(errShort)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *dec) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errors.New("bad varint"))
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *dec) uint32() uint32 {
	v := d.uvarint()
	if v > 1<<32-1 {
		d.fail(fmt.Errorf("attempt %d does not fit 32 bits", v))
	}
	return uint32(v)
}

// bytes returns a copy of the next length-prefixed bytes, nil when empty (as
// eventstore.Memory returns an empty payload).
func (d *dec) bytes() []byte {
	if v := d.raw(); len(v) > 0 {
		return append([]byte(nil), v...)
	}
	return nil
}

func (d *dec) str() string { return string(d.raw()) }

func (d *dec) id() (v [16]byte) {
	if d.err != nil || len(d.b) < 16 {
		d.fail(errShort)
		return v
	}
	copy(v[:], d.b)
	d.b = d.b[16:]
	return v
}

// raw returns the next length-prefixed bytes without a copy: for what is
// decoded from them at once.
func (d *dec) raw() []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(errShort)
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *dec) time() time.Time {
	b := d.raw()
	if d.err != nil {
		return time.Time{}
	}
	t, err := timeFromBytes(b)
	d.fail(err)
	return t
}

func (d *dec) payload() eventstore.Payload {
	return eventstore.Payload{ContentType: d.str(), Data: d.bytes()}
}

// decodeEvent rebuilds an event from its columns and body.
func decodeEvent(wf eventstore.WorkflowID, run eventstore.RunID, seq uint64, body []byte) (eventstore.Event, error) {
	d := dec{b: body}
	if v := d.byte1(); d.err == nil && v != FormatVersion {
		return nil, fmt.Errorf("format version %d, this build reads %d", v, FormatVersion)
	}
	kind := d.byte1()
	env := eventstore.Envelope{WorkflowID: wf, RunID: run, Seq: seq, RecordedAt: d.time()}
	var ev eventstore.Event
	switch kind {
	case kindWorkflowStarted:
		ev = eventstore.WorkflowStarted{Envelope: env, WorkflowType: d.str(), Input: d.payload(),
			ParentWorkflowID: d.id(), ParentRunID: d.id(), PackageVersion: d.str()}
	case kindWorkflowCompleted:
		ev = eventstore.WorkflowCompleted{Envelope: env, Result: d.payload()}
	case kindWorkflowFailed:
		ev = eventstore.WorkflowFailed{Envelope: env, Message: d.str(), Details: d.payload()}
	case kindWorkflowCancelled:
		ev = eventstore.WorkflowCancelled{Envelope: env, Reason: d.str()}
	case kindWorkflowTimedOut:
		ev = eventstore.WorkflowTimedOut{Envelope: env}
	case kindWorkflowContinuedAsNew:
		ev = eventstore.WorkflowContinuedAsNew{Envelope: env, NewRunID: d.id(), Input: d.payload()}
	case kindWorkflowReopened:
		ev = eventstore.WorkflowReopened{Envelope: env, Reason: d.str()}
	case kindWorkflowPaused:
		ev = eventstore.WorkflowPaused{Envelope: env, Reason: d.str()}
	case kindWorkflowResumed:
		ev = eventstore.WorkflowResumed{Envelope: env}
	case kindSignalReceived:
		ev = eventstore.SignalReceived{Envelope: env, SignalName: d.str(), Input: d.payload()}
	case kindScheduleTriggered:
		ev = eventstore.ScheduleTriggered{Envelope: env, ScheduleID: d.str()}
	case kindTimerScheduled:
		ev = eventstore.TimerScheduled{Envelope: env, TimerID: eventstore.TimerID(d.str()), FireAt: d.time()}
	case kindTimerFired:
		ev = eventstore.TimerFired{Envelope: env, TimerID: eventstore.TimerID(d.str())}
	case kindActivityScheduled:
		ev = eventstore.ActivityScheduled{Envelope: env, ActivityID: eventstore.ActivityID(d.uvarint()),
			ActivityType: d.str(), Input: d.payload(), TaskQueue: d.str(), Node: d.str()}
	case kindActivityCompleted:
		ev = eventstore.ActivityCompleted{Envelope: env, ActivityID: eventstore.ActivityID(d.uvarint()),
			Result: d.payload(), Attempt: d.uint32()}
	case kindActivityFailed:
		ev = eventstore.ActivityFailed{Envelope: env, ActivityID: eventstore.ActivityID(d.uvarint()),
			Error:   eventstore.ActivityError{Kind: eventstore.ActivityErrorKind(d.byte1()), Message: d.str(), Details: d.payload()},
			Attempt: d.uint32()}
	case kindActivityCancelled:
		ev = eventstore.ActivityCancelled{Envelope: env, ActivityID: eventstore.ActivityID(d.uvarint()), Attempt: d.uint32()}
	case kindActivityTimedOut:
		ev = eventstore.ActivityTimedOut{Envelope: env, ActivityID: eventstore.ActivityID(d.uvarint()), Attempt: d.uint32()}
	default:
		d.fail(fmt.Errorf("unknown event kind %d", kind))
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail(fmt.Errorf("%d bytes after the event", len(d.b)))
	}
	if d.err != nil {
		return nil, d.err
	}
	return ev, nil
}

// kindOf returns the kind column's value for an event.
func kindOf(body []byte) string { return kindNames[body[1]] }

// timeBytes encodes t exactly, as time.Time.MarshalBinary does: the instant
// to the nanosecond and the zone offset (UTC and Local come back as UTC and
// Local). A zone offset MarshalBinary cannot encode is dropped: the instant
// is kept, in UTC.
func timeBytes(t time.Time) []byte {
	b, err := t.MarshalBinary()
	if err != nil {
		b, _ = t.UTC().MarshalBinary()
	}
	return b
}

func timeFromBytes(b []byte) (time.Time, error) {
	var t time.Time
	if err := t.UnmarshalBinary(b); err != nil {
		return time.Time{}, err
	}
	return t, nil
}

// instant is a time as two sortable columns: seconds since 0001-01-01 UTC
// (no time.Time overflows it) and the nanosecond within the second. Rows
// compare and sort on (sec, nsec) exactly as time.Time.Compare orders their
// times.
type instant struct {
	sec  int64
	nsec int32
}

func instantOf(t time.Time) instant {
	// MarshalBinary's bytes 1-8 are the seconds since year 1, 9-12 the
	// nanoseconds, whatever the version byte.
	b := timeBytes(t)
	return instant{sec: int64(binary.BigEndian.Uint64(b[1:9])), nsec: int32(binary.BigEndian.Uint32(b[9:13]))}
}
