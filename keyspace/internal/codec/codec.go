package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// Version is the format version this package writes, stored as the first
// byte of every encoding. [DecodeEvent] reads it and every older version
// (from [OldestVersion]), and refuses any other with an error naming it.
//
// Version 2 added the provider, request model, response model and
// operation of a usage content; version 3 its cache-read, cache-creation
// and reasoning token counts and its started-at and first-chunk-at times.
// An older usage decodes with the fields its version lacks zero.
const Version byte = 3

// OldestVersion is the oldest format version [DecodeEvent] still reads.
const OldestVersion byte = 1

// ErrCorrupt is wrapped by every error of [DecodeEvent]: the bytes are not an
// encoding this package reads (see the package documentation).
var ErrCorrupt = errors.New("corrupt event encoding")

// Content kind names, as returned by [keyspace.Content.ContentKind] and
// stored in a record. An empty kind stands for a nil Content.
const (
	kindMessage    = "message"
	kindToolCall   = "tool_call"
	kindToolResult = "tool_result"
	kindStatus     = "status"
	kindUsage      = "usage"
)

// AppendEvent appends the encoding of ev's stored fields to dst and returns
// the extended slice. The stream key and store seq are not part of it. ev
// must not be ephemeral (the backends refuse those before encoding).
//
// A Content that is not one of the five kinds (value or non-nil pointer)
// cannot be encoded: the error wraps [eventstore.ErrInvalidArgument], and dst
// is not returned. [keyspace.ValidateBatch] refuses every such Content, so
// for a batch that passed it this error does not occur.
func AppendEvent(dst []byte, ev *keyspace.ActivityEvent) ([]byte, error) {
	dst = append(dst, Version)
	dst = appendString(dst, ev.AgentID)
	dst = appendString(dst, ev.AgentRole)
	dst = appendTime(dst, ev.EmittedAt)
	dst = binary.AppendUvarint(dst, ev.WorkerSeq)
	switch c := ev.Content.(type) {
	case nil:
		dst = appendString(dst, "")
	case keyspace.Message:
		dst = appendMessage(dst, c)
	case *keyspace.Message:
		return appendPointer(dst, c, appendMessage)
	case keyspace.ToolCall:
		dst = appendToolCall(dst, c)
	case *keyspace.ToolCall:
		return appendPointer(dst, c, appendToolCall)
	case keyspace.ToolResult:
		dst = appendToolResult(dst, c)
	case *keyspace.ToolResult:
		return appendPointer(dst, c, appendToolResult)
	case keyspace.Status:
		dst = appendStatus(dst, c)
	case *keyspace.Status:
		return appendPointer(dst, c, appendStatus)
	case keyspace.Usage:
		dst = appendUsage(dst, c)
	case *keyspace.Usage:
		return appendPointer(dst, c, appendUsage)
	default:
		// Not c.ContentKind(): a foreign type's method may panic (a nil
		// pointer with a value receiver does).
		return nil, fmt.Errorf("%w: content type %T is not one of the keyspace content kinds", eventstore.ErrInvalidArgument, c)
	}
	return dst, nil
}

// appendPointer appends the encoding of *c, a content kind held by pointer,
// with appendValue. A nil pointer cannot be encoded: the error wraps
// [eventstore.ErrInvalidArgument] and names the pointer type.
func appendPointer[T any](dst []byte, c *T, appendValue func([]byte, T) []byte) ([]byte, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: content is a nil %T", eventstore.ErrInvalidArgument, c)
	}
	return appendValue(dst, *c), nil
}

func appendMessage(dst []byte, c keyspace.Message) []byte {
	dst = appendString(dst, kindMessage)
	dst = appendString(dst, c.Role)
	return appendString(dst, c.Text)
}

func appendToolCall(dst []byte, c keyspace.ToolCall) []byte {
	dst = appendString(dst, kindToolCall)
	dst = appendString(dst, c.CallID)
	dst = appendString(dst, c.Name)
	return appendString(dst, c.Arguments)
}

func appendToolResult(dst []byte, c keyspace.ToolResult) []byte {
	dst = appendString(dst, kindToolResult)
	dst = appendString(dst, c.CallID)
	dst = appendString(dst, c.Output)
	if c.IsError {
		return append(dst, 1)
	}
	return append(dst, 0)
}

func appendStatus(dst []byte, c keyspace.Status) []byte {
	dst = appendString(dst, kindStatus)
	dst = appendString(dst, c.State)
	return appendString(dst, c.Detail)
}

