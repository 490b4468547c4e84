package pgstore

import (
	"bytes"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aionotel/aionotel/eventstore"
)

// allKinds is one zero value of every event kind of package eventstore.
var allKinds = []eventstore.Event{
	eventstore.WorkflowStarted{}, eventstore.WorkflowCompleted{}, eventstore.WorkflowFailed{},
	eventstore.WorkflowCancelled{}, eventstore.WorkflowTimedOut{}, eventstore.WorkflowContinuedAsNew{},
	eventstore.WorkflowReopened{}, eventstore.WorkflowPaused{}, eventstore.WorkflowResumed{},
	eventstore.SignalReceived{}, eventstore.ScheduleTriggered{}, eventstore.TimerScheduled{},
	eventstore.TimerFired{}, eventstore.ActivityScheduled{}, eventstore.ActivityCompleted{},
	eventstore.ActivityFailed{}, eventstore.ActivityCancelled{}, eventstore.ActivityTimedOut{},
}

var hostileTexts = []string{"", "plain", "nul\x00inside", "bad\xff\xfeutf8", "ünïcødé ✓", strings.Repeat("long-", 3000)}

// fill sets every field of v (walking structs) to a random value, so that
// a field the codec forgets, or one added to a kind later, cannot round
// trip by luck.
func fill(rng *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(randomTime(rng)))
			return
		}
		for i := range v.NumField() {
			fill(rng, v.Field(i))
		}
	case reflect.String:
		v.SetString(hostileTexts[rng.IntN(len(hostileTexts))])
	case reflect.Slice: // []byte payload data; empty reads back as nil
		b := make([]byte, 1+rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.UintN(256))
		}
		v.SetBytes(b)
	case reflect.Array: // IDs
		for i := range v.Len() {
			v.Index(i).SetUint(uint64(rng.UintN(256)))
		}
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bounds := []uint64{0, 1, math.MaxUint8, math.MaxUint32, math.MaxUint64, rng.Uint64()}
		v.SetUint(bounds[rng.IntN(len(bounds))] & (1<<(v.Type().Bits()-1)<<1 - 1))
	default:
		panic("fill: unhandled kind " + v.Kind().String() + " in " + v.Type().String())
	}
}

// randomTime returns times a store could lose something of: nanoseconds,
// UTC and Local, the extremes. (A zone other than UTC and Local keeps its
// offset but not its name: TestTimesKeepTheirOffset.)
func randomTime(rng *rand.Rand) time.Time {
	times := []time.Time{
		time.Unix(1_700_000_000, 123_456_789).UTC(),
		time.Unix(1_700_000_000, 1),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(-4000, 6, 1, 0, 0, 0, 0, time.UTC),
	}
	return times[rng.IntN(len(times))]
}

func TestCodecRoundTripsEveryFieldOfEveryKind(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, kind := range allKinds {
		t.Run(reflect.TypeOf(kind).Name(), func(t *testing.T) {
			for range 50 {
				v := reflect.New(reflect.TypeOf(kind)).Elem()
				fill(rng, v)
				ev := v.Interface().(eventstore.Event)
				env := ev.EventEnvelope()
				body := encodeEvent(ev)
				if got := kindOf(body); got == "" {
					t.Fatalf("kind column of %T is empty", ev)
				}
				got, err := decodeEvent(env.WorkflowID, env.RunID, env.Seq, body)
				if err != nil {
					t.Fatalf("decoding %+v: %v", ev, err)
				}
				if !reflect.DeepEqual(got, ev) {
					t.Fatalf("round trip changed the event:\n got %+v\nwant %+v", got, ev)
				}
			}
		})
	}
}

// TestCodecKeepsEmptyPayloadsNil: an empty payload reads back nil, as
// eventstore.Memory returns one.
func TestCodecKeepsEmptyPayloadsNil(t *testing.T) {
	ev := eventstore.WorkflowCompleted{Envelope: eventstore.Envelope{RecordedAt: time.Unix(1, 0)}, Result: eventstore.Payload{Data: []byte{}}}
	got, err := decodeEvent(eventstore.WorkflowID{1}, eventstore.RunID{2}, 1, encodeEvent(ev))
	if err != nil {
		t.Fatal(err)
	}
	if data := got.(eventstore.WorkflowCompleted).Result.Data; data != nil {
		t.Fatalf("empty payload read back as %#v, want nil", data)
	}
}

