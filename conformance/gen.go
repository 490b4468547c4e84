package conformance

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// The generators the suites share (see the package documentation, How),
// and the reflective copy, comparison and scribbling.

// newRand returns the generator of one rule: the seed mixed with the
// rule's name.
func newRand(seed int64, rule string) *rand.Rand {
	var h uint64 = 14695981039346656037
	for i := 0; i < len(rule); i++ {
		h = (h ^ uint64(rule[i])) * 1099511628211
	}
	return rand.New(rand.NewPCG(uint64(seed), h))
}

// gen draws the values of one rule run. IDs take their first eight bytes
// (their order and [eventstore.ShardOf]) from the seed; the last eight,
// and every shared key (packages, routes, dispatch keys), a per-process
// salt, so that a replay on a shared backend meets no earlier data.
type gen struct {
	*rand.Rand
	salt    string
	idTag   [8]byte
	used    map[uint64]bool
	bigLeft *int // how many more values from bigSizes
	huge    bool // the decorator generators make slices past 65,536
	nanos   bool // times to the nanosecond (an event store keeps microseconds)
}

func newGen(rng *rand.Rand) *gen {
	g := &gen{Rand: rng, used: map[uint64]bool{}, bigLeft: new(int)}
	_, _ = crand.Read(g.idTag[:])
	g.idTag[0] |= 1 // never all zero
	g.salt = fmt.Sprintf("c%x-", g.idTag[:5])
	return g
}

// id returns 16 bytes whose first eight are fresh, non-zero and distinct
// from every earlier draw.
func (g *gen) id() [16]byte {
	var id [16]byte
	for {
		v := g.Uint64()
		if v != 0 && !g.used[v] {
			g.used[v] = true
			binary.BigEndian.PutUint64(id[:8], v)
			break
		}
	}
	copy(id[8:], g.idTag[:])
	return id
}

// sub returns a generator drawing from seed that shares g's salt, IDs and
// size budget: the values of one step.
func (g *gen) sub(seed uint64) *gen {
	c := *g
	c.Rand = rand.New(rand.NewPCG(seed, 1))
	return &c
}

func (g *gen) workflow() eventstore.WorkflowID { return eventstore.WorkflowID(g.id()) }
func (g *gen) run() eventstore.RunID           { return eventstore.RunID(g.id()) }

// pick returns one element of list.
func pick[T any](r interface{ IntN(int) int }, list ...T) T { return list[r.IntN(len(list))] }

// bigSizes are the lengths, in bytes or elements, next to the limits a
// store or decorator plausibly has: a byte, a page, 64 KiB.
var bigSizes = []int{255, 256, 4095, 4096, 4097, 65535, 65536, 65537}

// size returns a length: mostly small, one time in forty from bigSizes
// while the budget lasts.
func (g *gen) size() int {
	if g.IntN(40) == 0 && *g.bigLeft > 0 {
		*g.bigLeft--
		return pick(g, bigSizes...)
	}
	return g.IntN(24)
}

// hostileStrings are texts every store must keep exactly: empty, NUL,
// non-ASCII, invalid UTF-8, separators and quotes a store might use.
var hostileStrings = []string{
	"", "plain", "nul\x00inside", "\x00", "ünïcødé ✓ 日本語", "bad\xff\xfeutf8", "\xc3\x28",
	"slash/and:colon|pipe\ttab\nnewline", "'quote\" \\back %s %%", "Mixed Case", "mixed case",
	" led", "trailed ", "\tboth\n", // what a trimming store or decorator cuts
}

// str returns a string of a drawn shape and size.
func (g *gen) str() string {
	s := pick(g, hostileStrings...)
	if n := g.size(); n > 24 {
		s = strings.Repeat("\x00ü\xffa", n/4+1)[:n]
	}
	return s
}

// bytes returns a byte slice of a drawn size (nil one time in eight).
func (g *gen) bytes() []byte {
	if g.IntN(8) == 0 {
		return nil
	}
	b := make([]byte, g.size())
	for i := range b {
		b[i] = byte(g.IntN(256))
	}
	return b
}

// keyShapes are the key parts a store's composite keys must keep apart:
// separators ("a/b"+"c" against "a"+"b/c"), case, NUL, non-ASCII, a shared
// prefix past 255 bytes.
var keyShapes = func() []string {
	long := strings.Repeat("k", 300)
	return []string{"a", "A", "a/b", "a:b", "a\x00b", "a/B", "b", "b/c", "c", "a/b/c", "ü", "u", "Ü", "a b", "a%2Fb", long + "1", long + "2"}
}()

// key returns prefix followed by a key shape.
func (g *gen) key(prefix string) string { return prefix + pick(g, keyShapes...) }

