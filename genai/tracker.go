package genai

import (
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/log"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/internal/attrcache"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/instrument"
	"github.com/aionotel/aionotel/internal/version"
	"github.com/aionotel/aionotel/keyspace"
)

// DefaultMaxPendingToolCalls is how many tool calls and tool results a
// [Tracker] remembers while the other half of their pair is
// outstanding. Past it the oldest is forgotten and counted on
// aion.gen_ai.tool.pairing.evicted; a forgotten result is counted as a call
// of gen_ai.tool.name "_unknown", without duration or span.
const DefaultMaxPendingToolCalls = 1 << 14

// DefaultMaxAgentInvocations is how many attempts a [Tracker] tracks with
// an open invoke_agent span, and how many ended ones it remembers so that
// their late events still join them. Past it the attempt committed to
// least recently is ended (and counted on aion.gen_ai.agent.pairing.evicted),
// or the oldest ended one forgotten.
const DefaultMaxAgentInvocations = 1 << 12

// DefaultAgentIdleTimeout is how long an attempt's invoke_agent span stays
// open without a new event, unless [WithAgentIdleTimeout] says otherwise.
const DefaultAgentIdleTimeout = 10 * time.Minute

// MaxTokenCount is the largest token count of one model call that the
// GenAI telemetry records. A larger count in a [keyspace.Usage] (an agent
// writing -1 for "unknown" stores math.MaxUint64) is implausible: it is
// recorded nowhere (no metric point, span attribute or total) and counted
// on aion.gen_ai.usage.refused, so that no sum of the process can overflow
// and every later point stays valid. The transcript keeps it as written.
const MaxTokenCount = 1 << 32

// MaxContentLen is the largest length, in bytes, of one content text (a
// message text, tool arguments or output) in a log record or span, when
// [WithContentCapture] lets content out at all. Longer text is cut on a
// rune boundary; invalid UTF-8 becomes U+FFFD.
const MaxContentLen = 64 << 10

// Tracker turns transcript events into the GenAI telemetry: token usage,
// model-call, tool and agent durations and spans, tool calls and, when
// enabled, log records (see the package doc). It is safe for concurrent
// use; its zero value is not ready (use [New]): like a nil Tracker, it
// records nothing. It must not be copied.
type Tracker struct {
	tokens        metric.Int64Histogram // gen_ai.client.token.usage; nil behind OptInLatest
	inputTokens   metric.Int64Counter   // OptInLatest only
	outputTokens  metric.Int64Counter   // OptInLatest only
	cacheRead     metric.Int64Counter
	cacheWrite    metric.Int64Counter
	reasoning     metric.Int64Counter
	callDuration  metric.Float64Histogram // model calls (the opt-in's inference duration behind OptInLatest)
	toolOld       metric.Float64Histogram // tools on gen_ai.client.operation.duration, behind OptInDup
	firstChunk    metric.Float64Histogram
	toolDuration  metric.Float64Histogram
	agentDuration metric.Float64Histogram
	toolCalls     metric.Int64Counter
	toolEvicted   metric.Int64Counter
	agentEvicted  metric.Int64Counter
	refused       metric.Int64Counter
	baseOpts      []metric.AddOption // aion.namespace and WithAttributes
	agentOK       []metric.RecordOption
	agentFailed   []metric.RecordOption
	refusedOpts   [numTokenFields][]metric.AddOption
	base          []attribute.KeyValue // aion.namespace, then WithAttributes

	providers, requestModels, responseModels, operations *attrcache.Cache[string]
	// tools maps a raw tool name to its recorded name and measurement
	// options; usageOpts a usage's recorded names (a usageKey) to its
	// measurement options, for at most maxUsageSets combinations.
	tools     *attrcache.Cache[*toolOpts]
	usageOpts sync.Map // usageKey -> *usageSet
	usageSets atomic.Int64

	tracer    trace.Tracer // nil: no GenAI spans
	seed      maphash.Seed
	agents    agents
	logger    log.Logger // nil: log records are off
	content   bool
	optIn     semconvOptIn
	namespace string
	spans     ActivitySpanSource
	idle      time.Duration
	now       func() time.Time
	handle    func(error)
}

// New returns a Tracker configured by opts. It cannot fail: an attribute
// it cannot record is dropped and reported (see [WithAttributes]), and an
// instrument the meter provider refuses is a no-op one, reported too.
func New(opts ...Option) *Tracker {
	cfg := newConfig()
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	cfg.clean()
	return newTracker(&cfg)
}