func TestCodecRefusesDamage(t *testing.T) {
	good := encodeEvent(eventstore.ActivityFailed{Envelope: eventstore.Envelope{RecordedAt: time.Unix(1, 0)}, Error: eventstore.ActivityError{Message: "m"}})
	testCases := []struct {
		name string
		body []byte
	}{
		{"empty", nil},
		{"version only", []byte{FormatVersion}},
		{"other version", append([]byte{FormatVersion + 1}, good[1:]...)},
		{"unknown kind", append([]byte{FormatVersion, 200}, good[2:]...)},
		{"truncated", good[:len(good)-1]},
		{"trailing bytes", append(bytes.Clone(good), 0)},
		{"attempt past 32 bits", encodeEventWithAttempt(1 << 40)},
	}
	for _, tc := range testCases {
		t.Run(tc.name, func(t *testing.T) {
			if ev, err := decodeEvent(eventstore.WorkflowID{1}, eventstore.RunID{1}, 1, tc.body); err == nil {
				t.Fatalf("decoding a damaged body gave %+v, want an error", ev)
			}
		})
	}
}

// encodeEventWithAttempt writes an ActivityCancelled whose attempt does not
// fit its uint32.
func encodeEventWithAttempt(attempt uint64) []byte {
	e := enc{}
	e.byte1(FormatVersion)
	e.byte1(kindActivityCancelled)
	e.time(time.Unix(1, 0))
	e.uvarint(7)
	e.uvarint(attempt)
	return e.b
}

func FuzzDecodeEvent(f *testing.F) {
	for _, kind := range allKinds {
		v := reflect.New(reflect.TypeOf(kind)).Elem()
		fill(rand.New(rand.NewPCG(3, 4)), v)
		f.Add(encodeEvent(v.Interface().(eventstore.Event)))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := decodeEvent(eventstore.WorkflowID{1}, eventstore.RunID{1}, 1, body)
		if err != nil {
			return
		}
		// Whatever decodes is an event the store can write and read back
		// unchanged (the input bytes may differ from the canonical ones:
		// varints and times have more than one encoding).
		canonical := encodeEvent(ev)
		again, err := decodeEvent(eventstore.WorkflowID{1}, eventstore.RunID{1}, 1, canonical)
		if err != nil || !bytes.Equal(encodeEvent(again), canonical) {
			t.Fatalf("decoded %+v, which re-encodes and decodes as %+v, %v", ev, again, err)
		}
	})
}

func TestTimesKeepTheirOffset(t *testing.T) {
	for _, in := range []time.Time{
		time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("X", -(7*3600+30*60))),
		time.Date(2030, 1, 2, 3, 4, 5, 6, time.FixedZone("Y", 5*3600+45*60+30)),
	} {
		got, err := timeFromBytes(timeBytes(in))
		if err != nil {
			t.Fatal(err)
		}
		_, wantOff := in.Zone()
		if _, off := got.Zone(); !got.Equal(in) || off != wantOff {
			t.Fatalf("%v read back as %v", in, got)
		}
	}
}

func TestInstantSortsAsTimes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 2000 {
		a, b := randomTime(rng).Add(time.Duration(rng.Int64N(1e10)-5e9)), randomTime(rng).In(time.FixedZone("", 3600*rng.IntN(20)-36000))
		ia, ib := instantOf(a), instantOf(b)
		got := 0
		switch {
		case ia.sec < ib.sec || ia.sec == ib.sec && ia.nsec < ib.nsec:
			got = -1
		case ia != ib:
			got = 1
		}
		if want := a.Compare(b); got != want {
			t.Fatalf("instants of %v and %v compare %d, times %d", a, b, got, want)
		}
	}
}
