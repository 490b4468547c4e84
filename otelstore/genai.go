package otelstore

import (
	"container/list"
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

	"github.com/aionotel/aionotel/internal/attrcache"
	"github.com/aionotel/aionotel/internal/attrvalue"
	"github.com/aionotel/aionotel/internal/catalog"
	"github.com/aionotel/aionotel/internal/instrument"
	"github.com/aionotel/aionotel/internal/timeline"
	"github.com/aionotel/aionotel/internal/version"
	"github.com/aionotel/aionotel/keyspace"
	"github.com/aionotel/aionotel/pairing"
)

// DefaultMaxPendingToolCalls is how many tool calls [NewKeyspace] remembers
// while their results are outstanding, to measure their duration. Past it
// the oldest is forgotten and counted on aion.gen_ai.tool.pairing.evicted;
// its result, when it comes, is counted with gen_ai.tool.name "_unknown"
// and no duration.
const DefaultMaxPendingToolCalls = 1 << 14

// MaxContentLen is the largest length, in bytes, of one content field (a
// message text, tool arguments or output, a status) in a log record, when
// [WithContentCapture] lets content out at all. Longer text is cut on a
// rune boundary; invalid UTF-8 becomes U+FFFD.
const MaxContentLen = 64 << 10

// genai turns committed transcript events into the GenAI telemetry: token
// usage, tool calls and, when enabled, log records. It is safe for
// concurrent use.
type genai struct {
	tokens       metric.Int64Histogram
	toolCalls    metric.Int64Counter
	toolDuration metric.Float64Histogram
	evicted      metric.Int64Counter
	evictedOpts  []metric.AddOption
	base         []attribute.KeyValue // aion.namespace, then WithAttributes

	providers, requestModels, responseModels, operations *attrcache.Cache[string]
	// tools maps a raw tool name to its recorded name and measurement
	// options; usageOpts a usage's recorded names (a usageKey) to the
	// options of its two points, for at most maxUsageSets combinations.
	tools     *attrcache.Cache[*toolOpts]
	usageOpts sync.Map // usageKey -> *[2]metric.MeasurementOption
	usageSets atomic.Int64

	seed    maphash.Seed
	pending pendingCalls

	logger    log.Logger // nil: log records are off
	content   bool
	namespace string
	spans     ActivitySpanSource
	now       func() time.Time
	handle    func(error)
}

func newGenAI(cfg *config, meter *instrument.Meter) *genai {
	base := append([]attribute.KeyValue{catalog.Namespace.String(cfg.keyspaceNamespace)}, cfg.attributes...)
	same := func(recorded string) string { return recorded }
	limit := cfg.typeLimit
	ga := &genai{
		tokens: meter.Int64Histogram(catalog.GenAIClientTokenUsage, catalog.UnitToken,
			"Number of input and output tokens used.", catalog.TokenUsageBoundaries),
		toolCalls: meter.Int64Counter(catalog.GenAIToolCalls, catalog.UnitCall,
			"Tool calls whose result was committed to the transcript keyspace."),
		toolDuration: meter.Float64Histogram(catalog.GenAIClientOperationDuration, catalog.UnitSeconds,
			"GenAI operation duration.", catalog.GenAIDurationBoundaries),
		evicted: meter.Int64Counter(catalog.GenAIToolPairingEvicted, catalog.UnitCall,
			"Tool calls forgotten by the memory bound before their result was committed."),
		evictedOpts:    []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(base...))},
		base:           base,
		providers:      attrcache.New(limit, catalog.UnknownType, catalog.OtherType, same),
		requestModels:  attrcache.New(limit, "", catalog.OtherType, same),
		responseModels: attrcache.New(limit, "", catalog.OtherType, same),
		operations:     attrcache.New(limit, catalog.GenAIOperationChat, catalog.OtherType, same),
		tools: attrcache.New(limit, catalog.UnknownType, catalog.OtherType, func(name string) *toolOpts {
			return newToolOpts(base, name)
		}),
		seed:      maphash.MakeSeed(),
		pending:   pendingCalls{limit: max(cfg.maxPendingCalls, 1), m: map[callKey]*list.Element{}},
		content:   cfg.contentCapture,
		namespace: cfg.keyspaceNamespace,
		spans:     cfg.activitySpans,
		now:       cfg.now,
		handle:    cfg.handle,
	}
	if cfg.transcriptLogs && cfg.loggerProvider != nil {
		ga.logger = cfg.loggerProvider.Logger(ScopeName, log.WithInstrumentationVersion(version.Version),
			log.WithSchemaURL(catalog.SchemaURL))
	}
	return ga
}