// boundaryU64 are numbers next to the widths a store may keep one in.
var boundaryU64 = []uint64{0, 1, 2, 255, 256, 65535, 65536, 1<<31 - 1, 1 << 31, 1<<32 - 1, 1 << 32, 1<<32 + 1,
	1<<53 + 1, 1<<63 - 1, 1 << 63, 1<<63 + 1, math.MaxUint64 - 1, math.MaxUint64}

// boundaryInt are the ints a limit or a shard number is tried with.
var boundaryInt = []int{math.MinInt, -1 << 31, -1, 0, 1, 2, 1<<31 - 1, 1 << 31, 1<<32 + 1, math.MaxInt}

func (g *gen) u64() uint64 {
	switch g.IntN(8) {
	case 0:
		return 0
	case 1, 2:
		return pick(g, boundaryU64...)
	}
	return g.Uint64() >> g.IntN(64)
}

// times are the instants every store must keep exactly (to the
// microsecond): the Unix epoch and just before it, the 2^31 and 2^32
// second boundaries, far past and future, and past the years 1678 to 2262
// that int64 nanoseconds since 1970 hold.
var times = []time.Time{
	time.Unix(0, 0), time.Unix(-1, 999_999_000), time.Unix(1<<31-1, 0), time.Unix(1<<31, 1000),
	time.Unix(1<<32, 0), time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2200, 12, 31, 23, 59, 59, 999_999_000, time.UTC),
	time.Date(1, 1, 1, 0, 0, 0, 1000, time.UTC), time.Date(1677, 9, 21, 0, 12, 43, 145_224_000, time.UTC),
	time.Date(2262, 4, 11, 23, 47, 16, 854_776_000, time.UTC), time.Date(2500, 6, 30, 12, 0, 0, 1000, time.UTC),
}

// zones are the locations times are drawn in besides UTC.
var zones = []*time.Location{time.FixedZone("CET", 3600), time.FixedZone("", -9*3600-1800)}

// time returns a non-zero instant at microsecond precision (nanosecond
// with nanos), mostly in UTC.
func (g *gen) time() time.Time {
	t := time.Unix(1_000_000_000+g.Int64N(2_000_000_000), g.Int64N(1_000_000)*1000)
	if g.nanos {
		t = t.Add(time.Duration(1 + g.IntN(999)))
	}
	switch g.IntN(12) {
	case 1, 2, 3:
		t = pick(g, times...)
	case 4:
		return t.In(pick(g, zones...))
	}
	return t.UTC()
}

var (
	timeType  = reflect.TypeFor[time.Time]()
	tokenType = reflect.TypeFor[eventstore.WriteToken]()
	errorType = reflect.TypeFor[error]()
	eventType = reflect.TypeFor[eventstore.Event]()
)

// fill sets every exported field reachable in v (a settable value) to a
// drawn value; interfaces and pointers are left to the caller.
func (g *gen) fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		switch v.Type() {
		case timeType:
			if g.IntN(12) != 0 {
				v.Set(reflect.ValueOf(g.time()))
			}
		case tokenType:
			v.Set(reflect.ValueOf(pick(g, eventstore.WriteToken{}, token, token)))
		}
		for _, i := range exported(v.Type()) {
			g.fill(v.Field(i))
		}
	case reflect.String:
		v.SetString(g.str())
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			v.SetBytes(g.bytes())
		}
	case reflect.Array:
		for i := range v.Len() {
			g.fill(v.Index(i))
		}
	case reflect.Bool:
		v.SetBool(g.IntN(2) == 0)
	case reflect.Uint64, reflect.Uint:
		v.SetUint(g.u64())
	case reflect.Uint8, reflect.Uint16, reflect.Uint32:
		bits := v.Type().Bits()
		v.SetUint(pick(g, 0, 1, uint64(1)<<(bits-1), uint64(1)<<bits-1, uint64(g.IntN(1<<bits))))
	case reflect.Int, reflect.Int64, reflect.Int32, reflect.Int16, reflect.Int8:
		v.SetInt(int64(pick(g, 0, 1, -1, g.IntN(1000))))
	}
}

// filled returns a T with every field drawn.
func filled[T any](g *gen) T {
	var v T
	g.fill(reflect.ValueOf(&v).Elem())
	return v
}

// deepCopy returns a copy of v that shares no slice, pointer or map with
// it.
func deepCopy[T any](v T) T {
	out := reflect.New(reflect.TypeFor[T]()).Elem()
	out.Set(copyValue(reflect.ValueOf(&v).Elem()))
	return out.Interface().(T)
}