func appendUsage(dst []byte, c keyspace.Usage) []byte {
	dst = appendString(dst, kindUsage)
	dst = binary.AppendUvarint(dst, c.InputTokens)
	dst = binary.AppendUvarint(dst, c.OutputTokens)
	dst = appendString(dst, c.Provider)
	dst = appendString(dst, c.RequestModel)
	dst = appendString(dst, c.ResponseModel)
	dst = appendString(dst, c.Operation)
	dst = binary.AppendUvarint(dst, c.CacheReadInputTokens)
	dst = binary.AppendUvarint(dst, c.CacheCreationInputTokens)
	dst = binary.AppendUvarint(dst, c.ReasoningOutputTokens)
	dst = appendTime(dst, c.StartedAt)
	return appendTime(dst, c.FirstChunkAt)
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendTime stores the instant exactly (seconds and nanoseconds, any year)
// and the zone as a fixed offset with its name. The monotonic clock reading
// and the *time.Location identity are not kept.
func appendTime(dst []byte, t time.Time) []byte {
	name, offset := t.Zone()
	dst = binary.AppendVarint(dst, t.Unix())
	dst = binary.AppendUvarint(dst, uint64(t.Nanosecond()))
	dst = binary.AppendVarint(dst, int64(offset))
	return appendString(dst, name)
}

// DecodeEvent decodes an encoding written by [AppendEvent]. The returned
// event's key fields, StoreSeq and Persisted are unset: the caller fills them
// from the record's key. Every string is a fresh copy: the event does not
// share memory with b, so it stays valid after b is reused or unmapped.
//
// Every error wraps [ErrCorrupt]; the returned event is then the zero event.
func DecodeEvent(b []byte) (keyspace.ActivityEvent, error) {
	var ev keyspace.ActivityEvent
	if len(b) == 0 {
		return ev, fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	version := b[0]
	if version < OldestVersion || version > Version {
		return ev, fmt.Errorf("%w: format version %d is not supported (this build reads versions %d to %d)", ErrCorrupt, version, OldestVersion, Version)
	}
	d := decoder{b: b[1:]}
	ev.AgentID = d.string("agent id")
	ev.AgentRole = d.string("agent role")
	ev.EmittedAt = d.time("emitted-at")
	ev.WorkerSeq = d.uvarint("worker seq")
	switch kind := d.string("content kind"); kind {
	case "":
	case kindMessage:
		ev.Content = keyspace.Message{Role: d.string("message role"), Text: d.string("message text")}
	case kindToolCall:
		ev.Content = keyspace.ToolCall{CallID: d.string("tool call id"), Name: d.string("tool call name"), Arguments: d.string("tool call arguments")}
	case kindToolResult:
		ev.Content = keyspace.ToolResult{CallID: d.string("tool result call id"), Output: d.string("tool result output"), IsError: d.bool("tool result is-error flag")}
	case kindStatus:
		ev.Content = keyspace.Status{State: d.string("status state"), Detail: d.string("status detail")}
	case kindUsage:
		u := keyspace.Usage{InputTokens: d.uvarint("usage input tokens"), OutputTokens: d.uvarint("usage output tokens")}
		if version >= 2 {
			u.Provider = d.string("usage provider")
			u.RequestModel = d.string("usage request model")
			u.ResponseModel = d.string("usage response model")
			u.Operation = d.string("usage operation")
		}
		if version >= 3 {
			u.CacheReadInputTokens = d.uvarint("usage cache-read input tokens")
			u.CacheCreationInputTokens = d.uvarint("usage cache-creation input tokens")
			u.ReasoningOutputTokens = d.uvarint("usage reasoning output tokens")
			u.StartedAt = d.time("usage started-at")
			u.FirstChunkAt = d.time("usage first-chunk-at")
		}
		ev.Content = u
	default:
		if d.err == nil {
			d.err = fmt.Errorf("unknown content kind %q", kind)
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.err = fmt.Errorf("%d unexpected trailing bytes", len(d.b))
	}
	if d.err != nil {
		return keyspace.ActivityEvent{}, fmt.Errorf("%w: %w", ErrCorrupt, d.err)
	}
	return ev, nil
}

// decoder reads the fields of an encoding in order. The first failure is
// kept in err and makes every later read return a zero value.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(field, problem string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %s", field, problem)
	}
}

func (d *decoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(field, "truncated or overlong uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(field, "truncated or overlong varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string(field string) string {
	n := d.uvarint(field + " length")
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail(field, fmt.Sprintf("length %d exceeds the %d bytes left", n, len(d.b)))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) bool(field string) bool {
	if d.err != nil {
		return false
	}
	if len(d.b) == 0 {
		d.fail(field, "truncated")
		return false
	}
	v := d.b[0]
	d.b = d.b[1:]
	if v > 1 {
		d.fail(field, fmt.Sprintf("byte %d is neither 0 nor 1", v))
	}
	return v == 1
}

// time reads a time written by appendTime; field names it in errors.
func (d *decoder) time(field string) time.Time {
	sec := d.varint(field + " seconds")
	nsec := d.uvarint(field + " nanoseconds")
	offset := d.varint(field + " offset")
	name := d.string(field + " zone")
	if d.err != nil {
		return time.Time{}
	}
	if nsec >= uint64(time.Second) {
		d.fail(field+" nanoseconds", fmt.Sprintf("%d is not below one second", nsec))
		return time.Time{}
	}
	// A zone offset is less than a day in every real zone; bounding it keeps
	// the int conversion exact.
	if offset <= -86400 || offset >= 86400 {
		d.fail(field+" offset", fmt.Sprintf("%d seconds is not a zone offset", offset))
		return time.Time{}
	}
	t := time.Unix(sec, int64(nsec))
	if offset == 0 && (name == "" || name == "UTC") {
		return t.UTC()
	}
	return t.In(time.FixedZone(name, int(offset)))
}
