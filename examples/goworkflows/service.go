package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cschleiden/go-workflows/activity"
	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/client"
	"github.com/cschleiden/go-workflows/worker"
	"github.com/cschleiden/go-workflows/workflow"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/aionotel/aionotel/instrumentation/github.com/cschleiden/go-workflows/otelworkflows"
	"github.com/aionotel/aionotel/pairing"
)

// The workflows and activities of the shop.

func Charge(ctx context.Context, order int) error {
	if activity.Attempt(ctx) == 0 && order%3 == 0 {
		return errors.New("payment gateway timeout") // retried
	}
	return nil
}

func Ship(ctx context.Context, order int) error {
	if order%10 == 7 {
		return errors.New("address rejected") // the order fails
	}
	return nil
}

func Notify(ctx context.Context, order int) error { return nil }

func Poll(ctx context.Context, round int) (int, error) { return round + 1, nil }

func Notification(ctx workflow.Context, order int) error {
	_, err := workflow.ExecuteActivity[any](ctx, workflow.ActivityOptions{}, Notify, order).Get(ctx)
	return err
}

func Order(ctx workflow.Context, order int) error {
	retry := workflow.RetryOptions{MaxAttempts: 3, FirstRetryInterval: 20 * time.Millisecond, BackoffCoefficient: 2}
	if _, err := workflow.ExecuteActivity[any](ctx, workflow.ActivityOptions{RetryOptions: retry}, Charge, order).Get(ctx); err != nil {
		return err
	}
	if _, err := workflow.ScheduleTimer(ctx, 50*time.Millisecond).Get(ctx); err != nil {
		return err // cancelled while waiting for the warehouse
	}
	if _, err := workflow.ExecuteActivity[any](ctx, workflow.ActivityOptions{RetryOptions: workflow.RetryOptions{MaxAttempts: 1}}, Ship, order).Get(ctx); err != nil {
		return err
	}
	_, err := workflow.CreateSubWorkflowInstance[any](ctx, workflow.SubWorkflowOptions{}, Notification, order).Get(ctx)
	return err
}

func Poller(ctx workflow.Context, round int) (int, error) {
	n, err := workflow.ExecuteActivity[int](ctx, workflow.ActivityOptions{}, Poll, round).Get(ctx)
	if err != nil || n >= 3 {
		return n, err
	}
	return 0, workflow.ContinueAsNew(ctx, n)
}

