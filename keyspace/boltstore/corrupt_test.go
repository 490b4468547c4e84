package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// The corruption fixture: three streams in two runs, written through the
// Store in four commits after the one Open makes. The data bucket spans
// many leaf pages under a branch page, one value spills onto overflow
// pages, and the last commit only adds to stream A, so losing it (to a lost
// meta page) leaves a known earlier state.
var (
	fixA = keyspace.NewStreamKey(eventstore.WorkflowID{1}, eventstore.RunID{2}, 3, 0)
	fixB = keyspace.NewStreamKey(eventstore.WorkflowID{1}, eventstore.RunID{2}, 4, 1)
	fixC = keyspace.NewStreamKey(eventstore.WorkflowID{5}, eventstore.RunID{6}, 0, 0)
)

// fixBatch is one commit of the fixture.
type fixBatch struct {
	key   keyspace.StreamKey
	n     int
	bytes int // text length
}

var fixBatches = []fixBatch{
	{fixA, 200, 120},
	{fixB, 150, 90},
	{fixC, 1, 10_000},
	{fixA, 50, 120},
}

// fixText is the text of the i-th event of a stream (seq i), n bytes long,
// naming its stream and seq so a misplaced value shows.
func fixText(key keyspace.StreamKey, seq uint64, n int) string {
	s := fmt.Sprintf("%s#%d;", key, seq)
	return s + strings.Repeat(string(rune('a'+seq%26)), max(n-len(s), 0))
}

func fixEvents(key keyspace.StreamKey, from uint64, n, size int) []keyspace.ActivityEvent {
	evs := make([]keyspace.ActivityEvent, n)
	for i := range evs {
		seq := from + uint64(i)
		evs[i] = keyspace.ActivityEvent{
			WorkflowID: key.WorkflowID, RunID: key.RunID, ActivityID: key.ActivityID, Attempt: key.Attempt,
			AgentID: "fixture", WorkerSeq: seq, EmittedAt: time.Unix(1_700_000_000+int64(seq), 0).UTC(),
			Content: keyspace.Message{Role: "assistant", Text: fixText(key, seq, size)},
		}
	}
	return evs
}

// state is what the store holds: for each stream, one line per record.
type state map[keyspace.StreamKey][]string

func (st state) clone() state {
	out := state{}
	for k, v := range st {
		out[k] = slices.Clone(v)
	}
	return out
}

func recordLine(r keyspace.Record) string {
	text := ""
	if m, ok := r.Event.Content.(keyspace.Message); ok {
		text = m.Text
	}
	return fmt.Sprintf("%d/%d/%s", r.StoreSeq, r.Event.WorkerSeq, text)
}

// fixture is a pristine bbolt file, what the check found in it, and the
// states after its last commit (final) and before it (prev).
type fixture struct {
	file        []byte
	layout      *checker
	final, prev state
}

