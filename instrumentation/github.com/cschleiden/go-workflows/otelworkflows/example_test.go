package otelworkflows_test

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/cschleiden/go-workflows/backend"
	"github.com/cschleiden/go-workflows/backend/sqlite"
	"github.com/cschleiden/go-workflows/client"
	"github.com/cschleiden/go-workflows/worker"
	"github.com/cschleiden/go-workflows/workflow"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/aionotel/aionotel/instrumentation/github.com/cschleiden/go-workflows/otelworkflows"
)

func Double(ctx context.Context, n int) (int, error) { return 2 * n, nil }

func Doubler(ctx workflow.Context, n int) (int, error) {
	return workflow.ExecuteActivity[int](ctx, workflow.ActivityOptions{}, Double, n).Get(ctx)
}

// Wrap the backend once; the worker and the client use the wrapper.
func ExampleNew() {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	b := otelworkflows.New(
		sqlite.NewInMemoryBackend(sqlite.WithBackendOptions(backend.WithLogger(slog.New(slog.DiscardHandler)))),
		otelworkflows.WithMeterProvider(mp),
		otelworkflows.WithNamespace("example"))
	defer b.Close()

	w := worker.New(b, nil)
	_ = w.RegisterWorkflow(Doubler)
	_ = w.RegisterActivity(Double)
	wctx, stop := context.WithCancel(ctx)
	_ = w.Start(wctx)
	c := client.New(b)
	wi, err := c.CreateWorkflowInstance(ctx, client.WorkflowInstanceOptions{InstanceID: "doubler-1"}, Doubler, 21)
	if err != nil {
		panic(err)
	}
	result, err := client.GetWorkflowResult[int](ctx, c, wi, 10*time.Second)
	if err != nil {
		panic(err)
	}
	stop()
	_ = w.WaitForCompletion()

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "aion.activities.completed" {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					typ, _ := dp.Attributes.Value("aion.activity.type")
					outcome, _ := dp.Attributes.Value("aion.activity.outcome")
					fmt.Printf("%s: %s %s %d\n", m.Name, typ.AsString(), outcome.AsString(), dp.Value)
				}
			}
		}
	}
	fmt.Println("result:", result)
	// Output:
	// aion.activities.completed: Double succeeded 1
	// result: 42
}
