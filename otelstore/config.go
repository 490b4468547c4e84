package otelstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/aionotel/aionotel/genai"
	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/guard"
	"github.com/aionotel/aionotel/internal/version"
	"github.com/aionotel/aionotel/pairing"
)

// ScopeName is the instrumentation scope of every meter and tracer this
// package creates: its import path. The scope version is [Version] and the
// schema URL that of the semantic conventions the attribute keys come from.
const ScopeName = "github.com/aionotel/aionotel/otelstore"

// Version is the version of the aionotel module, without a leading "v": the
// instrumentation scope version of every meter and tracer this package
// creates.
func Version() string { return version.Version }

// DefaultTypeCardinalityLimit is how many distinct workflow (and activity)
// types are recorded as themselves before later new ones become "_other".
const DefaultTypeCardinalityLimit = 512

// ErrInvalidOption is returned, wrapped, by [New] and [NewKeyspace] when an
// option cannot be honoured (a [WithPairing] tracker not made by
// pairing.New), and is what the error handler (otel.Handle) is given, wrapped,
// for each [WithAttributes] attribute dropped because its key is empty,
// invalid UTF-8, or one the decorators or the pairing tracker set
// themselves: a bad attribute key never stops a service from starting.
var ErrInvalidOption = errors.New("otelstore: invalid option")

// config is what the options set. The constructors apply the defaults first.
type config struct {
	meterProvider  metric.MeterProvider
	tracerProvider trace.TracerProvider
	namespace      string
	outboxWake     chan<- struct{}
	spanFilter     func(context.Context, Operation) bool
	attributes     []attribute.KeyValue
	classify       func(error) string
	tracker        *pairing.Tracker
	typeLimit      int
	dbSystem       string
	conflictError  bool
	timeline       bool
	shardCount     int
	resumeReport   func(pairing.ResumeReport, error)
	timelineSet    bool // WithTimelineSpans was given
	typeLimitSet   bool // WithTypeCardinalityLimit was given
	// The span's shape on the call path.
	spanNameFormat  func(Operation, string) string
	exceptionEvents bool

	// NewKeyspace's GenAI telemetry.
	loggerProvider    log.LoggerProvider
	transcriptLogs    bool
	contentCapture    bool
	keyspaceNamespace string
	activitySpans     ActivitySpanSource
	agentIdle         time.Duration
	optIn             *string // nil: the environment variable decides

	// Seams for tests inside the package: now stands in for time.Now (and
	// for time.Since); nil outside tests.
	now    func() time.Time
	handle func(error)
}

// newConfig returns the defaults of a decorator whose db.system.name is
// dbSystem unless an option says otherwise.
func newConfig(dbSystem string) config {
	return config{
		meterProvider:  otel.GetMeterProvider(),
		tracerProvider: otel.GetTracerProvider(),
		namespace:      catalog.DefaultNamespace,
		typeLimit:      DefaultTypeCardinalityLimit,
		dbSystem:       dbSystem,
		conflictError:  true,
		timeline:       true,
		handle:         otel.Handle,

		loggerProvider:    otel.GetLoggerProvider(),
		keyspaceNamespace: catalog.DefaultNamespace,
		agentIdle:         DefaultAgentIdleTimeout,
	}
}

