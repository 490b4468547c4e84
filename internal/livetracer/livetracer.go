// Package livetracer gives instrumentation the tracer to start its spans
// with, or nil when no span would record, so that a program that records
// no traces pays nothing for them: no span start, no context, no
// attribute. A [Source] made from a no-op provider (trace/noop) never has
// a tracer; one made from the global provider (or nil) follows
// otel.GetTracerProvider at every call: nil while that is the global
// default with nothing installed, the installed provider's tracer once
// otel.SetTracerProvider ran, and the next one's if it is replaced.
//
// A Source is safe for concurrent use; a lookup is a few atomic loads and
// a comparison, and allocates only when the global provider changed. A
// [Lookup] is one call's look at the global provider: everything the call
// asks of it (the tracers of several scopes, whether it records) shares
// that one look, so a decorated call that also hands its batch to a
// pairing tracker looks the provider up once.
//
// Limits: the global default provider is taken to record nothing until a
// provider is installed, which holds unless Go's eBPF auto-instrumentation
// redirects it; a global provider of a type that cannot be compared (a
// struct holding a slice) is asked for a tracer at every lookup.
package livetracer

import (
	"reflect"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Source gives the tracer of one instrumentation scope.
type Source struct {
	fixed   trace.Tracer // the tracer of a fixed provider, nil if it records nothing
	global  bool         // follow otel.GetTracerProvider
	name    string
	opts    []trace.TracerOption
	cache   atomic.Pointer[entry]
	changed atomic.Bool
}

// entry is what a lookup learned of one global provider; immutable once
// stored.
type entry struct {
	tp         trace.TracerProvider
	comparable bool         // whether tp's dynamic type is
	tracer     trace.Tracer // nil: the provider records nothing
}

// is reports whether tp is the provider e is about. Two interface values
// whose dynamic types differ are unequal before their values are compared,
// so the comparison can only panic for a tp of e.tp's own type: the check
// of comparable covers it, and a lookup of a provider compares the
// provider alone (what a lookup at every call costs).
func (e *entry) is(tp trace.TracerProvider) bool {
	return e != nil && e.comparable && e.tp == tp
}

// learn asks tp for the tracer of the scope name with opts, nil if tp
// records nothing.
func learn(tp trace.TracerProvider, name string, opts []trace.TracerOption) *entry {
	typ := reflect.TypeOf(tp)
	e := &entry{tp: tp, comparable: typ != nil && typ.Comparable()}
	if tp == nil || Quiet(tp) {
		return e
	}
	tr := tp.Tracer(name, opts...)
	if globalTracerType != nil && reflect.TypeOf(tr) == globalTracerType {
		return e // the global default, with nothing installed: its tracers record nothing yet
	}
	e.tracer = tr
	return e
}

// New returns the Source of tp's tracer for the scope name with opts; tp
// nil, or the global default provider, makes it follow the global one.
func New(tp trace.TracerProvider, name string, opts ...trace.TracerOption) *Source {
	s := &Source{name: name, opts: opts}
	if tp == nil || IsGlobalDefault(tp) {
		s.global = true
	} else {
		s.fixed = learn(tp, name, opts).tracer
	}
	return s
}

// Lookup is one call's look at the global provider, taken when first
// needed and kept for the rest of the call: a provider installed while the
// call runs is used from the next call on. It also keeps what the call
// learned of that provider (whether it records, the tracer a Source asked
// for last), so that a provider whose type cannot be compared, and so is
// asked again at each call, is asked once per scope within one. The zero
// Lookup has not looked yet; a Lookup is for one goroutine, and is passed
// by value from one instrumentation to the next.
type Lookup struct {
	tp      trace.TracerProvider
	looked  bool
	records int8 // recordsUnknown, recordsNo or recordsYes
	src     *Source
	tracer  trace.Tracer // src's tracer for tp
}

const (
	recordsUnknown int8 = iota
	recordsNo
	recordsYes
)

// provider returns the global provider as this call first saw it.
func (l *Lookup) provider() trace.TracerProvider {
	if !l.looked {
		l.tp, l.looked = otel.GetTracerProvider(), true
	}
	return l.tp
}

func (l *Lookup) learned(tracer trace.Tracer) {
	l.records = recordsNo
	if tracer != nil {
		l.records = recordsYes
	}
}

// Tracer returns the tracer spans start with now, nil if none would
// record: [Source.TracerAt] with a look of its own.
func (s *Source) Tracer() trace.Tracer {
	var l Lookup
	return s.TracerAt(&l)
}

// TracerAt returns the tracer spans start with in the call that took l,
// nil if none would record.
func (s *Source) TracerAt(l *Lookup) trace.Tracer {
	if !s.global {
		return s.fixed
	}
	if l.src == s {
		return l.tracer
	}
	tp := l.provider()
	e := s.cache.Load()
	if !e.is(tp) {
		e = learn(tp, s.name, s.opts)
		s.cache.Store(e)
		s.changed.Store(true)
	}
	l.src, l.tracer = s, e.tracer
	l.learned(e.tracer)
	return e.tracer
}

// Global reports whether s follows the global provider; a Source that
// does not always returns the same tracer.
func (s *Source) Global() bool { return s.global }

// Changed reports, once, that the global provider changed since the last
// call: what a caller learned from its spans (how the provider makes IDs)
// is about another provider.
func (s *Source) Changed() bool {
	return s.changed.Load() && s.changed.CompareAndSwap(true, false)
}

// global is what GlobalRecords learned of the global provider last.
var global atomic.Pointer[entry]

// GlobalRecords reports whether the global provider may record now: it
// is neither a no-op provider nor the global default with nothing
// installed.
func GlobalRecords() bool {
	var l Lookup
	return GlobalRecordsAt(&l)
}

// GlobalRecordsAt is GlobalRecords for the call that took l; known
// without asking the provider once a Source found its tracer with l.
func GlobalRecordsAt(l *Lookup) bool {
	if l.records != recordsUnknown {
		return l.records == recordsYes
	}
	tp := l.provider()
	e := global.Load()
	if !e.is(tp) {
		e = learn(tp, probeScope, nil)
		global.Store(e)
	}
	l.learned(e.tracer)
	return e.tracer != nil
}

// probeScope is the scope of the tracer GlobalRecords asks a global
// provider for; it never starts a span.
const probeScope = "github.com/aionotel/aionotel/internal/livetracer"

// globalDefaultType and globalTracerType are the types of the provider
// otel.GetTracerProvider returns before any is installed and of its
// tracers while nothing is; nil if a provider was installed before this
// package was initialised.
var globalDefaultType, globalTracerType = func() (reflect.Type, reflect.Type) {
	tp := otel.GetTracerProvider()
	if t := reflect.TypeOf(tp); t.String() == "*global.tracerProvider" {
		if tr := reflect.TypeOf(tp.Tracer(probeScope)); tr.String() == "*global.tracer" {
			return t, tr
		}
	}
	return nil, nil
}()

// IsGlobalDefault reports whether tp is the global default provider: the
// one otel.GetTracerProvider returns until a program installs its own
// (and which delegates to that one from then on).
func IsGlobalDefault(tp trace.TracerProvider) bool {
	return tp != nil && globalDefaultType != nil && reflect.TypeOf(tp) == globalDefaultType
}

// Quiet reports whether tp is known never to record: a trace/noop
// provider.
func Quiet(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return true
	}
	return false
}