func newTracker(cfg *config) *Tracker {
	base := append([]attribute.KeyValue{catalog.Namespace.String(cfg.namespace)}, cfg.attributes...)
	// The instruments of the current, unreleased text carry its schema URL
	// (catalog.GenAIDevSchemaURL), the others v1.41.0's, whose gen_ai.*
	// attribute keys they all use.
	meterOf := func(schemaURL string) *instrument.Meter {
		return instrument.New(cfg.meterProvider.Meter(ScopeName, metric.WithInstrumentationVersion(version.Version),
			metric.WithSchemaURL(schemaURL)), "genai", cfg.handle)
	}
	meter, dev := meterOf(catalog.GenAISchemaURL), meterOf(catalog.GenAIDevSchemaURL)
	same := func(recorded string) string { return recorded }
	limit := cfg.nameLimit
	baseSet := attribute.NewSet(base...)
	ga := &Tracker{
		cacheRead: dev.Int64Counter(catalog.GenAIInferenceCacheReadTokens, catalog.UnitToken,
			"The number of input tokens served from a provider-managed cache."),
		cacheWrite: dev.Int64Counter(catalog.GenAIInferenceCacheWriteTokens, catalog.UnitToken,
			"The number of input tokens written to a provider-managed cache."),
		reasoning: dev.Int64Counter(catalog.GenAIInferenceReasoningTokens, catalog.UnitToken,
			"The number of output tokens used for reasoning."),
		toolDuration: dev.Float64Histogram(catalog.GenAIExecuteToolDuration, catalog.UnitSeconds,
			"The duration of a single tool execution.", catalog.GenAIDurationBoundaries),
		agentDuration: dev.Float64Histogram(catalog.GenAIInvokeAgentDuration, catalog.UnitSeconds,
			"The end-to-end duration of a single agent invocation.", catalog.InvokeAgentBoundaries),
		toolCalls: meter.Int64Counter(catalog.GenAIToolCalls, catalog.UnitCall,
			"Tool executions whose call and result were both observed."),
		toolEvicted: meter.Int64Counter(catalog.GenAIToolPairingEvicted, catalog.UnitCall,
			"Tool calls and results forgotten by the memory bound before the other half was observed."),
		agentEvicted: meter.Int64Counter(catalog.GenAIAgentPairingEvicted, catalog.UnitCount,
			"Agent invocations whose span the memory bound ended before their attempt ended."),
		refused: meter.Int64Counter(catalog.GenAIUsageRefused, catalog.UnitCount,
			"Token counts of a model call above the plausible bound, recorded nowhere."),
		baseOpts:       []metric.AddOption{metric.WithAttributeSet(baseSet)},
		agentOK:        []metric.RecordOption{metric.WithAttributeSet(baseSet)},
		agentFailed:    []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(append(slices.Clone(base), catalog.ErrorType.String(catalog.OtherError))...))},
		base:           base,
		providers:      attrcache.New(limit, catalog.UnknownType, catalog.OtherType, same),
		requestModels:  attrcache.New(limit, "", catalog.OtherType, same),
		responseModels: attrcache.New(limit, "", catalog.OtherType, same),
		operations:     attrcache.New(limit, catalog.GenAIOperationChat, catalog.OtherType, same),
		tools: attrcache.New(limit, catalog.UnknownType, catalog.OtherType, func(name string) *toolOpts {
			return newToolOpts(base, name)
		}),
		seed:      maphash.MakeSeed(),
		agents:    newAgents(max(cfg.maxAttempts, 1), max(cfg.maxPendingCalls, 1)),
		content:   cfg.content,
		optIn:     cfg.optIn,
		namespace: cfg.namespace,
		spans:     cfg.spans,
		idle:      cfg.idle,
		now:       cfg.now,
		handle:    cfg.handle,
	}
	for f := range numTokenFields {
		ga.refusedOpts[f] = []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(append(slices.Clone(base), catalog.UsageField.String(usageFieldNames[f]))...))}
	}
	if cfg.optIn.latest {
		ga.inputTokens = dev.Int64Counter(catalog.GenAIInferenceInputTokens, catalog.UnitToken,
			"The number of input (prompt) tokens used, including cached tokens.")
		ga.outputTokens = dev.Int64Counter(catalog.GenAIInferenceOutputTokens, catalog.UnitToken,
			"The number of output (completion) tokens used, including reasoning tokens.")
		ga.callDuration = dev.Float64Histogram(catalog.GenAIClientInferenceDuration, catalog.UnitSeconds,
			"GenAI inference operation duration.", catalog.GenAIDurationBoundaries)
		ga.firstChunk = dev.Float64Histogram(catalog.GenAIClientInferenceTimeToFirst, catalog.UnitSeconds,
			"Time to receive the first chunk of a streamed response, from when the request was issued.", catalog.GenAIDurationBoundaries)
	} else {
		ga.tokens = meter.Int64Histogram(catalog.GenAIClientTokenUsage, catalog.UnitToken,
			"Number of input and output tokens used.", catalog.TokenUsageBoundaries)
		ga.callDuration = meter.Float64Histogram(catalog.GenAIClientOperationDuration, catalog.UnitSeconds,
			"GenAI operation duration.", catalog.GenAIDurationBoundaries)
		ga.firstChunk = meter.Float64Histogram(catalog.GenAIClientTimeToFirstChunk, catalog.UnitSeconds,
			"Time to receive the first chunk of a streamed response, from when the request was issued.", catalog.GenAIDurationBoundaries)
	}
	if cfg.optIn.dup {
		ga.toolOld = ga.callDuration
		if cfg.optIn.latest {
			ga.toolOld = meter.Float64Histogram(catalog.GenAIClientOperationDuration, catalog.UnitSeconds,
				"GenAI operation duration.", catalog.GenAIDurationBoundaries)
		}
	}
	if _, noop := cfg.tracerProvider.(tracenoop.TracerProvider); !noop {
		ga.tracer = cfg.tracerProvider.Tracer(ScopeName, trace.WithInstrumentationVersion(version.Version),
			trace.WithSchemaURL(catalog.GenAISchemaURL))
	}
	if cfg.logs && cfg.loggerProvider != nil {
		ga.logger = cfg.loggerProvider.Logger(ScopeName, log.WithInstrumentationVersion(version.Version),
			log.WithSchemaURL(catalog.GenAISchemaURL))
	}
	return ga
}

