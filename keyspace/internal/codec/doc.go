// Package codec is the versioned binary encoding of a [keyspace.ActivityEvent]
// that the durable keyspace backends store: package boltstore as the value of
// each bbolt record, package pgstore as the payload column of each row. Both
// write exactly these bytes, so a record can move from one backend to the
// other, and the golden bytes in this package's tests pin them.
//
// The package is internal to github.com/aionotel/aionotel/keyspace: it is
// used by the backends below that path (which live in modules of their own)
// and is not part of any public API.
//
// # Format
//
// An encoding holds the event's stored fields; the stream key and the store
// seq are not part of it (each backend keeps them as the record's key). The
// first byte is the format version ([Version], 3); the rest is a compact
// binary form, in this order (uvarint and varint as in encoding/binary; a
// string is its length as a uvarint, then its bytes):
//
//	version                                  byte, 3
//	agent id, agent role                     strings
//	emitted at                               a time: varint Unix seconds,
//	                                         uvarint nanoseconds
//	                                         (0..999,999,999), varint UTC
//	                                         offset in seconds, zone name
//	                                         (string)
//	worker seq                               uvarint
//	content kind                             string: the ContentKind name,
//	                                         "" for a nil Content
//	content fields, by kind:
//	  message      role, text                strings
//	  tool_call    call id, name, arguments  strings
//	  tool_result  call id, output, is error strings, one byte 0 or 1
//	  status       state, detail             strings
//	  usage        input, output tokens      uvarints, then provider,
//	               request model, response   strings, then
//	               model, operation, cache   uvarints, then
//	               read, cache creation,     times
//	               reasoning tokens, started
//	               at, first chunk at
//
// Strings are stored as their exact bytes, valid UTF-8 or not (NUL
// characters included). Times keep their instant to the nanosecond for any
// year and their zone as a fixed offset with its name; the monotonic clock
// reading and the identity of the *time.Location are not kept (the decoded
// time is Equal to the encoded one, and a zero offset named "" or "UTC"
// decodes as UTC). A pointer content (*keyspace.Message and so on) is stored
// as its kind and decoded as the value type. Ephemeral, StoreSeq, Persisted
// and the stream key fields are not stored: the backends refuse ephemeral
// events before encoding and set the others from the record's key on
// reading.
//
// A change to these bytes is a format change: it needs a new [Version], and
// a decoder that still reads the old one. Version 2 is version 3 without the
// usage's three breakdown counts and two times; version 1 is version 2
// without the four usage strings. [DecodeEvent] reads both, giving a usage
// content with the missing fields zero, so records written by an older
// build stay readable in place; testdata holds one record of each kind as
// each older encoder wrote it. Encoding always writes the newest version.
//
// # Errors
//
// [AppendEvent] refuses a Content that is not one of the five keyspace kinds
// (another type, or a nil pointer to one of them) with an error wrapping
// [eventstore.ErrInvalidArgument]; the backends never reach that error, as
// [keyspace.ValidateBatch] refuses the same contents first. [DecodeEvent] refuses anything it did not
// write: an empty value, a format version outside 1 to [Version], an unknown content kind, a
// truncated or overlong field, an out-of-range time, a flag byte other than 0
// or 1, or trailing bytes. Its errors wrap [ErrCorrupt] and say what is
// wrong; each backend wraps them in turn with its own corrupt-record error,
// adding the stream and store seq.
package codec
