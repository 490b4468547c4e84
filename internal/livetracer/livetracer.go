// Package livetracer gives instrumentation the tracer to start its spans
// with, or nil when no span would record, so that a program that records
// no traces pays nothing for them: no span start, no context, no
// attribute. A [Source] made from a no-op provider (trace/noop) never has
// a tracer; one made from the global provider (or nil) follows
// otel.GetTracerProvider at every call: nil while it is the global
// default (nothing installed), the installed provider's tracer once
// otel.SetTracerProvider ran, and the new one's if it is replaced.
//
// A Source is safe for concurrent use; a lookup is two atomic loads and a
// comparison, and allocates only when the provider changed.
//
// Limits: the global default provider is taken to record nothing, which
// it does unless Go's eBPF auto-instrumentation redirects it; a provider
// of a type that cannot be compared (a struct holding a slice) is asked
// for a tracer at every lookup.
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

// entry is the tracer of one global provider, immutable once stored.
type entry struct {
	tp         trace.TracerProvider
	typ        reflect.Type
	comparable bool
	tracer     trace.Tracer // nil: the provider records nothing
}

// New returns the Source of tp's tracer for the scope name with opts; tp
// nil, or the global default provider, makes it follow the global one.
func New(tp trace.TracerProvider, name string, opts ...trace.TracerOption) *Source {
	s := &Source{name: name, opts: opts}
	switch {
	case tp == nil || IsGlobalDefault(tp):
		s.global = true
	case !Quiet(tp):
		s.fixed = tp.Tracer(name, opts...)
	}
	return s
}

// Tracer returns the tracer spans start with now, nil if none would
// record.
func (s *Source) Tracer() trace.Tracer {
	if !s.global {
		return s.fixed
	}
	tp := otel.GetTracerProvider()
	if c := s.cache.Load(); c != nil && c.comparable && c.typ == reflect.TypeOf(tp) && c.tp == tp {
		return c.tracer
	}
	typ := reflect.TypeOf(tp)
	c := &entry{tp: tp, typ: typ, comparable: typ.Comparable()}
	if !IsGlobalDefault(tp) && !Quiet(tp) {
		c.tracer = tp.Tracer(s.name, s.opts...)
	}
	s.cache.Store(c)
	s.changed.Store(true)
	return c.tracer
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

// globalDefaultType is the type of the provider otel.GetTracerProvider
// returns before any is installed; nil if a provider was installed before
// this package was initialised.
var globalDefaultType = func() reflect.Type {
	if t := reflect.TypeOf(otel.GetTracerProvider()); t.String() == "*global.tracerProvider" {
		return t
	}
	return nil
}()

// IsGlobalDefault reports whether tp is the global default provider: the
// one otel.GetTracerProvider returns until a program installs its own,
// which records nothing until then.
func IsGlobalDefault(tp trace.TracerProvider) bool {
	return tp != nil && globalDefaultType != nil && reflect.TypeOf(tp) == globalDefaultType
}

// GlobalRecords reports whether the global provider may record: it is
// neither the global default nor a no-op one.
func GlobalRecords() bool {
	tp := otel.GetTracerProvider()
	return !IsGlobalDefault(tp) && !Quiet(tp)
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