// clock returns the current time: the test seam's when set.
func (g *Tracker) clock() time.Time {
	if g.now != nil {
		return g.now()
	}
	return time.Now()
}

// Observe records the telemetry of events, a batch of transcript events
// that has just been committed, in commit order: the i-th event is at
// position firstSeq+i of its stream (aion.keyspace.store_seq on its log
// records; a [keyspace.Store] commits AppendEvents(ctx, firstSeq, events)
// there). An engine that keeps transcripts elsewhere calls it after each
// of its own commits, with its own positions. A batch may hold events of
// several streams; ephemeral events, and events whose Content is nil or of
// a foreign type, record nothing. Each event should be observed once: the
// Tracker does not deduplicate (a re-delivered event counts again). ctx
// is the committing call's: metric points without a span of their own get
// it as exemplar.
//
// The bookkeeping (pairing, totals, bounds) is done under one lock without
// calling out; the spans, points and records are made after it is
// released. A panic inside (of an [ActivitySpanSource], a sampler, a span
// or log processor or an exporter) is reported to the error handler, never
// passed on. A nil or zero Tracker records nothing.
func (g *Tracker) Observe(ctx context.Context, firstSeq uint64, events []keyspace.ActivityEvent) {
	if !g.ready() || len(events) == 0 {
		return
	}
	defer func() {
		if r := recover(); r != nil {
			g.handle(fmt.Errorf("genai: telemetry of an observed batch: panic: %v", r))
		}
	}()
	buf := actionPool.Get().(*[]action)
	acts := g.plan((*buf)[:0], firstSeq, events)
	g.run(ctx, acts)
	if cap(acts) <= maxPooledActions {
		clear(acts) // drop the references to attempts and events
		*buf = acts[:0]
		actionPool.Put(buf)
	}
}

// ready reports whether g was made by New: a nil or zero Tracker has no
// caches (and no error handler) and records nothing.
func (g *Tracker) ready() bool { return g != nil && g.providers != nil }

// actionPool holds the action slices of observe, so that a committed batch
// costs no allocation for them; a slice grown past maxPooledActions (a huge
// batch) is left to the collector.
var actionPool = sync.Pool{New: func() any { return new([]action) }}

const maxPooledActions = 64

