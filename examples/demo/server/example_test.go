package server_test

import (
	"fmt"
	"os"
	"time"

	"github.com/aionotel/aionotel/examples/demo/server"
)

func ExampleProgress() {
	p := server.NewProgress(os.Stdout, false)
	p.Report(server.Stats{Elapsed: 5 * time.Second, WorkflowsStarted: 100, WorkflowsFinished: 82, ActivitiesRunning: 14, StoreCalls: 6400, Conflicts: 9})
	// Output:
	//     5s  workflows 100 started, 82 finished | activities 14 in flight | store 1280 calls/s | conflicts 9 retried
}

func ExampleParseExporter() {
	for _, name := range []string{"otlp", "graphite"} {
		e, err := server.ParseExporter(name)
		fmt.Printf("%q %v\n", e, err)
	}
	// Output:
	// "otlp" <nil>
	// "" invalid configuration: unknown exporter "graphite" (want prometheus, otlp or stdout)
}
