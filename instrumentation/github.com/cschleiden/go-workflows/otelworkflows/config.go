package otelworkflows

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/pairing"
)

// ScopeName is the instrumentation scope of the meter and tracer this
// package creates: its import path. The scope version is [Version].
const ScopeName = "github.com/aionotel/aionotel/instrumentation/github.com/cschleiden/go-workflows/otelworkflows"

// Version is the version of this module, without a leading "v": the
// version of aionotel's module set, which the scope carries.
func Version() string { return pairing.Version() }

// DefaultHistoryReadConcurrency is how many instance histories the
// decorator reads at once, without [WithHistoryReadConcurrency], to join an
// instance it first sees part-way through its history.
const DefaultHistoryReadConcurrency = 4

// DefaultHistoryReadQueue is how many history reads may wait for a reader;
// past it a read is not queued (the instance is read when next seen).
const DefaultHistoryReadQueue = 1024

// DefaultMaxKnownInstances bounds the executions the decorator remembers
// having seen from their start; past it the oldest is forgotten, which at
// worst costs one more history read.
const DefaultMaxKnownInstances = 1 << 17

type config struct {
	mp          metric.MeterProvider
	tp          trace.TracerProvider
	namespace   string
	filter      func(context.Context, Operation) bool
	attrs       []attribute.KeyValue
	dbSystem    string
	tracker     *pairing.Tracker
	typeLimit   int
	readers     int
	readQueue   int
	maxKnown    int
	classify    func(error) string
	pairingOpts []pairing.Option
	now         func() time.Time // the clock of claims; tests set it
}

func newConfig(opts []Option) config {
	c := config{
		namespace: "default",
		dbSystem:  defaultDBSystem,
		readers:   DefaultHistoryReadConcurrency,
		readQueue: DefaultHistoryReadQueue,
		maxKnown:  DefaultMaxKnownInstances,
		now:       time.Now,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// Option configures the decorator [New] returns.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithMeterProvider sets the MeterProvider of the per-call duration
// histogram, the workflow counters and (unless [WithPairing] gives a
// tracker) the pairing tracker's instruments. Without it, or with nil (a nil
// interface or a nil pointer in one), the global provider at the time New
// runs is used.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if !isNil(mp) {
			c.mp = mp
		}
	})
}

// WithTracerProvider sets the TracerProvider of the per-call spans and
// (unless [WithPairing] gives a tracker) of the run and activity timeline
// spans. Without it, or with nil (a nil interface or a nil pointer in one),
// the global provider is used.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if !isNil(tp) {
			c.tp = tp
		}
	})
}

// isNil reports whether v is nil or a nil pointer, map, slice, func or
// channel behind an interface: a value that would panic on first use.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface, reflect.UnsafePointer:
		return rv.IsNil()
	}
	return false
}

// WithNamespace sets the aion.namespace of every measurement and span, and
// the namespace of the pairing keys. Without it, or with "", it is
// "default".
func WithNamespace(ns string) Option {
	return optionFunc(func(c *config) {
		if ns != "" {
			c.namespace = ns
		}
	})
}

// WithSpanFilter decides, per call, whether the call gets a span: a call
// for which filter returns false is still forwarded, timed and observed,
// without a span. Without it every call gets one. A panic of filter is
// reported to otel.Handle and the call gets its span.
func WithSpanFilter(filter func(ctx context.Context, op Operation) bool) Option {
	return optionFunc(func(c *config) { c.filter = filter })
}

// WithAttributes adds attributes to every per-call span and measurement,
// to the workflow counters and (unless [WithPairing] gives a tracker) to
// every pairing instrument. Without it only the catalog's attributes are
// recorded. String values are made valid UTF-8 and cut to 256 bytes. A key
// that is empty, not valid UTF-8, over 256 bytes or without an exportable
// Prometheus label name, or one the decorator or its tracker set themselves
// (any aion.* key, db.operation.name, db.system.name, which has
// [WithDBSystem], error.type, go_workflows.*), also under another spelling
// of its label name ("error_type"), is dropped and reported to otel.Handle;
// the other attributes are kept everywhere. Repeated calls accumulate.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return optionFunc(func(c *config) { c.attrs = append(c.attrs, attrs...) })
}

// WithDBSystem sets db.system.name on the per-call spans and durations (for
// example "sqlite" or "mysql", the backend behind the decorator). Without
// it, or with "", it is "aion.go_workflows": the decorator cannot know
// which database a backend.Backend uses.
func WithDBSystem(name string) Option {
	return optionFunc(func(c *config) {
		if name != "" {
			c.dbSystem = name
		}
	})
}

