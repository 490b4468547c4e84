package genai

import (
	"cmp"
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/guard"
	"github.com/aionotel/aionotel/pairing"
)

// ScopeName is the instrumentation scope of every meter, tracer and logger
// a [Tracker] creates: this package's import path. The scope version is
// the aionotel module's.
const ScopeName = "github.com/aionotel/aionotel/genai"

// config is what the options set. New applies the defaults first.
type config struct {
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	loggerProvider log.LoggerProvider
	namespace      string
	attributes     []attribute.KeyValue
	logs           bool
	content        bool
	spans          ActivitySpanSource
	idle           time.Duration
	optIn          semconvOptIn

	// Seams for the tests inside the package.
	nameLimit       int
	maxAttempts     int
	maxPendingCalls int
	now             func() time.Time // nil: time.Now
	handle          func(error)
}

func newConfig() config {
	return config{
		meterProvider:   otel.GetMeterProvider(),
		tracerProvider:  otel.GetTracerProvider(),
		loggerProvider:  otel.GetLoggerProvider(),
		namespace:       catalog.DefaultNamespace,
		idle:            DefaultAgentIdleTimeout,
		optIn:           parseOptIn(os.Getenv(catalog.OptInEnv)),
		nameLimit:       defaultNameLimit,
		maxAttempts:     DefaultMaxAgentInvocations,
		maxPendingCalls: DefaultMaxPendingToolCalls,
		handle:          otel.Handle,
	}
}

// defaultNameLimit bounds the distinct values of each name attribute
// (provider, models, operation, tool).
const defaultNameLimit = 512

// clean makes the configured values exportable: the namespace and the
// attribute values valid UTF-8 and bounded; an attribute whose key is not
// valid, or is one the Tracker sets itself, is dropped and reported.
func (c *config) clean() {
	c.namespace = attrvalue.String(c.namespace)
	attrs := make([]attribute.KeyValue, 0, len(c.attributes))
	for _, kv := range c.attributes {
		if !attrvalue.ValidKey(kv.Key) || reservedLabels[attrvalue.LabelName(string(kv.Key))] {
			c.handle(fmt.Errorf("genai: WithAttributes: key %.300q dropped: empty, longer than %d bytes, not valid UTF-8, without a Prometheus label name, or set by the GenAI telemetry itself", kv.Key, attrvalue.MaxLen))
			continue
		}
		attrs = append(attrs, attrvalue.KeyValue(kv))
	}
	c.attributes = attrs
}

// reservedLabels are the Prometheus label names of the keys a Tracker sets
// itself.
var reservedLabels = func() map[string]bool {
	m := map[string]bool{}
	for _, k := range append([]attribute.Key{catalog.Namespace, catalog.ErrorType, catalog.WorkflowID,
		catalog.RunID, catalog.ActivityID, catalog.Attempt}, catalog.GenAIKeys...) {
		m[attrvalue.LabelName(string(k))] = true
	}
	return m
}()

// Option configures [New].
type Option interface {
	apply(*config)
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// unlessNil is an Option setting v through set, unless v is nil (also a
// nil pointer in an interface).
func unlessNil[T any](v T, set func(*config, T)) Option {
	return optionFunc(func(c *config) {
		if !guard.IsNil(v) {
			set(c, v)
		}
	})
}

// WithMeterProvider sets the MeterProvider the instruments come from.
// Without it, or given nil, the global provider (otel.GetMeterProvider).
func WithMeterProvider(mp metric.MeterProvider) Option {
	return unlessNil(mp, func(c *config, mp metric.MeterProvider) { c.meterProvider = mp })
}

// WithTracerProvider sets the TracerProvider the spans come from. Without
// it, or given nil, the global provider (otel.GetTracerProvider) at the
// time New runs; a trace/noop provider makes no span.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return unlessNil(tp, func(c *config, tp trace.TracerProvider) { c.tracerProvider = tp })
}

// WithLoggerProvider sets the LoggerProvider of the log records
// ([WithTranscriptLogs]). Without it, or given nil, the global provider
// (otel.GetLoggerProvider). It emits nothing by itself.
func WithLoggerProvider(lp log.LoggerProvider) Option {
	return unlessNil(lp, func(c *config, lp log.LoggerProvider) { c.loggerProvider = lp })
}

