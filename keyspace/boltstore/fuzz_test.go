package boltstore

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenCorrupt lets the fuzzer damage the corruption fixture: edits is
// a sequence of patches, each a 4-byte little-endian file offset (taken
// modulo the file's length), a length byte and that many bytes to write
// there; a non-zero cut then cuts the file to cut modulo its length. No
// panic may escape, every error must wrap ErrCorrupt, and a store that
// opens must accept appends that read back exactly and survive a reopen.
//
// The seed corpus (testdata/fuzz/FuzzOpenCorrupt) damages a meta page, the
// freelist, a branch page and a leaf page, and cuts the file; the offsets
// are those of the fixture with 4 KiB pages.
func FuzzOpenCorrupt(f *testing.F) {
	fx := buildFixture(f)
	f.Add([]byte{}, uint32(0))
	f.Add(patch(nil, 16, []byte{0xFF, 0xFF, 0xFF, 0xFF}), uint32(0))
	f.Add([]byte{}, uint32(len(fx.file)/3))
	f.Fuzz(func(t *testing.T, edits []byte, cut uint32) {
		b := bytes.Clone(fx.file)
		for len(edits) >= 5 {
			off := int(binary.LittleEndian.Uint32(edits) % uint32(len(b)))
			n := min(int(edits[4]), len(edits)-5)
			copy(b[off:], edits[5:5+n])
			edits = edits[5+n:]
		}
		if cut != 0 {
			b = b[:int(cut%uint32(len(b)))]
		}
		path := filepath.Join(t.TempDir(), "fuzzed.db")
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		exercise(t, path, -1, fx)
	})
}

// patch appends to edits the patch that writes data at off.
func patch(edits []byte, off uint32, data []byte) []byte {
	edits = binary.LittleEndian.AppendUint32(edits, off)
	edits = append(edits, byte(len(data)))
	return append(edits, data...)
}
