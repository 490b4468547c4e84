package boltstore

import (
	"bytes"
	"cmp"
	"math"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

var (
	wfA  = eventstore.WorkflowID{0x01}
	wfB  = eventstore.WorkflowID{0x02}
	runA = eventstore.RunID{0x0A}
	runB = eventstore.RunID{0x0B}
)

// compareKeys is the order the key bytes must reproduce: workflow and run as
// UUID bytes, then activity and attempt as unsigned numbers.
func compareKeys(a, b keyspace.StreamKey) int {
	return cmp.Or(
		bytes.Compare(a.WorkflowID[:], b.WorkflowID[:]),
		bytes.Compare(a.RunID[:], b.RunID[:]),
		cmp.Compare(a.ActivityID, b.ActivityID),
		cmp.Compare(a.Attempt, b.Attempt),
	)
}

func TestKeyOrderMirrorsStreamOrder(t *testing.T) {
	keys := []keyspace.StreamKey{
		{WorkflowID: wfA, RunID: runA, ActivityID: 0, Attempt: 0},
		{WorkflowID: wfA, RunID: runA, ActivityID: 0, Attempt: 1},
		{WorkflowID: wfA, RunID: runA, ActivityID: 0, Attempt: 256},
		{WorkflowID: wfA, RunID: runA, ActivityID: 0, Attempt: math.MaxUint32},
		{WorkflowID: wfA, RunID: runA, ActivityID: 1, Attempt: 0},
		{WorkflowID: wfA, RunID: runA, ActivityID: 255, Attempt: 0},
		{WorkflowID: wfA, RunID: runA, ActivityID: 256, Attempt: 0},
		{WorkflowID: wfA, RunID: runA, ActivityID: 1 << 63, Attempt: 0},
		{WorkflowID: wfA, RunID: runA, ActivityID: math.MaxUint64, Attempt: math.MaxUint32},
		{WorkflowID: wfA, RunID: runB, ActivityID: 0, Attempt: 0},
		{WorkflowID: wfB, RunID: runA, ActivityID: 0, Attempt: 0},
	}
	for i, a := range keys {
		for j, b := range keys {
			want := cmp.Compare(i, j)
			if got := compareKeys(a, b); got != want {
				t.Fatalf("test table out of order at %d, %d", i, j)
			}
			if got := bytes.Compare(streamPrefix(a), streamPrefix(b)); got != want {
				t.Errorf("stream prefixes of %v and %v compare %d, want %d", a, b, got, want)
			}
			for _, seqs := range [][2]uint64{{0, 0}, {math.MaxUint64, 0}, {0, math.MaxUint64}} {
				ka := appendRecordKey(nil, streamPrefix(a), seqs[0])
				kb := appendRecordKey(nil, streamPrefix(b), seqs[1])
				if want != 0 {
					if got := bytes.Compare(ka, kb); got != want {
						t.Errorf("record keys %v@%d and %v@%d compare %d, want %d", a, seqs[0], b, seqs[1], got, want)
					}
				}
			}
		}
	}
	// Within a stream, store seqs order numerically.
	p := streamPrefix(keys[0])
	seqs := []uint64{0, 1, 255, 256, 1 << 32, 1 << 63, math.MaxUint64}
	for i := 1; i < len(seqs); i++ {
		if bytes.Compare(appendRecordKey(nil, p, seqs[i-1]), appendRecordKey(nil, p, seqs[i])) >= 0 {
			t.Errorf("record key of seq %d does not sort before seq %d", seqs[i-1], seqs[i])
		}
	}
}

func TestRecordKeyLayout(t *testing.T) {
	key := keyspace.StreamKey{
		WorkflowID: eventstore.WorkflowID{0: 0x11, 15: 0x1F},
		RunID:      eventstore.RunID{0: 0x21, 15: 0x2F},
		ActivityID: 0x0102030405060708,
		Attempt:    0x0A0B0C0D,
	}
	k := appendRecordKey(nil, streamPrefix(key), 0xF1F2F3F4F5F6F7F8)
	want := []byte{
		'O',
		0x11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x1F,
		0x21, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x2F,
		1, 2, 3, 4, 5, 6, 7, 8,
		0x0A, 0x0B, 0x0C, 0x0D,
		0xF1, 0xF2, 0xF3, 0xF4, 0xF5, 0xF6, 0xF7, 0xF8,
	}
	if !bytes.Equal(k, want) {
		t.Fatalf("record key\n got %x\nwant %x", k, want)
	}
	gotKey, gotSeq, err := parseRecordKey(k)
	if err != nil || gotKey != key || gotSeq != 0xF1F2F3F4F5F6F7F8 {
		t.Fatalf("parseRecordKey = %v, %x, %v; want %v, f1f2f3f4f5f6f7f8", gotKey, gotSeq, err, key)
	}
}

func TestParseRecordKeyRejectsForeignKeys(t *testing.T) {
	valid := appendRecordKey(nil, streamPrefix(keyspace.StreamKey{WorkflowID: wfA, RunID: runA}), 3)
	otherRegion := bytes.Clone(valid)
	otherRegion[0] = 'E'
	testCases := []struct {
		name string
		key  []byte
	}{
		{"empty", nil},
		{"short", valid[:recordKeyLen-1]},
		{"long", append(bytes.Clone(valid), 0)},
		{"other-region", otherRegion},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := parseRecordKey(tc.key); err == nil {
				t.Fatalf("parseRecordKey(%x) succeeded", tc.key)
			}
		})
	}
}

