package boltstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"slices"
)

// bbolt's on-disk format (file format version 2), as checkFile reads it.
// bbolt writes its structs in the machine's byte order.
const (
	pageHeaderSize   = 16 // id u64, flags u16, count u16, overflow u32
	elementSize      = 16 // branch: pos, ksize u32, child u64; leaf: flags, pos, ksize, vsize u32
	bucketHeaderSize = 16 // root page u64, sequence u64
	metaChecksumOff  = 56 // the checksum is FNV-64a of the meta's first 56 bytes

	boltMagic   = 0xED0CDAED
	boltVersion = 2

	flagBranch   = 0x01
	flagLeaf     = 0x02
	flagFreelist = 0x10

	leafFlagBucket = 0x01
	noFreelist     = ^uint64(0)

	// maxKeySize is bbolt's limit on a key's length.
	maxKeySize = 32768
	// maxCheckDepth bounds the nesting of pages and buckets the check
	// follows. A bbolt B+tree of a file that fits in an address space is
	// far shallower; a deeper chain is damage.
	maxCheckDepth = 64
	// minPageSize and maxPageSize bound the page size a meta page may
	// declare: bbolt uses the operating system's page size.
	minPageSize = 1 << 10
	maxPageSize = 1 << 24
)

var nativeEndian = binary.NativeEndian

// meta is the part of a bbolt meta page that the check uses.
type meta struct {
	pageSize uint64
	root     uint64
	freelist uint64
	hwm      uint64 // high water mark: pages [0, hwm) are in use or free
	txid     uint64
}

// parseMeta decodes the meta page whose page starts at b[0]. It fails
// unless the magic, the format version and the checksum are right: the
// tests bbolt applies before it uses a meta page.
func parseMeta(b []byte) (meta, error) {
	if len(b) < pageHeaderSize+metaChecksumOff+8 {
		return meta{}, errors.New("cut short")
	}
	m := b[pageHeaderSize:]
	if magic := nativeEndian.Uint32(m[0:]); magic != boltMagic {
		return meta{}, fmt.Errorf("no bbolt magic (%#x)", magic)
	}
	if v := nativeEndian.Uint32(m[4:]); v != boltVersion {
		return meta{}, fmt.Errorf("bbolt format version %d, want %d", v, boltVersion)
	}
	h := fnv.New64a()
	_, _ = h.Write(m[:metaChecksumOff])
	if sum := nativeEndian.Uint64(m[metaChecksumOff:]); sum != h.Sum64() {
		return meta{}, errors.New("bad checksum")
	}
	return meta{
		pageSize: uint64(nativeEndian.Uint32(m[8:])),
		root:     nativeEndian.Uint64(m[16:]),
		freelist: nativeEndian.Uint64(m[32:]),
		hwm:      nativeEndian.Uint64(m[40:]),
		txid:     nativeEndian.Uint64(m[48:]),
	}, nil
}

// checker walks a bbolt file through ReadAt (never through a memory map,
// so damage can only produce errors) and checks every structure bbolt
// would trust: the meta page bbolt will use, the freelist, and every page
// of every bucket's B+tree. Each page is read once; the work and the
// memory are bounded by the file's size.
type checker struct {
	r        io.ReaderAt
	size     uint64
	ps       uint64
	meta     meta
	metaPage uint64     // the meta page (0 or 1) bbolt will use
	kind     []pageKind // what each page below the high water mark is

	// Per nesting depth, a page buffer and a key list, reused from page
	// to page: a page's keys must stay valid only while its children
	// (one level deeper) are walked.
	bufs [maxCheckDepth + 1][]byte
	keys [maxCheckDepth + 1][][]byte
}

// pageKind is what the check found a page to be.
type pageKind byte

const (
	pageUnseen pageKind = iota
	pageMeta
	pageFreelist
	pageBranch
	pageLeaf
	pageOverflow // a continuation page of the page before it
	pageFree     // listed by the freelist
)

// errCheck builds a damage report, wrapping ErrCorrupt.
func errCheck(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// checkFile checks the bbolt file f before bbolt maps it. A zero-length
// file passes: bbolt initialises it as a new file. Any structure bbolt
// would panic on, fault on, or silently misread fails with an error
// wrapping ErrCorrupt that says where the damage is.
func checkFile(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return nil
	}
	_, err = checkReader(f, uint64(fi.Size()))
	return err
}

