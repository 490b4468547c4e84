package main

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/pprof/profile"
)

func TestClassify(t *testing.T) {
	testCases := []struct {
		function string
		want     Class
	}{
		{"github.com/aionotel/aionotel/otelstore.(*Store).Append", Library},
		{"github.com/aionotel/aionotel/pairing.(*Tracker).observe.func1", Library},
		{"github.com/aionotel/aionotel/genai.recordTokens", Library},
		{"github.com/aionotel/aionotel/internal/attrcache.(*Cache).Get", Library},
		{"github.com/aionotel/aionotel/instrumentation/github.com/cschleiden/go-workflows/otelworkflows.(*decorated).CompleteWorkflowTask", Library},
		{"github.com/cschleiden/go-workflows/backend/sqlite.(*sqliteBackend).CompleteWorkflowTask", App},
		{"github.com/aionotel/aionotel.Version", Library},
		{"github.com/aionotel/aionotel/eventstore.(*Memory).Append", App},
		{"github.com/aionotel/aionotel/eventstore/pgstore.(*Store).Append", App},
		{"github.com/aionotel/aionotel/keyspace/boltstore.(*Store).Put", App},
		{"github.com/aionotel/aionotel/examples/demo/internal/sim.(*Server).Run", App},
		{"github.com/aionotel/aionotelx/otelstore.Foo", App}, // not a path prefix
		{"github.com/jackc/pgx/v5/pgconn.(*PgConn).Exec", App},
		{"go.opentelemetry.io/otel/sdk/trace.(*recordingSpan).End", OTel},
		{"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp.(*client).UploadTraces", OTel},
		{"go.opentelemetry.io/contrib/exporters/autoexport.NewSpanExporter", OTel},
		{"runtime.mallocgc", Neutral},
		{"sync.(*Mutex).Lock", Neutral},
		{"crypto/sha256.block", Neutral},
		{"google.golang.org/protobuf/proto.MarshalOptions.marshal", Neutral},
		{"golang.org/x/net/http2.(*Framer).WriteData", Neutral},
		{"", Neutral},
	}
	for _, tc := range testCases {
		if got := Classify(tc.function); got != tc.want {
			t.Errorf("Classify(%q) = %v, want %v", tc.function, got, tc.want)
		}
	}
}

// synthetic builds a CPU profile of the given stacks, each leaf first
// (a stack entry "a|b" is one location where a is inlined into b), with
// the given CPU time.
func synthetic(stacks map[string]int64) *profile.Profile {
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		PeriodType: &profile.ValueType{Type: "cpu", Unit: "nanoseconds"},
		Period:     10_000_000,
	}
	fns := map[string]*profile.Function{}
	fn := func(name string) *profile.Function {
		if f, ok := fns[name]; ok {
			return f
		}
		f := &profile.Function{ID: uint64(len(fns) + 1), Name: name}
		fns[name] = f
		p.Function = append(p.Function, f)
		return f
	}
	for stack, v := range stacks {
		var locs []*profile.Location
		for _, frame := range strings.Split(stack, ";") {
			loc := &profile.Location{ID: uint64(len(p.Location) + 1)}
			for _, name := range strings.Split(frame, "|") {
				loc.Line = append(loc.Line, profile.Line{Function: fn(name)})
			}
			p.Location = append(p.Location, loc)
			locs = append(locs, loc)
		}
		p.Sample = append(p.Sample, &profile.Sample{Location: locs, Value: []int64{v / p.Period, v}})
	}
	return p
}

const (
	lib   = "github.com/aionotel/aionotel/otelstore.(*Store).Append"
	lib2  = "github.com/aionotel/aionotel/pairing.(*Tracker).observe"
	sdk   = "go.opentelemetry.io/otel/sdk/trace.(*recordingSpan).End"
	sdkm  = "go.opentelemetry.io/otel/sdk/metric.(*histogram).Record"
	pg    = "github.com/aionotel/aionotel/eventstore/pgstore.(*Store).Append"
	pgx   = "github.com/jackc/pgx/v5.(*Conn).Exec"
	sim   = "github.com/aionotel/aionotel/examples/demo/internal/sim.(*flow).run"
	pb    = "google.golang.org/protobuf/proto.MarshalOptions.marshal"
	otlp  = "go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp.(*client).UploadTraces"
	mallc = "runtime.mallocgc"
	gc    = "runtime.gcBgMarkWorker"
	sysc  = "syscall.Syscall"
)