func TestPrefixEnd(t *testing.T) {
	testCases := []struct {
		name   string
		prefix []byte
		want   []byte
	}{
		{"simple", []byte{'O', 1, 2}, []byte{'O', 1, 3}},
		{"carry", []byte{'O', 1, 0xFF}, []byte{'O', 2}},
		{"double-carry", []byte{'O', 0xFF, 0xFF}, []byte{'P'}},
		{"all-ff", []byte{0xFF, 0xFF}, nil},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			got := prefixEnd(tc.prefix)
			if !bytes.Equal(got, tc.want) || (got == nil) != (tc.want == nil) {
				t.Fatalf("prefixEnd(%x) = %x, want %x", tc.prefix, got, tc.want)
			}
		})
	}
}

// countingCursor counts the cursor moves of a key walk.
type countingCursor struct {
	c     *bolt.Cursor
	moves int
}

func (c *countingCursor) Seek(k []byte) ([]byte, []byte) { c.moves++; return c.c.Seek(k) }
func (c *countingCursor) Last() ([]byte, []byte)         { c.moves++; return c.c.Last() }
func (c *countingCursor) Prev() ([]byte, []byte)         { c.moves++; return c.c.Prev() }

// putKeys writes the given keys (with a dummy value) into a fresh bucket and
// runs fn on a cursor over it.
func withBucket(t *testing.T, keys [][]byte, fn func(c *bolt.Cursor)) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(t.TempDir(), "keys.db"), 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket(dataBucket)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := b.Put(k, []byte{0}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.View(func(tx *bolt.Tx) error { fn(tx.Bucket(dataBucket).Cursor()); return nil }); err != nil {
		t.Fatal(err)
	}
}

func TestHeadOfFindsTheLastRecordAnywhereInTheBucket(t *testing.T) {
	first := streamPrefix(keyspace.StreamKey{WorkflowID: wfA, RunID: runA, ActivityID: 1})
	middle := streamPrefix(keyspace.StreamKey{WorkflowID: wfA, RunID: runA, ActivityID: 2})
	last := streamPrefix(keyspace.StreamKey{WorkflowID: wfA, RunID: runA, ActivityID: 3})
	absent := streamPrefix(keyspace.StreamKey{WorkflowID: wfA, RunID: runA, ActivityID: 9})
	before := streamPrefix(keyspace.StreamKey{WorkflowID: wfA, RunID: runA, ActivityID: 0})
	var keys [][]byte
	for seq := range uint64(300) { // several bbolt pages
		keys = append(keys, appendRecordKey(nil, first, seq))
	}
	for seq := range uint64(5) {
		keys = append(keys, appendRecordKey(nil, middle, seq))
	}
	keys = append(keys, appendRecordKey(nil, last, 0), appendRecordKey(nil, last, 1))
	testCases := []struct {
		name   string
		keys   [][]byte
		prefix []byte
		want   uint64
	}{
		{"first-stream", keys, first, 300},
		{"middle-stream", keys, middle, 5},
		{"last-stream-in-bucket", keys, last, 2},
		{"absent-after-all", keys, absent, 0},
		{"absent-before-all", keys, before, 0},
		{"empty-bucket", nil, first, 0},
		{"foreign-region-after", append(keys[:len(keys):len(keys)], []byte{'P', 0}), last, 2},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			withBucket(t, tc.keys, func(c *bolt.Cursor) {
				cc := &countingCursor{c: c}
				got, err := headOf(cc, tc.prefix)
				if err != nil || got != tc.want {
					t.Fatalf("headOf = %d, %v; want %d", got, err, tc.want)
				}
				if cc.moves > 2 {
					t.Errorf("headOf made %d cursor moves, want at most 2 (one seek, one step back)", cc.moves)
				}
			})
		})
	}
}

