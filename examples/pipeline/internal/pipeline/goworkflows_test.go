package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// goWorkflowsJob is the service.name, so the job, of the go-workflows
// scenario.
const goWorkflowsJob = "aionotel-e2e-goworkflows"

// goWorkflowsUnfed are the catalog families the dashboard reads that a
// go-workflows service wrapped by otelworkflows has no facts for, and why.
// Every other dashboard query must return data on its job.
var goWorkflowsUnfed = map[string]string{
	"aion_schedules_fired_total":    "go-workflows has no schedules (no ScheduleTriggered fact)",
	"aion_workflows_reopened_total": "go-workflows never reopens a finished instance",
	"aion_activity_pairing_evicted_total": "counted only once the tracker's activity bound drops a pairing; " +
		"the scenario stays far below pairing's default bound",
	"aion_workflow_pairing_evicted_total": "counted only once the tracker's run bound drops a run; " +
		"the scenario stays far below pairing's default bound",
	"aion_keyspace_operation_duration_seconds":                     "transcripts: the keyspace decorator (otelstore.NewKeyspace), which a go-workflows backend is not",
	"aion_keyspace_append_batch_size":                              "transcripts: the keyspace decorator (otelstore.NewKeyspace), which a go-workflows backend is not",
	"gen_ai_client_token_usage":                                    "GenAI: agent transcripts, which go-workflows' history does not carry",
	"gen_ai_client_inference_usage_cache_read_input_tokens_total":  "GenAI: agent transcripts, which go-workflows' history does not carry",
	"gen_ai_client_inference_usage_cache_write_input_tokens_total": "GenAI: agent transcripts, which go-workflows' history does not carry",
	"gen_ai_client_inference_usage_reasoning_output_tokens_total":  "GenAI: agent transcripts, which go-workflows' history does not carry",
	"gen_ai_client_operation_duration_seconds":                     "GenAI: agent transcripts, which go-workflows' history does not carry",
	"gen_ai_client_operation_time_to_first_chunk_seconds":          "GenAI: agent transcripts, which go-workflows' history does not carry",
	"aion_gen_ai_tool_calls_total":                                 "GenAI: agent transcripts, which go-workflows' history does not carry",
	"gen_ai_execute_tool_duration_seconds":                         "GenAI: agent transcripts, which go-workflows' history does not carry",
	"gen_ai_invoke_agent_duration_seconds":                         "GenAI: agent transcripts, which go-workflows' history does not carry",
}

// goWorkflowsBuild is the go-workflows example's binary, built at most once
// per test binary, in the stack's directory.
var goWorkflowsBuild struct {
	once sync.Once
	bin  string
	err  error
}

// goWorkflowsBin builds examples/goworkflows, in the examples module whose
// replace directives reach otelworkflows and the library of this checkout,
// the first time a scenario asks.
func (r *e2e) goWorkflowsBin(ctx context.Context) string {
	r.t.Helper()
	goWorkflowsBuild.once.Do(func() {
		bin := filepath.Join(r.stack.tmp, "goworkflows")
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./goworkflows")
		cmd.Dir = filepath.Join(r.root, "examples")
		if out, err := cmd.CombinedOutput(); err != nil {
			goWorkflowsBuild.err = fmt.Errorf("go build ./goworkflows: %v\n%s", err, out)
			return
		}
		goWorkflowsBuild.bin = bin
	})
	if goWorkflowsBuild.err != nil {
		r.t.Fatal(goWorkflowsBuild.err)
	}
	return goWorkflowsBuild.bin
}

