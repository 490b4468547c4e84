// Package globaltest_test holds the tests that set the global
// TracerProvider, in a test binary of their own: otel.SetTracerProvider
// delegates the global default only once per process, so these tests run
// in order and leave the global state to no other test.
package globaltest_test

import (
	"context"
	"fmt"
	"go.opentelemetry.io/otel/metric"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/eventstore"
	"github.com/aionotel/aionotel/otelstore"
	"github.com/aionotel/aionotel/pairing"
)

var (
	t0    = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	token = eventstore.RecorderToken()
)

// appender appends, to one workflow, batches of a dispatch and the
// terminal of a fresh activity, the steady state of a worker.
type appender struct {
	s    eventstore.Store
	wf   eventstore.WorkflowID
	run  eventstore.RunID
	next uint64 // the next expected seq
}

func newAppender(s eventstore.Store) *appender {
	return &appender{s: s, wf: eventstore.NewWorkflowID(), run: eventstore.NewRunID()}
}

func (a *appender) append(t testing.TB, events ...eventstore.Event) {
	t.Helper()
	if err := a.s.Append(context.Background(), token, a.wf, events, a.next); err != nil {
		t.Fatalf("Append: %v", err)
	}
	a.next += uint64(len(events))
}

func (a *appender) scheduled(id uint64) eventstore.Event {
	return eventstore.ActivityScheduled{Envelope: eventstore.Envelope{RunID: a.run, RecordedAt: t0},
		ActivityID: eventstore.ActivityID(id), ActivityType: "charge"}
}

func (a *appender) completed(id uint64) eventstore.Event {
	return eventstore.ActivityCompleted{Envelope: eventstore.Envelope{RunID: a.run, RecordedAt: t0.Add(time.Second)},
		ActivityID: eventstore.ActivityID(id)}
}

// pair appends the dispatch and terminal of activity id in one batch.
func (a *appender) pair(t testing.TB, id uint64) { a.append(t, a.scheduled(id), a.completed(id)) }

func meter(t *testing.T) *sdkmetric.MeterProvider {
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return mp
}