// WithNamespace sets the aion.namespace attribute of every span, metric
// point and log record, and the namespace of the activity keys asked of
// [WithActivitySpans] and of the run's trace anchor. Invalid UTF-8 becomes
// U+FFFD and the value is cut to 256 bytes. Without it, or given "", the
// namespace is "default".
func WithNamespace(namespace string) Option {
	return optionFunc(func(c *config) { c.namespace = cmp.Or(namespace, c.namespace) })
}

// WithAttributes adds attributes to every span, metric point and log
// record. Keep them low-cardinality: they are on every metric stream.
// Values are made valid UTF-8 and cut to 256 bytes; an attribute with an
// invalid key (empty, longer than 256 bytes, not valid UTF-8, without a
// Prometheus label name) or with a key the Tracker sets itself
// (aion.namespace, the gen_ai.* and aion.gen_ai.* keys it records, the
// stream's coordinates, error.type, or another spelling of their label
// names) is dropped and reported to the error handler (otel.Handle).
// Repeated calls accumulate. Without it only the Tracker's own attributes
// are recorded.
func WithAttributes(attrs ...attribute.KeyValue) Option {
	return optionFunc(func(c *config) { c.attributes = append(c.attributes, attrs...) })
}

// WithTranscriptLogs turns on the log records: one
// gen_ai.client.inference.operation.details record per model call. Without
// it, or given false, no record is emitted. Records carry no content
// unless [WithContentCapture] is on too.
func WithTranscriptLogs(enabled bool) Option {
	return optionFunc(func(c *config) { c.logs = enabled })
}

// WithContentCapture lets transcript content out where the conventions
// allow it (their opt-in attributes): gen_ai.input.messages and
// gen_ai.output.messages on the log records, gen_ai.tool.call.arguments and
// gen_ai.tool.call.result on execute_tool spans; each text is made valid
// UTF-8 and cut to [MaxContentLen] bytes. It is the conventions'
// content-capture setting (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
// in instrumentations that read the environment). Without it, or given
// false, no content leaves the process. Metrics never carry content.
func WithContentCapture(enabled bool) Option {
	return optionFunc(func(c *config) { c.content = enabled })
}

// ActivitySpanSource gives the span context of an activity's span, so that
// each attempt's invoke_agent span is its child. It returns an invalid
// span context when it holds no span for the key; it must be safe for
// concurrent use. A *pairing.Tracker is one.
type ActivitySpanSource interface {
	ActivitySpanContext(key pairing.Key) trace.SpanContext
}

// WithActivitySpans sets where the span of the activity a transcript
// belongs to is found. Without it, or given nil, or when the source has no
// valid span context for the activity, an invoke_agent span is a child of
// its run's derived trace anchor (the parent the pairing timeline's run
// span has), so it is in the run's trace either way.
func WithActivitySpans(src ActivitySpanSource) Option {
	return unlessNil(src, func(c *config, src ActivitySpanSource) { c.spans = src })
}

// WithAgentIdleTimeout sets how long an attempt's invoke_agent span stays
// open without a new event before the next observed batch (of any stream)
// ends it, at its last event's time. Without it, or given d <= 0,
// [DefaultAgentIdleTimeout].
func WithAgentIdleTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) { c.idle = cmp.Or(max(d, 0), c.idle) })
}

// WithSemConvStabilityOptIn sets the OTEL_SEMCONV_STABILITY_OPT_IN values
// to follow (a comma-separated list, as in the variable) in place of the
// variable's: "gen_ai_latest_experimental" and "gen_ai/dup" (see the
// package doc); other values are ignored. Without it the variable, read
// when New runs, decides; given "", neither value is on.
func WithSemConvStabilityOptIn(values string) Option {
	return optionFunc(func(c *config) { c.optIn = parseOptIn(values) })
}

// semconvOptIn is what OTEL_SEMCONV_STABILITY_OPT_IN asks of the GenAI
// telemetry.
type semconvOptIn struct {
	latest bool // gen_ai_latest_experimental
	dup    bool // gen_ai/dup
}

// parseOptIn reads a comma-separated OTEL_SEMCONV_STABILITY_OPT_IN value;
// spaces around a value are ignored, and so are values of other domains.
func parseOptIn(values string) semconvOptIn {
	var o semconvOptIn
	for v := range strings.SplitSeq(values, ",") {
		switch strings.TrimSpace(v) {
		case catalog.OptInLatest:
			o.latest = true
		case catalog.OptInDup:
			o.dup = true
		}
	}
	return o
}