// WithErrorClassifier refines error.type: a non-empty result of classify is
// recorded (past 64 distinct values, "_OTHER"); an empty one falls back to
// the default classification (see the package doc). A panic of classify is
// taken as "_OTHER".
func WithErrorClassifier(classify func(error) string) Option {
	return optionFunc(func(c *config) { c.classify = classify })
}

// WithPairing shares one pairing tracker between decorators (several
// backends, or this decorator and an otelstore one). Without it, or given
// nil, New makes one on the same providers, namespace, attributes and type
// limit; so it does, reporting it to otel.Handle, for a zero pairing.Tracker
// (not made by pairing.New), which would record nothing.
func WithPairing(t *pairing.Tracker) Option {
	return optionFunc(func(c *config) {
		switch {
		case t == nil:
		case reflect.ValueOf(t).Elem().IsZero():
			otel.Handle(errors.New("otelworkflows: WithPairing: a zero pairing.Tracker records nothing (make it with pairing.New): New makes its own"))
		default:
			c.tracker = t
		}
	})
}

// WithTypeCardinalityLimit bounds the distinct workflow and activity types
// recorded (past it, "_other"). Without it, or with n <= 0, the limit is
// pairing.DefaultTypeCardinalityLimit.
func WithTypeCardinalityLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.typeLimit = n
		}
	})
}

// WithHistoryReadConcurrency sets how many instance histories the decorator
// reads at once (and so holds in memory at once) to join an instance first
// seen part-way through its history. Without it, or with n <= 0, it is
// [DefaultHistoryReadConcurrency].
func WithHistoryReadConcurrency(n int) Option {
	return optionFunc(func(c *config) {
		if n > 0 {
			c.readers = n
		}
	})
}

// WithPairingOptions passes options to the tracker New makes (for example
// pairing.WithMaxInFlight or pairing.WithTimelineSpans(false)); ignored
// with [WithPairing].
func WithPairingOptions(opts ...pairing.Option) Option {
	return optionFunc(func(c *config) { c.pairingOpts = append(c.pairingOpts, opts...) })
}

// admitAttrs returns the WithAttributes attributes that can be recorded,
// string values cleaned; each dropped key is reported to otel.Handle.
func admitAttrs(attrs []attribute.KeyValue) []attribute.KeyValue {
	out := make([]attribute.KeyValue, 0, len(attrs))
	for _, kv := range attrs {
		if why := refusedKey(kv.Key); why != "" {
			otel.Handle(fmt.Errorf("otelworkflows: WithAttributes: key %.300q dropped: %s", kv.Key, why))
			continue
		}
		if !kv.Valid() {
			otel.Handle(fmt.Errorf("otelworkflows: WithAttributes: key %.300q dropped: its value is not valid", kv.Key))
			continue
		}
		switch kv.Value.Type() {
		case attribute.STRING:
			kv = kv.Key.String(clean(kv.Value.AsString()))
		case attribute.STRINGSLICE:
			ss := kv.Value.AsStringSlice()
			for i := range ss {
				ss[i] = clean(ss[i])
			}
			kv = kv.Key.StringSlice(ss)
		}
		out = append(out, kv)
	}
	return out
}

// refusedKey says why a WithAttributes key cannot be recorded, or "".
func refusedKey(k attribute.Key) string {
	if k == "" || len(k) > 256 || !utf8.ValidString(string(k)) {
		return "it is empty, longer than 256 bytes or not valid UTF-8"
	}
	label := labelName(string(k))
	collapsed := label
	for strings.Contains(collapsed, "__") {
		collapsed = strings.ReplaceAll(collapsed, "__", "_")
	}
	switch {
	case strings.Trim(label, "_") == "" || strings.HasPrefix(label, "__") || strings.HasPrefix(collapsed, "otel_scope_") ||
		label == "le" || label == "quantile":
		return "it has no exportable Prometheus label name"
	case label == "db_system_name":
		return "use WithDBSystem"
	case strings.HasPrefix(label, "aion_") || strings.HasPrefix(label, "go_workflows_") ||
		label == "db_operation_name" || label == "error_type":
		return "it is (or has the Prometheus label name of) a key the decorator or its tracker set themselves"
	}
	return ""
}

// labelName is the Prometheus label name of the key k: every character
// other than an ASCII letter or digit written as '_'.
func labelName(k string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, k)
}
