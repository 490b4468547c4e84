package pipeline

// metricKind is the Prometheus type a catalog instrument becomes.
type metricKind int

const (
	counter   metricKind = iota // OTel counter: name ends in _total
	gauge                       // OTel up-down counter or gauge: a gauge
	histogram                   // _bucket, _count and _sum series
)

func (k metricKind) String() string {
	switch k {
	case counter:
		return "counter"
	case gauge:
		return "gauge"
	case histogram:
		return "histogram"
	}
	return "unknown"
}

// catalogMetric is one row of the telemetry catalog (otelstore's package
// doc, "Telemetry catalog", and NewKeyspace's) as Prometheus sees it: the contract the dashboard and the alert
// rules are written against.
type catalogMetric struct {
	Name     string // Prometheus metric family name
	Kind     metricKind
	Labels   []string // always present
	Optional []string // present on some series only (error_type: failures)
	// Engine names the engine whose decorator alone records the metric
	// (an engine module's instrument, internal/catalog's engines.go); ""
	// for the catalog every decorator records, the demo's.
	Engine string
}

// catalogPrefixes are the name prefixes of the catalog's families: aionotel's
// own, and the OpenTelemetry GenAI conventions' (gen_ai.client.token.usage).
var catalogPrefixes = []string{"aion_", "gen_ai_"}

// catalogMetrics is the whole catalog.
var catalogMetrics = []catalogMetric{
	{Name: "aion_store_operation_duration_seconds", Kind: histogram, Labels: []string{"aion_namespace", "db_operation_name", "db_system_name"}, Optional: []string{"error_type"}},
	{Name: "aion_workflows_started_total", Kind: counter, Labels: []string{"aion_namespace", "aion_workflow_type"}},
	{Name: "aion_workflows_completed_total", Kind: counter, Labels: []string{"aion_namespace", "aion_workflow_status"}},
	{Name: "aion_workflows_reopened_total", Kind: counter, Labels: []string{"aion_namespace"}},
	{Name: "aion_signals_delivered_total", Kind: counter, Labels: []string{"aion_namespace", "aion_signal_delivery"}},
	{Name: "aion_schedules_fired_total", Kind: counter, Labels: []string{"aion_namespace"}},
	{Name: "aion_activities_dispatched_total", Kind: counter, Labels: []string{"aion_namespace", "aion_activity_type"}},
	{Name: "aion_inflight_activities", Kind: gauge, Labels: []string{"aion_namespace", "aion_activity_type"}},
	{Name: "aion_activities_completed_total", Kind: counter, Labels: []string{"aion_namespace", "aion_activity_type", "aion_activity_outcome"}},
	{Name: "aion_activity_duration_seconds", Kind: histogram, Labels: []string{"aion_namespace", "aion_activity_type", "aion_activity_outcome"}},
	{Name: "aion_activities_retried_total", Kind: counter, Labels: []string{"aion_namespace", "aion_activity_type"}},
	{Name: "aion_activity_pairing_evicted_total", Kind: counter, Labels: []string{"aion_namespace"}},
	// The keyspace decorator's namespace (otelstore.WithNamespace),
	// so that the dashboard's namespace variable filters them too.
	{Name: "aion_keyspace_operation_duration_seconds", Kind: histogram, Labels: []string{"aion_namespace", "db_operation_name", "db_system_name"}, Optional: []string{"error_type"}},
	{Name: "aion_keyspace_append_batch_size", Kind: histogram, Labels: []string{"aion_namespace"}},
	// The timeline (issue 16): work on workflow timescales.
	{Name: "aion_activity_oldest_inflight_age_seconds", Kind: gauge, Labels: []string{"aion_namespace", "aion_activity_type"}},
	{Name: "aion_workflow_duration_seconds", Kind: histogram, Labels: []string{"aion_namespace", "aion_workflow_type", "aion_workflow_status"}},
	{Name: "aion_workflow_pairing_evicted_total", Kind: counter, Labels: []string{"aion_namespace"}},
	// aion.pairing.forgotten, aion.pairing.resumed and aion.pairing.released
	// (issues 21, 22 and 33) are left out: they exist only once the
	// tracker's bound dropped a waiting fact, a process resumed open
	// workflows or filled a gap, or a shard moved, which a run may or may
	// not make happen.
	// The wait for a worker (issue 26): from a dispatch to the claim of its
	// outbox row.
	{Name: "aion_activity_wait_duration_seconds", Kind: histogram, Labels: []string{"aion_namespace", "aion_activity_type"}},
	{Name: "aion_activity_oldest_waiting_age_seconds", Kind: gauge, Labels: []string{"aion_namespace", "aion_activity_type"}},
	// go-workflows' workflow task time in queue (issue 31), recorded by
	// otelworkflows only: the demo's engine has no workflow task queue.
	{Name: "aion_workflow_task_wait_duration_seconds", Kind: histogram, Labels: []string{"aion_namespace", "aion_workflow_task_trigger"}, Engine: "go-workflows"},
	// Agent transcripts (issues 17 and 25), by the GenAI conventions where
	// they have names (v1.41.0: token usage, model-call durations; the
	// current GenAI text: tool and agent durations, the token breakdown
	// counters) and aion.gen_ai. where they do not (the tool-call counter).
	// The models are attributes "when known". aion.gen_ai.tool.pairing.evicted,
	// aion.gen_ai.agent.pairing.evicted and aion.gen_ai.usage.refused are
	// left out: they exist only once a memory bound dropped something or an
	// agent reported an implausible count, which the demo never does.
	{Name: "gen_ai_client_token_usage", Kind: histogram, Labels: []string{"aion_namespace", "gen_ai_operation_name", "gen_ai_provider_name", "gen_ai_token_type"},
		Optional: []string{"gen_ai_request_model", "gen_ai_response_model"}},
	{Name: "gen_ai_client_inference_usage_cache_read_input_tokens_total", Kind: counter, Labels: genAITokenLabels, Optional: genAIModelLabels},
	{Name: "gen_ai_client_inference_usage_cache_write_input_tokens_total", Kind: counter, Labels: genAITokenLabels, Optional: genAIModelLabels},
	{Name: "gen_ai_client_inference_usage_reasoning_output_tokens_total", Kind: counter, Labels: genAITokenLabels, Optional: genAIModelLabels},
	{Name: "gen_ai_client_operation_duration_seconds", Kind: histogram, Labels: genAICallLabels, Optional: genAIModelLabels},
	{Name: "gen_ai_client_operation_time_to_first_chunk_seconds", Kind: histogram, Labels: genAICallLabels, Optional: genAIModelLabels},
	{Name: "aion_gen_ai_tool_calls_total", Kind: counter, Labels: []string{"aion_namespace", "gen_ai_operation_name", "gen_ai_tool_name"}, Optional: []string{"error_type"}},
	{Name: "gen_ai_execute_tool_duration_seconds", Kind: histogram, Labels: []string{"aion_namespace", "gen_ai_tool_name"}, Optional: []string{"error_type"}},
	{Name: "gen_ai_invoke_agent_duration_seconds", Kind: histogram, Labels: []string{"aion_namespace"}, Optional: []string{"error_type"}},
}