func buildFixture(t testing.TB) *fixture {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "fixture.db")
	s, err := Open(path, WithNoSync())
	if err != nil {
		t.Fatal(err)
	}
	st := state{}
	var prev state
	for _, b := range fixBatches {
		prev = st.clone()
		head := uint64(len(st[b.key]))
		evs := fixEvents(b.key, head, b.n, b.bytes)
		if _, err := s.AppendEvents(ctx, head, evs); err != nil {
			t.Fatal(err)
		}
		for i, ev := range evs {
			st[b.key] = append(st[b.key], recordLine(keyspace.Record{StoreSeq: head + uint64(i), Event: ev}))
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	file, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	layout, err := checkReader(bytes.NewReader(file), uint64(len(file)))
	if err != nil {
		t.Fatalf("the pristine fixture fails the check: %v", err)
	}
	return &fixture{file: file, layout: layout, final: st, prev: prev}
}

// pages returns the ids of the fixture's pages of kind k.
func (fx *fixture) pages(k pageKind) []uint64 {
	var ids []uint64
	for id, got := range fx.layout.kind {
		if got == k {
			ids = append(ids, uint64(id))
		}
	}
	return ids
}

func (fx *fixture) page(t testing.TB, k pageKind, i int) uint64 {
	t.Helper()
	ids := fx.pages(k)
	if len(ids) <= i {
		t.Fatalf("the fixture has %d pages of kind %d, the case needs %d", len(ids), k, i+1)
	}
	return ids[i]
}

func (fx *fixture) off(id uint64) int { return int(id * fx.layout.ps) }

// readState reads every fixture stream, and any other stream the fixture's
// runs list, from s. The first error is returned.
func readState(ctx context.Context, s *Store) (state, error) {
	st := state{}
	for _, run := range []keyspace.StreamKey{fixA, fixC} {
		list, err := s.ListStreams(ctx, run.WorkflowID, run.RunID)
		if err != nil {
			return nil, err
		}
		for _, sum := range list {
			recs, err := s.ReadFrom(ctx, sum.Key, 0, 0)
			if err != nil {
				return nil, err
			}
			if uint64(len(recs)) != sum.Head {
				return nil, fmt.Errorf("stream %s: %d records under head %d", sum.Key, len(recs), sum.Head)
			}
			for i, r := range recs {
				if r.StoreSeq != uint64(i) || keyspace.KeyOf(r.Event) != sum.Key {
					return nil, fmt.Errorf("stream %s: record %d is %s seq %d", sum.Key, i, keyspace.KeyOf(r.Event), r.StoreSeq)
				}
				st[sum.Key] = append(st[sum.Key], recordLine(r))
			}
		}
	}
	return st, nil
}

func sameState(a, b state) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// outcome is what a damaged file must give.
type outcome int

const (
	wantCorrupt outcome = iota // Open fails with ErrCorrupt
	wantFinal                  // everything committed is there
	wantPrev                   // the last commit is lost, the rest is there
	wantEmpty                  // a new, empty store
)

// noPanic runs fn and reports a panic that escapes it as an error.
func noPanic(what string, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%s: a panic escaped: %v", what, r)
		}
	}()
	return fn()
}

// exercise opens the file at path and checks the store against want (or,
// for the fuzz target, want < 0: any outcome the contract allows). It then
// appends to stream A and C, reads the batch back, closes, reopens and
// checks that the append is still there.
func exercise(t *testing.T, path string, want outcome, fx *fixture) {
	t.Helper()
	ctx := context.Background()
	var s *Store
	err := noPanic("Open", func() (err error) { s, err = Open(path, WithNoSync()); return err })
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("Open = %v, want nil or an error wrapping ErrCorrupt", err)
		}
		if want != wantCorrupt && want >= 0 {
			t.Fatalf("Open = %v, want a usable store", err)
		}
		return
	}
	defer s.Close()
	if want == wantCorrupt {
		t.Fatal("Open succeeded on a file the check must refuse")
	}
	var got state
	err = noPanic("reading", func() (err error) { got, err = readState(ctx, s); return err })
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("reading = %v, want nil or an error wrapping ErrCorrupt", err)
		}
		if want >= 0 {
			t.Fatalf("reading = %v, want the data", err)
		}
		return
	}
	switch want {
	case wantFinal, wantPrev, wantEmpty:
		w := map[outcome]state{wantFinal: fx.final, wantPrev: fx.prev, wantEmpty: {}}[want]
		if !sameState(got, w) {
			t.Fatalf("the store holds %d streams (%v heads), want the %v state", len(got), heads(got), heads(w))
		}
	}
	for _, key := range []keyspace.StreamKey{fixA, fixC} {
		head := uint64(len(got[key]))
		evs := fixEvents(key, head, 3, 50)
		err = noPanic("AppendEvents", func() error { _, err := s.AppendEvents(ctx, head, evs); return err })
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || want >= 0 {
				t.Fatalf("AppendEvents at head %d of %s = %v", head, key, err)
			}
			return
		}
		var recs []keyspace.Record
		err = noPanic("ReadFrom", func() (err error) { recs, err = s.ReadFrom(ctx, key, head, 0); return err })
		if err != nil || len(recs) != 3 || recordLine(recs[2]) != recordLine(keyspace.Record{StoreSeq: head + 2, Event: evs[2]}) {
			t.Fatalf("reading back the append to %s at %d: %d records, %v", key, head, len(recs), err)
		}
		got[key] = append(got[key], "appended", "appended", "appended")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	err = noPanic("reopen", func() (err error) { s, err = Open(path, WithNoSync()); return err })
	if err != nil {
		t.Fatalf("reopening after a successful append = %v", err)
	}
	for key, lines := range got {
		if h, err := s.Head(ctx, key); err != nil || h != uint64(len(lines)) {
			t.Fatalf("after reopening, Head(%s) = %d, %v; want %d", key, h, err, len(lines))
		}
	}
}