// buildConfig is the common start of both constructors: the nil check, the
// defaults, the options in order, and validation.
func buildConfig[O any](inner any, opts []O, apply func(O, *config), dbSystem string) (*config, error) {
	if guard.IsNil(inner) {
		return nil, ErrNilStore
	}
	cfg := newConfig(dbSystem)
	for _, o := range opts {
		if any(o) != nil {
			apply(o, &cfg)
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// validate cleans and checks what the options set, the same way whatever
// the combination: attribute values are made valid UTF-8 and bounded, and a
// key that is empty, invalid UTF-8 or reserved is dropped and reported to
// the error handler.
func (c *config) validate() error {
	if c.tracker != nil && reflect.ValueOf(c.tracker).Elem().IsZero() {
		// Its zero value is not ready, and the first dispatch would panic.
		return fmt.Errorf("%w: WithPairing: a zero pairing.Tracker: make it with pairing.New", ErrInvalidOption)
	}
	if c.tracker != nil && c.timelineSet {
		c.handle(fmt.Errorf("%w: WithTimelineSpans is ignored beside WithPairing: the shared tracker's own pairing.WithTimelineSpans applies", ErrInvalidOption))
	}
	if c.tracker != nil && c.typeLimitSet {
		c.handle(fmt.Errorf("%w: WithTypeCardinalityLimit beside WithPairing bounds aion.workflows.started only: the shared tracker's own pairing.WithTypeCardinalityLimit applies to its instruments", ErrInvalidOption))
	}
	c.namespace = attrvalue.String(c.namespace)
	c.keyspaceNamespace = attrvalue.String(c.keyspaceNamespace)
	c.dbSystem = attrvalue.String(c.dbSystem)
	attrs := make([]attribute.KeyValue, 0, len(c.attributes))
	for _, kv := range c.attributes {
		if err := checkKey(kv.Key); err != nil {
			c.handle(err)
			continue
		}
		attrs = append(attrs, attrvalue.KeyValue(kv))
	}
	c.attributes = attrs
	return nil
}

// checkKey says why a WithAttributes key cannot be recorded, or nil.
func checkKey(key attribute.Key) error {
	switch {
	case !attrvalue.ValidKey(key):
		return fmt.Errorf("%w: WithAttributes: key %.300q dropped: it is empty, longer than %d bytes, not valid UTF-8, or has no exportable Prometheus label name", ErrInvalidOption, key, attrvalue.MaxLen)
	case key == catalog.DBSystemName:
		return fmt.Errorf("%w: WithAttributes: key %q dropped: use WithDBSystem", ErrInvalidOption, key)
	case reservedLabels[attrvalue.LabelName(string(key))]:
		return fmt.Errorf("%w: WithAttributes: key %q dropped: it is (or has the Prometheus label name of) a key the decorators set themselves", ErrInvalidOption, key)
	}
	return nil
}

// reserved are the keys of the telemetry catalog: the decorators, the
// pairing tracker and the GenAI telemetry set them, on metrics or spans.
var reserved = func() map[attribute.Key]bool {
	m := map[attribute.Key]bool{
		catalog.Namespace: true, catalog.OperationName: true, catalog.ErrorType: true,
		catalog.WorkflowType: true, catalog.WorkflowStatus: true, catalog.SignalDelivery: true,
		catalog.ActivityType: true, catalog.ActivityOutcome: true, catalog.WorkflowID: true,
		catalog.RunID: true, catalog.ExpectedSeq: true, catalog.FoundSeq: true,
		catalog.EventCount: true, catalog.OutboxRowCount: true, catalog.ActivityID: true,
		catalog.Attempt: true, catalog.DBSystemName: true, catalog.RetryCount: true,
		catalog.TimelineLink: true,
	}
	for _, k := range catalog.GenAIKeys {
		m[k] = true
	}
	return m
}()

// reservedLabels are the Prometheus label names of the reserved keys: a key
// such as "error_type" would share a label with error.type.
var reservedLabels = func() map[string]bool {
	m := make(map[string]bool, len(reserved))
	for k := range reserved {
		m[attrvalue.LabelName(string(k))] = true
	}
	return m
}()

// Option configures [New].
type Option interface {
	apply(*config)
}

// KeyspaceOption configures [NewKeyspace].
type KeyspaceOption interface {
	applyKeyspace(*config)
}

// SharedOption configures both [New] and [NewKeyspace]: the providers, the
// span filter, the extra attributes, the db.system.name, the conflict status
// and the error classifier.
type SharedOption interface {
	Option
	KeyspaceOption
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type sharedFunc func(*config)

func (f sharedFunc) apply(c *config)         { f(c) }
func (f sharedFunc) applyKeyspace(c *config) { f(c) }

// WithMeterProvider sets the MeterProvider the instruments come from. Without
// it, or given nil (a nil interface or a nil pointer in one), the global
// provider (otel.GetMeterProvider) is used.
func WithMeterProvider(mp metric.MeterProvider) SharedOption {
	return sharedFunc(func(c *config) {
		if !guard.IsNil(mp) {
			c.meterProvider = mp
		}
	})
}

// WithTracerProvider sets the TracerProvider spans come from. Without it, or
// given nil (a nil interface or a nil pointer in one), the global provider
// (otel.GetTracerProvider) is used, as it is at each call: before a program
// installs one, the global default records nothing and a call starts no
// span at all (no context, no attribute, no allocation); from the first
// call after otel.SetTracerProvider, spans start. A call looks the global
// provider up once, at its start, and the pairing tracker it hands its
// batch to makes that batch's timeline spans with the same provider; one
// installed while a call runs is used from the next call on. A
// trace/noop provider starts none either.
func WithTracerProvider(tp trace.TracerProvider) SharedOption {
	return sharedFunc(func(c *config) {
		if !guard.IsNil(tp) {
			c.tracerProvider = tp
		}
	})
}

// WithNamespace sets the aion.namespace attribute of every metric point,
// span and log record the decorator records, and the namespace of the
// activity pairing keys; given to [NewKeyspace], of its call metrics and of
// all its GenAI telemetry (see [genai.WithNamespace]). Invalid UTF-8 is
// replaced by U+FFFD and the value is cut to 256 bytes. Without it, or
// given "", the namespace is "default".
func WithNamespace(namespace string) SharedOption {
	return sharedFunc(func(c *config) {
		if namespace != "" {
			c.namespace = namespace
			c.keyspaceNamespace = namespace
		}
	})
}

// WithOutboxWake sets a channel that is woken after every successful
// AppendWithOutbox that staged at least one row: one non-blocking send, so a
// channel with a buffer of one coalesces wakes and a full channel is never
// waited on. Nothing is sent for a failed append or an empty row slice. The
// wake is advisory: a dispatcher must still poll. A nil channel is never
// sent on; a closed one is reported to otel.Handle, never a panic out of a
// committed append. Without it no wake is sent.
func WithOutboxWake(wake chan<- struct{}) Option {
	return optionFunc(func(c *config) { c.outboxWake = wake })
}

// WithSpanFilter sets a function deciding, per call, whether a span is
// started; the duration metric is recorded either way. A filtered-out call
// costs no span and no span attributes. It is not asked while the tracer
// provider records nothing (a trace/noop one, or the global default before
// a program installs one). Without it, or given nil, every timed call gets
// a span.
func WithSpanFilter(filter func(ctx context.Context, op Operation) bool) SharedOption {
	return sharedFunc(func(c *config) { c.spanFilter = filter })
}

// WithAttributes adds attributes to every metric point and span the decorator
// records (and to the pairing metrics of the tracker New makes, when
// [WithPairing] is not used). Keep them low-cardinality: they are on every
// metric stream. String values are made valid UTF-8 and cut to 256 bytes. A
// key that is empty, longer than 256 bytes, not valid UTF-8, one that no
// Prometheus exporter can turn into a label (one without an ASCII letter or
// digit, such as "ключ"; one whose label name, each other character written
// as '_', starts with "__" or "otel_scope_", or is "le" or "quantile",
// which histogram and summary series carry already), or one the decorators set
// themselves (any aion.* key of the catalog, db.operation.name, error.type,
// and db.system.name, which has [WithDBSystem]), also under another
// spelling of its label name ("error_type"), is dropped, and reported to
// the error handler (otel.Handle) with [ErrInvalidOption]; the other
// attributes are kept and the constructor succeeds. db.namespace and
// db.collection.name, when given here, also name the target in span names
// (see [New]). Repeated calls accumulate; for a key given twice the last
// value wins. Without it only the catalog attributes are recorded.
func WithAttributes(attrs ...attribute.KeyValue) SharedOption {
	return sharedFunc(func(c *config) { c.attributes = append(c.attributes, attrs...) })
}

// WithErrorClassifier sets a function mapping a failed call's error to the
// error.type attribute. It is asked first; when it returns "" (or is nil) the
// default classification applies: sequence_conflict, invalid_token,
// not_found, not_owner, invalid_argument, unsupported, canceled,
// deadline_exceeded, else _OTHER. Its results are made valid UTF-8 and cut
// to 256 bytes, and must be low-cardinality: past 64 distinct values, further
// ones are recorded as _OTHER.
func WithErrorClassifier(classify func(error) string) SharedOption {
	return sharedFunc(func(c *config) { c.classify = classify })
}

// WithPairing shares one activity pairing tracker between decorators (several
// stores of one namespace, or a tracker you read yourself). Without it, or
// given nil, [New] makes a tracker on the same meter and tracer providers
// with the same attributes, type cardinality limit and [WithTimelineSpans]
// setting; a shared tracker makes its timeline spans with its own tracer
// provider (pairing.WithTracerProvider). A zero pairing.Tracker (one not
// made by pairing.New) makes New fail with [ErrInvalidOption].
func WithPairing(t *pairing.Tracker) Option {
	return optionFunc(func(c *config) {
		if t != nil {
			c.tracker = t
		}
	})
}

// WithTimelineSpans turns the timeline on or off: for each run whose
// WorkflowStarted the decorator observes, a run span from that event's
// RecordedAt to the run's closing event, and for each activity whose
// ActivityScheduled it observes, an activity span from then to its first
// terminal (or its run's close), as a child of the run span (see [New]).
// They are on by default. The setting is the tracker's: with [WithPairing],
// the shared tracker's own (pairing.WithTimelineSpans) applies, and this
// option, given beside it, is reported to the error handler with
// [ErrInvalidOption] (New still succeeds).
func WithTimelineSpans(on bool) Option {
	return optionFunc(func(c *config) { c.timeline, c.timelineSet = on, true })
}

// WithShardCount sets the number of shards the wrapped
// [eventstore.ShardOwner] partitions workflows into, so that the decorator
// computes [eventstore.ShardOf] as the store does and follows shards from
// node to node (see [New]). Without it, or with n <= 0, the count is the
// inner store's ShardCount() method's if it has one (eventstore.Memory and
// pgstore do); without either the decorator does not follow shards: it
// cannot tell which workflows a shard holds.
func WithShardCount(n int) Option {
	return optionFunc(func(c *config) { c.shardCount = n })
}

// WithResumeReports sets a function that receives what each resume the
// decorator runs by itself did, when a [eventstore.ShardOwner] store starts
// serving shards (see [New]): its report and error. It runs on the
// goroutine that resumed, one report at a time, before that resume counts
// as ended: it must not wait for [Flush] of the same store, which waits for
// it. A panic of its is reported to otel.Handle. Without it, or given nil, a resume's error goes to
// otel.Handle and its report nowhere (the metric aion.pairing.resumed
// counts the workflows read).
func WithResumeReports(report func(pairing.ResumeReport, error)) Option {
	return optionFunc(func(c *config) { c.resumeReport = report })
}

// WithTypeCardinalityLimit bounds the distinct aion.workflow.type (and, for
// the tracker New makes, aion.activity.type) values: past n of them, new
// values are recorded as "_other". Types are made valid UTF-8 and cut to 256
// bytes first. Without it, or given n <= 0, the limit is
// [DefaultTypeCardinalityLimit]. With [WithPairing] it still bounds the
// decorator's own aion.workflows.started, but the shared tracker's
// instruments keep that tracker's pairing.WithTypeCardinalityLimit: given
// beside WithPairing, it is reported to the error handler with
// [ErrInvalidOption] (New still succeeds), as [WithTimelineSpans] is.
func WithTypeCardinalityLimit(n int) Option {
	return optionFunc(func(c *config) {
		c.typeLimitSet = true
		if n > 0 {
			c.typeLimit = n
		}
	})
}

// WithDBSystem sets the db.system.name attribute of every span and duration
// point: the semantic conventions' name of the database behind the
// decorator, such as "postgresql" (semconv.DBSystemNamePostgreSQL) for a
// pgstore keyspace, or "other_sql" for an SQL database they do not list.
// Invalid UTF-8 is replaced by U+FFFD and the value is cut to 256 bytes.
// Without it, or given "", the decorator cannot know what it wraps and says
// so by the interface: "aion.eventstore" for [New], "aion.keyspace" for
// [NewKeyspace].
func WithDBSystem(name string) SharedOption {
	return sharedFunc(func(c *config) {
		if name != "" {
			c.dbSystem = name
		}
	})
}

// WithConflictAsError decides how a sequence conflict (an
// [*eventstore.SequenceConflictError] from Append, AppendWithOutbox or
// AppendEvents) marks its span. With true, the default, it is a failed call
// like any other, as the semantic conventions say: status Error, an
// exception event, error.type sequence_conflict. With false the conflict
// counts as an expected answer of optimistic concurrency: the span keeps
// status Unset and gets no exception event, but still gets error.type and
// aion.store.found_seq. The duration point has error.type either way.
func WithConflictAsError(asError bool) SharedOption {
	return sharedFunc(func(c *config) { c.conflictError = asError })
}

// WithSpanNameFormatter sets how span names are made from an operation and
// its target: the db.collection.name given to [WithAttributes], else its
// db.namespace, else "". The formatter is called once per operation, when
// the decorator is made, never per call: a span name can vary only with
// the operation, so span names stay as few as the operations whatever it
// returns (IDs and other per-call values cannot reach them). An empty
// result, or a panic (reported to otel.Handle), leaves that operation's
// default name; a result is made valid UTF-8 and cut to 256 bytes.
// Without it, or given nil, spans are named as the semantic conventions
// name database client spans: "{db.operation.name} {target}", or
// "{db.operation.name}" without a target ("append").
func WithSpanNameFormatter(format func(op Operation, target string) string) SharedOption {
	return sharedFunc(func(c *config) { c.spanNameFormat = format })
}

// WithExceptionEvents adds, to the span of every failed call, the
// exception event that span.RecordError would add (exception.type, and
// exception.message with the cleaned error text), as earlier builds did
// by default. The semantic conventions' guidance on recording
// errors no longer recommends that event: error.type and the span status
// (Error, with the error text as description) carry the failure, and
// that is all a failed call's span gets without it, or given false. A
// sequence conflict with [WithConflictAsError](false) never gets it.
func WithExceptionEvents(on bool) SharedOption {
	return sharedFunc(func(c *config) { c.exceptionEvents = on })
}

// ActivitySpanSource gives the span context of an activity's span, so that
// [NewKeyspace]'s invoke_agent spans are its children and its log records
// join the activity's trace: [genai.ActivitySpanSource].
type ActivitySpanSource = genai.ActivitySpanSource

// keyspaceFunc is a KeyspaceOption that only [NewKeyspace] takes.
type keyspaceFunc func(*config)

func (f keyspaceFunc) applyKeyspace(c *config) { f(c) }

// WithLoggerProvider sets the LoggerProvider the transcript log records
// ([WithTranscriptLogs]) are emitted through. Without it, or given nil (also
// a nil pointer in the interface), the
// global provider (otel.GetLoggerProvider) is used. It emits
// nothing by itself: log records are off until WithTranscriptLogs(true).
func WithLoggerProvider(lp log.LoggerProvider) KeyspaceOption {
	return keyspaceFunc(func(c *config) {
		if !guard.IsNil(lp) {
			c.loggerProvider = lp
		}
	})
}

// WithTranscriptLogs turns on the GenAI log records of committed
// transcripts: one gen_ai.client.inference.operation.details event per
// model call (see [NewKeyspace]). Without it, or given false, no log record
// is emitted. Records carry no content unless [WithContentCapture] is on
// too.
func WithTranscriptLogs(enabled bool) KeyspaceOption {
	return keyspaceFunc(func(c *config) { c.transcriptLogs = enabled })
}

// WithContentCapture lets transcript content out, where the GenAI
// conventions allow it (their opt-in attributes): gen_ai.input.messages and
// gen_ai.output.messages on the inference-details log records
// ([WithTranscriptLogs]), and gen_ai.tool.call.arguments and
// gen_ai.tool.call.result on execute_tool spans; each text is made valid
// UTF-8 and cut to [MaxContentLen] bytes. It is the conventions'
// content-capture setting (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT
// in instrumentations that read the environment; a program may map that
// variable onto this option). Without it, or given false, no content leaves
// the process: not in log records, spans or metrics. Metrics never carry
// content, with it or without.
func WithContentCapture(enabled bool) KeyspaceOption {
	return keyspaceFunc(func(c *config) { c.contentCapture = enabled })
}

// WithKeyspaceNamespace sets the namespace of [NewKeyspace] alone, as
// [WithNamespace] does.
//
// Deprecated: WithNamespace applies to NewKeyspace too (it did not before);
// give the namespace once with it.
func WithKeyspaceNamespace(namespace string) KeyspaceOption {
	return keyspaceFunc(func(c *config) {
		if namespace != "" {
			c.keyspaceNamespace = namespace
		}
	})
}

// WithActivitySpans sets where the GenAI telemetry finds the span of the
// activity a transcript belongs to: each attempt's invoke_agent span is its
// child. Without it, or given nil, or when the source has no valid span
// context for the activity, the invoke_agent span is a child of its run's
// derived trace anchor (the parent the run span has), so it is in the run's
// trace either way. A *pairing.Tracker knows the activity's span while the
// activity is in flight and, with pairing.NewIDGenerator installed, also
// after it settled (an agent may write on after its activity timed out).
func WithActivitySpans(src ActivitySpanSource) KeyspaceOption {
	return keyspaceFunc(func(c *config) {
		if !guard.IsNil(src) {
			c.activitySpans = src
		}
	})
}

// WithAgentIdleTimeout sets how long an attempt's invoke_agent span stays
// open without a new committed event before the next committed batch (of
// any stream) ends it, at its last event's time. Without it, or given
// d <= 0, it is [DefaultAgentIdleTimeout]. The other ends of an attempt
// are listed in [NewKeyspace].
func WithAgentIdleTimeout(d time.Duration) KeyspaceOption {
	return keyspaceFunc(func(c *config) {
		if d > 0 {
			c.agentIdle = d
		}
	})
}

// WithSemConvStabilityOptIn sets the OTEL_SEMCONV_STABILITY_OPT_IN values
// the GenAI telemetry follows (a comma-separated list, as in the variable),
// in place of the variable's: "gen_ai_latest_experimental" records the
// newest names where the conventions still move, and "gen_ai/dup" adds
// the names earlier aionotel builds emitted (the table of the genai
// package doc says which). Other values are ignored. Without it the environment
// variable, read when NewKeyspace runs, decides; given "", neither value is
// on.
func WithSemConvStabilityOptIn(values string) KeyspaceOption {
	return keyspaceFunc(func(c *config) { c.optIn = &values })
}