func TestAttribute(t *testing.T) {
	p := synthetic(map[string]int64{
		// The library's own code, called by the demo: 100 to the library.
		lib + ";" + sim: 100,
		// A malloc the library asks for: owner library, self runtime.
		mallc + ";" + lib + ";" + sim: 40,
		// The store call the decorator wraps: the app's, though the
		// library is on the stack.
		sysc + ";" + pgx + ";" + pg + ";" + lib + ";" + sim: 500,
		// The SDK's histogram, inlined into the library's call: OTel.
		sdkm + "|" + lib2 + ";" + sim: 30,
		// The SDK's span end called by the library, allocating: OTel owns.
		mallc + ";" + sdk + ";" + lib + ";" + sim: 20,
		// Protobuf encoding for the OTLP exporter: OTel owns, runtime self.
		pb + ";" + otlp: 60,
		// The GC's background worker: nobody's but the runtime's.
		gc: 200,
		// The demo's own work.
		sim: 50,
	})
	s, err := Attribute(p)
	if err != nil {
		t.Fatal(err)
	}
	if s.Total != 1000 {
		t.Fatalf("total %d, want 1000", s.Total)
	}
	check := func(rule string, got [numClasses]int64, want [numClasses]int64) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %v, want %v (library, otel, app, runtime)", rule, got, want)
		}
	}
	check("owner", s.Owner, [numClasses]int64{Library: 140, OTel: 110, App: 550, Neutral: 200})
	check("self", s.Self, [numClasses]int64{Library: 100, OTel: 30, App: 50, Neutral: 820})
	check("on-stack", s.OnStack, [numClasses]int64{Library: 690, OTel: 110, App: 740, Neutral: 820})
	if got := s.TopFunctions(Library, 10); len(got) != 1 || got[0] != (FunctionTime{lib, 140}) {
		t.Errorf("top library functions %v, want only %s with 140", got, lib)
	}
	wantOTel := []FunctionTime{{otlp, 60}, {sdkm, 30}, {sdk, 20}}
	if got := s.TopFunctions(OTel, 10); len(got) != 3 || got[0] != wantOTel[0] || got[1] != wantOTel[1] || got[2] != wantOTel[2] {
		t.Errorf("top OTel functions %v, want %v", got, wantOTel)
	}
	if got := s.TopFunctions(OTel, 1); len(got) != 1 {
		t.Errorf("TopFunctions(OTel, 1) gave %d", len(got))
	}
}

// TestAttributeReport writes a synthetic profile to a file, as the demo's
// -cpuprofile does, and checks the command's report of it.
func TestAttributeReport(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := synthetic(map[string]int64{lib + ";" + sim: 30e6, sdk + ";" + lib + ";" + sim: 20e6, sim: 950e6}).Write(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	var stdout, stderr bytes.Buffer
	if code := run([]string{path}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	for _, want := range []string{"total CPU 1.00s", "library       3.00%", "otel          2.00%", "telemetry     5.00%", lib} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, &stdout)
		}
	}
}

func TestAttributeNotCPU(t *testing.T) {
	p := synthetic(nil)
	p.SampleType = []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}}
	if _, err := Attribute(p); !errors.Is(err, ErrNoCPU) {
		t.Errorf("a heap profile: error %v, want ErrNoCPU", err)
	}
}

func TestRunErrors(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(nil, &stdout, &stderr); code != 2 {
		t.Errorf("no profile: exit %d, want 2", code)
	}
	missing := filepath.Join(t.TempDir(), "none.pprof")
	if code := run([]string{missing}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), missing) {
		t.Errorf("missing profile: exit %d, stderr %q; want 1 naming it", code, &stderr)
	}
	notProfile := filepath.Join(t.TempDir(), "x.pprof")
	os.WriteFile(notProfile, []byte("not a profile"), 0o600)
	stderr.Reset()
	if code := run([]string{notProfile}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), notProfile) {
		t.Errorf("not a profile: exit %d, stderr %q; want 1 naming it", code, &stderr)
	}
}

// TestSink checks that the sink answers the OTLP/HTTP exports with success
// and nothing else.
func TestSink(t *testing.T) {
	srv := httptest.NewServer(Sink())
	defer srv.Close()
	for _, path := range []string{"/v1/traces", "/v1/metrics", "/v1/logs"} {
		resp, err := http.Post(srv.URL+path, "application/x-protobuf", strings.NewReader("\x0a\x00"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || len(body) != 0 || resp.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("POST %s: %d %q %q, want 200 and an empty protobuf", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	resp, err := http.Get(srv.URL + "/v1/traces")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("GET /v1/traces answered 200")
	}
}