func copyValue(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		out := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		if v.Type().Elem().Kind() == reflect.Uint8 {
			copy(out.Bytes(), v.Bytes())
			return out
		}
		for i := range v.Len() {
			out.Index(i).Set(copyValue(v.Index(i)))
		}
		return out
	case reflect.Struct:
		if v.Type() == timeType {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(v)
		for _, i := range exported(v.Type()) {
			out.Field(i).Set(copyValue(v.Field(i)))
		}
		return out
	case reflect.Interface:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type()).Elem()
		out.Set(copyValue(v.Elem()))
		return out
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		out := reflect.New(v.Type().Elem())
		out.Elem().Set(copyValue(v.Elem()))
		return out
	}
	return v
}

// scribble overwrites, in place, everything a caller can reach in v with
// marks (see mark): the caller's once the call returned.
func scribble(v any) { mark(reflect.ValueOf(v), true, nil) }

// The marks scribble leaves, none of which the generators draw.
const (
	poisonString = "conformance: poisoned once its call returned"
	poisonInt    = -0x5eedbad
	poisonUint   = 0xbdbd_bdbd_bdbd_bdbd
	poisonByte   = 0xbd
)

var poisonBytes = []byte("\xbdpoisoned\xbd")

// poisonedEvent is the mark of an event: reading its envelope, as any use
// of a kept event does, sets late (when not nil).
type poisonedEvent struct {
	eventstore.SignalReceived
	late *atomic.Bool
}

func (e poisonedEvent) EventEnvelope() eventstore.Envelope {
	if e.late != nil {
		e.late.Store(true)
	}
	return e.SignalReceived.EventEnvelope()
}

// mark walks everything a caller can reach in v (slice elements, exported
// fields, through interfaces and pointers). With set it overwrites each in
// place with its mark (the events of a slice with poisonedEvents reporting
// to late); without, it reports whether v holds a mark.
func mark(v reflect.Value, set bool, late *atomic.Bool) bool {
	switch v.Kind() {
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			for i := 0; set && i < v.Len(); i += copy(v.Bytes()[i:], poisonBytes) {
			}
			return !set && bytes.HasPrefix(v.Bytes(), poisonBytes)
		}
		for i := range v.Len() {
			if e := v.Index(i); mark(e, set, late) {
				return true
			} else if set && e.Type() == eventType {
				e.Set(reflect.ValueOf(poisonedEvent{eventstore.SignalReceived{SignalName: poisonString}, late}))
			}
		}
	case reflect.Struct:
		for _, i := range exported(v.Type()) {
			if mark(v.Field(i), set, late) {
				return true
			}
		}
	case reflect.Array:
		n := 0
		for i := range v.Len() {
			if e := v.Index(i); e.Kind() == reflect.Uint8 && set && e.CanSet() {
				e.SetUint(poisonByte)
			} else if e.Kind() == reflect.Uint8 && e.Uint() == poisonByte {
				n++
			}
		}
		return !set && n >= 8 && n == v.Len()
	case reflect.Interface:
		if !v.IsNil() && set && v.CanSet() {
			// What an interface holds is no one's to change in place:
			// the caller puts a marked copy there.
			cp := reflect.New(v.Elem().Type()).Elem()
			cp.Set(v.Elem())
			mark(cp, true, late)
			v.Set(cp)
			return false
		}
		return !v.IsNil() && mark(v.Elem(), set, late)
	case reflect.Pointer:
		return !v.IsNil() && mark(v.Elem(), set, late)
	case reflect.String:
		if set && v.CanSet() {
			v.SetString(poisonString)
		}
		return !set && v.String() == poisonString
	case reflect.Int:
		if set && v.CanSet() {
			v.SetInt(poisonInt)
		}
		return !set && v.Int() == poisonInt
	case reflect.Uint64:
		if set && v.CanSet() {
			v.SetUint(poisonUint)
		}
		return !set && v.Uint() == poisonUint
	}
	return false
}

// fieldCache maps a struct type to the indices of its exported fields.
var fieldCache sync.Map

// exported returns the indices of t's exported fields.
func exported(t reflect.Type) []int {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]int)
	}
	var out []int
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			out = append(out, i)
		}
	}
	fieldCache.Store(t, out)
	return out
}

// diff returns "" when got equals want, else where and how they differ.
// Times compare with Equal, and a nil slice equals an empty one (a store
// may return either for nothing).
func diff(got, want any) string {
	path, d := differ(reflect.ValueOf(got), reflect.ValueOf(want))
	if d == "" {
		return ""
	}
	if path == "" {
		return "value: " + d
	}
	return strings.TrimPrefix(path, ".") + ": " + d
}

// same reports whether got and want are equal as reflect.DeepEqual judges
// (a nil slice is not an empty one): a decorator must hand on the very
// values it got.
func same(got, want any) bool { return reflect.DeepEqual(got, want) }

