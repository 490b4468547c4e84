package conformance

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/keyspace"
)

// recordTypes are the types whose every field the generators must set.
var recordTypes = func() []reflect.Type {
	var out []reflect.Type
	for _, e := range eventKinds {
		out = append(out, reflect.TypeOf(e))
	}
	out = append(out, contentKinds...)
	return append(out, reflect.TypeFor[keyspace.ActivityEvent](), reflect.TypeFor[eventstore.OutboxRow](),
		reflect.TypeFor[eventstore.PackageRecord](), reflect.TypeFor[eventstore.RunSummary](), reflect.TypeFor[eventstore.WorkflowFilter]())
}()

// leaves yields the path and value of every exported leaf field of v.
func leaves(path string, v reflect.Value, yield func(string, reflect.Value)) {
	if v.Kind() == reflect.Struct && v.Type() != timeType && len(exported(v.Type())) == v.NumField() {
		for _, i := range exported(v.Type()) {
			leaves(path+"."+v.Type().Field(i).Name, v.Field(i), yield)
		}
		return
	}
	yield(path, v)
}

// Every field of every record type gets, over a few draws, a non-zero
// value and more than one value: a field added later is covered without a
// new rule.
func TestFillSetsEveryField(t *testing.T) {
	g := newGen(newRand(1, t.Name()))
	for _, typ := range recordTypes {
		values := map[string]map[string]bool{}
		bools := map[string]bool{}
		for range 200 {
			v := reflect.New(typ).Elem()
			g.fill(v)
			leaves(typ.Name(), v, func(path string, f reflect.Value) {
				if values[path] == nil {
					values[path] = map[string]bool{}
				}
				bools[path] = f.Kind() == reflect.Bool
				if !f.IsZero() {
					values[path][fmt.Sprintf("%v", f.Interface())] = true
				}
			})
		}
		for path, seen := range values {
			if strings.HasSuffix(path, ".Content") {
				continue // an interface: set by the models
			}
			if len(seen) < 2 && !(bools[path] && len(seen) == 1) {
				t.Errorf("%s got %d distinct non-zero values in 200 draws", path, len(seen))
			}
		}
	}
}

// A deep copy shares nothing: scribbling on the original leaves it as it
// was, and scribbling reaches every byte and element.
func TestDeepCopyAndScribble(t *testing.T) {
	g := newGen(newRand(2, t.Name()))
	var events []eventstore.Event
	for _, k := range eventKinds {
		e := reflect.New(reflect.TypeOf(k)).Elem()
		g.fill(e)
		events = append(events, e.Interface().(eventstore.Event))
	}
	rows := []eventstore.OutboxRow{filled[eventstore.OutboxRow](g), filled[eventstore.OutboxRow](g)}
	rows[0].Input.Data = []byte("row input")
	c := &keyspace.Message{Text: "pointer content"}
	records := []keyspace.ActivityEvent{{Content: c}}
	cpRows := deepCopy(rows)
	for _, v := range []any{events, rows, records} {
		cp := deepCopy(v)
		if d := diff(cp, v); d != "" {
			t.Fatalf("a deep copy differs: %s", d)
		}
		scribble(v)
		if d := diff(cp, v); d == "" {
			t.Errorf("scribbling on a %T changed nothing", v)
		}
		if d := diff(cp, deepCopy(cp)); d != "" {
			t.Errorf("the copy of a %T changed when the original was scribbled on: %s", v, d)
		}
	}
	if !mark(reflect.ValueOf(rows[0]), false, nil) || !mark(reflect.ValueOf(events), false, nil) || c.Text != poisonString {
		t.Errorf("scribble left rows[0] = %+v, events %v, the pointer content %+v unmarked", rows[0], events, c)
	}
	if mark(reflect.ValueOf(cpRows), false, nil) {
		t.Errorf("an unscribbled copy is marked: %+v", cpRows)
	}
}