func heads(st state) map[string]int {
	out := map[string]int{}
	for k, v := range st {
		out[k.String()[:8]+fmt.Sprint(k.ActivityID)] = len(v)
	}
	return out
}

// put writes v at b[off:] in the machine's byte order.
func put16(b []byte, off int, v uint16) { binary.NativeEndian.PutUint16(b[off:], v) }
func put32(b []byte, off int, v uint32) { binary.NativeEndian.PutUint32(b[off:], v) }
func put64(b []byte, off int, v uint64) { binary.NativeEndian.PutUint64(b[off:], v) }

// garbage overwrites n bytes at b[off:] with seeded random bytes.
func garbage(b []byte, off, n int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0x6761726261676521))
	for i := off; i < off+n && i < len(b); i++ {
		b[i] = byte(rng.Uint32())
	}
}

// resum rewrites the checksum of the meta page at b[off:] after a crafted
// change, so the meta page stays valid and the damage lies in what it says.
func resum(b []byte, off int) {
	m := b[off+pageHeaderSize:]
	h := fnv.New64a()
	_, _ = h.Write(m[:metaChecksumOff])
	put64(m, metaChecksumOff, h.Sum64())
}

// TestDamagedFileNeverPanics damages a file holding real data in the ways
// an adversarial tester did, and more: meta pages, the freelist, branch,
// leaf and root pages (headers and bodies), page ids pointing past the
// end, the file cut at several points, an empty file and a file of random
// bytes. No panic may escape; Open must fail with ErrCorrupt, or succeed
// with exactly the data that was committed (all of it, or all but the last
// commit when the newest meta page is lost), and then accept appends that
// survive a reopen.
func TestDamagedFileNeverPanics(t *testing.T) {
	fx := buildFixture(t)
	ps := int(fx.layout.ps)
	newest := int(fx.layout.metaPage)
	older := 1 - newest
	hwm := int(fx.layout.meta.hwm)
	testCases := []struct {
		name   string
		damage func(t *testing.T, b []byte) []byte
		want   outcome
	}{
		{"meta-newest-zeroed", func(t *testing.T, b []byte) []byte {
			clear(b[newest*ps : (newest+1)*ps])
			return b
		}, wantPrev},
		{"meta-older-zeroed", func(t *testing.T, b []byte) []byte {
			clear(b[older*ps : (older+1)*ps])
			return b
		}, wantFinal},
		{"meta-newest-checksum-flipped", func(t *testing.T, b []byte) []byte {
			b[newest*ps+pageHeaderSize+metaChecksumOff] ^= 0x01
			return b
		}, wantPrev},
		{"meta-older-magic-flipped", func(t *testing.T, b []byte) []byte {
			b[older*ps+pageHeaderSize] ^= 0x80
			return b
		}, wantFinal},
		{"meta-both-zeroed", func(t *testing.T, b []byte) []byte {
			clear(b[:2*ps])
			return b
		}, wantCorrupt},
		{"meta-both-flipped", func(t *testing.T, b []byte) []byte {
			b[pageHeaderSize+20] ^= 0x10
			b[ps+pageHeaderSize+20] ^= 0x10
			return b
		}, wantCorrupt},
		{"meta-hwm-past-end-valid-checksum", func(t *testing.T, b []byte) []byte {
			put64(b, newest*ps+pageHeaderSize+40, uint64(hwm*4))
			resum(b, newest*ps)
			return b
		}, wantCorrupt},
		{"meta-root-past-end-valid-checksum", func(t *testing.T, b []byte) []byte {
			put64(b, newest*ps+pageHeaderSize+16, uint64(hwm+7))
			resum(b, newest*ps)
			return b
		}, wantCorrupt},
		{"meta-freelist-is-a-leaf-valid-checksum", func(t *testing.T, b []byte) []byte {
			put64(b, newest*ps+pageHeaderSize+32, fx.page(t, pageLeaf, 1))
			resum(b, newest*ps)
			return b
		}, wantCorrupt},
		{"freelist-garbage", func(t *testing.T, b []byte) []byte {
			garbage(b, fx.off(fx.layout.meta.freelist), ps, 1)
			return b
		}, wantCorrupt},
		{"freelist-flags-leaf", func(t *testing.T, b []byte) []byte {
			put16(b, fx.off(fx.layout.meta.freelist)+8, flagLeaf)
			return b
		}, wantCorrupt},
		{"freelist-count-huge", func(t *testing.T, b []byte) []byte {
			off := fx.off(fx.layout.meta.freelist)
			put16(b, off+10, 0xFFFF)
			put64(b, off+pageHeaderSize, 1<<40)
			return b
		}, wantCorrupt},
		{"freelist-lists-a-live-page", func(t *testing.T, b []byte) []byte {
			off := fx.off(fx.layout.meta.freelist)
			put16(b, off+10, 1)
			put64(b, off+pageHeaderSize, fx.page(t, pageLeaf, 2))
			return b
		}, wantCorrupt},
		{"branch-id-flipped", func(t *testing.T, b []byte) []byte {
			b[fx.off(fx.page(t, pageBranch, 0))] ^= 0x01
			return b
		}, wantCorrupt},
		{"branch-flags-unknown", func(t *testing.T, b []byte) []byte {
			put16(b, fx.off(fx.page(t, pageBranch, 0))+8, 0x20)
			return b
		}, wantCorrupt},
		{"branch-count-huge", func(t *testing.T, b []byte) []byte {
			put16(b, fx.off(fx.page(t, pageBranch, 0))+10, 0xFFFE)
			return b
		}, wantCorrupt},
		{"branch-child-past-end", func(t *testing.T, b []byte) []byte {
			put64(b, fx.off(fx.page(t, pageBranch, 0))+pageHeaderSize+8, uint64(hwm+1000))
			return b
		}, wantCorrupt},
		{"branch-two-children-one-page", func(t *testing.T, b []byte) []byte {
			off := fx.off(fx.page(t, pageBranch, 0)) + pageHeaderSize
			copy(b[off+elementSize+8:off+elementSize+16], b[off+8:off+16])
			return b
		}, wantCorrupt},
		{"branch-body-garbage", func(t *testing.T, b []byte) []byte {
			garbage(b, fx.off(fx.page(t, pageBranch, 0))+pageHeaderSize, 64, 2)
			return b
		}, wantCorrupt},
		{"leaf-id-flipped", func(t *testing.T, b []byte) []byte {
			b[fx.off(fx.page(t, pageLeaf, 3))+1] ^= 0x40
			return b
		}, wantCorrupt},
		{"leaf-flags-branch", func(t *testing.T, b []byte) []byte {
			put16(b, fx.off(fx.page(t, pageLeaf, 3))+8, flagBranch)
			return b
		}, wantCorrupt},
		{"leaf-count-huge", func(t *testing.T, b []byte) []byte {
			put16(b, fx.off(fx.page(t, pageLeaf, 4))+10, 0xFFF0)
			return b
		}, wantCorrupt},
		{"leaf-overflow-huge", func(t *testing.T, b []byte) []byte {
			put32(b, fx.off(fx.page(t, pageLeaf, 4))+12, 0x0FFFFFFF)
			return b
		}, wantCorrupt},
		{"leaf-element-pos-past-page", func(t *testing.T, b []byte) []byte {
			put32(b, fx.off(fx.page(t, pageLeaf, 5))+pageHeaderSize+4, 0x00FFFFFF)
			return b
		}, wantCorrupt},
		{"leaf-keys-swapped", func(t *testing.T, b []byte) []byte {
			off := fx.off(fx.page(t, pageLeaf, 5)) + pageHeaderSize
			e0 := slices.Clone(b[off : off+elementSize])
			copy(b[off:off+elementSize], b[off+elementSize:off+2*elementSize])
			copy(b[off+elementSize:off+2*elementSize], e0)
			put32(b, off+4, binary.NativeEndian.Uint32(b[off+4:])+elementSize)
			put32(b, off+elementSize+4, binary.NativeEndian.Uint32(b[off+elementSize+4:])-elementSize)
			return b
		}, wantCorrupt},
		{"leaf-record-flagged-bucket", func(t *testing.T, b []byte) []byte {
			put32(b, fx.off(fx.page(t, pageLeaf, 6))+pageHeaderSize+elementSize, leafFlagBucket)
			return b
		}, wantCorrupt},
		{"leaf-body-garbage-elements", func(t *testing.T, b []byte) []byte {
			garbage(b, fx.off(fx.page(t, pageLeaf, 7))+pageHeaderSize, 256, 3)
			return b
		}, wantCorrupt},
		{"leaf-whole-page-garbage", func(t *testing.T, b []byte) []byte {
			garbage(b, fx.off(fx.page(t, pageLeaf, 8)), ps, 4)
			return b
		}, wantCorrupt},
		{"root-bucket-page-garbage", func(t *testing.T, b []byte) []byte {
			garbage(b, fx.off(fx.layout.meta.root)+pageHeaderSize, ps-pageHeaderSize, 5)
			return b
		}, wantCorrupt},
		{"overflow-page-cleared-header-of-its-leaf", func(t *testing.T, b []byte) []byte {
			first := fx.page(t, pageOverflow, 0) - 1
			clear(b[fx.off(first) : fx.off(first)+pageHeaderSize])
			return b
		}, wantCorrupt},
		{"cut-in-half", func(t *testing.T, b []byte) []byte { return b[:len(b)/2] }, wantCorrupt},
		{"cut-below-high-water-mark", func(t *testing.T, b []byte) []byte { return b[:hwm*ps-1] }, wantCorrupt},
		{"cut-at-high-water-mark", func(t *testing.T, b []byte) []byte { return b[:hwm*ps] }, wantFinal},
		{"cut-to-one-page", func(t *testing.T, b []byte) []byte { return b[:ps] }, wantCorrupt},
		{"cut-to-100-bytes", func(t *testing.T, b []byte) []byte { return b[:100] }, wantCorrupt},
		{"zero-length", func(t *testing.T, b []byte) []byte { return b[:0] }, wantEmpty},
		{"random-bytes", func(t *testing.T, b []byte) []byte {
			garbage(b, 0, len(b), 6)
			return b
		}, wantCorrupt},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "damaged.db")
			if err := os.WriteFile(path, tc.damage(t, bytes.Clone(fx.file)), 0o600); err != nil {
				t.Fatal(err)
			}
			exercise(t, path, tc.want, fx)
		})
	}
}

