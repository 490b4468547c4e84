package server_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/aionotel/aionotel/examples/demo/server"
	"github.com/aionotel/aionotel/keyspace"
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

// A build without the bbolt backend refuses -keyspace bolt:PATH with a usage
// error (exit status 2) that says which demo has it.
func ExampleCommand_missingBackend() {
	var stderr strings.Builder
	code := server.Command(context.Background(), []string{"-keyspace", "bolt:/var/lib/demo.db"}, io.Discard, &stderr)
	first, _, _ := strings.Cut(stderr.String(), "\n") // the usage follows
	fmt.Println(code)
	fmt.Println(first)
	// Output:
	// 2
	// demo: invalid configuration: -keyspace bolt:...: keyspace backend not in this build; the bbolt backend (a file) is in its own module, whose demo has it: cd keyspace/boltstore && go run ./cmd/demo -keyspace bolt:/tmp/demo.db
}

// A program adds a keyspace backend by passing it to Command; here one whose
// store cannot be reached, which fails the run (exit status 1) before it
// starts.
func ExampleBackend() {
	redis := server.Backend{
		Scheme: "redis",
		Open: func(ctx context.Context, addr string) (keyspace.Store, io.Closer, error) {
			return nil, nil, errors.New("dial tcp: connection refused")
		},
	}
	var stderr strings.Builder
	code := server.Command(context.Background(), []string{"-keyspace", "redis:localhost:6379"}, io.Discard, &stderr, redis)
	fmt.Print(code, " ", stderr.String())
	// Output:
	// 1 demo: -keyspace redis:...: cannot open the keyspace: dial tcp: connection refused
}