// contentOf returns c as a value kind: a pointer kind is dereferenced; nil
// for a nil pointer or a foreign type, which no conforming store commits.
func contentOf(c keyspace.Content) keyspace.Content {
	switch c := c.(type) {
	case keyspace.Message, keyspace.ToolCall, keyspace.ToolResult, keyspace.Status, keyspace.Usage:
		return c
	case *keyspace.Message:
		if c != nil {
			return *c
		}
	case *keyspace.ToolCall:
		if c != nil {
			return *c
		}
	case *keyspace.ToolResult:
		if c != nil {
			return *c
		}
	case *keyspace.Status:
		if c != nil {
			return *c
		}
	case *keyspace.Usage:
		if c != nil {
			return *c
		}
	}
	return nil
}

// The token counts of a Usage, as indexes of arrays.
const (
	fieldInput = iota
	fieldOutput
	fieldCacheRead
	fieldCacheWrite
	fieldReasoning
	numTokenFields
)

// usageFieldNames are the aion.gen_ai.usage.field values of
// aion.gen_ai.usage.refused.
var usageFieldNames = [numTokenFields]string{catalog.UsageFieldInput, catalog.UsageFieldOutput,
	catalog.UsageFieldCacheRead, catalog.UsageFieldCacheWrite, catalog.UsageFieldReasoning}

// tokenCounts are a Usage's counts, each either plausible (at most
// MaxTokenCount) or refused.
type tokenCounts struct {
	n       [numTokenFields]int64
	refused [numTokenFields]bool
}

func countsOf(u keyspace.Usage) tokenCounts {
	var c tokenCounts
	for f, v := range [numTokenFields]uint64{u.InputTokens, u.OutputTokens, u.CacheReadInputTokens,
		u.CacheCreationInputTokens, u.ReasoningOutputTokens} {
		if v > MaxTokenCount {
			c.refused[f] = true
			continue
		}
		c.n[f] = int64(v)
	}
	return c
}

// maxUsageSets bounds the cached attribute sets of token usage: each name
// is bounded on its own, but their combinations need not be; past it a
// usage's sets are built per call.
const maxUsageSets = 4096

// usageKey is a usage's recorded names; a model is "" when not given.
type usageKey struct {
	operation, provider, requestModel, responseModel string
}

// usageKeyOf cleans and bounds a usage's names: the operation and provider
// always (the conventions require them: an empty operation is "chat", an
// empty provider "_unknown"), each model when given ("_other" past the
// limit).
func (g *Tracker) usageKeyOf(u keyspace.Usage) usageKey {
	k := usageKey{operation: g.operations.Get(u.Operation), provider: g.providers.Get(u.Provider)}
	if u.RequestModel != "" {
		k.requestModel = g.requestModels.Get(u.RequestModel)
	}
	if u.ResponseModel != "" {
		k.responseModel = g.responseModels.Get(u.ResponseModel)
	}
	return k
}

// attrs are the GenAI attributes of a usage, without the base ones.
func (k usageKey) attrs() []attribute.KeyValue {
	attrs := []attribute.KeyValue{catalog.GenAIOperationName.String(k.operation), catalog.GenAIProviderName.String(k.provider)}
	if k.requestModel != "" {
		attrs = append(attrs, catalog.GenAIRequestModel.String(k.requestModel))
	}
	if k.responseModel != "" {
		attrs = append(attrs, catalog.GenAIResponseModel.String(k.responseModel))
	}
	return attrs
}

// spanName is the inference span's name: "{operation} {request model}", or
// the operation alone when no model is given.
func (k usageKey) spanName() string {
	if k.requestModel == "" {
		return k.operation
	}
	return k.operation + " " + k.requestModel
}

// usageSet is what recording a usage of one usageKey needs: the
// measurement options, each in the slice a variadic call takes, built once.
type usageSet struct {
	key usageKey
	// input and output are gen_ai.client.token.usage's options (with
	// gen_ai.token.type); behind OptInLatest, inputAdd and outputAdd are
	// the input and output counters' (with gen_ai.token.modality).
	input, output       []metric.RecordOption
	inputAdd, outputAdd []metric.AddOption
	// counts are the breakdown counters' (gen_ai.token.modality), call the
	// model-call durations' (neither).
	counts []metric.AddOption
	call   []metric.RecordOption
	// spanStart are the inference span's sampling-relevant attributes.
	spanStart trace.SpanStartOption
	spanName  string
}