// The labels of a model call's metrics: always, and when the Usage names
// the models; the token breakdown counters add the modality.
var (
	genAICallLabels  = []string{"aion_namespace", "gen_ai_operation_name", "gen_ai_provider_name"}
	genAITokenLabels = append(append([]string(nil), genAICallLabels...), "gen_ai_token_modality")
	genAIModelLabels = []string{"gen_ai_request_model", "gen_ai_response_model"}
)

// seriesNames returns the names of the series the metric is stored as in
// Prometheus.
func (m catalogMetric) seriesNames() []string {
	if m.Kind == histogram {
		return []string{m.Name + "_bucket", m.Name + "_count", m.Name + "_sum"}
	}
	return []string{m.Name}
}

// catalogSeries maps every series name of the catalog to its metric.
func catalogSeries() map[string]catalogMetric {
	out := map[string]catalogMetric{}
	for _, m := range catalogMetrics {
		for _, s := range m.seriesNames() {
			out[s] = m
		}
	}
	return out
}

// demoUnfed maps the catalog metrics of an engine module, which the demo
// (an eventstore engine, through otelstore) never records, to the reason:
// checkDashboardQueries does not wait for the queries that read only them.
func demoUnfed() map[string]string {
	out := map[string]string{}
	for _, m := range catalogMetrics {
		if m.Engine != "" {
			out[m.Name] = "recorded only by the " + m.Engine + " decorator; the demo's engine (an eventstore.Store) has no such fact"
		}
	}
	return out
}

// demoMetrics are the catalog metrics the demo records: all but the
// engine modules'.
func demoMetrics() []catalogMetric {
	var out []catalogMetric
	for _, m := range catalogMetrics {
		if m.Engine == "" {
			out = append(out, m)
		}
	}
	return out
}