// observe records the telemetry of events, which the inner store has just
// committed as one batch (so they are of one stream, none ephemeral). ctx
// is the append_events call's: metric points get its span as exemplar.
//
// A panic inside (of an [ActivitySpanSource], a log processor or an
// exporter) is reported to the error handler: the batch is committed, and
// the caller gets the inner result.
func (g *genai) observe(ctx context.Context, expectedSeq uint64, events []keyspace.ActivityEvent) {
	defer func() {
		if r := recover(); r != nil {
			g.handle(fmt.Errorf("otelstore: GenAI telemetry of a committed batch: panic: %v", r))
		}
	}()
	var logCtx context.Context
	for i := range events {
		ev := &events[i]
		if ev.Ephemeral {
			continue // not a transcript entry; a conforming store refuses it anyway
		}
		toolName, paired := "", false
		switch c := contentOf(ev.Content).(type) {
		case keyspace.Usage:
			g.recordUsage(ctx, c)
		case keyspace.ToolCall:
			g.callStarted(ev, c)
		case keyspace.ToolResult:
			toolName, paired = g.callEnded(ctx, ev, c)
		case nil:
			continue // nothing to say, and no record for it
		}
		if g.logger == nil {
			continue
		}
		if logCtx == nil {
			logCtx = g.traceContext(ctx, keyspace.KeyOf(*ev))
		}
		g.emit(logCtx, ev, expectedSeq+uint64(i), toolName, paired)
	}
}

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
func (g *genai) usageKeyOf(u keyspace.Usage) usageKey {
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

// usageOptions returns the measurement options of a usage's input and
// output points.
func (g *genai) usageOptions(k usageKey) *[2]metric.MeasurementOption {
	if v, ok := g.usageOpts.Load(k); ok {
		return v.(*[2]metric.MeasurementOption)
	}
	attrs := append(append(slices.Clone(g.base), k.attrs()...), attribute.KeyValue{})
	var opts [2]metric.MeasurementOption
	for i, typ := range [2]string{catalog.GenAITokenInput, catalog.GenAITokenOutput} {
		attrs[len(attrs)-1] = catalog.GenAITokenType.String(typ)
		opts[i] = metric.WithAttributeSet(attribute.NewSet(attrs...))
	}
	if g.usageSets.Load() >= maxUsageSets {
		return &opts
	}
	v, loaded := g.usageOpts.LoadOrStore(k, &opts)
	if !loaded {
		g.usageSets.Add(1)
	}
	return v.(*[2]metric.MeasurementOption)
}

func (g *genai) recordUsage(ctx context.Context, u keyspace.Usage) {
	opts := g.usageOptions(g.usageKeyOf(u))
	g.tokens.Record(ctx, attrvalue.Int64(u.InputTokens), opts[0])
	g.tokens.Record(ctx, attrvalue.Int64(u.OutputTokens), opts[1])
}

// toolOpts is a recorded tool name with the measurement options of its
// calls that succeeded and failed.
type toolOpts struct {
	name       string
	ok, failed metric.MeasurementOption
}

func newToolOpts(base []attribute.KeyValue, name string) *toolOpts {
	attrs := append(slices.Clone(base),
		catalog.GenAIOperationName.String(catalog.GenAIOperationExecuteTool),
		catalog.GenAIToolName.String(name))
	return &toolOpts{
		name:   name,
		ok:     metric.WithAttributeSet(attribute.NewSet(attrs...)),
		failed: metric.WithAttributeSet(attribute.NewSet(append(attrs, catalog.ErrorType.String(catalog.OtherError))...)),
	}
}

// callKey identifies a pending tool call: its stream and a hash of its
// call ID, so a huge ID costs no memory.
type callKey struct {
	stream keyspace.StreamKey
	id     uint64
}

func (g *genai) keyOf(ev *keyspace.ActivityEvent, callID string) callKey {
	return callKey{stream: keyspace.KeyOf(*ev), id: maphash.String(g.seed, callID)}
}

func (g *genai) callStarted(ev *keyspace.ActivityEvent, c keyspace.ToolCall) {
	if n := g.pending.put(g.keyOf(ev, c.CallID), g.tools.Get(c.Name), ev.EmittedAt); n > 0 {
		g.evicted.Add(context.Background(), int64(n), g.evictedOpts...)
	}
}

// callEnded counts a tool call by its result and records its duration when
// its call was seen (and both times are set, in order). It returns the
// recorded tool name and whether the call was seen.
func (g *genai) callEnded(ctx context.Context, ev *keyspace.ActivityEvent, r keyspace.ToolResult) (string, bool) {
	call, seen := g.pending.take(g.keyOf(ev, r.CallID))
	tool := call.tool
	if !seen {
		tool = g.tools.Get("")
	}
	opt := tool.ok
	if r.IsError {
		opt = tool.failed
	}
	g.toolCalls.Add(ctx, 1, opt)
	if seen && !call.at.IsZero() && !ev.EmittedAt.IsZero() {
		// A result stamped before its call (two workers' clocks apart)
		// took no measurable time: 0, so that every paired call has its
		// point.
		g.toolDuration.Record(ctx, max(ev.EmittedAt.Sub(call.at).Seconds(), 0), opt)
	}
	return tool.name, seen
}

// pendingCalls remembers tool calls until their result, at most limit of
// them: past it the oldest is forgotten. Safe for concurrent use.
type pendingCalls struct {
	mu    sync.Mutex
	limit int
	m     map[callKey]*list.Element
	order list.List // of *pendingCall, oldest first
}

type pendingCall struct {
	key  callKey
	tool *toolOpts
	at   time.Time
}

// put remembers a call (a second call with the same key replaces the first)
// and returns how many older calls it evicted.
func (p *pendingCalls) put(key callKey, tool *toolOpts, at time.Time) (evicted int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.m[key]; ok {
		p.order.Remove(e)
	}
	p.m[key] = p.order.PushBack(&pendingCall{key: key, tool: tool, at: at})
	for len(p.m) > p.limit {
		oldest := p.order.Front()
		delete(p.m, p.order.Remove(oldest).(*pendingCall).key)
		evicted++
	}
	return evicted
}

// take forgets a call and returns it, if it was pending.
func (p *pendingCalls) take(key callKey) (pendingCall, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.m[key]
	if !ok {
		return pendingCall{}, false
	}
	delete(p.m, key)
	return *p.order.Remove(e).(*pendingCall), true
}

// len is the number of pending calls.
func (p *pendingCalls) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.m)
}

// traceContext returns ctx carrying the span context the records of a
// stream belong to: the live activity span's when an [ActivitySpanSource]
// knows it, else the run's derived anchor, so the records land in the run's
// trace either way.
func (g *genai) traceContext(ctx context.Context, key keyspace.StreamKey) context.Context {
	var sc trace.SpanContext
	if g.spans != nil {
		sc = g.spans.ActivitySpanContext(pairing.Key{Namespace: g.namespace, WorkflowID: key.WorkflowID,
			RunID: key.RunID, ActivityID: key.ActivityID})
	}
	if !sc.IsValid() {
		sc = timeline.Anchor(g.namespace, key.WorkflowID, key.RunID)
	}
	return trace.ContextWithSpanContext(ctx, sc)
}