// TestEndToEndGoWorkflows runs the go-workflows example (examples/goworkflows:
// a go-workflows worker on a SQLite file, its backend wrapped by
// otelworkflows) exporting over OTLP/gRPC to the stack's Collector, and runs
// every query of the Grafana dashboard through the stack's Prometheus with
// the dashboard's variables set to its job: each query must return data,
// except those that read only the families in goWorkflowsUnfed, which must
// return none. Then, in Jaeger, each poller execution that continued as
// new links (next_run) to the run span of the execution that continued it.
func TestEndToEndGoWorkflows(t *testing.T) {
	t.Parallel()
	r := newScenario(t, goWorkflowsJob)
	ctx := r.context(8 * time.Minute)
	since := time.Now()
	bin := r.goWorkflowsBin(ctx)
	// Longer than the test needs; the test stops it. Orders with retried
	// and failing activities, timers, sub-workflows, signals, cancellations,
	// refused second starts and continue-as-new (the example's README).
	r.start("goworkflows", []string{
		"OTEL_SERVICE_NAME=" + r.job,
		"OTEL_EXPORTER_OTLP_PROTOCOL=grpc",
		"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + r.otlpGRPC,
		"OTEL_EXPORTER_OTLP_INSECURE=true",
		"OTEL_METRIC_EXPORT_INTERVAL=1000",
		"OTEL_BSP_SCHEDULE_DELAY=500",
	}, bin, "-exporter", "otlp", "-listen=", "-duration", "10m", "-rate", "20",
		"-namespace", "shop", "-db", filepath.Join(r.tmp, "shop.sqlite"))
	r.checkDashboardQueries(ctx, goWorkflowsUnfed)
	r.checkContinuedLinks(ctx, since, "workflow Poller", 4)
}

// checkContinuedLinks waits until the next_run links of at least n run
// spans named op of the scenario's job that continued as new lead to a run
// span Jaeger holds: a root named op, of the same instance, in a trace of
// its own. Every continued span must have the link; one whose target is
// not in Jaeger yet (the next execution still queued behind the workload)
// is not counted. otelworkflows keys each go-workflows execution as a
// workflow of its own, so a link resolves only because the continue-as-new
// names the next execution's whole key (pairing.ContinuedAsNew); links to
// traces nobody exports would wait here until the deadline.
func (r *e2e) checkContinuedLinks(ctx context.Context, since time.Time, op string, n int) {
	r.t.Helper()
	checked := 0
	r.waitFor(ctx, "continue-as-new links to the next execution's run span in Jaeger", 2*time.Minute, func(ctx context.Context) error {
		td, err := r.jaeger.findTraces(ctx, r.job, op, since, time.Now().Add(time.Minute), 200)
		if err != nil {
			return err
		}
		var continued []span
		for _, s := range flatten(td) {
			if s.Name == op && s.Attrs["aion.workflow.status"] == "continued_as_new" {
				continued = append(continued, s)
			}
		}
		resolved, unresolved := 0, ""
		for _, s := range continued {
			var next *spanLink
			for i, l := range s.Links {
				if l.Role == "next_run" {
					next = &s.Links[i]
				}
			}
			if next == nil {
				return permanent(fmt.Errorf("run span %s (%s) continued as new without a next_run link: %+v", s.SpanID, s.Attrs["go_workflows.instance.id"], s.Links))
			}
			if next.TraceID == s.TraceID {
				return permanent(fmt.Errorf("run span %s links its next run in its own trace", s.SpanID))
			}
			nt, err := r.jaeger.trace(ctx, next.TraceID)
			if errors.Is(err, errNoTraces) {
				unresolved = fmt.Sprintf("e.g. %s of %s: no such trace", next.spanRef, s.Attrs["go_workflows.instance.id"])
				continue
			}
			if err != nil {
				return err
			}
			for _, ns := range flatten(nt) {
				if ns.SpanID != next.SpanID {
					continue
				}
				if ns.Name != op || ns.hasParent || ns.Attrs["go_workflows.instance.id"] != s.Attrs["go_workflows.instance.id"] {
					return permanent(fmt.Errorf("the next_run link of %s (%s) leads to span %q of instance %q (parent %v), want the root %q of the same instance",
						s.SpanID, s.Attrs["go_workflows.instance.id"], ns.Name, ns.Attrs["go_workflows.instance.id"], ns.hasParent, op))
				}
				resolved++
			}
		}
		if resolved < n {
			return fmt.Errorf("%d of %d continued %q spans link a run span Jaeger holds, want %d (%s)", resolved, len(continued), op, n, unresolved)
		}
		checked = resolved
		return nil
	})
	r.t.Logf("%d continued executions link the next execution's run span", checked)
}