func TestHeadOfRefusesAForeignKeyUnderAStreamPrefix(t *testing.T) {
	p := streamPrefix(keyspace.StreamKey{WorkflowID: wfA, RunID: runA})
	withBucket(t, [][]byte{appendRecordKey(nil, p, 0), append(bytes.Clone(p), 1, 2, 3)}, func(c *bolt.Cursor) {
		if _, err := headOf(c, p); err == nil {
			t.Fatal("headOf guessed a head past a malformed key; want ErrCorruptRecord")
		}
	})
}

// TestListRunCostFollowsStreamsNotRecords proves the listing walk jumps from
// stream to stream: with 1,000 records per stream it makes the same number
// of cursor moves as with one.
func TestListRunCostFollowsStreamsNotRecords(t *testing.T) {
	const streams = 4
	for _, perStream := range []uint64{1, 1000} {
		var keys [][]byte
		for a := range streams {
			p := streamPrefix(keyspace.StreamKey{WorkflowID: wfA, RunID: runA, ActivityID: eventstore.ActivityID(a)})
			for seq := range perStream {
				keys = append(keys, appendRecordKey(nil, p, seq))
			}
		}
		// Neighbouring runs on both sides.
		keys = append(keys,
			appendRecordKey(nil, streamPrefix(keyspace.StreamKey{WorkflowID: wfA, RunID: eventstore.RunID{0x09}}), 0),
			appendRecordKey(nil, streamPrefix(keyspace.StreamKey{WorkflowID: wfA, RunID: runB}), 0))
		withBucket(t, keys, func(c *bolt.Cursor) {
			cc := &countingCursor{c: c}
			got, err := listRun(cc, runPrefix(wfA, runA))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != streams {
				t.Fatalf("listRun found %d streams, want %d", len(got), streams)
			}
			for i, s := range got {
				if s.Key.ActivityID != eventstore.ActivityID(i) || s.Head != perStream || s.Key.RunID != runA {
					t.Errorf("stream %d = %+v, want activity %d head %d of run A", i, s, i, perStream)
				}
			}
			if want := 1 + 3*streams; cc.moves > want {
				t.Errorf("listing %d streams of %d records made %d cursor moves, want at most %d", streams, perStream, cc.moves, want)
			}
		})
	}
}

func TestListRunOrderIsUnsigned(t *testing.T) {
	coords := []struct {
		activity eventstore.ActivityID
		attempt  uint32
	}{{math.MaxUint64, 0}, {1 << 63, 7}, {0, math.MaxUint32}, {0, 0}, {1, 1 << 31}}
	var keys [][]byte
	for _, co := range coords {
		keys = append(keys, appendRecordKey(nil, streamPrefix(keyspace.StreamKey{WorkflowID: wfA, RunID: runA, ActivityID: co.activity, Attempt: co.attempt}), 0))
	}
	withBucket(t, keys, func(c *bolt.Cursor) {
		got, err := listRun(c, runPrefix(wfA, runA))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.IsSortedFunc(got, func(a, b keyspace.StreamSummary) int { return compareKeys(a.Key, b.Key) }) || len(got) != len(coords) {
			t.Fatalf("listRun = %v, want %d streams in unsigned (activity, attempt) order", got, len(coords))
		}
	})
}