// run is the service: it starts orders for cfg.duration, drains, and
// prints the comparison.
func run(ctx context.Context, cfg config, out io.Writer) error {
	// Telemetry: a Prometheus endpoint, and a manual reader for the summary.
	reg := prometheus.NewRegistry()
	prom, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return err
	}
	summary := sdkmetric.NewManualReader()
	spans := &spanCounter{}
	mopts := []sdkmetric.Option{sdkmetric.WithReader(prom), sdkmetric.WithReader(summary)}
	topts := []sdktrace.TracerProviderOption{sdktrace.WithIDGenerator(pairing.NewIDGenerator(nil)), sdktrace.WithSpanProcessor(spans)}
	switch cfg.exporter {
	case "", "prometheus":
	case "otlp":
		m, tr, err := otlpOptions(ctx)
		if err != nil {
			return err
		}
		mopts, topts = append(mopts, m...), append(topts, tr...)
	default:
		return fmt.Errorf("-exporter %q: want prometheus or otlp", cfg.exporter)
	}
	mp := sdkmetric.NewMeterProvider(mopts...)
	tp := sdktrace.NewTracerProvider(topts...)
	defer func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) }()
	if cfg.listen != "" {
		lis, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.listen)
		if err != nil {
			return fmt.Errorf("the /metrics endpoint: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(lis) }()
		defer srv.Close()
		logf(out, "metrics at http://%s/metrics", lis.Addr())
		if cfg.drained != nil {
			defer func() { cfg.drained("http://" + lis.Addr().String() + "/metrics") }()
		}
	}

	// go-workflows' own metrics, counted, for the comparison.
	own := newOwnMetrics()
	inner := sqlite.NewSqliteBackend(cfg.db, sqlite.WithBackendOptions(
		backend.WithMetrics(own),
		backend.WithLogger(slog.New(slog.DiscardHandler))))

	// The one line: wrap the backend, use the wrapper everywhere.
	b := otelworkflows.New(inner,
		otelworkflows.WithMeterProvider(mp),
		otelworkflows.WithTracerProvider(tracesOf(tp)),
		otelworkflows.WithNamespace(cfg.namespace),
		otelworkflows.WithDBSystem("sqlite"))
	defer b.Close()

	w := worker.New(b, nil)
	for _, wf := range []any{Order, Notification, Poller} {
		if err := w.RegisterWorkflow(wf); err != nil {
			return err
		}
	}
	for _, a := range []any{Charge, Ship, Notify, Poll} {
		if err := w.RegisterActivity(a); err != nil {
			return err
		}
	}
	wctx, stopWorker := context.WithCancel(context.Background())
	defer stopWorker()
	if err := w.Start(wctx); err != nil {
		return err
	}
	c := client.New(b)

	var (
		started    []*workflow.Instance
		mu         sync.Mutex
		cancelled  atomic.Int64
		duplicates atomic.Int64
		cancels    sync.WaitGroup
	)
	runID := time.Now().UnixNano()
	tick := time.NewTicker(time.Second / time.Duration(max(cfg.rate, 1)))
	defer tick.Stop()
	progress := time.NewTicker(time.Second)
	defer progress.Stop()
	deadline := time.After(cfg.duration)
	n := 0
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-deadline:
			break loop
		case <-progress.C:
			logf(out, "started %d orders; in flight now: %d activities", n, inflight(summary))
		case <-tick.C:
			n++
			var wi *workflow.Instance
			var err error
			if n%25 == 0 {
				wi, err = c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: fmt.Sprintf("poller-%d-%d", runID, n)}, Poller, 0)
			} else {
				wi, err = c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: fmt.Sprintf("order-%d-%d", runID, n)}, Order, n)
			}
			if err != nil {
				return err
			}
			mu.Lock()
			started = append(started, wi)
			mu.Unlock()
			if n%7 == 3 { // a note from the customer, delivered to the running order
				if err := c.SignalWorkflow(ctx, wi.InstanceID, "note", "leave at the door"); err != nil {
					logf(out, "signal %s: %v", wi.InstanceID, err)
				}
			}
			if n%50 == 5 { // the shop's frontend retries a request: refused, the order exists
				_, err := c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: wi.InstanceID}, Order, n)
				if !errors.Is(err, backend.ErrInstanceAlreadyExists) {
					return fmt.Errorf("a second start of %s: %v, want %v", wi.InstanceID, err, backend.ErrInstanceAlreadyExists)
				}
				duplicates.Add(1)
			}
			if n%20 == 11 { // the customer changes their mind
				cancels.Add(1)
				time.AfterFunc(30*time.Millisecond, func() {
					defer cancels.Done()
					if c.CancelWorkflowInstance(context.Background(), wi) == nil {
						cancelled.Add(1)
					}
				})
			}
		}
	}
	cancels.Wait()
	logf(out, "draining %d orders (%d second starts refused)...", len(started), duplicates.Load())
	drainCtx, cancelDrain := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancelDrain()
	for _, wi := range started {
		if err := c.WaitForWorkflowInstance(drainCtx, wi, 30*time.Second); err != nil {
			logf(out, "not drained: %s: %v", wi.InstanceID, err)
			break
		}
	}
	// Let continued executions and late sub-workflows finish too.
	for inflight(summary) > 0 && drainCtx.Err() == nil {
		select {
		case <-drainCtx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
	stopWorker()
	if err := w.WaitForCompletion(); err != nil {
		return err
	}
	if err := otelworkflows.Flush(drainCtx, b); err != nil {
		return err
	}
	return printSummary(out, summary, own, spans, len(started), cancelled.Load())
}

// tracesOf returns tp, or a no-op provider when OTEL_TRACES_SAMPLER is
// always_off: no span could record, and the wrapper then starts none (as
// the demo does; examples/demo/cpushare measures metrics only so).
func tracesOf(tp *sdktrace.TracerProvider) trace.TracerProvider {
	if strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")) == "always_off" {
		return tracenoop.NewTracerProvider()
	}
	return tp
}
