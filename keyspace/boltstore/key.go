package boltstore

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// RegionTag is the first byte of every key this package writes: 'O' (0x4F),
// the observability region. Keys of other regions that share the bucket are
// never read, listed or changed by a [Store], and no key this package writes
// can be mistaken for one of theirs, because the tag differs in the very
// first byte.
//
// Records live in the bucket "aionotel.keyspace", one key per record: the
// tag, the workflow and run IDs (UUID bytes), the activity ID (big-endian
// uint64), the attempt (big-endian uint32) and the store seq (big-endian
// uint64). bbolt keeps keys in byte order, which is therefore the order
// (workflow, run, activity, attempt, store seq), numbers unsigned: a
// stream's records are contiguous and in seq order, its head is the last
// record's seq plus one (no separate head key can disagree with the
// records), and a run's streams are contiguous in (activity, attempt) order.
// The bucket "aionotel.keyspace.meta" holds the [LayoutVersion].
const RegionTag byte = 'O'

// Offsets and lengths of the record key's fields. A record key is
//
//	tag(1) | workflow(16) | run(16) | activity(8, big-endian) | attempt(4, big-endian) | store seq(8, big-endian)
//
// so that bbolt's byte order is the order (workflow, run, activity, attempt,
// store seq) with every number compared as unsigned.
const (
	runPrefixLen    = 1 + 16 + 16
	streamPrefixLen = runPrefixLen + 8 + 4
	recordKeyLen    = streamPrefixLen + 8
)

// runPrefix returns the key prefix shared by every record of one run.
func runPrefix(workflowID eventstore.WorkflowID, runID eventstore.RunID) []byte {
	p := make([]byte, runPrefixLen, streamPrefixLen)
	p[0] = RegionTag
	copy(p[1:17], workflowID[:])
	copy(p[17:33], runID[:])
	return p
}

// streamPrefix returns the key prefix shared by every record of one stream.
func streamPrefix(key keyspace.StreamKey) []byte {
	p := runPrefix(key.WorkflowID, key.RunID)
	p = binary.BigEndian.AppendUint64(p, uint64(key.ActivityID))
	return binary.BigEndian.AppendUint32(p, key.Attempt)
}

// appendRecordKey appends the key of the record at seq of the stream whose
// prefix is prefix.
func appendRecordKey(dst, prefix []byte, seq uint64) []byte {
	dst = append(dst, prefix...)
	return binary.BigEndian.AppendUint64(dst, seq)
}

// parseRecordKey splits a record key into its stream and store seq. It fails
// on a key of another length or region.
func parseRecordKey(k []byte) (keyspace.StreamKey, uint64, error) {
	if len(k) != recordKeyLen || k[0] != RegionTag {
		return keyspace.StreamKey{}, 0, fmt.Errorf("%w: key %x is not a %d-byte record key of region %q", ErrCorruptRecord, k, recordKeyLen, RegionTag)
	}
	var key keyspace.StreamKey
	copy(key.WorkflowID[:], k[1:17])
	copy(key.RunID[:], k[17:33])
	key.ActivityID = eventstore.ActivityID(binary.BigEndian.Uint64(k[33:41]))
	key.Attempt = binary.BigEndian.Uint32(k[41:45])
	return key, binary.BigEndian.Uint64(k[45:53]), nil
}

// prefixEnd returns the smallest key greater than every key starting with
// prefix, or nil when there is none (prefix is all 0xFF).
func prefixEnd(prefix []byte) []byte {
	end := bytes.Clone(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// cursor is the part of *bbolt.Cursor the key walks use.
type cursor interface {
	Seek(seek []byte) (key, value []byte)
	Last() (key, value []byte)
	Prev() (key, value []byte)
}

// lastWithPrefix positions c on the greatest key starting with prefix and
// returns it, or nil when no key has the prefix. It costs one seek and one
// step back, whatever the number of keys under the prefix.
func lastWithPrefix(c cursor, prefix []byte) []byte {
	var k []byte
	if end := prefixEnd(prefix); end == nil {
		k, _ = c.Last()
	} else if k, _ = c.Seek(end); k == nil {
		k, _ = c.Last()
	} else {
		k, _ = c.Prev()
	}
	if k == nil || !bytes.HasPrefix(k, prefix) {
		return nil
	}
	return k
}

// headOf returns the head (next store seq) of the stream with the given
// prefix: one past the last record's seq, 0 for an unwritten stream. A key
// under the prefix that is not a record key is reported as corruption rather
// than guessed around, since a wrong head would let an append overwrite
// records.
func headOf(c cursor, prefix []byte) (uint64, error) {
	k := lastWithPrefix(c, prefix)
	if k == nil {
		return 0, nil
	}
	if len(k) != recordKeyLen {
		return 0, fmt.Errorf("%w: key %x under stream prefix %x is not a %d-byte record key", ErrCorruptRecord, k, prefix, recordKeyLen)
	}
	return binary.BigEndian.Uint64(k[streamPrefixLen:]) + 1, nil
}