// diff reports a difference in any one field, by name, treats a nil and
// an empty slice and two instants in different zones as equal; same is
// reflect.DeepEqual.
func TestDiffAndSame(t *testing.T) {
	g := newGen(newRand(3, t.Name()))
	for _, typ := range recordTypes {
		a := reflect.New(typ).Elem()
		g.fill(a)
		leaves(typ.Name(), a, func(path string, f reflect.Value) {
			b := reflect.ValueOf(deepCopy(a.Interface()))
			bc := reflect.New(typ).Elem()
			bc.Set(b)
			field := bc.FieldByIndex(fieldIndex(typ, path))
			switch field.Kind() {
			case reflect.String:
				field.SetString(field.String() + "x")
			case reflect.Slice:
				field.SetBytes(append(field.Bytes(), 'x'))
			case reflect.Bool:
				field.SetBool(!field.Bool())
			case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				field.SetUint(field.Uint() ^ 1)
			case reflect.Int:
				field.SetInt(field.Int() ^ 1)
			case reflect.Array:
				field.Index(15).SetUint(field.Index(15).Uint() ^ 1)
			case reflect.Struct:
				field.Set(reflect.ValueOf(field.Interface().(time.Time).Add(time.Microsecond)))
			default:
				return
			}
			name := path[strings.LastIndex(path, ".")+1:]
			if d := diff(bc.Interface(), a.Interface()); !strings.Contains(d, name) {
				t.Errorf("diff after changing %s = %q, want it named", path, d)
			}
			if same(bc.Interface(), a.Interface()) {
				t.Errorf("same after changing %s = true", path)
			}
		})
	}
	at := time.Unix(1_700_000_000, 0)
	for _, c := range []struct {
		a, b       any
		diff, same bool
	}{
		{[]int(nil), []int{}, true, false},
		{at.UTC(), at.In(zones[0]), true, false},
		{[]byte{}, []byte(nil), true, false},
		{eventstore.WriteToken{}, eventstore.RecorderToken(), false, false},
		{[]eventstore.Event{nil}, []eventstore.Event{eventstore.WorkflowTimedOut{}}, false, false},
	} {
		if got := diff(c.a, c.b) == ""; got != c.diff {
			t.Errorf("diff(%#v, %#v) empty = %v, want %v", c.a, c.b, got, c.diff)
		}
		if got := same(c.a, c.b); got != c.same || got != reflect.DeepEqual(c.a, c.b) {
			t.Errorf("same(%#v, %#v) = %v, want %v", c.a, c.b, got, c.same)
		}
	}
}

func fieldIndex(t reflect.Type, path string) []int {
	var idx []int
	for _, name := range strings.Split(path, ".")[1:] {
		f, _ := t.FieldByName(name)
		idx = append(idx, f.Index...)
		t = f.Type
	}
	return idx
}

// A trip context is live for its first probes, then cancelled.
func TestTripContext(t *testing.T) {
	ctx, cancel := ctxFor(t.Context(), ctxTrip, 2)
	defer cancel()
	for i, want := range []error{nil, nil, context.Canceled, context.Canceled} {
		if err := ctx.Err(); !errors.Is(err, want) && err != want {
			t.Errorf("probe %d: Err() = %v, want %v", i+1, err, want)
		}
	}
	for _, m := range []ctxMode{ctxCancelled, ctxExpired} {
		ctx, cancel := ctxFor(t.Context(), m, 0)
		if !errors.Is(ctx.Err(), doneErr(m)) {
			t.Errorf("mode %d: Err() = %v", m, ctx.Err())
		}
		cancel()
	}
}

// The event store suite calls every method of the store interfaces, so a
// method added to them fails here until the model covers it.
func TestModelCoversEveryMethod(t *testing.T) {
	var seen sync.Map
	if err := CheckEventStore(t.Context(), func() (eventstore.Store, func(), error) {
		return passWrap(faults{record: &seen, claimHistories: true})(eventstore.NewMemory()), nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, m := range methodsOf(capAll) {
		if _, ok := seen.Load(m.Name); !ok {
			t.Errorf("no rule of the event store suite calls %s", m.Name)
		}
	}
}