// TestLosingOneMetaPageLosesOnlyTheLastCommit zeroes one of the two meta
// pages. bbolt falls back to the other: losing the newer one loses the
// last commit (the last batch of stream A) and nothing else; losing the
// older one loses nothing. Either way the store then works on, and its
// commits rewrite the lost meta page.
func TestLosingOneMetaPageLosesOnlyTheLastCommit(t *testing.T) {
	fx := buildFixture(t)
	ps := int(fx.layout.ps)
	ctx := context.Background()
	last := fixBatches[len(fixBatches)-1]
	for _, tc := range []struct {
		name     string
		page     int
		wantHead uint64
	}{
		{"newer", int(fx.layout.metaPage), uint64(len(fx.final[fixA]) - last.n)},
		{"older", 1 - int(fx.layout.metaPage), uint64(len(fx.final[fixA]))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(fx.file)
			clear(b[tc.page*ps : (tc.page+1)*ps])
			path := filepath.Join(t.TempDir(), "k.db")
			if err := os.WriteFile(path, b, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for key, lines := range fx.final {
				want := uint64(len(lines))
				if key == fixA {
					want = tc.wantHead
				}
				if h, err := s.Head(ctx, key); err != nil || h != want {
					t.Fatalf("Head(%s) = %d, %v; want %d", key, h, err, want)
				}
			}
			if _, err := s.AppendEvents(ctx, tc.wantHead, fixEvents(fixA, tc.wantHead, 1, 10)); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			b = mustRead(t, path)
			if _, err := parseMeta(b[tc.page*ps:]); err != nil {
				t.Fatalf("after the append, the lost meta page %d is still invalid: %v", tc.page, err)
			}
			if _, err := checkReader(bytes.NewReader(b), uint64(len(b))); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDamageWhileOpenFailsEveryLaterCall damages the file under an open
// Store, where only bbolt's memory map sees it: the file cut short (reads
// then fault), or a leaf page overwritten (bbolt then panics). The call
// that meets the damage returns ErrCorrupt instead of crashing the
// process, every later call returns ErrCorrupt, and Close releases the
// file: the next Open gets the lock at once and refuses the file.
func TestDamageWhileOpenFailsEveryLaterCall(t *testing.T) {
	fx := buildFixture(t)
	ps := int64(fx.layout.ps)
	ctx := context.Background()
	leafOfA := func(t *testing.T) uint64 {
		// The leaf holding stream A's record 100: the last leaf before
		// the one whose first key sorts after it.
		k := appendRecordKey(nil, streamPrefix(fixA), 100)
		for _, id := range fx.pages(pageLeaf) {
			page := fx.file[fx.off(id):]
			n := binary.NativeEndian.Uint16(page[10:])
			if n == 0 {
				continue
			}
			e := page[pageHeaderSize:]
			pos, ksize := binary.NativeEndian.Uint32(e[4:]), binary.NativeEndian.Uint32(e[8:])
			first := page[pageHeaderSize+pos : pageHeaderSize+pos+ksize]
			e = page[pageHeaderSize+elementSize*int(n-1):]
			pos, ksize = binary.NativeEndian.Uint32(e[4:]), binary.NativeEndian.Uint32(e[8:])
			lastKey := page[pageHeaderSize+elementSize*int(n-1)+int(pos):][:ksize]
			if bytes.Compare(first, k) <= 0 && bytes.Compare(k, lastKey) <= 0 {
				return id
			}
		}
		t.Fatal("no leaf holds stream A's record 100")
		return 0
	}
	testCases := []struct {
		name   string
		damage func(t *testing.T, f *os.File)
		call   func(s *Store) error
	}{
		{"cut-short-then-read", func(t *testing.T, f *os.File) {
			if err := f.Truncate(2 * ps); err != nil {
				t.Fatal(err)
			}
		}, func(s *Store) error { _, err := s.ReadFrom(ctx, fixA, 0, 0); return err }},
		{"leaf-overwritten-then-read", func(t *testing.T, f *os.File) {
			if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, int(ps)), int64(leafOfA(t))*ps); err != nil {
				t.Fatal(err)
			}
		}, func(s *Store) error { _, err := s.ReadFrom(ctx, fixA, 100, 1); return err }},
		{"leaf-overwritten-then-append", func(t *testing.T, f *os.File) {
			if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, int(ps)), int64(leafOfA(t))*ps); err != nil {
				t.Fatal(err)
			}
		}, func(s *Store) error {
			// An append into the damaged leaf: a conflict at a wrong head
			// would do, but bbolt must not crash; keys sort into the leaf.
			_, err := s.AppendEvents(ctx, 100, fixEvents(fixA, 100, 1, 10))
			if err == nil || errors.Is(err, eventstore.ErrSequenceConflict) {
				_, err = s.ReadFrom(ctx, fixA, 100, 1)
			}
			return err
		}},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "k.db")
			if err := os.WriteFile(path, fx.file, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := Open(path, WithNoSync())
			if err != nil {
				t.Fatal(err)
			}
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			tc.damage(t, f)
			_ = f.Close()
			err = noPanic("the call", func() error { return tc.call(s) })
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("the call meeting the damage = %v, want ErrCorrupt", err)
			}
			if _, err := s.Head(ctx, fixC); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a later Head = %v, want ErrCorrupt", err)
			}
			if _, err := s.AppendEvents(ctx, 1, fixEvents(fixC, 1, 1, 10)); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("a later AppendEvents = %v, want ErrCorrupt", err)
			}
			if err := s.Close(); err != nil {
				t.Fatalf("Close = %v", err)
			}
			if _, err := s.Head(ctx, fixC); !errors.Is(err, ErrClosed) {
				t.Fatalf("Head after Close = %v, want ErrClosed", err)
			}
			s2, err := Open(path, WithOpenTimeout(time.Millisecond))
			if err == nil {
				_ = s2.Close()
			}
			if errors.Is(err, ErrLocked) {
				t.Fatalf("Open after Close = %v: the damaged store kept the lock", err)
			}
		})
	}
}