// checkReader checks the file of the given size that r reads and returns
// the checker's findings (used by the tests to find pages to damage).
func checkReader(r io.ReaderAt, size uint64) (*checker, error) {
	c := &checker{r: r, size: size}
	if err := c.chooseMeta(); err != nil {
		return nil, err
	}
	m := c.meta
	c.kind = make([]pageKind, m.hwm)
	c.kind[0], c.kind[1] = pageMeta, pageMeta
	if m.freelist != noFreelist {
		if err := c.readFreelist(); err != nil {
			return nil, err
		}
	}
	if err := c.walkPage(m.root, nil, nil, 0); err != nil {
		return nil, err
	}
	if m.freelist != noFreelist {
		for id := range m.hwm {
			if c.kind[id] == pageUnseen {
				return nil, errCheck("page %d is neither in use nor free (meta page %d, txid %d)", id, c.metaPage, m.txid)
			}
		}
	}
	return c, nil
}

// chooseMeta finds the page size and the meta page bbolt will use, the way
// bbolt does: the page size from meta page 0, else from meta page 1; then
// the valid meta page of the higher transaction id, else the other one.
func (c *checker) chooseMeta() error {
	buf := make([]byte, 0x1000)
	var ps uint64
	var firstErr error
	if _, err := c.r.ReadAt(buf, 0); err == nil {
		if m, err := parseMeta(buf); err == nil {
			ps = m.pageSize
		} else {
			firstErr = fmt.Errorf("meta page 0: %w", err)
		}
	} else {
		firstErr = fmt.Errorf("meta page 0: %w", err)
	}
	for i := 0; ps == 0 && i <= 14; i++ {
		pos := uint64(1024) << i
		if pos+1024 >= c.size {
			break
		}
		n, _ := c.r.ReadAt(buf, int64(pos))
		if m, err := parseMeta(buf[:n]); err == nil {
			ps = m.pageSize
		}
	}
	if ps == 0 {
		return errCheck("no valid meta page (%v)", firstErr)
	}
	if ps < minPageSize || ps > maxPageSize || ps&(ps-1) != 0 {
		return errCheck("the meta page declares a page size of %d", ps)
	}
	if c.size < 2*ps {
		return errCheck("the file holds %d bytes, less than its two meta pages of %d", c.size, ps)
	}
	c.ps = ps
	var metas [2]meta
	var errs [2]error
	for i := range metas {
		b, err := c.read(uint64(i)*ps, pageHeaderSize+metaChecksumOff+8)
		if err == nil {
			metas[i], err = parseMeta(b)
		}
		errs[i] = err
	}
	a, b := 0, 1
	if metas[1].txid > metas[0].txid {
		a, b = 1, 0
	}
	switch {
	case errs[a] == nil:
	case errs[b] == nil:
		a = b
	default:
		return errCheck("both meta pages are invalid (meta page 0: %v; meta page 1: %v)", errs[0], errs[1])
	}
	m := metas[a]
	c.meta, c.metaPage = m, uint64(a)
	if m.pageSize != ps {
		return errCheck("meta page %d declares a page size of %d, the file uses %d", a, m.pageSize, ps)
	}
	if m.hwm < 3 || m.hwm > c.size/ps {
		return errCheck("meta page %d counts %d pages, the file holds %d", a, m.hwm, c.size/ps)
	}
	if m.root < 2 || m.root >= m.hwm {
		return errCheck("meta page %d puts the root bucket at page %d, outside [2, %d)", a, m.root, m.hwm)
	}
	if m.freelist != noFreelist && (m.freelist < 2 || m.freelist >= m.hwm) {
		return errCheck("meta page %d puts the freelist at page %d, outside [2, %d)", a, m.freelist, m.hwm)
	}
	return nil
}

// read reads n bytes at off.
func (c *checker) read(off, n uint64) ([]byte, error) {
	if off > c.size || n > c.size-off {
		return nil, errCheck("bytes [%d, %d) are past the end of the file (%d bytes)", off, off+n, c.size)
	}
	b := make([]byte, n)
	if _, err := c.r.ReadAt(b, int64(off)); err != nil {
		return nil, fmt.Errorf("boltstore: reading the file: %w", err)
	}
	return b, nil
}

