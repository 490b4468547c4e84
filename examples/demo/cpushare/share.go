package main

import (
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/google/pprof/profile"
)

// Class is who a frame, or a sample, is charged to.
type Class int

// The classes, in the order the report prints them.
const (
	// Library is this repository's instrumentation: otelstore, pairing,
	// genai, internal/... and the root package.
	Library Class = iota
	// OTel is OpenTelemetry Go: the API, the SDK, the exporters and
	// contrib (go.opentelemetry.io/...).
	OTel
	// App is every other module's code: the demo, the store backends
	// (eventstore, keyspace and their pgstore/boltstore), the conformance
	// suite, pgx and the rest.
	App
	// Neutral frames belong to no one by themselves: the Go runtime and
	// standard library, and the encoding and transport modules that the
	// OTLP exporters and others call (google.golang.org/protobuf,
	// google.golang.org/grpc, golang.org/x/net). A sample is charged to
	// the innermost frame of another class that called them.
	Neutral
	numClasses
)

func (c Class) String() string {
	switch c {
	case Library:
		return "library"
	case OTel:
		return "otel"
	case App:
		return "app"
	case Neutral:
		return "runtime"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

const root = "github.com/aionotel/aionotel"

// libraryPackages are the repository's packages that are the library, not
// a store backend, the conformance suite or an example: the engines'
// instrumentations (instrumentation/...) are the library too.
var libraryPackages = []string{root + "/otelstore", root + "/pairing", root + "/genai", root + "/internal", root + "/instrumentation"}

// neutralModules are the modules whose frames are charged to their caller.
var neutralModules = []string{"google.golang.org/protobuf", "google.golang.org/grpc", "golang.org/x/net"}

// Classify gives the class of a function by its full name as pprof shows
// it ("path/to/pkg.Func", "path/to/pkg.(*T).Method", "pkg.Func.func1").
func Classify(function string) Class {
	pkg := packageOf(function)
	switch {
	case pkg == root || hasPathPrefix(pkg, libraryPackages...):
		return Library
	case hasPathPrefix(pkg, "go.opentelemetry.io"):
		return OTel
	case !strings.Contains(firstElem(pkg), ".") || hasPathPrefix(pkg, neutralModules...):
		// The standard library and the runtime have no dot in their first
		// path element; cgo and unknown frames ("", "[unknown]") land here.
		return Neutral
	}
	return App
}

// packageOf cuts a function name to its package path: up to the first dot
// after the last slash.
func packageOf(function string) string {
	slash := strings.LastIndexByte(function, '/')
	if dot := strings.IndexByte(function[slash+1:], '.'); dot >= 0 {
		return function[:slash+1+dot]
	}
	return function
}

func firstElem(pkg string) string {
	first, _, _ := strings.Cut(pkg, "/")
	return first
}

func hasPathPrefix(pkg string, prefixes ...string) bool {
	for _, p := range prefixes {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// Shares is a profile's CPU time by class, under three rules (see the
// package documentation): Self charges each sample to the class of its
// innermost frame; Owner to the class of the innermost frame that is not
// Neutral (Neutral if there is none); OnStack counts, for each class, the
// samples with at least one frame of that class (so they overlap and do
// not sum to Total).
type Shares struct {
	Total   int64
	Self    [numClasses]int64
	Owner   [numClasses]int64
	OnStack [numClasses]int64
	// Top is, per class, the functions' own time under the Owner rule:
	// the frame that decided the owner, with its time.
	Top [numClasses]map[string]int64
}

// ErrNoCPU is returned for a profile without a CPU time sample type.
var ErrNoCPU = errors.New("cpushare: the profile has no cpu time sample type (want a CPU profile)")

// Attribute computes the shares of a CPU profile, in the unit of its
// cpu sample type (nanoseconds for Go's profiles).
func Attribute(p *profile.Profile) (*Shares, error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, ErrNoCPU
	}
	s := &Shares{}
	for c := range s.Top {
		s.Top[c] = map[string]int64{}
	}
	for _, sample := range p.Sample {
		v := sample.Value[idx]
		s.Total += v
		self, owner, ownerFn := Neutral, Neutral, ""
		var seen [numClasses]bool
		first, decided := true, false
		// Locations go from the leaf outwards; within a location, Line[0]
		// is the innermost inlined function.
		for _, loc := range sample.Location {
			for _, line := range loc.Line {
				name := ""
				if line.Function != nil {
					name = line.Function.Name
				}
				c := Classify(name)
				if first {
					self, ownerFn, first = c, name, false
				}
				if !decided && c != Neutral {
					owner, ownerFn, decided = c, name, true
				}
				seen[c] = true
			}
		}
		if first {
			seen[Neutral] = true // no symbolized frame
		}
		s.Self[self] += v
		s.Owner[owner] += v
		s.Top[owner][ownerFn] += v
		for c, ok := range seen {
			if ok {
				s.OnStack[c] += v
			}
		}
	}
	return s, nil
}

// Fraction is part/whole, 0 for an empty whole.
func Fraction(part, whole int64) float64 {
	if whole == 0 {
		return 0
	}
	return float64(part) / float64(whole)
}

// Report writes the shares as a table, then the top functions of the
// library and of OTel under the Owner rule.
func (s *Shares) Report(w io.Writer, top int) {
	fmt.Fprintf(w, "total CPU %.2fs\n", float64(s.Total)/1e9)
	fmt.Fprintf(w, "%-10s %8s %8s %9s\n", "class", "owner", "self", "on-stack")
	for c := Class(0); c < numClasses; c++ {
		fmt.Fprintf(w, "%-10s %7.2f%% %7.2f%% %8.2f%%\n", c, 100*Fraction(s.Owner[c], s.Total),
			100*Fraction(s.Self[c], s.Total), 100*Fraction(s.OnStack[c], s.Total))
	}
	fmt.Fprintf(w, "%-10s %7.2f%% %7.2f%%\n", "telemetry", 100*Fraction(s.Owner[Library]+s.Owner[OTel], s.Total),
		100*Fraction(s.Self[Library]+s.Self[OTel], s.Total))
	for _, c := range []Class{Library, OTel} {
		fmt.Fprintf(w, "top %s functions (owner rule):\n", c)
		for _, f := range s.TopFunctions(c, top) {
			fmt.Fprintf(w, "  %6.2f%%  %s\n", 100*Fraction(f.Value, s.Total), f.Name)
		}
	}
}

// FunctionTime is one function's time.
type FunctionTime struct {
	Name  string
	Value int64
}

// TopFunctions gives class c's n functions with the most time under the
// Owner rule, most first (ties by name).
func (s *Shares) TopFunctions(c Class, n int) []FunctionTime {
	var out []FunctionTime
	for name, v := range s.Top[c] {
		out = append(out, FunctionTime{name, v})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Value != out[j].Value {
			return out[i].Value > out[j].Value
		}
		return out[i].Name < out[j].Name
	})
	if len(out) > n {
		out = out[:n]
	}
	return out
}