// TestDamageWhileOpenConcurrentSafe cuts the file short under goroutines
// reading and appending: every goroutine ends with ErrCorrupt (none
// crashes, none is left waiting inside bbolt), and Close then releases the
// file.
func TestDamageWhileOpenConcurrentSafe(t *testing.T) {
	fx := buildFixture(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "k.db")
	if err := os.WriteFile(path, fx.file, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path, WithNoSync())
	if err != nil {
		t.Fatal(err)
	}
	const workers = 6
	started := make(chan struct{}, workers)
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			key := keyspace.NewStreamKey(eventstore.WorkflowID{9}, eventstore.RunID{9}, eventstore.ActivityID(w), 0)
			var head uint64
			for i := range 100_000 {
				var err error
				switch i % 3 {
				case 0:
					head, err = s.AppendEvents(ctx, head, fixEvents(key, head, 2, 40))
				case 1:
					_, err = s.ReadFrom(ctx, fixA, uint64(i%250), 5)
				default:
					_, err = s.ListStreams(ctx, fixA.WorkflowID, fixA.RunID)
				}
				if i == 2 {
					started <- struct{}{}
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- errors.New("never met the damage")
		}()
	}
	for range workers {
		<-started
	}
	if err := os.Truncate(path, 2*int64(fx.layout.ps)); err != nil {
		t.Fatal(err)
	}
	for range workers {
		if err := <-errs; !errors.Is(err, ErrCorrupt) {
			t.Errorf("a worker ended with %v, want ErrCorrupt", err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s2, err := Open(path, WithOpenTimeout(time.Millisecond)); errors.Is(err, ErrLocked) {
		t.Fatalf("Open after Close = %v: the damaged store kept the lock", err)
	} else if err == nil {
		_ = s2.Close()
	}
}