// page reads page id and checks its header: its own id, its flags (want),
// and its overflow pages within the high water mark. It records the kind
// of the page and its overflow pages, and fails on a page used twice or
// also free.
// It returns the page's first page worth of bytes and the length of the
// page with its overflow.
func (c *checker) page(id uint64, want uint16, what string, depth int) ([]byte, uint64, error) {
	if id < 2 || id >= c.meta.hwm {
		return nil, 0, errCheck("%s page %d is outside [2, %d)", what, id, c.meta.hwm)
	}
	if c.bufs[depth] == nil {
		c.bufs[depth] = make([]byte, c.ps)
	}
	b := c.bufs[depth]
	if _, err := c.r.ReadAt(b, int64(id*c.ps)); err != nil {
		return nil, 0, fmt.Errorf("boltstore: reading page %d: %w", id, err)
	}
	if got := nativeEndian.Uint64(b[0:]); got != id {
		return nil, 0, errCheck("page %d identifies itself as page %d", id, got)
	}
	if flags := nativeEndian.Uint16(b[8:]); flags != want && !(want == flagBranch|flagLeaf && (flags == flagBranch || flags == flagLeaf)) {
		return nil, 0, errCheck("%s page %d has flags %#x", what, id, flags)
	}
	overflow := uint64(nativeEndian.Uint32(b[12:]))
	if overflow >= c.meta.hwm-id {
		return nil, 0, errCheck("page %d claims %d overflow pages, past the high water mark %d", id, overflow, c.meta.hwm)
	}
	flags := nativeEndian.Uint16(b[8:])
	for p := id; p <= id+overflow; p++ {
		switch c.kind[p] {
		case pageUnseen:
		case pageFree:
			return nil, 0, errCheck("page %d is both in use (%s page %d) and in the freelist", p, what, id)
		default:
			return nil, 0, errCheck("page %d is referenced twice (from %s page %d)", p, what, id)
		}
		switch {
		case p > id:
			c.kind[p] = pageOverflow
		case flags == flagFreelist:
			c.kind[p] = pageFreelist
		case flags == flagBranch:
			c.kind[p] = pageBranch
		default:
			c.kind[p] = pageLeaf
		}
	}
	return b, (overflow + 1) * c.ps, nil
}

// readFreelist checks the freelist page and records the free pages.
func (c *checker) readFreelist() error {
	id := c.meta.freelist
	b, span, err := c.page(id, flagFreelist, "freelist", 0)
	if err != nil {
		return err
	}
	start, count := uint64(pageHeaderSize), uint64(nativeEndian.Uint16(b[10:]))
	if count == 0xFFFF {
		count = nativeEndian.Uint64(b[pageHeaderSize:])
		start += 8
	}
	if count > (span-start)/8 {
		return errCheck("freelist page %d lists %d pages, more than it can hold", id, count)
	}
	ids, err := c.read(id*c.ps+start, count*8)
	if err != nil {
		return err
	}
	free := make([]uint64, count)
	for i := range free {
		free[i] = nativeEndian.Uint64(ids[8*i:])
	}
	slices.Sort(free)
	for i, p := range free {
		switch {
		case p < 2 || p >= c.meta.hwm:
			return errCheck("freelist page %d lists page %d, outside [2, %d)", id, p, c.meta.hwm)
		case i > 0 && free[i-1] == p:
			return errCheck("freelist page %d lists page %d twice", id, p)
		case c.kind[p] != pageUnseen:
			return errCheck("freelist page %d lists page %d, which is in use", id, p)
		}
		c.kind[p] = pageFree
	}
	return nil
}

// elements reads the n element headers that follow the page header at
// base, within a page (or inline page) of span bytes.
func (c *checker) elements(first []byte, base, span, n uint64, id uint64) ([]byte, error) {
	end := pageHeaderSize + n*elementSize
	if end > span {
		return nil, errCheck("page %d holds %d elements, more than fit in it", id, n)
	}
	if end <= uint64(len(first)) {
		return first[pageHeaderSize:end], nil
	}
	return c.read(base+pageHeaderSize, n*elementSize)
}

// slice returns the bytes [off, off+n) of a page: from first when it
// holds them, else read from the file at base.
func (c *checker) slice(first []byte, base, off, n uint64) ([]byte, error) {
	if off+n <= uint64(len(first)) {
		return first[off : off+n], nil
	}
	return c.read(base+off, n)
}