// extraAllocs returns the allocations per call the decorator adds to
// inner's own: each run appends a fresh activity's dispatch and terminal,
// then reads the history back, on a decorated store and on a bare one.
func extraAllocs(t *testing.T, opts ...otelstore.Option) float64 {
	t.Helper()
	decorated, err := otelstore.New(eventstore.NewMemory(), append([]otelstore.Option{otelstore.WithMeterProvider(meter(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	measure := func(s eventstore.Store) float64 {
		a := newAppender(s)
		id := uint64(0)
		step := func() {
			a.pair(t, id)
			id++
			if _, err := s.ReadHistory(context.Background(), a.wf); err != nil {
				t.Fatal(err)
			}
			if id%256 == 0 { // keep histories short, as a server's
				a = newAppender(s)
			}
		}
		for range 1000 {
			step()
		}
		return testing.AllocsPerRun(1000, step)
	}
	return measure(decorated) - measure(eventstore.NewMemory())
}

// trackerAllocs returns the allocations of one dispatch and its terminal
// through the per-fact methods of a tracker made with opts, in steady
// state.
func trackerAllocs(t *testing.T, opts ...pairing.Option) float64 {
	t.Helper()
	tr, err := pairing.New(append([]pairing.Option{pairing.WithMeterProvider(meter(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	wf, run := eventstore.NewWorkflowID(), eventstore.NewRunID()
	id := eventstore.ActivityID(0)
	step := func() {
		k := pairing.Key{Namespace: "ns", WorkflowID: wf, RunID: run, ActivityID: id}
		if !tr.Dispatched(ctx, k, "charge", t0) || !tr.Finished(ctx, k, pairing.OutcomeSucceeded, t0.Add(time.Second)) {
			t.Fatalf("activity %d did not pair", id)
		}
		id++
	}
	for range 1 << 17 { // past the tracker's bound on remembered activities: steady state
		step()
	}
	return testing.AllocsPerRun(1000, step)
}

// A program that never installs a TracerProvider gets the global default,
// which records nothing: the decorator's calls and the tracker's pairings
// then allocate nothing of their own (the timeline is on, as by default),
// as with a trace/noop provider. Once the program installs a provider, the
// call spans and the timeline reach it from the first call on, even for
// an activity dispatched before; a provider that replaces it takes over.
func TestGlobalProvider(t *testing.T) {
	if otel.GetTracerProvider() != otel.GetTracerProvider() {
		t.Fatal("the global provider changes by itself")
	}
	quiet := []struct {
		name string
		opts []otelstore.Option
		popt []pairing.Option
	}{
		{"global default", nil, nil},
		{"trace/noop", []otelstore.Option{otelstore.WithTracerProvider(tracenoop.NewTracerProvider())},
			[]pairing.Option{pairing.WithTracerProvider(tracenoop.NewTracerProvider())}},
	}
	for _, tc := range quiet {
		if raceEnabled {
			t.Log("allocation counts mean nothing under the race detector: not counted")
			break
		}
		t.Run("decorator allocations, "+tc.name, func(t *testing.T) {
			if n := extraAllocs(t, tc.opts...); n != 0 {
				t.Errorf("the decorator adds %v allocations to an append and a read, want 0", n)
			}
		})
		t.Run("tracker allocations, "+tc.name, func(t *testing.T) {
			if n := trackerAllocs(t, tc.popt...); n != 0 {
				t.Errorf("a dispatch and its terminal allocate %v times, want 0", n)
			}
		})
	}

	// Made before anything is installed, as a program makes them at start.
	mp := meter(t)
	s, err := otelstore.New(eventstore.NewMemory(), otelstore.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := pairing.New(pairing.WithMeterProvider(mp))
	if err != nil {
		t.Fatal(err)
	}
	a := newAppender(s)
	a.pair(t, 0)
	a.append(t, a.scheduled(1)) // in flight when the provider comes
	ctx := context.Background()
	early := pairing.Key{Namespace: "ns", WorkflowID: a.wf, RunID: a.run, ActivityID: 1}
	tr.Dispatched(ctx, early, "charge", t0)

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	previous := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)

	t.Run("installed", func(t *testing.T) {
		a.pair(t, 2) // the first call after: its activity has its span
		a.append(t, a.completed(1))
		tr.Finished(ctx, early, pairing.OutcomeSucceeded, t0.Add(time.Second))
		fresh := pairing.Key{Namespace: "ns", WorkflowID: a.wf, RunID: a.run, ActivityID: 9}
		tr.Dispatched(ctx, fresh, "charge", t0)
		tr.Finished(ctx, fresh, pairing.OutcomeSucceeded, t0.Add(time.Second))
		names := map[string]int{}
		for _, sp := range rec.Ended() {
			names[sp.Name()]++
			if sp.Name() == "activity charge" && !sp.StartTime().Equal(t0) {
				t.Errorf("activity span starts at %v, want its dispatch's %v", sp.StartTime(), t0)
			}
		}
		// Appends 2 and 1: their spans; activities 2 and 1 (decorator),
		// 1 and 9 (tracker): theirs. Nothing from before.
		if names["append"] != 2 || names["activity charge"] != 4 || len(names) != 2 {
			t.Errorf("spans after installing a provider: %v, want 2 append and 4 activity charge", names)
		}
	})

	t.Run("replaced", func(t *testing.T) {
		rec2 := tracetest.NewSpanRecorder()
		tp2 := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec2))
		t.Cleanup(func() { _ = tp2.Shutdown(context.Background()) })
		otel.SetTracerProvider(tp2)
		a.pair(t, 3)
		if n := len(rec2.Ended()); n != 2 {
			t.Errorf("the replacing provider got %d spans, want the append's and the activity's", n)
		}
		// The old global default, set back: it delegates to the first
		// provider installed, so spans still record, there.
		before := len(rec.Ended())
		otel.SetTracerProvider(previous)
		a.pair(t, 4)
		if n := len(rec.Ended()) - before; n != 2 {
			t.Errorf("with the delegating default set back, the first provider got %d spans, want 2", n)
		}
	})

	t.Run("not comparable", func(t *testing.T) {
		rec3 := tracetest.NewSpanRecorder()
		tp3 := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec3))
		t.Cleanup(func() { _ = tp3.Shutdown(context.Background()) })
		t.Cleanup(func() { otel.SetTracerProvider(previous) })
		// Two values of a type == panics on, one after the other: a lookup
		// must neither compare them nor keep the first one's tracer.
		otel.SetTracerProvider(uncomparable{tps: []trace.TracerProvider{tp}})
		a.pair(t, 5)
		otel.SetTracerProvider(uncomparable{tps: []trace.TracerProvider{tp3}})
		a.pair(t, 6)
		if n := len(rec3.Ended()); n != 2 {
			t.Errorf("the second provider got %d spans, want the append's and the activity's", n)
		}
	})
}

// uncomparable is a provider whose type cannot be compared: it holds a
// slice. It gives the tracers of the first provider it holds.
type uncomparable struct {
	embedded.TracerProvider
	tps []trace.TracerProvider
}

func (u uncomparable) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return u.tps[0].Tracer(name, opts...)
}

// counting is a provider whose type cannot be compared, so that a lookup
// of the global provider (livetracer's, at each call) cannot recognise it
// and asks it for a tracer every time: its count of Tracer calls is the
// number of lookups.
type counting struct {
	embedded.TracerProvider
	tp    []trace.TracerProvider
	calls *scopeCounts
}

func (c counting) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	c.calls.add(name)
	return c.tp[0].Tracer(name, opts...)
}

// scopeCounts counts the tracers asked for, by instrumentation scope.
type scopeCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *scopeCounts) add(scope string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[scope]++
}

// take returns the counts since the last take.
func (c *scopeCounts) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = nil
	return n
}

// countingMeters counts the meters asked of it: after New, a call asks
// for none.
type countingMeters struct {
	metric.MeterProvider
	calls *atomic.Int64
}

func (c countingMeters) Meter(name string, opts ...metric.MeterOption) metric.Meter {
	c.calls.Add(1)
	return c.MeterProvider.Meter(name, opts...)
}

// A call looks the global tracer provider up once, and never looks up the
// global meter provider after New. The provider here cannot be compared,
// so each look at it asks it for the tracer of each scope the call needs:
// the store's span's, and the timeline's when an append makes timeline
// spans (the pairing tracker the append hands its batch to shares the
// call's look). A second look anywhere in the call (the tracker's own,
// or the probe that learns whether the provider records) asks a scope
// twice, or asks the probe's scope. TestOneLookPerCall shows the same
// with a provider that can be compared. (A tracker's first call also
// takes the look that registers it with the followers, once.)
func TestGlobalLookupsPerCall(t *testing.T) {
	previous, previousMeters := otel.GetTracerProvider(), otel.GetMeterProvider()
	t.Cleanup(func() { otel.SetTracerProvider(previous); otel.SetMeterProvider(previousMeters) })
	meters := new(atomic.Int64)
	otel.SetMeterProvider(countingMeters{MeterProvider: meter(t), calls: meters})
	// The stores are made while the global tracer provider is the default,
	// as a program makes them before it installs its own: they follow it.
	stores := map[bool]eventstore.Store{}
	for _, timeline := range []bool{false, true} {
		s, err := otelstore.New(eventstore.NewMemory(), otelstore.WithTimelineSpans(timeline))
		if err != nil {
			t.Fatal(err)
		}
		stores[timeline] = s
	}
	metersAtNew := meters.Load()
	if metersAtNew == 0 {
		t.Fatal("New asked the global meter provider for no meter: the counting provider is not in use")
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	lookups := new(scopeCounts)
	otel.SetTracerProvider(counting{tp: []trace.TracerProvider{tp}, calls: lookups})

	for _, timeline := range []bool{false, true} {
		t.Run(fmt.Sprintf("timeline=%v", timeline), func(t *testing.T) {
			s := stores[timeline]
			a := newAppender(s)
			ctx := context.Background()
			calls := []struct {
				name string
				call func()
			}{
				{"append started", func() {
					a.append(t, eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: a.run, RecordedAt: t0}, WorkflowType: "checkout"})
				}},
				{"append dispatch", func() { a.append(t, a.scheduled(1)) }},
				{"append terminal", func() { a.append(t, a.completed(1)) }},
				{"append dispatch and terminal", func() { a.pair(t, 2) }},
				{"read history", func() {
					if _, err := s.ReadHistory(ctx, a.wf); err != nil {
						t.Fatal(err)
					}
				}},
				{"append close", func() {
					a.append(t, eventstore.WorkflowCompleted{Envelope: eventstore.Envelope{RunID: a.run, RecordedAt: t0.Add(time.Minute)}})
				}},
			}
			// A tracker's first call also registers it with the trackers
			// that follow the global provider, which takes a look of its
			// own, once.
			newAppender(s).append(t, eventstore.WorkflowStarted{Envelope: eventstore.Envelope{RunID: eventstore.NewRunID(), RecordedAt: t0}, WorkflowType: "warm-up"})
			lookups.take()
			for _, c := range calls {
				c.call()
				got := lookups.take()
				timelineScope := 0
				if timeline && strings.HasPrefix(c.name, "append") {
					timelineScope = 1 // if the append makes a timeline span
				}
				for scope, n := range got {
					if max := map[string]int{otelstore.ScopeName: 1, pairing.ScopeName: timelineScope}[scope]; n > max {
						t.Errorf("%s: %d tracers of scope %s asked of the global provider, want at most %d", c.name, n, scope, max)
					}
				}
				if got[otelstore.ScopeName] != 1 {
					t.Errorf("%s: the store span's scope asked %d times, want once", c.name, got[otelstore.ScopeName])
				}
				if timeline && c.name == "append dispatch and terminal" && got[pairing.ScopeName] != 1 {
					t.Errorf("%s: the timeline's scope asked %d times, want once (its activity span)", c.name, got[pairing.ScopeName])
				}
			}
			if len(rec.Ended()) == 0 {
				t.Fatal("no span reached the installed provider: the lookups were not made through it")
			}
		})
	}
	if n := meters.Load() - metersAtNew; n != 0 {
		t.Errorf("the calls asked the global meter provider for %d meters, want none", n)
	}
}

// installing replaces the global tracer provider with next in the middle
// of its first Append, between the decorator's look at the provider and
// the tracker's.
type installing struct {
	eventstore.Store
	next trace.TracerProvider
	once sync.Once
}

func (s *installing) Append(ctx context.Context, token eventstore.WriteToken, wf eventstore.WorkflowID, events []eventstore.Event, expectedSeq uint64) error {
	s.once.Do(func() { otel.SetTracerProvider(s.next) })
	return s.Store.Append(ctx, token, wf, events, expectedSeq)
}

// One call, one look: a provider installed while a decorated append runs
// gets none of that append's spans, neither the store call's nor the
// timeline's the tracker makes of its batch, and all of the next call's.
func TestOneLookPerCall(t *testing.T) {
	previous := otel.GetTracerProvider()
	t.Cleanup(func() { otel.SetTracerProvider(previous) })
	recorder := func() (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
		return rec, tp
	}
	first, firstTP := recorder()
	second, secondTP := recorder()
	inner := &installing{Store: eventstore.NewMemory(), next: secondTP}
	s, err := otelstore.New(inner, otelstore.WithMeterProvider(meter(t)))
	if err != nil {
		t.Fatal(err)
	}
	otel.SetTracerProvider(firstTP)
	a := newAppender(s)
	a.pair(t, 1) // the second provider is installed during this call
	a.pair(t, 2)
	names := func(rec *tracetest.SpanRecorder) (n []string) {
		for _, sp := range rec.Ended() {
			n = append(n, sp.Name())
		}
		slices.Sort(n)
		return n
	}
	want := []string{"activity charge", "append"}
	if got := names(first); !slices.Equal(got, want) {
		t.Errorf("the provider the call looked at got spans %q, want %q: the call looked twice", got, want)
	}
	if got := names(second); !slices.Equal(got, want) {
		t.Errorf("the provider installed during the first call got spans %q, want %q of the second", got, want)
	}
}