// differ is the comparison behind diff: "" when g equals w, else how they
// differ and where (the path below g, built only then).
func differ(g, w reflect.Value) (path, how string) {
	switch {
	case !g.IsValid() || !w.IsValid():
		if g.IsValid() == w.IsValid() {
			return "", ""
		}
		return "", fmt.Sprintf("%s, want %s", show(g), show(w))
	case g.Type() != w.Type():
		return "", fmt.Sprintf("a %v, want a %v", g.Type(), w.Type())
	}
	eq := true
	switch g.Kind() {
	case reflect.Struct:
		if g.Type() == timeType {
			gt, wt := g.Interface().(time.Time), w.Interface().(time.Time)
			if !gt.Equal(wt) {
				return "", fmt.Sprintf("%v, want %v", gt, wt)
			}
			return "", ""
		}
		if len(exported(g.Type())) < g.NumField() {
			eq = reflect.DeepEqual(g.Interface(), w.Interface())
			break
		}
		for _, i := range exported(g.Type()) {
			if p, d := differ(g.Field(i), w.Field(i)); d != "" {
				return "." + g.Type().Field(i).Name + p, d
			}
		}
	case reflect.Slice, reflect.Array:
		if g.Kind() == reflect.Slice && g.Type().Elem().Kind() == reflect.Uint8 {
			gb, wb := g.Bytes(), w.Bytes()
			if bytes.Equal(gb, wb) {
				return "", ""
			}
			at := 0
			for at < min(len(gb), len(wb)) && gb[at] == wb[at] {
				at++
			}
			return "", fmt.Sprintf("%d bytes, want %d (first difference at byte %d)", len(gb), len(wb), at)
		}
		if g.Len() != w.Len() {
			return "", fmt.Sprintf("%d elements, want %d", g.Len(), w.Len())
		}
		if g.Kind() == reflect.Slice && g.Pointer() == w.Pointer() {
			return "", ""
		}
		for i := range g.Len() {
			if p, d := differ(g.Index(i), w.Index(i)); d != "" {
				return fmt.Sprintf("[%d]%s", i, p), d
			}
		}
	case reflect.Interface, reflect.Pointer:
		if g.IsNil() || w.IsNil() {
			if g.IsNil() == w.IsNil() {
				return "", ""
			}
			return "", fmt.Sprintf("%s, want %s", show(g), show(w))
		}
		return differ(g.Elem(), w.Elem())
	case reflect.String:
		if gs, ws := g.String(), w.String(); gs != ws {
			return "", fmt.Sprintf("%s, want %s", short(gs), short(ws))
		}
	case reflect.Bool:
		eq = g.Bool() == w.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		eq = g.Int() == w.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		eq = g.Uint() == w.Uint()
	default:
		eq = reflect.DeepEqual(g.Interface(), w.Interface())
	}
	if !eq {
		return "", fmt.Sprintf("%+v, want %+v", g.Interface(), w.Interface())
	}
	return "", ""
}

func show(v reflect.Value) string {
	if !v.IsValid() || ((v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) && v.IsNil()) {
		return "nil"
	}
	return fmt.Sprintf("%v", v.Interface())
}

// short quotes s, cut in the middle when long.
func short(s string) string {
	if len(s) > 60 {
		return fmt.Sprintf("%q...%q (%d bytes)", s[:24], s[len(s)-24:], len(s))
	}
	return fmt.Sprintf("%q", s)
}

// A ctxMode is how an operation's context behaves: live, done before the
// call, or cancelled during it.
type ctxMode int

const (
	ctxLive      ctxMode = iota
	ctxCancelled         // cancelled before the call
	ctxExpired           // past its deadline before the call
	ctxTrip              // cancelled while the call consults it (see tripContext)
)

// ctxFor returns a context of mode m derived from parent (trip is how many
// times a trip context may be consulted before it cancels itself) and its
// cancel function. It is made for a call, so the call before it returned:
// progress for the watchdog.
func ctxFor(parent context.Context, m ctxMode, trip int) (context.Context, context.CancelFunc) {
	tick(parent)
	switch m {
	case ctxCancelled:
		ctx, cancel := context.WithCancel(parent)
		cancel()
		return ctx, cancel
	case ctxExpired:
		return context.WithDeadline(parent, time.Unix(1, 0))
	case ctxTrip:
		ctx, cancel := context.WithCancel(parent)
		t := &tripContext{Context: ctx, cancel: cancel}
		t.left.Store(int64(trip))
		return t, cancel
	}
	return parent, func() {}
}

// tripContext cancels itself once it has been consulted (Err or Done) more
// than left times: a cancellation that lands while a call runs, between
// its first check and its commit, wherever the implementation looks.
type tripContext struct {
	context.Context
	cancel context.CancelFunc
	left   atomic.Int64
}

func (c *tripContext) probe() {
	if c.left.Add(-1) < 0 {
		c.cancel()
	}
}

func (c *tripContext) Err() error {
	c.probe()
	return c.Context.Err()
}

func (c *tripContext) Done() <-chan struct{} {
	c.probe()
	return c.Context.Done()
}