// walkPage checks the B+tree page id and, below it, its children and the
// buckets its leaves hold. Every key under it must be in [lo, hi) (nil:
// unbounded) and keys must increase.
func (c *checker) walkPage(id uint64, lo, hi []byte, depth int) error {
	if depth > maxCheckDepth {
		return errCheck("page %d is nested more than %d levels deep", id, maxCheckDepth)
	}
	first, span, err := c.page(id, flagBranch|flagLeaf, "B+tree", depth)
	if err != nil {
		return err
	}
	base := id * c.ps
	flags, n := nativeEndian.Uint16(first[8:]), uint64(nativeEndian.Uint16(first[10:]))
	if flags == flagBranch && n == 0 {
		return errCheck("branch page %d has no children", id)
	}
	elems, err := c.elements(first, base, span, n, id)
	if err != nil {
		return err
	}
	keys := slices.Grow(c.keys[depth][:0], int(n))[:n]
	c.keys[depth] = keys
	for i := range n {
		e := elems[i*elementSize:]
		off := pageHeaderSize + i*elementSize // pos counts from the element
		var pos, ksize, vsize uint64
		if flags == flagBranch {
			pos, ksize = uint64(nativeEndian.Uint32(e[0:])), uint64(nativeEndian.Uint32(e[4:]))
		} else {
			if lf := nativeEndian.Uint32(e[0:]); lf&^leafFlagBucket != 0 {
				return errCheck("leaf page %d element %d has flags %#x", id, i, lf)
			}
			pos, ksize, vsize = uint64(nativeEndian.Uint32(e[4:])), uint64(nativeEndian.Uint32(e[8:])), uint64(nativeEndian.Uint32(e[12:]))
		}
		if ksize == 0 || ksize > maxKeySize || off+pos+ksize+vsize > span {
			return errCheck("page %d element %d: key of %d bytes and value of %d at %d do not fit in the page's %d bytes", id, i, ksize, vsize, off+pos, span)
		}
		k, err := c.slice(first, base, off+pos, ksize)
		if err != nil {
			return err
		}
		if err := checkOrder(id, i, k, keys, lo, hi); err != nil {
			return err
		}
		keys[i] = k
	}
	for i := range n {
		e := elems[i*elementSize:]
		if flags == flagBranch {
			next := hi
			if i+1 < n {
				next = keys[i+1]
			}
			if err := c.walkPage(nativeEndian.Uint64(e[8:]), keys[i], next, depth+1); err != nil {
				return err
			}
			continue
		}
		if nativeEndian.Uint32(e[0:])&leafFlagBucket == 0 {
			continue
		}
		off := pageHeaderSize + i*elementSize + uint64(nativeEndian.Uint32(e[4:])) + uint64(len(keys[i]))
		vsize := uint64(nativeEndian.Uint32(e[12:]))
		if vsize < bucketHeaderSize {
			return errCheck("leaf page %d element %d: a bucket value of %d bytes", id, i, vsize)
		}
		v, err := c.slice(first, base, off, vsize)
		if err != nil {
			return err
		}
		if root := nativeEndian.Uint64(v); root != 0 {
			if err := c.walkPage(root, nil, nil, depth+1); err != nil {
				return err
			}
		} else if err := checkInline(id, i, v[bucketHeaderSize:]); err != nil {
			return err
		}
	}
	return nil
}

// checkOrder checks key k, element i of page id, against the keys before
// it and the bounds its parent sets.
func checkOrder(id, i uint64, k []byte, keys [][]byte, lo, hi []byte) error {
	switch {
	case i == 0 && lo != nil && bytes.Compare(k, lo) < 0:
		return errCheck("page %d: its first key %x is below its parent's key %x", id, k, lo)
	case i > 0 && bytes.Compare(keys[i-1], k) >= 0:
		return errCheck("page %d: key %d (%x) does not sort after key %d (%x)", id, i, k, i-1, keys[i-1])
	case hi != nil && bytes.Compare(k, hi) >= 0:
		return errCheck("page %d: key %d (%x) is not below its parent's next key %x", id, i, k, hi)
	}
	return nil
}

// checkInline checks the inline page of a small bucket, stored in the
// bucket's value on leaf page id (element i) after the bucket header:
// a leaf page whose elements and keys lie within the value. bbolt never
// puts a bucket inside an inline bucket.
func checkInline(id, i uint64, p []byte) error {
	if len(p) < pageHeaderSize || nativeEndian.Uint16(p[8:]) != flagLeaf {
		return errCheck("leaf page %d element %d: the inline bucket is not a leaf page", id, i)
	}
	n, span := uint64(nativeEndian.Uint16(p[10:])), uint64(len(p))
	if pageHeaderSize+n*elementSize > span {
		return errCheck("leaf page %d element %d: the inline bucket holds %d elements, more than fit", id, i, n)
	}
	keys := make([][]byte, n)
	for j := range n {
		off := pageHeaderSize + j*elementSize
		e := p[off:]
		pos, ksize, vsize := uint64(nativeEndian.Uint32(e[4:])), uint64(nativeEndian.Uint32(e[8:])), uint64(nativeEndian.Uint32(e[12:]))
		if nativeEndian.Uint32(e[0:]) != 0 || ksize == 0 || off+pos+ksize+vsize > span {
			return errCheck("leaf page %d element %d: inline bucket element %d is damaged", id, i, j)
		}
		k := p[off+pos : off+pos+ksize]
		if err := checkOrder(id, j, k, keys, nil, nil); err != nil {
			return err
		}
		keys[j] = k
	}
	return nil
}