// usageSetOf returns the measurement options of a usage of key k.
func (g *Tracker) usageSetOf(k usageKey) *usageSet {
	if v, ok := g.usageOpts.Load(k); ok {
		return v.(*usageSet)
	}
	attrs := append(slices.Clone(g.base), k.attrs()...)
	with := func(kv attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(append(slices.Clone(attrs), kv)...))
	}
	counts := with(catalog.GenAITokenModality.String(catalog.GenAIModalityUnknown))
	set := &usageSet{
		key:       k,
		counts:    []metric.AddOption{counts},
		inputAdd:  []metric.AddOption{counts},
		outputAdd: []metric.AddOption{counts},
		call:      []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(attrs...))},
		input:     []metric.RecordOption{with(catalog.GenAITokenType.String(catalog.GenAITokenInput))},
		output:    []metric.RecordOption{with(catalog.GenAITokenType.String(catalog.GenAITokenOutput))},
		spanStart: trace.WithAttributes(attrs...),
		spanName:  k.spanName(),
	}
	if g.usageSets.Load() >= maxUsageSets {
		return set
	}
	v, loaded := g.usageOpts.LoadOrStore(k, set)
	if !loaded {
		g.usageSets.Add(1)
	}
	return v.(*usageSet)
}

// recordUsage records the metric points of one model call: the token
// counts, refused ones counted apart, and, when the Usage says when the
// call started, its duration and time to first chunk. ctx carries the
// inference span, the points' exemplar.
func (g *Tracker) recordUsage(ctx context.Context, u *usageAction) {
	set, c := u.set, &u.counts
	if g.optIn.latest {
		if !c.refused[fieldInput] {
			g.inputTokens.Add(ctx, c.n[fieldInput], set.inputAdd...)
		}
		if !c.refused[fieldOutput] {
			g.outputTokens.Add(ctx, c.n[fieldOutput], set.outputAdd...)
		}
	} else {
		if !c.refused[fieldInput] {
			g.tokens.Record(ctx, c.n[fieldInput], set.input...)
		}
		if !c.refused[fieldOutput] {
			g.tokens.Record(ctx, c.n[fieldOutput], set.output...)
		}
	}
	if !c.refused[fieldCacheRead] {
		g.cacheRead.Add(ctx, c.n[fieldCacheRead], set.counts...)
	}
	if !c.refused[fieldCacheWrite] {
		g.cacheWrite.Add(ctx, c.n[fieldCacheWrite], set.counts...)
	}
	if !c.refused[fieldReasoning] {
		g.reasoning.Add(ctx, c.n[fieldReasoning], set.counts...)
	}
	for f := range numTokenFields {
		if c.refused[f] {
			g.refused.Add(ctx, 1, g.refusedOpts[f]...)
		}
	}
	if u.start.IsZero() {
		return
	}
	g.callDuration.Record(ctx, seconds(u.start, u.end), set.call...)
	if !u.firstChunk.IsZero() {
		g.firstChunk.Record(ctx, seconds(u.start, u.firstChunk), set.call...)
	}
}

// seconds is the time from start to end, in seconds; 0 when end is not
// after start (two clocks apart).
func seconds(start, end time.Time) float64 {
	return max(end.Sub(start).Seconds(), 0)
}

// toolOpts is a recorded tool name with the measurement options of its
// executions that succeeded and failed: calls (the tool-call counter, and
// behind OptInDup gen_ai.client.operation.duration, with
// gen_ai.operation.name) and exec (gen_ai.execute_tool.duration, without).
type toolOpts struct {
	name               string
	calls, callsFailed []metric.AddOption
	oldCall, oldFailed []metric.RecordOption
	exec, execFailed   []metric.RecordOption
	spanStart          trace.SpanStartOption
	spanName           string
}

func newToolOpts(base []attribute.KeyValue, name string) *toolOpts {
	tool := catalog.GenAIToolName.String(name)
	op := catalog.GenAIOperationName.String(catalog.GenAIOperationExecuteTool)
	failed := catalog.ErrorType.String(catalog.OtherError)
	set := func(kvs ...attribute.KeyValue) metric.MeasurementOption {
		return metric.WithAttributeSet(attribute.NewSet(append(slices.Clone(base), kvs...)...))
	}
	calls, callsFailed := set(op, tool), set(op, tool, failed)
	return &toolOpts{
		name:        name,
		calls:       []metric.AddOption{calls},
		callsFailed: []metric.AddOption{callsFailed},
		oldCall:     []metric.RecordOption{calls},
		oldFailed:   []metric.RecordOption{callsFailed},
		exec:        []metric.RecordOption{set(tool)},
		execFailed:  []metric.RecordOption{set(tool, failed)},
		spanStart:   trace.WithAttributes(append(slices.Clone(base), op, tool)...),
		spanName:    catalog.GenAIOperationExecuteTool + " " + name,
	}
}
